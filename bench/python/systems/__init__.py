"""The benchmarked systems, by name. Modules load lazily, so a missing optional package
(redis, zmq) only matters to the system that needs it."""
from __future__ import annotations

import importlib
from typing import Dict, Tuple, Type

from systems.base import System

__all__ = ["SYSTEMS", "BUILT_APART", "ON_REQUEST", "NETWORKED_ALTERNATIVES", "load_system"]

#: name -> (module, class); the column order of the result table.
SYSTEMS: Dict[str, Tuple[str, str]] = {
    "replayd": ("systems.replayd_system", "ReplaydSystem"),
    "replayd-socket": ("systems.replayd_system", "ReplaydSocketSystem"),
    "replayd-writer": ("systems.replayd_system", "ReplaydRowsSystem"),
    "replayd-deep": ("systems.replayd_system", "ReplaydDeepSystem"),
    "replayd-poll": ("systems.replayd_system", "ReplaydPollSystem"),
    "replayd.cpprb": ("systems.replayd_cpprb", "ReplaydCpprbSystem"),
    "cpprb": ("systems.cpprb_real", "CpprbRealSystem"),
    "cpprb-mp": ("systems.cpprb_mp", "CpprbMPSystem"),
    "shm": ("systems.shm_ring", "ShmRingSystem"),
    "manager": ("systems.manager_proxy", "ManagerSystem"),
    "redis": ("systems.redis_store", "RedisSystem"),
    "zmq": ("systems.zmq_server", "ZmqSystem"),
}

#: Systems built outside this repository (the real cpprb: systems/cpprb_real.py and
#: systems/cpprb_mp.py), left out of compare.py's default.
BUILT_APART = ("cpprb", "cpprb-mp")

#: Variants measured on request only, also left out of compare.py's default: replayd's
#: 64-row inserts through a VectorWriter (consecutive calls sharing requests),
#: insert_async with 32 calls in flight instead of 8, and the server polling 200 us before
#: it sleeps (--busy-poll-us 200).
ON_REQUEST = ("replayd-writer", "replayd-deep", "replayd-poll")

#: Alternatives reached through a socket (the "best networked" ratio is against these).
NETWORKED_ALTERNATIVES = ("manager", "redis", "zmq")


def load_system(name: str) -> Type[System]:
    """The System class of `name`; ImportError when its Python package is missing."""
    module, cls = SYSTEMS[name]
    return getattr(importlib.import_module(module), cls)
