"""cpprb's in-process helpers that its own code and scripts import from
``cpprb.PyReplayBuffer``: ``dict2buffer`` (numpy arrays laid out as cpprb's buffers are)
and ``NstepBuffer`` (the local cache that turns steps into n-step transitions).

Neither talks to a server: they are plain numpy, one object per process, not thread-safe.

- ``dict2buffer(size, env_dict, stack_compress=..., default_dtype=..., mmap_prefix=...)``:
  per value an array ``(size, *shape)`` filled with 1, of the value's dtype
  (``default_dtype``, else float32). A value named in `stack_compress` is a strided view of
  ``size + stack - 1`` single frames, so that row i + 1's stack is row i's shifted by one
  frame on the last axis (cpprb's memory compression). `mmap_prefix` keeps each array in the
  file ``<prefix>_<name>.dat`` (``np.memmap``). Each env_dict entry gets ``add_shape``
  ``(-1, *shape)``, as in cpprb.
- ``NstepBuffer(env_dict, Nstep, next_of=..., default_dtype=...)``: ``add(**kw)`` returns
  the n-step transitions its steps complete (a dict of ``(n, *shape)`` arrays) or None,
  ``on_episode_end()`` returns the transitions of the steps still cached, ``clear()`` and
  ``get_Nstep_size()``; the sums are replayd.cpprb.nstep's (``done`` covers the whole
  window, as there).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, MutableMapping, Optional, Tuple

import numpy as np

from .nstep import NstepCache
from .table import env_fields

__all__ = ["dict2buffer", "NstepBuffer"]


def _shape_of(spec: Mapping[str, Any]) -> Tuple[int, ...]:
    shape = spec.get("shape", 1)
    return tuple(int(d) for d in np.array(shape, ndmin=1))


def dict2buffer(buffer_size: int, env_dict: MutableMapping[str, Any], *,
                stack_compress: Any = None, default_dtype: Any = None,
                mmap_prefix: Optional[str] = None, shared: Optional[str] = None,
                ctx: Any = None) -> Dict[str, np.ndarray[Any, Any]]:
    """Arrays for `buffer_size` rows of every value of `env_dict` (module docstring).
    Raises ValueError for `shared` (cpprb's MP buffers' own shared memory: replayd.cpprb's
    MP buffers keep their values in the server)."""
    if shared is not None:
        raise ValueError(f"dict2buffer(shared={shared!r}): replayd.cpprb has no shared-memory "
                         "arrays (its MP buffers keep their values in the replayd server)")
    size = int(buffer_size)
    compressed = set() if stack_compress is None else \
        {str(name) for name in np.array(stack_compress, ndmin=1)}
    fallback = np.float32 if default_dtype is None else default_dtype
    out: Dict[str, np.ndarray[Any, Any]] = {}
    for name, spec in env_dict.items():
        shape = _shape_of(spec)
        dtype = np.dtype(spec.get("dtype", fallback))
        if name in compressed and len(shape) >= 1:
            stack = shape[-1]
            frames = _zeros(mmap_prefix, name, (size + stack - 1, *shape[:-1]), dtype)
            row = frames.strides[0]  # one frame further on: the next row, the next stack slot
            out[name] = np.lib.stride_tricks.as_strided(
                frames, shape=(size, *shape), strides=(row, *frames.strides[1:], row))
        else:
            out[name] = _zeros(mmap_prefix, name, (size, *shape), dtype)
        out[name][:] = 1
        spec["add_shape"] = np.array((-1, *shape))
    return out


def _zeros(mmap_prefix: Optional[str], name: str, shape: Tuple[int, ...],
           dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if mmap_prefix:
        return np.memmap(f"{mmap_prefix}_{name}.dat", dtype=dtype, mode="w+", shape=shape)
    return np.zeros(shape, dtype=dtype)


class NstepBuffer:
    """cpprb.PyReplayBuffer.NstepBuffer: the n-step cache on its own (module docstring)."""

    def __init__(self, env_dict: Optional[Mapping[str, Any]] = None, Nstep: Any = None, *,
                 stack_compress: Any = None, default_dtype: Any = None,
                 next_of: Any = None) -> None:
        self._fields = env_fields(env_dict, default_dtype, next_of)
        self._cache = NstepCache(Nstep, self._fields)

    def add(self, **kwargs: Any) -> Optional[Dict[str, np.ndarray[Any, Any]]]:
        """Caches the steps given (each value reshaped to ``(-1, *shape)``); returns the
        n-step transitions they complete, or None when none is complete yet."""
        data: Dict[str, np.ndarray[Any, Any]] = {}
        n = -1
        for name, dtype, shape in self._fields:
            if name not in kwargs:
                raise KeyError(f"NstepBuffer.add() is missing a value for '{name}'")
            array = np.asarray(kwargs[name]).astype(dtype, copy=False).reshape(-1, *shape)
            if n not in (-1, array.shape[0]):
                raise ValueError(f"NstepBuffer.add(): '{name}' holds {array.shape[0]} steps, "
                                 f"the other values {n}")
            n = array.shape[0]
            data[name] = array
        columns, _, count = self._cache.add(data, n, None)
        return columns if count else None

    def on_episode_end(self) -> Dict[str, np.ndarray[Any, Any]]:
        """The transitions of the steps still cached (shorter windows); empties the cache."""
        columns, _, count = self._cache.flush()
        if not count:
            return {name: np.zeros((0, *shape), dtype) for name, dtype, shape in self._fields}
        return columns

    def clear(self) -> None:
        """Forgets the cached steps."""
        self._cache.clear()

    def get_Nstep_size(self) -> int:  # noqa: N802 - cpprb's name
        """The n of the n-step transitions."""
        return self._cache.size
