"""Loading a Minari dataset into an episodic table, one episode at a time.

The table (created when missing; docs in client/python/README.md, "Datasets"):
- ``obs`` (or ``obs/<path>`` for Dict/Tuple spaces), a ``next_of`` field: each step's
  observation, the episode's last observation stored once as its final row (so a
  truncated episode's last step bootstraps from it, a terminated one does not);
- ``act`` (or ``act/<path>``), ``rew`` (the rewards' float dtype);
- ``info/<path>`` when the dataset has infos and `infos` is True: ``next_of`` too when
  there are T+1 of them (Minari 0.5's DataCollector records the reset's info first);
- JPEG-encoded image leaves as their bytes (replayd.datasets.jpeg_fields);
- ``terminations`` and ``truncations`` per step, only when some episode's flags are not
  exactly one True at its last step (a termination at the time limit sets both): the
  episode's end says terminated (no bootstrap) when ``terminations`` ends True, else
  truncated, and the export writes the flags back as they were.
Its metadata keeps the dataset's metadata.json (less the counts), for exports.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..client_interface import ClientLike
from . import jpeg_fields
from .load_table import (FieldSpec, LoadResult, Loading, ensure_table, reward_dtype,
                         split_rows)
from .minari_files import POLICY_VERSIONS, InfoLeaf, MinariSource, open_minari

__all__ = ["load_minari"]

_COUNTS = ("total_episodes", "total_steps", "dataset_size")
_FLAGS = ("terminations", "truncations")


def _field(prefix: str, path: str) -> str:
    return prefix if not path else f"{prefix}/{path}"


def _fields(source: MinariSource, infos: List[InfoLeaf], info_rows: Optional[str],
            jpeg: Dict[str, int], rew: np.dtype[Any], flags: bool = False) -> List[FieldSpec]:
    fields: List[FieldSpec] = []
    for leaf in source.observation_leaves:
        name = _field("obs", leaf.path)
        if name in jpeg:
            fields.append((name, np.dtype("uint8"), (jpeg[name],), True))
        else:
            fields.append((name, leaf.dtype, leaf.shape, True))
    for leaf in source.action_leaves:
        name = _field("act", leaf.path)
        if name in jpeg:
            fields.append((name, np.dtype("uint8"), (jpeg[name],), False))
        else:
            fields.append((name, leaf.dtype, leaf.shape, False))
    fields.append(("rew", rew, (), False))
    for info in infos:
        fields.append((f"info/{info.path}", info.dtype, info.shape, info_rows == "next"))
    if flags:  # the per-step flags, where an episode's end alone does not say them
        fields += [(key, np.dtype("bool"), (), False) for key in _FLAGS]
    return fields


def load_minari(client: ClientLike, table: str, path: str, *, infos: bool = True,
                capacity: Optional[int] = None, jpeg_bytes: Optional[int] = None,
                chunk_steps: int = 65536, progress: Optional[bool] = None,
                **table_options: Any) -> LoadResult:
    """Loads the Minari dataset at `path` (its folder, ``data`` folder or
    ``main_data.hdf5``; Minari 0.5 or 0.4 layout) into the episodic `table`, creating it
    when missing (capacity: the dataset's steps plus one final row per episode, unless
    given; `table_options` go to create_table). `infos=False` leaves infos out.
    `jpeg_bytes`: bytes per JPEG frame in a new table (default: the dataset's longest
    frame, found by a first pass over the images). Episodes go `chunk_steps` steps or so
    per request. Memory: one episode and the requests in flight.

    Progress on stderr when it is a terminal (`progress` True/False forces it). Raises
    LoadInterrupted (how many episodes are stored) when the load fails part way; a
    KeyboardInterrupt prints that count and propagates."""
    source = open_minari(path)
    with source:
        info_leaves, info_rows = source.info_leaves() if infos else ([], None)
        first = source.file[source.episode_names[0]] if source.episode_names else None
        rew = reward_dtype(np.dtype(first["rewards"].dtype) if first is not None
                           else np.dtype("float64"))
        jpeg: Dict[str, int] = {}
        jpeg_names = [(_field("obs" if kind == "observations" else "act", leaf.path), kind,
                       leaf) for kind, leaf in source.jpeg_leaves()]
        exists = table in client.tables()  # type: ignore[attr-defined]
        for name, kind, leaf in jpeg_names:
            if exists:
                field = client.schema(table).get(name)
                jpeg[name] = field.shape[0] if field is not None and field.shape else 0
            else:
                longest = jpeg_bytes if jpeg_bytes else source.longest_jpeg(kind, leaf)
                jpeg[name] = jpeg_fields.HEADER_BYTES + int(longest)
        flags = (client.schema(table).get("terminations") is not None if exists
                 else source.irregular_ends())
        fields = _fields(source, info_leaves, info_rows, jpeg, rew, flags)
        described = {"format": "minari", "layout": source.layout,
                     "minari": {k: v for k, v in source.metadata.items() if k not in _COUNTS},
                     "infos": info_rows, "jpeg": sorted(jpeg)}
        total = source.total_steps
        episodes = len(source.episode_names)
        ensure_table(client, table, fields, capacity or (total + episodes), described,
                     table_options)
        loading = Loading(client, table, total, progress)
        try:
            _send_episodes(loading, source, fields, info_leaves, info_rows, jpeg, chunk_steps)
        except BaseException as exc:
            raise loading.fail(exc) from (None if isinstance(exc, KeyboardInterrupt) else exc)
        return loading.finish()


def _send_episodes(loading: Loading, source: MinariSource, fields: List[FieldSpec],
                   info_leaves: List[InfoLeaf], info_rows: Optional[str],
                   jpeg: Dict[str, int], chunk_steps: int) -> None:
    """Reads episodes and sends them about `chunk_steps` steps per request."""
    rows: Dict[str, List[np.ndarray[Any, Any]]] = {name: [] for name, _, _, _ in fields}
    lengths: List[int] = []
    ends: List[Tuple[bool, Dict[str, Any]]] = []
    versions: List[np.ndarray[Any, Any]] = []  # each episode's, when the file has them
    pending = 0

    def send() -> None:
        nonlocal pending
        ids = loading.sender.open_episodes(len(lengths))
        columns = {name: split_rows(values) for name, values in rows.items()}
        episode_ids = np.repeat(np.asarray(ids, np.uint64), lengths)
        loading.sender.send(columns, episode_ids,
                            [(i, terminated, final) for i, (terminated, final)
                             in zip(ids, ends)],
                            np.concatenate(versions) if len(versions) == len(lengths)
                            else None)
        versions.clear()
        loading.sent(pending)
        for values in rows.values():
            values.clear()
        lengths.clear()
        ends.clear()
        pending = 0

    for episode in source.episodes(info_leaves):
        steps = int(len(episode["rewards"]))
        if steps == 0:
            continue  # an episode with no step cannot be stored
        final: Dict[str, Any] = {}
        for prefix, kind in (("obs", "observations"), ("act", "actions")):
            for path, values in episode[kind].items():
                name = _field(prefix, path)
                if name in jpeg:
                    values = jpeg_fields.pack(values, jpeg[name], f"{source.data_dir}: {name}")
                if prefix == "obs":
                    if len(values) != steps + 1:
                        raise ValueError(f"{episode['name']}: {len(values)} observations for "
                                         f"{steps} steps (expected {steps + 1})")
                    final[name] = values[steps]
                rows[name].append(values[:steps])
        rows["rew"].append(episode["rewards"])
        for path, values in episode["infos"].items():
            name = f"info/{path}"
            if info_rows == "next":
                final[name] = values[steps]
            rows[name].append(values[:steps])
        if "terminations" in rows:
            for key in _FLAGS:
                rows[key].append(np.asarray(episode[key], bool))
        terminated = bool(episode["terminations"][-1])
        if POLICY_VERSIONS in episode:
            versions.append(np.asarray(episode[POLICY_VERSIONS][:steps], dtype="<u8"))
        lengths.append(steps)
        ends.append((terminated, final))
        pending += steps
        if pending >= chunk_steps:
            send()
    if lengths:
        send()
