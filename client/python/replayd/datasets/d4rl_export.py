"""Writing an episodic table's ended episodes as a D4RL-style flat HDF5 file, appended
episode by episode to resizable datasets (bounded memory).

``observations``, ``actions``, ``rewards``, ``terminals`` (1 at a terminated episode's
last step), ``timeouts`` (1 at a truncated one's), ``next_observations`` (the following
observation, the final one at an episode's end) and ``infos/<path>`` per step;
``metadata/*`` from a D4RL load. A table a D4RL load created is written back as the file
was: its dtypes and reward shape, ``next_observations`` only if the file had them, a
truncated episode's last step (stored without a final row) as a step, and the unmarked
last episode unmarked. Observations must be one array (no Dict/Tuple): D4RL's layout has
no place for nesting. ``policy_versions`` (uint64 per step, docs/VERSIONS.md) holds the
version each step was acted with, written only when some step's is not 0; a D4RL load
reads it back.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..client_interface import ClientLike
from ..errors import InvalidArgument
from .episode_reader import EndedEpisodes
from .load_table import dataset_description
from .minari_export import ExportResult, table_layout
from .minari_files import POLICY_VERSIONS, import_h5py
from .progress import Progress

__all__ = ["export_d4rl"]


class _Appender:
    """Resizable datasets of `f`, grown by each episode's rows."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.sets: Dict[str, Any] = {}

    def add(self, name: str, values: np.ndarray[Any, Any]) -> None:
        dataset = self.sets.get(name)
        if dataset is None:
            dataset = self.f.create_dataset(name, shape=(0, *values.shape[1:]),
                                            maxshape=(None, *values.shape[1:]),
                                            dtype=values.dtype,
                                            chunks=(max(1, min(65536, 2 ** 20 // max(
                                                1, values[:1].nbytes))), *values.shape[1:]))
            self.sets[name] = dataset
        old = dataset.shape[0]
        dataset.resize(old + len(values), axis=0)
        dataset[old:] = values


def export_d4rl(client: ClientLike, table: str, path: str, *,
                next_observations: Optional[bool] = None, page: int = 4096,
                progress: Optional[bool] = None) -> ExportResult:
    """Writes the ended episodes of the episodic `table` to the D4RL-style file `path`
    (replaced if it exists). `next_observations`: write them (default: yes, except for a
    table loaded from a file without them). Reads the table in pages (bounded memory)
    while the server keeps serving."""
    h5py = import_h5py()
    schema = client.schema(table)
    described = dataset_description(client, table)
    d4rl = described if described and described.get("format") == "d4rl" else None
    layout = table_layout(schema, described)
    if layout.obs != ["obs"] or layout.act != ["act"]:
        raise InvalidArgument(f"table '{table}': D4RL's flat layout holds one observation "
                              "and one action array; nested fields need --format minari")
    if layout.jpeg:
        raise InvalidArgument(f"table '{table}': JPEG-encoded images need --format minari")
    if next_observations is None:
        next_observations = bool(d4rl["next_observations"]) if d4rl else True
    reward_shape: Tuple[int, ...] = tuple(d4rl["rewards"]["shape"]) if d4rl else ()
    reward_dtype = np.dtype(d4rl["rewards"]["dtype"]) if d4rl else schema.by_name["rew"].dtype
    terminal_dtype = np.dtype(d4rl["terminals"]) if d4rl else np.dtype(bool)
    timeout_dtype = np.dtype(d4rl["timeouts"]) if d4rl and d4rl["timeouts"] else np.dtype(bool)
    no_final_when_truncated = d4rl is not None and not d4rl["next_observations"]
    reader = EndedEpisodes(client, table, page)
    bar = Progress(None, enabled=progress)
    episodes = steps = 0
    pending: Optional[List[Any]] = None  # the last episode, held back to mark it unmarked
    versions = [0]  # episodes with a policy version other than 0
    with h5py.File(path, "w") as f:
        out = _Appender(f)

        def write(episode: Any, last: bool) -> int:
            rows = episode.rows
            whole = layout.next_obs is not None or (no_final_when_truncated
                                                     and not episode.terminated)
            count = len(episode) if whole else len(episode) - 1
            if layout.next_obs is not None:
                following = rows["next_obs"][:count]
            else:
                following = rows["obs"][1:count + 1]
                if whole:  # no final row: the last step has no next observation
                    following = np.concatenate([following, rows["obs"][count - 1:count]])
            out.add("observations", rows["obs"][:count])
            out.add("actions", rows["act"][:count])
            out.add("rewards", rows["rew"][:count].astype(reward_dtype)
                    .reshape(count, *reward_shape))
            mark = np.zeros(count, bool)
            if count and not (last and d4rl and d4rl.get("last_unmarked")):
                mark[-1] = True
            zeros = np.zeros(count, bool)
            out.add("terminals", (mark if episode.terminated else zeros).astype(terminal_dtype))
            out.add("timeouts", (zeros if episode.terminated else mark).astype(timeout_dtype))
            if next_observations:
                out.add("next_observations", following)
            for name in layout.infos:
                out.add(f"infos/{name[len('info/'):]}", rows[name][:count])
            versions[0] += 1 if "version" in rows and rows["version"][:count].any() else 0
            out.add(POLICY_VERSIONS, rows["version"][:count] if "version" in rows
                    else np.zeros(count, np.uint64))
            return count

        for episode in reader:
            if pending is not None:
                steps += write(pending[0], False)
                episodes += 1
                bar.update(steps)
            pending = [episode]
        if pending is not None:
            steps += write(pending[0], True)
            episodes += 1
        if not versions[0] and POLICY_VERSIONS in f:
            del f[POLICY_VERSIONS]  # every step of version 0: the file as it would be without
        for name, entry in (d4rl or {}).get("metadata", {}).items():
            value = entry["value"]
            if entry.get("string"):
                f.create_dataset(f"metadata/{name}", data=value,
                                 dtype=h5py.string_dtype() if entry["dtype"] == "object"
                                 else None)
            else:
                f.create_dataset(f"metadata/{name}",
                                 data=np.asarray(value, dtype=entry["dtype"]))
    bar.close(steps)
    return ExportResult(path, episodes, steps, reader.skipped)
