"""replayd-cli (also ``python3 -m replayd``): look at and manage a running server.

    replayd-cli status ADDRESS [--interval S] [--json]
    replayd-cli create-table ADDRESS NAME --field obs:float32:4 --field act:int64 \\
        --capacity N [--sampler prioritized] [--min-size K] [--rate-limiter JSON] ...
    replayd-cli drop-table ADDRESS NAME
    replayd-cli snapshot ADDRESS
    replayd-cli load ADDRESS TABLE PATH         (replayd.cli_datasets: Minari, D4RL files)
    replayd-cli export ADDRESS TABLE PATH --format minari|d4rl

Exit codes: 0 done (also when the output's reader stopped reading, as ``| head`` does:
the rest is dropped quietly); 1 the server refused the request (its error code and message
are printed); 2 bad command line; 3 the server could not be reached or did not answer.
ADDRESS is ``unix:///path`` or ``tcp://host:port``; a TCP token comes from REPLAYD_TOKEN.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .cli_datasets import add_dataset_commands
from .client import Client
from .errors import (ConnectionLost, InvalidArgument, ProtocolError, ReplayError,
                     TimeoutError, Unauthenticated)
from .limiter_state import insert_state, sample_state

# Sampler and remover kinds (docs/CONFIG.md "tables"); the server refuses any other name.
SELECTOR_KINDS = ["uniform", "prioritized", "fifo", "lifo", "max_heap", "min_heap"]

__all__ = ["main"]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class _UsageError(Exception):
    pass


def parse_field(spec: str) -> Tuple[str, str, Tuple[int, ...]]:
    """``name:dtype[:shape]`` with shape like ``4`` or ``84x84x4`` (none: a scalar)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise _UsageError(f"--field {spec!r}: expected NAME:DTYPE or NAME:DTYPE:SHAPE "
                          f"(e.g. obs:float32:4, frame:uint8:84x84)")
    shape: Tuple[int, ...] = ()
    if len(parts) == 3 and parts[2]:
        try:
            shape = tuple(int(d) for d in parts[2].split("x"))
        except ValueError:
            raise _UsageError(f"--field {spec!r}: shape {parts[2]!r} is not like 4 or "
                              f"84x84x4") from None
    return parts[0], parts[1], shape


def _json_arg(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _UsageError(f"{flag}: not valid JSON: {exc}") from None


def _rates(before: Dict[str, Any], after: Dict[str, Any], seconds: float
           ) -> Dict[str, Tuple[float, float]]:
    """table -> (inserted items/s, sampled items/s) between two INFO replies."""
    old = {t["name"]: t.get("counters", {}) for t in before.get("tables", [])}
    rates = {}
    for table in after.get("tables", []):
        prev, now = old.get(table["name"], {}), table.get("counters", {})
        rates[table["name"]] = tuple(
            (now.get(key, 0) - prev.get(key, 0)) / seconds for key in ("inserts", "samples"))
    return rates  # type: ignore[return-value]


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    info = client.info()
    rates: Dict[str, Tuple[float, float]] = {}
    if args.interval > 0:
        started = time.monotonic()
        time.sleep(args.interval)
        later = client.info()
        rates = _rates(info, later, time.monotonic() - started)
        info = later
    tables = info.get("tables", [])
    if args.json:
        for table in tables:
            table["sample_limiter"] = sample_state(table)
            table["insert_limiter"] = insert_state(table)
            if table["name"] in rates:
                table["inserts_per_s"], table["samples_per_s"] = rates[table["name"]]
        print(json.dumps(info, indent=2))
        return EXIT_OK
    server = info.get("server", {})
    print(f"{client.address}: replayd {server.get('version', '?')}, protocol "
          f"{server.get('protocol', '?')}, up {float(server.get('uptime_s', 0)):.0f} s, "
          f"{server.get('connections', '?')} connections, {len(tables)} tables")
    for table in tables:
        name = table["name"]
        description = table.get("description", {})
        sampler = description.get("sampler", {}).get("kind", "?")
        counters = table.get("counters", {})
        waiting = table.get("waiting", {})
        if name in rates:
            ins, smp = rates[name]
            rate = f"{ins:,.0f} inserted/s, {smp:,.0f} sampled/s"
        else:
            rate = (f"{counters.get('inserts', 0):,} inserted, "
                    f"{counters.get('samples', 0):,} sampled in total")
        print(f"\n{name}: {table.get('size', 0):,} / {table.get('capacity', 0):,} items, "
              f"{sampler} sampler; {rate}")
        print(f"  samples: {sample_state(table)}; {waiting.get('samples', 0)} waiting")
        print(f"  inserts: {insert_state(table)}; {waiting.get('inserts', 0)} waiting")
        for line in _replay_lines(table.get("replay")):
            print(f"  {line}")
        for line in _version_lines(table):
            print(f"  {line}")
    for line in _value_lines(server.get("values")):
        print(line)
    return EXIT_OK


def _value_lines(published: Any) -> List[str]:
    """The published values of the server's INFO (docs/VALUES.md): one line each, under a
    heading; none from a server that reports none (or predates them)."""
    if not published:
        return []
    lines = ["", f"published values: {len(published)}"]
    for value in published:
        waiting = f"{value.get('fetchers_waiting', 0)} fetchers waiting"
        if value.get("version") is None:  # named by a fetch that waits for it
            lines.append(f"  {value.get('name', '?')}: not published yet, {waiting}")
            continue
        lines.append(f"  {value.get('name', '?')}: version {value['version']}, "
                     f"{int(value.get('bytes', 0)):,} bytes in {value.get('arrays', '?')} "
                     f"arrays, {waiting}")
    return lines


def _replay_lines(replay: Optional[Dict[str, Any]]) -> List[str]:
    """The replay figures of one table's INFO entry (absent from older servers: none)."""
    if not replay:
        return []
    age, age_s = replay["sample_age_inserts"], replay["sample_age_s"]
    removed = replay["times_sampled_at_removal"]
    if age["count"]:
        age_line = (f"replay age: p50 {age['p50']:,.0f} inserts / {age_s['p50']:.3g} s, "
                    f"p99 {age['p99']:,.0f} inserts / {age_s['p99']:.3g} s "
                    f"({age['count']:,} draws)")
    else:
        age_line = "replay age: no draws yet"
    if removed["count"]:
        removed_line = (f"times sampled at removal: p50 {removed['p50']:.3g}, "
                        f"p99 {removed['p99']:.3g}, mean {removed['mean']:.3g} "
                        f"({removed['count']:,} items left)")
    else:
        removed_line = "times sampled at removal: no item has left yet"
    return [age_line, removed_line,
            f"samples per insert: {replay['samples_per_insert']:.3g}"]


def _version_lines(table: Dict[str, Any]) -> List[str]:
    """The policy versions of one table's INFO entry (docs/VERSIONS.md): the followed
    value's version, the versions stored and the staleness of the draws; for a table that
    follows a value or stores versions other than 0 (none from older servers)."""
    versions = table.get("versions")
    followed = table.get("description", {}).get("versions") or {}
    if not isinstance(versions, dict) or (not followed and not versions.get("newest")):
        return []
    if followed:
        current = versions.get("policy_version")
        head = (f"policy version: {current if current is not None else 'none yet'} "
                f"(follows '{followed.get('value', '?')}'")
        if followed.get("drop_behind") is not None:
            head += f", drops items more than {followed['drop_behind']} behind"
        head += ")"
    else:
        head = "policy versions: written by the writers (the table follows no value)"
    if versions.get("oldest") is None:
        stored = "no item stored"
    else:
        stored = (f"stored versions {versions['oldest']}..{versions['newest']} "
                  f"({versions.get('distinct', 0):,} distinct)")
    stored += f", {versions.get('dropped', 0):,} items dropped behind"
    lines = [f"{head}; {stored}"]
    staleness = (table.get("replay") or {}).get("sample_staleness_versions")
    if followed and staleness:
        lines.append(f"sample staleness: p50 {staleness['p50']:.3g}, p99 "
                     f"{staleness['p99']:.3g} versions ({staleness['count']:,} draws)"
                     if staleness.get("count") else "sample staleness: no draws yet")
    return lines


def cmd_create_table(client: Client, args: argparse.Namespace) -> int:
    if not args.field:
        raise _UsageError("create-table needs at least one --field NAME:DTYPE[:SHAPE]")
    fields = [parse_field(spec) for spec in args.field]
    limiter: Any = None
    if args.rate_limiter is not None:
        if args.min_size is not None:
            raise _UsageError("give --min-size or --rate-limiter, not both")
        limiter = _json_arg(args.rate_limiter, "--rate-limiter")
    elif args.min_size is not None:
        limiter = {"kind": "min_size", "min_size_to_sample": args.min_size}
    versions: Optional[Dict[str, Any]] = None
    if args.follow_value is not None:
        versions = {"value": args.follow_value}
        if args.drop_behind is not None:
            versions["drop_behind"] = args.drop_behind
    elif args.drop_behind is not None:
        raise _UsageError("--drop-behind counts versions of the value --follow-value names: "
                          "give --follow-value too")
    info = client.create_table(args.name, fields, args.capacity, sampler=args.sampler,
                               priority_exponent=args.priority_exponent,
                               remover=args.remover,
                               max_times_sampled=args.max_times_sampled,
                               rate_limiter=limiter, seed=args.seed,
                               exist_ok=args.exist_ok, versions=versions)
    print(f"table {info['name']}: {len(fields)} fields, capacity {info['capacity']:,}")
    return EXIT_OK


def cmd_drop_table(client: Client, args: argparse.Namespace) -> int:
    client.drop_table(args.name)
    print(f"dropped table {args.name}")
    return EXIT_OK


def cmd_snapshot(client: Client, args: argparse.Namespace) -> int:
    reply = client.snapshot()
    print(f"snapshot {reply.get('file')}: {reply.get('tables')} tables, "
          f"{reply.get('items'):,} items, {reply.get('bytes'):,} bytes in "
          f"{reply.get('duration_ms')} ms")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replayd-cli", description="Look at and manage a running replayd server.",
        epilog="Exit codes: 0 done, 1 refused by the server, 2 bad command line, "
               "3 server unreachable.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the server (default 10)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    status = commands.add_parser("status", help="tables, sizes, rates, rate limiter state, "
                                                "published values")
    status.add_argument("address")
    status.add_argument("--interval", type=float, default=1.0,
                        help="seconds between the two readings rates come from; 0: totals "
                             "only (default 1)")
    status.add_argument("--json", action="store_true", help="the INFO reply, annotated")
    status.set_defaults(run=cmd_status)

    create = commands.add_parser("create-table", help="create a table")
    create.add_argument("address")
    create.add_argument("name")
    create.add_argument("--field", action="append", metavar="NAME:DTYPE[:SHAPE]",
                        help="a field, e.g. obs:float32:4 or act:int64 (repeat it)")
    create.add_argument("--capacity", type=int, required=True, help="items kept")
    create.add_argument("--sampler", default="uniform",
                        choices=SELECTOR_KINDS)
    create.add_argument("--priority-exponent", type=float, default=0.6)
    create.add_argument("--remover", default="fifo", choices=SELECTOR_KINDS)
    create.add_argument("--max-times-sampled", type=int, default=0)
    create.add_argument("--min-size", type=int, help="samples wait until this many items "
                                                     "exist (default 1)")
    create.add_argument("--rate-limiter", metavar="JSON",
                        help='e.g. \'{"kind": "queue", "size": 100}\' (docs/CONFIG.md)')
    create.add_argument("--seed", type=int)
    create.add_argument("--follow-value", metavar="NAME",
                        help="the table follows published value NAME: its version is the "
                             "table's policy version (docs/VERSIONS.md)")
    create.add_argument("--drop-behind", type=int, metavar="K",
                        help="with --follow-value: each publish of version V drops the "
                             "items of versions below V - K")
    create.add_argument("--exist-ok", action="store_true",
                        help="an existing table with the same description is fine")
    create.set_defaults(run=cmd_create_table)

    drop = commands.add_parser("drop-table", help="remove a table and its items")
    drop.add_argument("address")
    drop.add_argument("name")
    drop.set_defaults(run=cmd_drop_table)

    snapshot = commands.add_parser("snapshot", help="snapshot every table to the server's "
                                                    "data directory")
    snapshot.add_argument("address")
    snapshot.set_defaults(run=cmd_snapshot)
    add_dataset_commands(commands)
    return parser


def _quiet_stdout() -> None:
    """The reader of stdout has gone (``| head``): what it did not read is dropped, without
    a traceback. stdout now points at /dev/null, so the interpreter's final flush of what
    is still buffered does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one command; returns its exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        client = Client(args.address, timeout=args.timeout, name="replayd-cli")
    except (InvalidArgument, ValueError) as exc:
        parser.error(str(exc))
    try:
        with client:
            code: int = args.run(client, args)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
            return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except _UsageError as exc:
        parser.error(str(exc))  # exits with EXIT_USAGE
    except (ConnectionLost, Unauthenticated, ProtocolError, TimeoutError) as exc:
        print(f"replayd-cli: cannot talk to the server at {args.address}: {exc}",
              file=sys.stderr)
        return EXIT_UNREACHABLE
    except ReplayError as exc:
        print(f"replayd-cli: {args.command} refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # a load already said what it stored
        return 130
    except (ImportError, OSError) as exc:  # h5py missing, a dataset file not found
        print(f"replayd-cli: {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TypeError, ValueError) as exc:  # client-side checks of table descriptions
        print(f"replayd-cli: {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK

