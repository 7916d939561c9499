"""A torch module's weights as a published value (docs/VALUES.md): the learner publishes its
state_dict, explorers load the latest one. Re-exported by replayd.torch; imports torch.

    version = replayd.torch.publish_module(client, "policy", learner_net)     # learner
    loaded = replayd.torch.load_latest(client, "policy", net, newer_than=version)  # explorer

`publish_module` sends each tensor's bytes from its CPU copy (no copy for CPU tensors);
`load_latest` wraps the fetched arrays with ``torch.from_numpy`` (no copy) and lets
``load_state_dict`` copy them into the module's own tensors, on the module's device.
Thread-safety as the Client's calls.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Union

import torch

from .client import DEFAULT, Client
from .errors import InvalidArgument
from .sharded import ShardedClient

__all__ = ["publish_module", "load_latest"]

ClientOrShards = Union[Client, ShardedClient]


def publish_module(client: ClientOrShards, name: str, module: torch.nn.Module, *,
                   timeout: Any = DEFAULT) -> int:
    """Publishes ``module.state_dict()`` as the next version of value `name`; returns it.
    Raises as `Client.publish` (a dtype numpy lacks, such as bfloat16, is InvalidArgument:
    convert the module first)."""
    return client.publish(name, module.state_dict(), timeout=timeout)


def load_latest(client: ClientOrShards, name: str, module: torch.nn.Module, *,
                newer_than: Optional[int] = None, timeout: Optional[float] = 0) -> Optional[int]:
    """Loads the version of value `name` above `newer_than` (None: any) into `module`
    (``load_state_dict``, strict) and returns that version; None when there is none within
    `timeout` seconds (default 0: ask without waiting; None: wait for it). Raises as
    `Client.fetch`; InvalidArgument naming the differences when the value's keys or
    shapes do not fit the module (checked before anything is loaded: the module is then
    unchanged)."""
    version, arrays = client.fetch(name, newer_than=newer_than, timeout=timeout)
    if arrays is None:
        return None
    _check_fits(name, version, arrays, module)
    state: Dict[str, torch.Tensor] = {key: torch.from_numpy(array)
                                      for key, array in arrays.items()}
    module.load_state_dict(state)
    return version


def _check_fits(name: str, version: Optional[int], arrays: Mapping[str, Any],
                module: torch.nn.Module) -> None:
    """Raises InvalidArgument unless `arrays` has the keys and shapes of the module's
    state_dict (load_state_dict would copy the matching tensors before raising)."""
    expected = {key: tuple(tensor.shape) for key, tensor in module.state_dict().items()}
    got = {key: tuple(array.shape) for key, array in arrays.items()}
    if expected == got:
        return
    missing = sorted(expected.keys() - got.keys())
    unexpected = sorted(got.keys() - expected.keys())
    reshaped = [f"{key} {got[key]} (module: {expected[key]})"
                for key in expected.keys() & got.keys() if expected[key] != got[key]]
    raise InvalidArgument(f"value '{name}' version {version} does not fit the module: "
                          f"missing {missing}, unexpected {unexpected}, other shapes "
                          f"{sorted(reshaped)}; publish this module's state_dict under "
                          f"'{name}'")
