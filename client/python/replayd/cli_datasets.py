"""replayd-cli's dataset commands (replayd.datasets):

    replayd-cli load ADDRESS TABLE PATH [--no-infos] [--capacity N] [--jpeg-bytes B]
    replayd-cli export ADDRESS TABLE PATH [--format minari|d4rl] [--dataset-id ID]

A progress line on a terminal's stderr; a summary line on stdout. An interrupted load says
how many episodes are stored (the episodes stay). h5py is imported only when these run.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict

__all__ = ["add_dataset_commands"]


def cmd_load(client: Any, args: argparse.Namespace) -> int:
    from . import datasets
    options: Dict[str, Any] = {"infos": not args.no_infos}
    if args.capacity:
        options["capacity"] = args.capacity
    if args.jpeg_bytes:
        options["jpeg_bytes"] = args.jpeg_bytes
    result = datasets.load(client, args.table, args.path, **options)
    print(f"loaded {result.episodes} episodes ({result.steps} steps) into table "
          f"'{result.table}' in {result.seconds:.2f} s ({result.steps_per_second:,.0f} "
          "steps/s)")
    return 0


def cmd_export(client: Any, args: argparse.Namespace) -> int:
    from . import datasets
    options: Dict[str, Any] = {}
    if args.dataset_id:
        if args.format != "minari":
            raise ValueError("--dataset-id names a Minari dataset (--format minari)")
        options["dataset_id"] = args.dataset_id
    result = datasets.export(client, args.table, args.path, format=args.format, **options)
    skipped = f"; {result.skipped} episodes left out (open, or with evicted steps)" \
        if result.skipped else ""
    print(f"exported {result.episodes} ended episodes ({result.steps} steps) of table "
          f"'{args.table}' to {result.path}{skipped}")
    return 0


def add_dataset_commands(commands: Any) -> None:
    """Adds ``load`` and ``export`` to replayd-cli's subcommands."""
    load = commands.add_parser("load", help="load a Minari dataset or a D4RL-style HDF5 "
                                            "file into an episodic table")
    load.add_argument("address")
    load.add_argument("table", help="created from the dataset's spaces when missing")
    load.add_argument("path", help="a Minari dataset folder (or its main_data.hdf5), or a "
                                   "D4RL-style .hdf5 file")
    load.add_argument("--no-infos", action="store_true", help="leave the infos out")
    load.add_argument("--capacity", type=int, help="steps a new table holds (default: the "
                                                   "dataset's, plus a final row per episode)")
    load.add_argument("--jpeg-bytes", type=int, help="bytes per JPEG frame in a new table "
                                                     "(default: the dataset's longest)")
    load.set_defaults(run=cmd_load)

    export = commands.add_parser("export", help="write an episodic table's ended episodes "
                                                "as a Minari dataset or a D4RL-style file")
    export.add_argument("address")
    export.add_argument("table")
    export.add_argument("path", help="minari: the dataset's data folder (metadata.json and "
                                     "main_data.hdf5 go there); d4rl: the .hdf5 file")
    export.add_argument("--format", choices=["minari", "d4rl"], default="minari")
    export.add_argument("--dataset-id", help="the Minari dataset id (default: the loaded "
                                             "dataset's, else replayd/TABLE-v0)")
    export.set_defaults(run=cmd_export)
