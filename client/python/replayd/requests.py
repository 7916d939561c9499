"""Request metadata (and key/priority payloads) for the operations of docs/PROTOCOL.md.

Pure functions; thread-safe. Argument errors the client can see without the server raise
InvalidArgument naming the table.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .columns import InsertBatch
from .errors import InvalidArgument

__all__ = ["timeout_ms", "insert_meta", "sample_meta", "nstep_meta", "sequence_meta",
           "SequenceShape", "keyed_request"]


def timeout_ms(seconds: Optional[float]) -> Optional[int]:
    """A timeout in seconds (None: wait forever) as the wire's ``timeout_ms``."""
    if seconds is None:
        return None
    if seconds < 0:
        raise InvalidArgument(f"timeout must be >= 0 seconds or None, got {seconds}")
    return int(round(seconds * 1000))


def insert_meta(table: str, batch: InsertBatch, seconds: Optional[float]) -> Dict[str, Any]:
    """Metadata of an insert of `batch`; its payload is ``batch.buffers()``."""
    meta = {"op": "insert", "table": table, "n": batch.n,
            "priorities": batch.priorities is not None, "timeout_ms": timeout_ms(seconds),
            "columns": batch.columns}
    version = batch.version
    if version is not None:
        if isinstance(version, np.ndarray):
            meta["versions"] = True
        else:
            meta["version"] = version
    return meta


def sample_meta(table: str, batch_size: int, beta: float,
                seconds: Optional[float]) -> Dict[str, Any]:
    """Metadata of a sample request (no payload)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise InvalidArgument(f"table '{table}': batch_size must be an int, got "
                              f"{batch_size!r}")
    return {"op": "sample", "table": table, "n": int(batch_size), "beta": float(beta),
            "timeout_ms": timeout_ms(seconds)}


def nstep_meta(table: str, batch_size: int, nstep: int, gamma: float, beta: float,
               seconds: Optional[float]) -> Dict[str, Any]:
    """Metadata of an n-step sample of an episodic table (docs/PROTOCOL.md); the server
    checks k and gamma against the table."""
    meta = sample_meta(table, batch_size, beta, seconds)
    meta["nstep"] = _count(table, "nstep", nstep)
    meta["gamma"] = float(gamma)
    return meta


def sequence_meta(table: str, batch_size: int, length: int, stride: int, burn_in: int,
                  pad: bool, beta: float, seconds: Optional[float]) -> Dict[str, Any]:
    """Metadata of a ``sample_sequences`` request (no payload)."""
    meta = sample_meta(table, batch_size, beta, seconds)
    meta.update({"op": "sample_sequences", "length": _count(table, "length", length),
                 "stride": _count(table, "stride", stride),
                 "burn_in": _count(table, "burn_in", burn_in), "pad": bool(pad)})
    return meta


class SequenceShape(NamedTuple):
    """What a ``sample_sequences`` request asks for besides its size (docs/PROTOCOL.md)."""
    length: int
    stride: int = 1
    burn_in: int = 0
    pad: bool = False


def _count(table: str, name: str, value: Any) -> int:
    """`value` as a non-negative int; InvalidArgument naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgument(f"table '{table}': {name} must be an int >= 0, got {value!r}")
    return int(value)


def keyed_request(op: str, table: str, keys: Any,
                  priorities: Any) -> Optional[Tuple[Dict[str, Any], List[np.ndarray[Any, Any]]]]:
    """(metadata, payload columns) of ``update_priorities`` (with priorities) or ``delete``
    (priorities None): n uint64 keys, then n float64 priorities. None when keys is empty
    (nothing to send)."""
    try:
        key_array = np.ascontiguousarray(np.asarray(keys).reshape(-1))
        if key_array.dtype != np.dtype("<u8"):
            if key_array.size and key_array.dtype.kind not in "iu":
                raise ValueError(f"keys must be integers, got dtype {key_array.dtype}")
            if key_array.size and key_array.dtype.kind == "i" and key_array.min() < 0:
                raise ValueError("keys must be >= 0")
            key_array = key_array.astype("<u8")
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(f"table '{table}': bad keys: {exc}") from None
    n = int(key_array.shape[0])
    buffers: List[np.ndarray[Any, Any]] = [key_array]
    if priorities is not None:
        try:
            prio = np.ascontiguousarray(np.asarray(priorities, dtype="<f8").reshape(-1))
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"table '{table}': priorities must be numbers: {exc}") \
                from None
        if prio.shape[0] != n:
            raise InvalidArgument(f"table '{table}': {n} keys but {prio.shape[0]} priorities")
        buffers.append(prio)
    if n == 0:
        return None
    return {"op": op, "table": table, "n": n}, buffers
