"""Minari's serialized Gymnasium spaces (the JSON of ``metadata.json``'s
``observation_space`` / ``action_space``) as the leaves of a replayd field, and back.

A Dict space's keys are a level of dicts, a Tuple space's elements a level of a tuple
(leaf ``obs/0``, ...; replayd.nesting); in Minari's HDF5 files they are a subgroup per key
and ``_index_0``, ``_index_1``, ... Pure functions; thread-safe.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["SpaceLeaf", "space_leaves", "is_image_space", "box_space", "space_of_leaves"]


@dataclass(frozen=True)
class SpaceLeaf:
    """One array of a space: its path under the field (``""`` for a space that is one
    array, ``camera`` or ``0/state`` for nested ones), its path in a Minari episode group
    under the space's group (``camera``, ``_index_0/state``; ``""`` for the group itself),
    its dtype and per-step shape, and whether Minari treats it as an image (stored
    JPEG-encoded by Minari 0.5.x)."""

    path: str
    hdf5_path: str
    dtype: np.dtype[Any]
    shape: Tuple[int, ...]
    image: bool


def _join(prefix: str, name: str) -> str:
    return name if not prefix else f"{prefix}/{name}"


def is_image_space(space: Dict[str, Any]) -> bool:
    """Minari 0.5's rule: a uint8 Box of 2 or 3 dimensions, at least 32x32, low 0 and
    high 255 everywhere."""
    if space.get("type") != "Box" or space.get("dtype") != "uint8":
        return False
    shape = list(space.get("shape", []))
    if len(shape) not in (2, 3) or shape[0] < 32 or shape[1] < 32:
        return False
    return bool(np.all(np.asarray(space["low"]) == 0) and np.all(np.asarray(space["high"]) == 255))


def space_leaves(space: Any, prefix: str = "", hdf5_prefix: str = "") -> List[SpaceLeaf]:
    """The leaves of a serialized space (a JSON string or its parsed dict). Raises
    ValueError naming a space type replayd cannot hold (Text, Graph, Sequence...)."""
    if isinstance(space, str):
        space = json.loads(space)
    kind = space.get("type")
    if kind == "Box":
        return [SpaceLeaf(prefix, hdf5_prefix, np.dtype(space["dtype"]),
                          tuple(int(d) for d in space["shape"]), is_image_space(space))]
    if kind == "Discrete":
        return [SpaceLeaf(prefix, hdf5_prefix, np.dtype(space.get("dtype", "int64")), (),
                          False)]
    if kind == "MultiDiscrete":
        shape = np.asarray(space["nvec"]).shape
        return [SpaceLeaf(prefix, hdf5_prefix, np.dtype(space.get("dtype", "int64")),
                          tuple(int(d) for d in shape), False)]
    if kind == "MultiBinary":
        n = space["n"]
        shape = (int(n),) if isinstance(n, int) else tuple(int(d) for d in n)
        return [SpaceLeaf(prefix, hdf5_prefix, np.dtype("int8"), shape, False)]
    if kind == "Dict":
        out: List[SpaceLeaf] = []
        for key, sub in space["subspaces"].items():
            out += space_leaves(sub, _join(prefix, key), _join(hdf5_prefix, key))
        return out
    if kind == "Tuple":
        out = []
        for i, sub in enumerate(space["subspaces"]):
            out += space_leaves(sub, _join(prefix, str(i)), _join(hdf5_prefix, f"_index_{i}"))
        return out
    raise ValueError(f"a {kind} space cannot be stored in a replayd table (Box, Discrete, "
                     "MultiDiscrete, MultiBinary and Dict/Tuple of them can)")


def box_space(dtype: np.dtype[Any], shape: Tuple[int, ...]) -> Dict[str, Any]:
    """An unbounded Box of `dtype` and `shape` (the dtype's range for integers): the space
    an export writes for a field no dataset described."""
    if dtype.kind == "f":
        low: Any = -np.inf
        high: Any = np.inf
    elif dtype.kind == "b":
        dtype, low, high = np.dtype("bool"), 0, 1
    else:
        info = np.iinfo(dtype)
        low, high = int(info.min), int(info.max)
    return {"type": "Box", "dtype": dtype.name, "shape": list(shape),
            "low": np.full(shape, low).tolist(), "high": np.full(shape, high).tolist()}


def space_of_leaves(leaves: List[Tuple[str, np.dtype[Any], Tuple[int, ...]]],
                    prefix: str) -> Optional[Dict[str, Any]]:
    """A space for the fields ``prefix`` / ``prefix/...`` (name, dtype, shape): one Box,
    or Dict/Tuple levels of Boxes by replayd's naming rule. None when there is none."""
    from ..nesting import nest
    flat = {name: (dtype, shape) for name, dtype, shape in leaves
            if name == prefix or name.startswith(prefix + "/")}
    if not flat:
        return None
    tree = nest(flat)[prefix]

    def build(node: Any) -> Dict[str, Any]:
        if isinstance(node, dict):
            return {"type": "Dict", "subspaces": {k: build(v) for k, v in node.items()}}
        if isinstance(node, tuple) and len(node) == 2 and isinstance(node[0], np.dtype):
            return box_space(node[0], node[1])
        return {"type": "Tuple", "subspaces": [build(v) for v in node]}

    return build(tree)
