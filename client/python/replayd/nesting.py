"""Nested fields: a field may be a dict or a tuple of arrays (Gymnasium's Dict and Tuple
spaces). The server knows only the leaves, each a field named by its path joined with
'/': ``obs/camera``, ``obs/state``; a tuple's elements are ``obs/0``, ``obs/1``, ...

The naming rule that makes this round-trip without anything stored beside the fields:
**a level whose keys are exactly "0", "1", ..., "k-1" is a tuple**; every other level is a
dict (in the order of its first leaf). So a dict may not have exactly such keys (it would
come back as a tuple): `flatten_spec` refuses it, naming the field. Keys are non-empty and
hold no '/'.

Pure functions over plain containers; thread-safe.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

__all__ = ["flatten_spec", "flatten_values", "nest", "flatten", "is_tuple_level",
           "leaf_paths"]


def is_tuple_level(keys: List[str]) -> bool:
    """Whether a level with these child keys (in order) reads back as a tuple."""
    return bool(keys) and keys == [str(i) for i in range(len(keys))]


def _is_leaf_spec(spec: Any) -> bool:
    """A ``(dtype, shape)`` pair, as opposed to a dict or tuple of specs."""
    return (isinstance(spec, (tuple, list)) and len(spec) == 2
            and not isinstance(spec[0], (tuple, list, dict, Mapping)))


def flatten_spec(name: str, spec: Any) -> List[Tuple[str, Any]]:
    """The leaves of the field spec `spec` named `name`: ``[(path, (dtype, shape)), ...]``.
    A spec is ``(dtype, shape)``, a dict of specs or a tuple of specs. Raises
    TypeError/ValueError naming the field for an empty level, a bad key, or a dict whose
    keys would read back as a tuple."""
    if _is_leaf_spec(spec):
        return [(name, spec)]
    out: List[Tuple[str, Any]] = []
    if isinstance(spec, Mapping):
        keys = list(spec)
        if not keys:
            raise ValueError(f"field {name!r}: an empty dict has no leaves")
        for key in keys:
            if not isinstance(key, str) or not key or "/" in key:
                raise ValueError(f"field {name!r}: dict key {key!r} must be a non-empty "
                                 "string without '/'")
        if is_tuple_level(keys):
            raise ValueError(f"field {name!r}: a dict with keys {', '.join(keys)} would read "
                             "back as a tuple (levels keyed 0..k-1 are tuples); use a tuple "
                             "or other keys")
        for key in keys:
            out += flatten_spec(f"{name}/{key}", spec[key])
        return out
    if isinstance(spec, (tuple, list)):
        if not spec:
            raise ValueError(f"field {name!r}: an empty tuple has no leaves")
        for i, element in enumerate(spec):
            out += flatten_spec(f"{name}/{i}", element)
        return out
    raise TypeError(f"field {name!r}: expected (dtype, shape), a dict or a tuple of them, "
                    f"got {spec!r}")


def flatten(prefix: str, value: Any, out: Dict[str, Any]) -> None:
    """Adds the leaves of `value` (nested dicts and tuples of anything) to `out` by path."""
    if isinstance(value, Mapping):
        for key, element in value.items():
            flatten(f"{prefix}/{key}", element, out)
    elif isinstance(value, tuple):
        for i, element in enumerate(value):
            flatten(f"{prefix}/{i}", element, out)
    else:
        out[prefix] = value


def flatten_values(data: Mapping[str, Any], known: Mapping[str, Any]) -> Dict[str, Any]:
    """`data` with every nested value (a dict, or a tuple where `known` has ``name/0``)
    replaced by its leaves; a name in `known` is a leaf whatever its value (a tuple of
    numbers for an array field stays as it is). Unknown names pass through, for the
    caller's error."""
    out: Dict[str, Any] = {}
    for name, value in data.items():
        if name in known:
            out[name] = value
        elif isinstance(value, Mapping) or (isinstance(value, (tuple, list))
                                            and f"{name}/0" in known):
            _flatten_known(name, value, known, out)
        else:
            out[name] = value
    return out


def _flatten_known(prefix: str, value: Any, known: Mapping[str, Any],
                   out: Dict[str, Any]) -> None:
    if prefix in known:
        out[prefix] = value
    elif isinstance(value, Mapping):
        for key, element in value.items():
            _flatten_known(f"{prefix}/{key}", element, known, out)
    elif isinstance(value, (tuple, list)) and f"{prefix}/0" in known:
        for i, element in enumerate(value):
            _flatten_known(f"{prefix}/{i}", element, known, out)
    else:
        out[prefix] = value


def nest(flat: Mapping[str, Any]) -> Dict[str, Any]:
    """`flat` (path -> value) as nested dicts and tuples (the rule above); names without
    '/' stay as they are. A path that is both a leaf and a level (``obs`` and ``obs/x``)
    leaves that subtree flat. Values are not copied."""
    if not any("/" in name for name in flat):
        return dict(flat)
    tree: Dict[str, Any] = {}
    clashes: List[str] = []
    for path, value in flat.items():
        parts = path.split("/")
        level = tree
        ok = True
        for part in parts[:-1]:
            child = level.setdefault(part, {})
            if not isinstance(child, dict):
                ok = False
                break
            level = child
        if not ok or not all(parts) or parts[-1] in level:
            clashes.append(path)
            continue
        level[parts[-1]] = _Leaf(value)
    out = {key: _finish(node) for key, node in tree.items()}
    for path in clashes:
        out[path] = flat[path]
    return out


class _Leaf:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _finish(node: Any) -> Any:
    if isinstance(node, _Leaf):
        return node.value
    keys = list(node)
    if is_tuple_level(keys):
        return tuple(_finish(node[key]) for key in keys)
    return {key: _finish(child) for key, child in node.items()}


def leaf_paths(value: Any, prefix: Optional[str] = None) -> Iterator[Tuple[str, Any]]:
    """(path, leaf) of a nested value, in order (the inverse of `nest`)."""
    if isinstance(value, Mapping):
        for key, element in value.items():
            yield from leaf_paths(element, key if prefix is None else f"{prefix}/{key}")
    elif isinstance(value, tuple):
        for i, element in enumerate(value):
            yield from leaf_paths(element, str(i) if prefix is None else f"{prefix}/{i}")
    elif prefix is not None:
        yield prefix, value
