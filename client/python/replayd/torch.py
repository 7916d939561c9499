"""replayd.torch: samples as torch tensors, a DataLoader-ready dataset, priority updates
from tensors. The only module of the client that imports torch.

    dataset = replayd.torch.ReplayDataset(client, "replay", 256)
    for batch in dataset:                        # or torch.utils.data.DataLoader(dataset,
        loss = (batch["weights"] * td(batch) ** 2).mean()     # batch_size=None, ...)
        dataset.update_priorities(batch["keys"], td.abs() + 1e-3)

Tensors and dtypes (`as_tensors`): each field becomes a tensor that shares memory with the
received payload (``torch.from_numpy``, no copy) when torch has its dtype: bool, uint8,
int8..int64, float16..float64. torch has no uint16/uint32/uint64, so:
- ``uint64`` fields and the keys are viewed as ``int64`` (no copy; values of 2^63 and more
  read as negative, and `update_priorities` turns them back unchanged);
- ``uint16`` fields become ``int32`` and ``uint32`` fields (and ``times_sampled``)
  ``int64``: a widening copy.
The batch dict holds the fields plus ``keys`` (int64), ``weights`` (float32 importance
weights, a copy of n values), ``probabilities`` (float64) and ``times_sampled`` (int64);
a table with a field of one of these names is refused. Episodic tables: with ``nstep=k``
the fields are those of an n-step sample (the return in the reward field, ``discount`` in
the reward's dtype, ``steps`` int64, see `Client.sample`); with ``sequence_length=T`` each field is (B, burn_in + T,
...) and the dict also holds ``mask`` (B, burn_in + T) uint8, 1 for a real step (a field
named ``mask`` is then refused). With ``versions=True``, ``min_version`` or
``max_staleness`` (as `Client.sample`'s, docs/VERSIONS.md) the dict also holds
``versions`` (int64, each row's policy version). Stacked frame fields (docs/PIXELS.md) become tensors over
the received frames, whose rows overlap in memory: read them, or ``clone()`` before writing
in place.

Mixed batches (docs/MIXED.md): ``ReplayDataset(client, {"online": 0.5, "demos": 0.5}, 256)``
(or a schedule: batch index -> such a dict) yields batches whose dict also holds ``table``
(int64, the row's index into `dataset.tables`); ``dataset.update_priorities(batch["keys"],
td, table=batch["table"])`` routes each row to its table in one round trip. A mixed batch
is assembled in pageable memory: on a CUDA device its copy is not overlapped.

Memory (CPU): over the shared-memory plane a large batch (W2: 1.8 MB) is gathered into a
pooled block, reused once no tensor or view of the batch is left. A ``for batch in
dataset`` loop still holds the last batch while the next is gathered, so two blocks take
turns; ``del batch`` at the end of the step lets each batch reuse the last one's block,
still in the cache.

On a CUDA `device`, replies are received straight into pinned host buffers (no staging
copy, see `Client.sample`), copied with non-blocking copies on a side CUDA stream while
the learner computes, and handed over with an event the learner's stream waits for: with
the server keeping up, the learner's step never waits on replay.

Threading: a ReplayDataset is iterated by one thread per process. It pickles as its
settings (the Client pickles as its address), so DataLoader workers (``num_workers > 0``)
each open their own connection and sampler.

Published values (docs/VALUES.md, replayd.torch_values): ``publish_module(client, name,
module)`` publishes a module's state_dict, ``load_latest(client, name, module,
newer_than=v)`` loads a newer version into a module.

Typing: torch's own annotations are incomplete (untyped CUDA stream and event calls), so
the few calls into them go through names typed Any (`_cuda`); the module passes ``mypy --strict``
with or without torch's stubs followed.
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .client import Client
from .errors import InvalidArgument
from .mixed import MixedSample, MixLike, Schedule, schedule_of
from .mixed_bounds import MixBound, PerTable, PerValue, asked
from .nesting import nest
from .requests import SequenceShape
from .sample import Sample
from .sampler import Sampler
from .torch_values import load_latest, publish_module

# Untyped in torch's annotations: torch.cuda's Stream, Event, stream(), current_stream(),
# and get_worker_info.
_cuda: Any = torch.cuda
_get_worker_info: Any = get_worker_info

__all__ = ["ReplayDataset", "as_tensors", "update_priorities", "update_mixed_priorities",
           "RESERVED_NAMES", "publish_module", "load_latest"]

#: Keys of a batch dict besides the fields.
RESERVED_NAMES = ("keys", "weights", "probabilities", "times_sampled")

# Per numpy dtype that torch lacks: (dtype of a zero-copy host view, finishing step on the
# device). Keyed by dtype objects: a dtype's `name` is built anew on every call.
_Finish = Optional[Callable[[torch.Tensor], torch.Tensor]]
_WIDEN: Dict[np.dtype[Any], Tuple[np.dtype[Any], _Finish]] = {
    np.dtype("<u2"): (np.dtype("<i2"), lambda t: t.to(torch.int32) & 0xFFFF),
    np.dtype("<u4"): (np.dtype("<i4"), lambda t: t.to(torch.int64) & 0xFFFFFFFF),
    np.dtype("<u8"): (np.dtype("<i8"), None),
}
# The same on the CPU, where numpy widens a small array faster than torch's per-call cost,
# as one step per dtype (a dict lookup on the dtype object).
_UINT64, _INT64, _FLOAT32 = np.dtype("<u8"), np.dtype("<i8"), np.dtype("<f4")
_CPU_CONVERT: Dict[np.dtype[Any], Callable[[np.ndarray[Any, Any]], torch.Tensor]] = {
    _UINT64: lambda array: torch.from_numpy(array.view(_INT64)),
    np.dtype("<u2"): lambda array: torch.from_numpy(array.astype(np.int32)),
    np.dtype("<u4"): lambda array: torch.from_numpy(array.astype(_INT64)),
}


def _host_view(array: np.ndarray[Any, Any]) -> Tuple[torch.Tensor, _Finish]:
    """A tensor sharing `array`'s memory, and the step that gives it a torch dtype holding
    its values (None when none is needed)."""
    widen = _WIDEN.get(array.dtype)
    if widen is None:
        return _from_numpy(array), None
    view_dtype, finish = widen
    return torch.from_numpy(array.view(view_dtype)), finish


def _cpu_tensor(array: np.ndarray[Any, Any]) -> torch.Tensor:
    """`array` as a CPU tensor of a dtype holding its values: sharing its memory, except
    uint16 and uint32 (widened copies); uint64 viewed as int64."""
    convert = _CPU_CONVERT.get(array.dtype)
    return _from_numpy(array) if convert is None else convert(array)


def _from_numpy(array: np.ndarray[Any, Any]) -> torch.Tensor:
    """torch.from_numpy, also for the read-only stacked views of frame fields (their rows
    overlap in memory: the tensor must be read, not written, as the array)."""
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


# The field names already checked against the batch dict's own entries (a learner's
# samples all have the same fields): (names, with a mask) -> True.
_CHECKED_NAMES: Dict[Tuple[Tuple[str, ...], bool], bool] = {}


def _check_names(data: Dict[str, Any], with_mask: bool) -> None:
    """InvalidArgument when a field has the name of a batch entry (RESERVED_NAMES, and
    ``mask`` for sequences). Checked once per set of names."""
    names = tuple(data)
    if (names, with_mask) in _CHECKED_NAMES:
        return
    reserved = RESERVED_NAMES + (("mask",) if with_mask else ())
    clash = [name for name in names if name in reserved]
    if clash:
        raise InvalidArgument(f"field '{clash[0]}' has the name of a batch entry "
                              f"({', '.join(reserved)}); rename the field")
    if len(_CHECKED_NAMES) >= 64:  # a few tables per learner; never grows without bound
        _CHECKED_NAMES.clear()
    _CHECKED_NAMES[names, with_mask] = True


def _sample_columns(sample: Sample) -> List[Tuple[str, np.ndarray[Any, Any]]]:
    """The batch dict's entries as arrays, in order: the fields, then keys, weights (as
    float32, once here for the CPU and the device path; no copy when the reply carried
    float32 already), probabilities, times_sampled, and the mask of sequences."""
    _check_names(sample.data, sample.mask is not None)
    columns = list(sample.flat.items())  # leaf paths; as_tensors nests them again
    columns += [("keys", sample.keys), ("weights", sample.weights.astype(_FLOAT32, copy=False)),
                ("probabilities", sample.probabilities),
                ("times_sampled", sample.times_sampled)]
    if sample.mask is not None:
        columns.append(("mask", sample.mask))
    if sample.versions is not None:  # asked for (docs/VERSIONS.md): int64, as keys
        columns.append(("versions", sample.versions))
    if isinstance(sample, MixedSample):
        if "table" in sample.data:
            raise InvalidArgument("field 'table' has the name of a mixed batch's entry "
                                  "(the row's table index); rename the field")
        columns.append(("table", sample.table))
    return columns


def as_tensors(sample: Sample) -> Dict[str, torch.Tensor]:
    """The batch dict of `sample` on the CPU (see the module docstring for dtypes): fields
    share memory with the sample's arrays where torch has their dtype.
    Cost: a torch.from_numpy per entry (about 1 us each with warm caches; the first after a
    large gather has streamed megabytes through the cache costs about 10) and little else:
    the names are checked once per set of fields."""
    out = {name: _cpu_tensor(array) for name, array in _sample_columns(sample)}
    return nest(out) if sample.flat is not sample.data else out  # nested fields as dicts


def _numpy(values: Any) -> np.ndarray[Any, Any]:
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu").numpy()
    return np.ascontiguousarray(np.asarray(values).reshape(-1))


def update_priorities(client: Client, table: str, keys: Any, priorities: Any) -> int:
    """`Client.update_priorities` from tensors on any device (or arrays): `keys` as a batch
    dict holds them (int64; uint64 also taken), `priorities` any real dtype, e.g.
    ``td_errors.abs() + 1e-3``. Waits for the copy to the host (a synchronization of the
    device) and for the server's reply; returns how many keys were stale."""
    key_array = _numpy(keys)
    if key_array.dtype == np.int64:
        key_array = key_array.view(np.uint64)  # the int64 view of as_tensors, undone
    return client.update_priorities(table, key_array, _numpy(priorities))


def update_mixed_priorities(client: Client, tables: Sequence[str], table: Any, keys: Any,
                            priorities: Any) -> int:
    """`Client.update_mixed_priorities` from a mixed batch dict's tensors (or arrays): its
    ``table`` (the row's index into `tables`) and ``keys``, with `priorities` one per row.
    One round trip for every table; returns how many keys were stale."""
    return client.update_mixed_priorities({"keys": _numpy(keys), "table": _numpy(table)},
                                          _numpy(priorities), tables=tables)


class _PinnedPool:
    """Pinned host buffers that replies are received into (CUDA path). A buffer is busy
    from its allocation until the device copies out of it have completed. Used by the
    sampler's background thread only."""

    def __init__(self) -> None:
        self._tensors: List[torch.Tensor] = []  # owners of the pinned memory
        self._arrays: List[np.ndarray[Any, Any]] = []  # their numpy views
        self._events: List[Optional[Any]] = []  # copy-done events; None while receiving

    def allocate(self, nbytes: int) -> np.ndarray[Any, Any]:
        for i, array in enumerate(self._arrays):
            event = self._events[i]
            if array.nbytes >= nbytes and event is not None and event.query():
                self._events[i] = None
                return array
        tensor = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        self._tensors.append(tensor)
        self._arrays.append(tensor.numpy())
        self._events.append(None)
        return self._arrays[-1]

    def release_after(self, sample: Sample, event: Any) -> None:
        """The buffer holding `sample` (its keys are the payload's first column) becomes
        free once `event` has completed."""
        start = sample.keys.__array_interface__["data"][0]
        for i, array in enumerate(self._arrays):
            if array.__array_interface__["data"][0] == start:
                self._events[i] = event
                return


class _DeviceStager:
    """Copies samples to a CUDA device on a side stream (runs in the sampler's thread)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.pool = _PinnedPool()
        self._stream: Optional[Any] = None

    def __call__(self, sample: Sample) -> Tuple[Dict[str, torch.Tensor], Any]:
        if self._stream is None:
            self._stream = _cuda.Stream(self.device)
        out: Dict[str, torch.Tensor] = {}
        with _cuda.stream(self._stream):
            for name, array in _sample_columns(sample):
                tensor, finish = _host_view(array)
                moved = tensor.to(self.device, non_blocking=True)
                out[name] = moved if finish is None else finish(moved)
            event: Any = _cuda.Event()
            event.record(self._stream)
        self.pool.release_after(sample, event)
        return (nest(out) if sample.flat is not sample.data else out), event


class ReplayDataset(IterableDataset[Dict[str, torch.Tensor]]):
    """An endless `torch.utils.data.IterableDataset` of batch dicts sampled from `table`.

    Args:
        client: the server (pickled into DataLoader workers, each connecting on its own).
        table: the table to sample; or a dict of table -> fraction, or a schedule (batch
            index -> such a dict; picklable for ``num_workers > 0``): mixed batches
            (docs/MIXED.md), whose dict also holds ``table``.
        batch_size: items per batch (use ``DataLoader(dataset, batch_size=None)``).
        beta: importance-sampling exponent of each sample.
        prefetch: sample requests in flight and batches ready ahead of the consumer.
        timeout: server-side wait of each request for the rate limiter (None: forever).
        device: None or "cpu" for CPU tensors sharing memory with the received payload; a
            CUDA device for tensors there (pinned receive buffers, non-blocking copies on a
            side stream; only with ``num_workers=0``). InvalidArgument when torch has no
            CUDA device.
        num_batches: stop after this many batches per iteration (None: never stop).
        nstep, gamma: n-step samples of an episodic table (see `Client.sample`).
        sequence_length, stride, burn_in, pad: sequences of an episodic table instead
            (see `Client.sample_sequences`): batch_size sequences of burn_in +
            sequence_length steps, with ``mask``.
        fields: of mixed batches, the fields they carry (see `Client.sample`).

    Attributes:
        wait_seconds: seconds the consumer of this process spent waiting for a batch (the
            learner's replay-wait time); `batches` counts the batches it received.
    """

    def __init__(self, client: Client, table: Union[str, MixLike, Schedule], batch_size: int,
                 *, beta: float = 0.4,
                 prefetch: int = 4, timeout: Optional[float] = None,
                 device: Union[None, str, torch.device] = None,
                 num_batches: Optional[int] = None, nstep: Optional[int] = None,
                 gamma: float = 1.0, sequence_length: Optional[int] = None,
                 stride: int = 1, burn_in: int = 0, pad: bool = False,
                 fields: Optional[Sequence[str]] = None, versions: bool = False,
                 min_version: PerTable = None, max_staleness: PerTable = None,
                 value: PerValue = None) -> None:
        super().__init__()
        if nstep is not None and sequence_length is not None:
            raise InvalidArgument("ReplayDataset draws n-step samples (nstep) or sequences "
                                  "(sequence_length), not both")
        self.nstep = nstep
        self.gamma = float(gamma)
        self.sequence = (None if sequence_length is None else
                         SequenceShape(int(sequence_length), int(stride), int(burn_in),
                                       bool(pad)))
        self.client = client
        self.table = table
        #: Of mixed batches, the tables a batch's ``table`` entry indexes (else None).
        self.tables = None if isinstance(table, str) else schedule_of(table)[1]
        self.fields = None if fields is None else list(fields)
        self.batch_size = int(batch_size)
        self.beta = float(beta)
        self.prefetch = int(prefetch)
        self.timeout = timeout
        self.device = None if device is None else torch.device(device)
        if self.device is not None and self.device.type == "cuda" and \
                not torch.cuda.is_available():
            raise InvalidArgument(
                f"ReplayDataset(device={str(self.device)!r}): torch {torch.__version__} sees no "
                "CUDA device (torch.cuda.is_available() is False: a CPU-only build of torch, "
                "or no GPU or driver); leave device=None for CPU tensors")
        self.num_batches = num_batches
        #: Policy version members of each request (Client.sample's versions, min_version,
        #: max_staleness, value; of mixed batches, each table's bound), or None; batches
        #: then hold ``versions``.
        self.bound: Union[None, Dict[str, Any], MixBound] = None
        if asked(versions, min_version, max_staleness, value):
            if self.sequence is not None:
                raise InvalidArgument("ReplayDataset: versions, min_version and "
                                      "max_staleness apply to plain samples, not sequences")
            if isinstance(table, str):
                self.bound = dict(Client._version_bound(table, nstep, versions, min_version,
                                                        max_staleness, value))
            else:
                assert self.tables is not None
                self.bound = Client._mixed_version_bound(self.tables, nstep, versions,
                                                         min_version, max_staleness, value)
        self.wait_seconds = 0.0
        self.batches = 0

    def __repr__(self) -> str:
        return (f"replayd.torch.ReplayDataset({self.client.address!r}, {self.table!r}, "
                f"batch_size={self.batch_size}, device={self.device})")

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        on_device = self.device is not None and self.device.type == "cuda"
        if on_device and _get_worker_info() is not None:
            raise InvalidArgument("ReplayDataset(device='cuda') copies to the device itself: "
                                  "use it with num_workers=0, or leave device=None and "
                                  "move batches in the learner")
        stager = _DeviceStager(self.device) if on_device and self.device is not None else None
        sampler = Sampler(
            self.client, self.table, self.batch_size, prefetch=self.prefetch, beta=self.beta,
            timeout=self.timeout, transform=as_tensors if stager is None else stager,
            allocate=None if stager is None or self.tables is not None else stager.pool.allocate,
            nstep=self.nstep, gamma=self.gamma, sequence=self.sequence, fields=self.fields,
            bound=self.bound)
        with sampler:
            produced = 0
            while self.num_batches is None or produced < self.num_batches:
                started = time.perf_counter()
                try:
                    item = next(sampler)
                except StopIteration:
                    return
                self.wait_seconds += time.perf_counter() - started
                self.batches += 1
                produced += 1
                if stager is None:
                    yield item
                    # Not kept while the next batch is gathered: a batch nobody holds
                    # lets the sampler reuse its memory, still in cache, for the next.
                    del item
                    continue
                batch, event = item
                del item
                stream: Any = _cuda.current_stream(self.device)
                stream.wait_event(event)
                for tensor in batch.values():
                    tensor.record_stream(stream)
                yield batch
                del batch

    def update_priorities(self, keys: Any, priorities: Any, *, table: Any = None) -> int:
        """Sets the priorities of the items with `keys` (a batch's ``keys``) from tensors on
        any device; see the module function `update_priorities`. Of a mixed dataset, also
        give ``table=batch["table"]``: each row's priority goes to its own table (see
        `update_mixed_priorities`)."""
        if self.tables is not None:
            if table is None:
                raise InvalidArgument(f"a mixed ReplayDataset (tables {list(self.tables)}) "
                                      f"routes each row by its table: pass "
                                      f"table=batch['table']")
            return update_mixed_priorities(self.client, self.tables, table, keys, priorities)
        if table is not None:
            raise InvalidArgument(f"table= routes the rows of mixed batches; this dataset "
                                  f"samples the one table '{self.table}'")
        assert isinstance(self.table, str)
        return update_priorities(self.client, self.table, keys, priorities)
