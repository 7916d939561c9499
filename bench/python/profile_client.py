"""Profiles the client side of one benchmark measure with cProfile (the server runs in its
own process and is not profiled).

    /usr/bin/python3 bench/python/profile_client.py --system replayd --workload W1 \
        --measure insert1_writer --duration 3 [--top 25]

Prints the functions with the largest cumulative and own time, and the measured rate.
"""
from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

from pinned_server import cpu_seconds  # noqa: E402
from runner import LAST_TIMING, MEASURES, _loop, fill  # noqa: E402
from systems import SYSTEMS, load_system  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


_THREAD_PROFILES: List[cProfile.Profile] = []


def _profile_client_threads() -> None:
    """Makes the replayd client's reader and sampler threads run under cProfile too (the
    default profiler sees only the calling thread)."""
    import replayd.connection
    import replayd.sampler

    def profiled(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            profile = cProfile.Profile()
            _THREAD_PROFILES.append(profile)
            return profile.runcall(fn, *args, **kwargs)
        return run

    replayd.connection._read_loop = profiled(replayd.connection._read_loop)
    replayd.sampler.Sampler._run = profiled(replayd.sampler.Sampler._run)


def _cpu_s(pid: Optional[int]) -> float:
    """User+system CPU seconds of process `pid` so far (0 when unknown)."""
    return 0.0 if pid is None else cpu_seconds(pid)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--system", default="replayd", choices=list(SYSTEMS))
    p.add_argument("--workload", default="W1", choices=list(WORKLOADS))
    p.add_argument("--measure", default="insert1_writer",
                   choices=list(MEASURES) + ["explorer", "learner"])
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-profile", action="store_true",
                   help="only the rate and the client's CPU time per transition")
    args = p.parse_args()
    workload = WORKLOADS[args.workload]
    system_cls = load_system(args.system)
    prioritized = args.measure == "prioritized"
    with tempfile.TemporaryDirectory(prefix="replayd-profile-") as tmp:
        system = system_cls()
        handle = system.create_store(workload, prioritized, Path(tmp))
        try:
            fill(system_cls, handle, workload)
            endpoint = system_cls.connect(handle)
            server_pid = getattr(getattr(system, "proc", None), "pid", None)
            server_before = _cpu_s(server_pid)
            rate = _loop(args.measure, endpoint, workload, args.duration)
            server_us = 1e6 * (_cpu_s(server_pid) - server_before) / LAST_TIMING["count"]
            cpu_us = 1e6 * LAST_TIMING["client_cpu_s"] / LAST_TIMING["count"]
            print(f"{args.system} {args.workload} {args.measure}: {rate:,.0f} transitions/s, "
                  f"client CPU {cpu_us:.2f} us per transition (all threads), server CPU "
                  f"{server_us:.2f} us (warm-up included)"
                  if server_pid else "")
            profile = cProfile.Profile()
            if not args.no_profile:
                if args.system == "replayd":
                    _profile_client_threads()
                    endpoint.close()
                    endpoint = system_cls.connect(handle)  # new threads, profiled
                profile.enable()
                rate = _loop(args.measure, endpoint, workload, args.duration)
                profile.disable()
            endpoint.close()
        finally:
            system.destroy_store()
    if args.no_profile:
        return 0
    out = io.StringIO()
    stats = pstats.Stats(profile, *_THREAD_PROFILES, stream=out)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    print(f"{args.system} {args.workload} {args.measure}: {rate:,.0f} transitions/s "
          f"(under cProfile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
