"""Loading a D4RL-style flat HDF5 file into an episodic table, in chunks of steps.

The file: ``observations`` (N, ...), ``actions``, ``rewards`` ((N,) or (N, 1)),
``terminals``, ``timeouts`` (optional), ``next_observations`` (optional), ``infos/*`` and
``metadata/*``. An episode ends at a terminal (terminated) or a timeout (truncated); steps
after the last of them form a last episode, stored as truncated.

The table (created when missing): ``obs`` (``next_of``), ``act``, ``rew`` (scalar) and
``info/<path>`` per step. Final observations: ``next_observations`` of an episode's last
step when the file has them (each episode's next_observations must then equal its
following observations: ValueError otherwise); without them, a terminated episode's final
row repeats its last observation (never bootstrapped from), and a truncated one ends
without a final row, so its last step is no transition (as D4RL's qlearning_dataset drops
it). The table's metadata keeps what an export needs to write the file back as it was.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..client_interface import ClientLike
from .load_table import FieldSpec, LoadResult, Loading, ensure_table, reward_dtype
from .minari_files import POLICY_VERSIONS, import_h5py, json_safe

__all__ = ["load_d4rl", "is_d4rl_file"]


def is_d4rl_file(path: str) -> bool:
    """Whether `path` is an HDF5 file with D4RL's ``observations`` at its root."""
    h5py = import_h5py()
    try:
        with h5py.File(path, "r") as f:
            return "observations" in f and "actions" in f
    except OSError:
        return False


def _metadata(group: Any) -> Dict[str, Any]:
    """``metadata/*`` as JSON: path -> {value, dtype, shape} (strings as text)."""
    out: Dict[str, Any] = {}

    def visit(name: str, obj: Any) -> None:
        if hasattr(obj, "dtype"):
            value = obj[()]
            out[name] = {"value": json_safe(value), "dtype": str(obj.dtype),
                         "string": obj.dtype.kind in "OSU", "shape": list(obj.shape)}

    group.visititems(visit)
    return out


def load_d4rl(client: ClientLike, table: str, path: str, *, infos: bool = True,
              capacity: Optional[int] = None, chunk_steps: int = 65536,
              progress: Optional[bool] = None, **table_options: Any) -> LoadResult:
    """Loads the D4RL-style file `path` into the episodic `table`, creating it when
    missing (capacity: N steps plus one final row per episode, unless given;
    `table_options` go to create_table). `infos=False` leaves ``infos/*`` out. Reads
    `chunk_steps` rows at a time (memory: a few chunks). Progress, errors and interrupts
    as `load_minari`."""
    h5py = import_h5py()
    with h5py.File(path, "r") as f:
        for key in ("observations", "actions", "rewards", "terminals"):
            if key not in f:
                raise ValueError(f"{path}: no '{key}' dataset (a D4RL-style file has "
                                 "observations, actions, rewards, terminals, timeouts)")
        observations, actions, rewards = f["observations"], f["actions"], f["rewards"]
        n = int(observations.shape[0])
        for key in ("actions", "rewards", "terminals"):
            if f[key].shape[0] != n:
                raise ValueError(f"{path}: '{key}' has {f[key].shape[0]} rows, observations {n}")
        if rewards.ndim > 2 or (rewards.ndim == 2 and rewards.shape[1] != 1):
            raise ValueError(f"{path}: rewards of shape {list(rewards.shape)} (expected (N,) "
                             "or (N, 1))")
        timeouts = f["timeouts"] if "timeouts" in f else None
        next_obs = f["next_observations"] if "next_observations" in f else None
        info_names: List[str] = []
        if infos and "infos" in f:
            f["infos"].visititems(lambda name, obj: info_names.append(name)
                                  if hasattr(obj, "dtype") and obj.shape[:1] == (n,)
                                  and obj.dtype.kind in "biuf" else None)
        ended = 0  # episode ends, counted a chunk at a time (bounded memory)
        for begin in range(0, n, chunk_steps):
            ended += int(_done(f, begin, min(begin + chunk_steps, n)).sum())
        last_unmarked = bool(n) and not bool(_done(f, n - 1, n)[0])
        episodes = ended + (1 if last_unmarked else 0)
        fields: List[FieldSpec] = [
            ("obs", observations.dtype, tuple(observations.shape[1:]), True),
            ("act", actions.dtype, tuple(actions.shape[1:]), False),
            ("rew", reward_dtype(rewards.dtype), (), False)]
        fields += [(f"info/{name}", f[f"infos/{name}"].dtype,
                    tuple(f[f"infos/{name}"].shape[1:]), False) for name in info_names]
        described = {"format": "d4rl", "rewards": {"dtype": str(rewards.dtype),
                                                   "shape": list(rewards.shape[1:])},
                     "terminals": str(f["terminals"].dtype),
                     "timeouts": None if timeouts is None else str(timeouts.dtype),
                     "next_observations": next_obs is not None,
                     "last_unmarked": last_unmarked,
                     "infos": info_names,
                     "metadata": _metadata(f["metadata"]) if "metadata" in f else {}}
        ensure_table(client, table, fields, capacity or (n + episodes), described,
                     table_options)
        loading = Loading(client, table, n, progress)
        try:
            _send_chunks(loading, f, n, info_names, chunk_steps)
        except BaseException as exc:
            raise loading.fail(exc) from (None if isinstance(exc, KeyboardInterrupt) else exc)
        return loading.finish()


def _done(f: Any, begin: int, end: int) -> np.ndarray[Any, Any]:
    """Whether each of rows begin..end ends an episode (a terminal or a timeout)."""
    done = np.asarray(f["terminals"][begin:end], bool)
    if "timeouts" in f:
        done |= np.asarray(f["timeouts"][begin:end], bool)
    return done


def _read_chunk(f: Any, begin: int, end: int, n: int,
                info_names: List[str]) -> Dict[str, Any]:
    """Rows begin..end of the file: the table's columns, ``done``, ``terminal`` and
    ``next`` (next_observations, checked) when the file has them."""
    obs = f["observations"][begin:end]
    chunk: Dict[str, Any] = {"obs": obs, "act": f["actions"][begin:end],
                             "rew": f["rewards"][begin:end].reshape(end - begin)}
    for name in info_names:
        chunk[f"info/{name}"] = f[f"infos/{name}"][begin:end]
    if POLICY_VERSIONS in f:  # each step's policy version, as replayd's export writes it
        chunk["versions"] = np.asarray(f[POLICY_VERSIONS][begin:end], dtype="<u8")
    chunk["done"] = _done(f, begin, end)
    chunk["terminal"] = np.asarray(f["terminals"][begin:end], bool)
    if "next_observations" in f:
        chunk["next"] = f["next_observations"][begin:end]
        _check_next(obs, chunk["next"], chunk["done"], f["observations"], begin, end, n)
    return chunk


def _send_chunks(loading: Loading, f: Any, n: int, info_names: List[str],
                 chunk_steps: int) -> None:
    """Sends the file's rows a chunk at a time, the next chunk read by a thread of its
    own meanwhile (the reads overlap the sends, which wait for the server)."""
    open_id: Optional[int] = None  # the episode that continues into the next chunk
    starts_at = list(range(0, n, chunk_steps))
    with ThreadPoolExecutor(1, thread_name_prefix="replayd-d4rl-reader") as reader:
        pending = reader.submit(_read_chunk, f, 0, min(chunk_steps, n), n, info_names) \
            if n else None
        for index, begin in enumerate(starts_at):
            end = min(begin + chunk_steps, n)
            assert pending is not None
            chunk = pending.result()
            pending = None
            if index + 1 < len(starts_at):  # at most one chunk read ahead
                after = starts_at[index + 1]
                pending = reader.submit(_read_chunk, f, after, min(after + chunk_steps, n), n,
                                        info_names)
            open_id = _send_chunk(loading, chunk, open_id, end == n)
            loading.sent(end - begin)


def _send_chunk(loading: Loading, chunk: Dict[str, Any], open_id: Optional[int],
                last_chunk: bool) -> Optional[int]:
    """Sends one chunk's rows and the ends of the episodes it finishes; returns the id
    of the episode that goes on into the next chunk (None when none does)."""
    rows = len(chunk["done"])
    chunk_done, terminal, obs = chunk["done"], chunk["terminal"], chunk["obs"]
    next_chunk = chunk.get("next")
    last_rows = np.flatnonzero(chunk_done)  # rows (in the chunk) that end an episode
    if last_chunk and not chunk_done[-1]:
        last_rows = np.append(last_rows, rows - 1)  # the unmarked last episode
    starts = np.concatenate([[0], last_rows + 1])
    stops = np.concatenate([last_rows + 1, [rows]])
    keep = stops > starts
    lengths = stops[keep] - starts[keep]
    new = len(lengths) - (1 if open_id is not None else 0)
    ids = ([open_id] if open_id is not None else []) + loading.sender.open_episodes(new)
    ends: List[Tuple[int, bool, Optional[Dict[str, Any]]]] = []
    for i, row in enumerate(last_rows.tolist()):
        is_terminal = bool(terminal[row])
        final: Optional[Dict[str, Any]]
        if next_chunk is not None:
            final = {"obs": next_chunk[row]}
        elif is_terminal:
            final = {"obs": obs[row]}  # never bootstrapped from (terminated)
        else:
            final = None  # truncated, no next observation: the last step serves
        ends.append((ids[i], is_terminal, final))
    columns = {name: value for name, value in chunk.items()
               if name not in ("done", "terminal", "next", "versions")}
    loading.sender.send(columns, np.repeat(np.asarray(ids, np.uint64), lengths), ends,
                        chunk.get("versions"))
    return ids[-1] if len(ids) > len(last_rows) else None


def _check_next(obs: np.ndarray[Any, Any], next_chunk: np.ndarray[Any, Any],
                chunk_done: np.ndarray[Any, Any], observations: Any, begin: int, end: int,
                n: int) -> None:
    """ValueError unless each step's next observation is the following step's
    observation within an episode (what a next_of field stores)."""
    following = obs[1:]
    if end < n:
        following = np.concatenate([following, observations[end:end + 1]])
    else:
        next_chunk, chunk_done = next_chunk[:-1], chunk_done[:-1]
    inside = ~chunk_done[:len(following)]
    if not np.array_equal(next_chunk[:len(following)][inside], following[inside]):
        raise ValueError("next_observations differ from the following observations inside "
                         "an episode; replayd stores each observation once (next_of), so "
                         "such a file cannot be loaded as it is")
