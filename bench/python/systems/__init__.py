"""The benchmarked systems, by name. Modules load lazily, so a missing optional package
(redis, zmq) only matters to the system that needs it."""
from __future__ import annotations

import importlib
from typing import Dict, Tuple, Type

from systems.base import System

__all__ = ["SYSTEMS", "NETWORKED_ALTERNATIVES", "load_system"]

#: name -> (module, class); the column order of the result table.
SYSTEMS: Dict[str, Tuple[str, str]] = {
    "replayd": ("systems.replayd_system", "ReplaydSystem"),
    "replayd-socket": ("systems.replayd_system", "ReplaydSocketSystem"),
    "replayd.cpprb": ("systems.replayd_cpprb", "ReplaydCpprbSystem"),
    "shm": ("systems.shm_ring", "ShmRingSystem"),
    "manager": ("systems.manager_proxy", "ManagerSystem"),
    "redis": ("systems.redis_store", "RedisSystem"),
    "zmq": ("systems.zmq_server", "ZmqSystem"),
}

#: Alternatives reached through a socket (the "best networked" ratio is against these).
NETWORKED_ALTERNATIVES = ("manager", "redis", "zmq")


def load_system(name: str) -> Type[System]:
    """The System class of `name`; ImportError when its Python package is missing."""
    module, cls = SYSTEMS[name]
    return getattr(importlib.import_module(module), cls)
