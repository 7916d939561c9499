"""The replies of episodic tables (docs/TRAJECTORIES.md) as arrays: sequence samples,
``read_steps`` pages, and whole episodes regrouped from pages.

Pure decoding over reply payloads (views, no copies where the layout allows), except
`iterate_steps`, which asks a Client for the pages. Thread-safe.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Tuple

import numpy as np

from .batch_limits import page_rows
from .client_interface import ClientLike
from .errors import ProtocolError
from .nesting import nest
from .pixel_frame_fields import (add_row_frames, add_sequence_frames, frame_specs,
                                 split_frame_columns, view_column)
from .sample import Sample

__all__ = ["decode_columns", "decode_sequences", "decode_page", "iterate_steps",
           "ragged_episodes", "group_episodes", "nest_page", "END_TERMINATED",
           "END_TRUNCATED"]

#: ``end`` of a read_steps row: the last row of an episode that ended terminated / truncated
END_TERMINATED = 1
END_TRUNCATED = 2


def decode_columns(meta: Mapping[str, Any],
                   payload: np.ndarray[Any, Any]) -> Dict[str, np.ndarray[Any, Any]]:
    """Views every column of a reply (name -> array of its stated shape), without copying."""
    columns = meta.get("columns")
    if not isinstance(columns, list):
        raise ProtocolError(f"reply without its columns: {dict(meta)!r}")
    out: Dict[str, np.ndarray[Any, Any]] = {}
    for column in columns:
        array = view_column(column, payload)  # ProtocolError for a malformed description
        out[str(column.get("name"))] = array
    return out


def decode_sequences(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> Sample:
    """A ``sample_sequences`` reply as a Sample: `data` holds (n, T, ...) arrays of the
    fields, `mask` (n, T) uint8 (1: a real step), keys etc. of the start steps."""
    specs = frame_specs(meta)
    listed, frame_columns = split_frame_columns(list(meta.get("columns") or []), specs)
    columns = decode_columns({"columns": listed}, payload)
    names = [str(c["name"]) for c in listed]
    if names[:5] != ["key", "probability", "weight", "times_sampled", "mask"]:
        raise ProtocolError(f"sample_sequences reply with columns {names}")
    data = {name: columns[name] for name in names[5:]}
    if specs:
        mask = columns["mask"]
        add_sequence_frames(data, meta, payload, specs, frame_columns, columns["key"],
                            int(mask.shape[1]) if mask.ndim == 2 else 0)
    return Sample(data=data, keys=columns["key"],
                  probabilities=columns["probability"], weights=columns["weight"],
                  times_sampled=columns["times_sampled"], mask=columns["mask"],
                  state=meta.get("state"))


def decode_page(meta: Mapping[str, Any],
                payload: np.ndarray[Any, Any]) -> Tuple[Dict[str, np.ndarray[Any, Any]], int]:
    """A ``read_steps`` page: its columns (key, episode, position, sequence, the fields,
    compressed ones decompressed) and the cursor of the next page."""
    specs = frame_specs(meta)
    if not specs:
        return decode_columns(meta, payload), int(meta["next"])
    listed, frame_columns = split_frame_columns(list(meta.get("columns") or []), specs)
    columns = decode_columns({"columns": listed}, payload)
    add_row_frames(columns, meta, payload, specs, frame_columns, columns["key"])
    return columns, int(meta["next"])


def nest_page(columns: Dict[str, Any]) -> Dict[str, Any]:
    """A page's (or an episode's) columns with nested fields' leaves as dicts and tuples
    (replayd.nesting); the arrays are not copied."""
    return nest(columns)


def iterate_steps(client: ClientLike, table: str, page: int,
                  after: int = 0) -> Iterator[Dict[str, Any]]:
    """Pages of ``read_steps`` from after `after` (0: the start) until an empty page (flat
    columns), each of at most `page` rows and never more than the server's
    max_batch_items (a larger request would be refused). InvalidArgument for a page < 1."""
    rows = page_rows(client, page)
    while True:
        columns, after = client._call({"op": "read_steps", "table": table, "n": rows,
                                       "after": after}, decode=decode_page)
        if len(columns["key"]) == 0:
            return
        yield columns


def ragged_episodes(pages: Iterator[Dict[str, Any]]) -> Dict[str, np.ndarray[Any, Any]]:
    """Every step of `pages` ordered by episode id, then position, as one dict of
    concatenated arrays (key, episode, position, sequence, the fields) plus ``offsets``:
    episode i's rows are ``offsets[i]:offsets[i + 1]`` (len = episodes + 1)."""
    collected = [page for page in pages]
    if not collected:
        return {"offsets": np.zeros(1, np.int64)}
    steps = {name: np.concatenate([page[name] for page in collected]) for name in collected[0]}
    order = np.lexsort((steps["position"], steps["episode"]))
    ragged = {name: array[order] for name, array in steps.items()}
    starts = np.flatnonzero(np.diff(ragged["episode"])) + 1
    ragged["offsets"] = np.concatenate([[0], starts, [len(order)]]).astype(np.int64)
    if "end" in ragged:  # how each episode ended, from the end marks of its rows
        ends = np.maximum.reduceat(ragged["end"], ragged["offsets"][:-1]) if len(order) \
            else np.zeros(0, np.uint8)
        ragged["terminated"] = ends == END_TERMINATED
        ragged["truncated"] = ends == END_TRUNCATED
    return ragged


def group_episodes(pages: Iterator[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
    """Regroups pages of steps by episode: one dict of arrays per episode, in id order,
    its rows in position order."""
    ragged = ragged_episodes(pages)
    offsets = ragged.pop("offsets")
    ragged.pop("terminated", None)
    ragged.pop("truncated", None)
    for begin, end in zip(offsets[:-1], offsets[1:]):
        yield {name: array[begin:end] for name, array in ragged.items()}
