"""Writing an episodic table's ended episodes as a Minari dataset (Minari 0.5's hdf5
layout: ``metadata.json`` and ``main_data.hdf5``), one episode at a time.

The table's steps become Minari's arrays: with a ``next_of`` observation, an episode of
R rows is R - 1 steps and R observations (the last row is the final observation); with
plain ``obs`` and ``next_obs`` fields (transitions), R steps and the last ``next_obs``
as the final observation. ``terminations`` / ``truncations`` are all False but at the
last step, as the episode ended. A table a Minari load created gets its dataset's
metadata (spaces, ids, env_spec...) back, the counts written anew; any other table gets
unbounded Box spaces from its fields (Dict/Tuple for nested ones). An episode whose steps
have policy versions (docs/VERSIONS.md) other than 0 gets them as ``policy_versions``
(uint64 per step) in its group, which a Minari load reads back (Minari ignores it).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..client_interface import ClientLike
from ..errors import InvalidArgument
from ..schema import TableSchema
from . import jpeg_fields
from .episode_reader import EndedEpisode, EndedEpisodes
from .load_table import dataset_description
from .minari_files import POLICY_VERSIONS, import_h5py
from .progress import Progress
from .spaces import SpaceLeaf, space_leaves, space_of_leaves

__all__ = ["export_minari", "ExportResult", "TableLayout", "table_layout"]


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: episodes and steps; episodes left out (still open, or with
    evicted steps)."""
    path: str
    episodes: int
    steps: int
    skipped: int


@dataclass
class TableLayout:
    """How a table's fields make a dataset's arrays."""
    obs: List[str]            # observation leaves (fields)
    act: List[str]
    rew: str
    next_obs: Optional[List[str]]  # plain next_obs leaves (transitions), or None (next_of)
    infos: List[str]          # info/<path> fields
    info_rows: Optional[str]  # "next" (T+1 rows) or "step"
    jpeg: List[str]


def _under(schema: TableSchema, prefix: str) -> List[str]:
    return [f.name for f in schema.fields if f.name == prefix or f.name.startswith(prefix + "/")]


def table_layout(schema: TableSchema, described: Optional[Dict[str, Any]]) -> TableLayout:
    """The layout of `schema`'s fields (``obs``, ``act``, ``rew``, ``next_obs``,
    ``info/*``). InvalidArgument naming what is missing."""
    obs, act = _under(schema, "obs"), _under(schema, "act")
    if not obs or not act or schema.get("rew") is None:
        raise InvalidArgument(f"table '{schema.table}': an export needs fields obs, act and "
                              f"rew (nested ones too); it has {', '.join(schema.names)}")
    next_of = all(schema.by_name[name].next_of for name in obs)
    next_obs = None if next_of else _under(schema, "next_obs")
    if not next_of and not next_obs:
        raise InvalidArgument(f"table '{schema.table}': its observations need a next "
                              "observation to export: a next_of obs field, or next_obs fields")
    infos = _under(schema, "info")
    info_rows = None
    if infos:
        info_rows = "next" if all(schema.by_name[n].next_of for n in infos) else "step"
    jpeg = list(described.get("jpeg", [])) if described else []
    return TableLayout(obs, act, "rew", next_obs, infos, info_rows, jpeg)


def _spaces(schema: TableSchema, layout: TableLayout,
            described: Optional[Dict[str, Any]]) -> Tuple[str, str]:
    if described and described.get("format") == "minari":
        meta = described["minari"]
        return str(meta["observation_space"]), str(meta["action_space"])
    leaves = [(f.name, f.dtype, f.shape) for f in schema.fields]
    return (json.dumps(space_of_leaves(leaves, "obs")),
            json.dumps(space_of_leaves(leaves, "act")))


def _write_leaves(h5group: Any, name: str, leaves: List[SpaceLeaf], prefix: str,
                  columns: Dict[str, np.ndarray[Any, Any]], jpeg: List[str], h5py: Any) -> None:
    for leaf in leaves:
        field = prefix if not leaf.path else f"{prefix}/{leaf.path}"
        target = name if not leaf.hdf5_path else f"{name}/{leaf.hdf5_path}"
        values = columns[field]
        if field in jpeg:
            h5group.create_dataset(target, data=jpeg_fields.unpack(values),
                                   dtype=h5py.vlen_dtype(np.uint8))
        else:
            h5group.create_dataset(target, data=values, chunks=True if values.size else None,
                                   maxshape=(None, *values.shape[1:]))


def minari_arrays(episode: EndedEpisode, layout: TableLayout) -> Dict[str, np.ndarray[Any, Any]]:
    """An ended episode's rows as Minari's per-episode arrays, by field name, plus
    ``terminations`` / ``truncations``: observations (and next_of infos) T+1 rows,
    the rest T."""
    rows = episode.rows
    out: Dict[str, np.ndarray[Any, Any]] = {}
    if layout.next_obs is None:
        steps = len(episode) - 1
        for name in layout.obs:
            out[name] = rows[name]
    else:
        steps = len(episode)
        for name, nxt in zip(layout.obs, layout.next_obs):
            out[name] = np.concatenate([rows[name], rows[nxt][-1:]])
    for name in layout.act + [layout.rew]:
        out[name] = rows[name][:steps]
    for name in layout.infos:
        out[name] = rows[name] if layout.info_rows == "next" and layout.next_obs is None \
            else rows[name][:steps]
    last = np.zeros(steps, bool)
    if steps:
        last[-1] = True
    if "terminations" in rows and "truncations" in rows:  # kept as the dataset had them
        out["terminations"] = rows["terminations"][:steps]
        out["truncations"] = rows["truncations"][:steps]
    else:
        out["terminations"] = last if episode.terminated else np.zeros(steps, bool)
        out["truncations"] = np.zeros(steps, bool) if episode.terminated else last
    return out


def _dataset_id(table: str) -> str:
    name = re.sub(r"[^-_\w]", "_", table)
    return f"replayd/{name}-v0"


def export_minari(client: ClientLike, table: str, path: str, *, dataset_id: Optional[str] = None,
                  page: int = 4096, progress: Optional[bool] = None) -> ExportResult:
    """Writes the ended episodes of the episodic `table` as a Minari dataset in the folder
    `path` (created; it must not hold a dataset yet): ``metadata.json`` and
    ``main_data.hdf5``, which ``minari.MinariDataset(path)`` reads, and
    ``minari.load_dataset(id)`` when `path` is ``$MINARI_DATASETS_PATH/<id>/data``.
    `dataset_id`: the id in metadata.json (default: the loaded dataset's, else
    ``replayd/<table>-v0``). Reads the table in pages of `page` steps (bounded memory) while
    the server keeps serving; steps stored meanwhile are exported if their episode ends
    before the read reaches them."""
    h5py = import_h5py()
    schema = client.schema(table)
    described = dataset_description(client, table)
    layout = table_layout(schema, described)
    observation_space, action_space = _spaces(schema, layout, described)
    obs_leaves, act_leaves = space_leaves(observation_space), space_leaves(action_space)
    os.makedirs(path, exist_ok=True)
    metadata_path = os.path.join(path, "metadata.json")
    if os.path.exists(metadata_path):
        raise FileExistsError(f"{path} holds a dataset already (metadata.json); export to "
                              "another folder or delete it")
    reader = EndedEpisodes(client, table, page)
    episodes = steps = 0
    bar = Progress(None, enabled=progress)
    with h5py.File(os.path.join(path, "main_data.hdf5"), "w", track_order=True) as f:
        empty = 0
        for episode in reader:
            arrays = minari_arrays(episode, layout)
            count = len(arrays[layout.rew])
            if count == 0:  # only a final row: no step to write
                empty += 1
                continue
            group = f.create_group(f"episode_{episodes}")
            group.attrs["id"] = episodes
            group.attrs["total_steps"] = count
            _write_leaves(group, "observations", obs_leaves, "obs", arrays, layout.jpeg, h5py)
            _write_leaves(group, "actions", act_leaves, "act", arrays, layout.jpeg, h5py)
            group.create_dataset("rewards", data=arrays[layout.rew], maxshape=(None,),
                                 chunks=True if count else None)
            for key in ("terminations", "truncations"):
                group.create_dataset(key, data=arrays[key], maxshape=(None,),
                                     chunks=True if count else None)
            infos = group.create_group("infos")
            for name in layout.infos:
                infos.create_dataset(name[len("info/"):], data=arrays[name])
            if "version" in episode.rows and episode.rows["version"][:count].any():
                group.create_dataset(POLICY_VERSIONS, data=episode.rows["version"][:count])
            episodes += 1
            steps += count
            bar.update(steps)
    bar.close()
    metadata: Dict[str, Any] = {}
    if described and described.get("format") == "minari":
        metadata.update(described["minari"])
    version = str(metadata.get("minari_version", ""))
    metadata.update({"total_episodes": episodes, "total_steps": steps, "data_format": "hdf5",
                     "observation_space": observation_space, "action_space": action_space,
                     "dataset_id": dataset_id or metadata.get("dataset_id") or _dataset_id(table),
                     "minari_version": version if version.startswith("0.5") else "0.5.3"})
    with open(metadata_path, "w") as out:
        json.dump(metadata, out)
    return ExportResult(path, episodes, steps, reader.skipped + empty)
