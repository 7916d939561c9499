"""Offline-RL datasets in and out of episodic tables (client/python/README.md, "Datasets").

    import replayd, replayd.datasets
    client = replayd.Client("unix:///tmp/replayd.sock")
    replayd.datasets.load(client, "cartpole", "~/.minari/datasets/cartpole/random-v0")
    replayd.datasets.load(client, "hopper", "hopper-medium.hdf5")          # D4RL-style
    replayd.datasets.export(client, "cartpole", "out/data", format="minari")

Minari datasets (hdf5, the 0.5 and 0.4 layouts; Dict and Tuple spaces as nested fields,
JPEG images as their bytes) and D4RL-style flat HDF5 files, read and written with h5py and
json only (h5py is imported here only; Minari itself is not needed). Loads and exports
stream in bounded memory.

Command line: ``replayd-cli load ADDRESS TABLE PATH``, ``replayd-cli export ADDRESS TABLE
PATH --format minari|d4rl``.
"""
from __future__ import annotations

import os
from typing import Any

from ..client_interface import ClientLike
from .d4rl_export import export_d4rl
from .d4rl_load import is_d4rl_file, load_d4rl
from .episode_reader import EndedEpisode, EndedEpisodes
from .load_table import DATASET_KEY, LoadInterrupted, LoadResult, dataset_description
from .minari_export import ExportResult, export_minari
from .minari_load import load_minari

__all__ = ["load", "load_minari", "load_d4rl", "export", "export_minari", "export_d4rl",
           "ended_episodes", "EndedEpisode", "LoadResult", "ExportResult", "LoadInterrupted",
           "DATASET_KEY", "dataset_description"]


def load(client: ClientLike, table: str, path: str, **options: Any) -> LoadResult:
    """Loads `path` into `table`: a D4RL-style HDF5 file (``observations`` at its root) with
    `load_d4rl`, anything else (a Minari dataset folder or its main_data.hdf5) with
    `load_minari`; options go to them."""
    path = os.path.expanduser(path)
    if os.path.isfile(path) and is_d4rl_file(path):
        return load_d4rl(client, table, path, **options)
    return load_minari(client, table, path, **options)


def export(client: ClientLike, table: str, path: str, *, format: str = "minari",
           **options: Any) -> ExportResult:
    """`export_minari` (a dataset folder) or `export_d4rl` (a file) by `format`."""
    path = os.path.expanduser(path)
    if format == "minari":
        return export_minari(client, table, path, **options)
    if format == "d4rl":
        return export_d4rl(client, table, path, **options)
    raise ValueError(f"unknown dataset format {format!r} (minari or d4rl)")


def ended_episodes(client: ClientLike, table: str, *, page: int = 4096) -> EndedEpisodes:
    """The ended episodes of an episodic table, streamed in the order they ended (bounded
    memory; see replayd.datasets.episode_reader)."""
    return EndedEpisodes(client, table, page)


