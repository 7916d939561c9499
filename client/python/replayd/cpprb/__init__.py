"""Drop-in replacements for cpprb's replay buffers, stored in a replayd table.

    from replayd.cpprb import MPPrioritizedReplayBuffer
    rb = MPPrioritizedReplayBuffer(10**6, {"obs": {"shape": 4}, "act": {}, "rew": {},
                                           "next_obs": {"shape": 4}, "done": {}},
                                   alpha=0.6, eps=1e-4, address="unix:///tmp/replayd.sock")

Unlike cpprb's shared-memory buffers, these pickle (they are a replayd.Client plus the
table's description), so they can be passed to processes started with any method and to
Ray tasks. Every process talks to the server; the server serializes.

What matches cpprb:
- constructor arguments ``size``, ``env_dict``, ``default_dtype``, ``alpha``, ``eps``;
  env_dict entries ``{"shape": int or tuple, "dtype": ...}``: a missing shape means
  ``(1,)`` as in cpprb (so a scalar comes back with shape ``(batch, 1)``), a missing dtype
  means ``default_dtype`` (float32 by default);
- ``add(**kw)`` with one transition or a batch (values reshaped to ``(-1, *shape)`` and
  cast to the field's dtype, as cpprb does), returning cpprb's ring position of the first
  item (None when nothing was given); a batch larger than the buffer keeps its newest
  ``size`` steps, as a ring buffer does. One transition goes into a batching writer (no
  round trip per call); every method of the same object (``sample``, ``get_stored_size``,
  ...) first delivers what the writer holds, so it sees every earlier ``add``;
- ``sample(batch_size)`` returning a dict of arrays ``(batch, *shape)``; the prioritized
  buffers add ``"indexes"`` (uint64 ring positions) and ``"weights"`` (float32);
- ``update_priorities(indexes, priorities)``: priorities become ``|p| + eps`` and the table
  samples proportionally to ``(p + eps)^alpha`` (the server applies alpha); new items get
  the largest priority given so far, like cpprb's max priority; ``get_max_priority()``;
- ``get_stored_size()``, ``get_buffer_size()``, ``get_next_index()``,
  ``get_current_episode_len()``, ``clear()``, ``on_episode_end()``, ``is_Nstep()``;
- the MP buffers share one ring between processes: each add is stored before it returns,
  every process sees the same next index, stored size, priorities and contents;
  update_priorities reaches positions sampled since they were last written (as with
  ``check_for_update=True``);
- a ring position is the slot of the step's key (replayd.cpprb.steps.RingKeys); with
  ``next_of`` / ``stack_compress``, the position replayd.cpprb.frame_ring gives it;
- ``get_all_transitions(shuffle)`` (ring order, as cpprb), ``_encode_sample(idx)`` (ring
  positions), ``save_transitions`` / ``load_transitions`` in cpprb's ``.npz`` layouts, the
  safe one and (``safe=False`` with ``next_of`` / ``stack_compress``) the unsafe one (files
  move both ways between cpprb and replayd.cpprb);
- ``Nstep={"size", "gamma", "rew", "next"}`` (replayd.cpprb.nstep: a client-side cache as
  cpprb's, correct where cpprb is not);
- ``create_buffer(size, env_dict, prioritized=...)``, ``train(...)`` (replayd.cpprb.train),
  ``ReverseReplayBuffer`` (replayd.cpprb.reverse), ``HindsightReplayBuffer``
  (replayd.cpprb.her), ``SelectiveReplayBuffer`` (replayd.cpprb.selective), ``LaBERmean``,
  ``LaBERlazy``, ``LaBERmax`` (replayd.cpprb.laber), ``dict2buffer`` and ``NstepBuffer``
  (replayd.cpprb.local_buffers, imported by cpprb's scripts from cpprb.PyReplayBuffer);
  the MP buffers' errors for ``backend`` and ``ctx``; unknown keyword arguments are
  ignored with a warning (cpprb ignores them silently).

The table is episodic (replayd.cpprb.steps): each buffer object appends, per process, to an
episode of its own that ``on_episode_end()`` ends, which is what lets the ordered reads
work. Samples are the server's 1-step samples of it (every stored step, uniformly or by
priority).

Each buffer object owns its table: a unique name (``cpprb-<hex>``) unless ``table=`` names
one, created if missing (an existing table with the same description is reused with its
contents, one with a different description raises replayd.AlreadyExists). A table the
buffer named itself is dropped when the buffer is garbage-collected, or at exit, in the
process that created it, unless ``persist=True``; a named table is never dropped. Pickled
copies (for other processes: they are a replayd.Client plus the table's description) refer
to the same table and never drop it.

Differences and unsupported options:
- ``SelectiveReplayBuffer`` (replayd.cpprb.selective): ``get_episode``, ``sample`` and
  ``_encode_sample`` read the whole table; ``_encode_sample`` of a position past the stored
  steps raises IndexError (cpprb returns its unwritten memory);
- ReplayBuffer / PrioritizedReplayBuffer (not MP): single-transition adds reach *other*
  objects and processes sharing the table when 64 of them (at most the size) are
  collected, at ``on_episode_end()``, when the buffer is pickled, collected or its process
  exits; ``get_next_index()``, ``add()``'s return value and ``get_current_episode_len()``
  count this object's adds; ``get_max_priority()`` sees the priorities given through this
  object (cpprb's non-MP buffers are not shared at all);
- ``get_all_transitions``, ``_encode_sample`` and each ``ReverseReplayBuffer.sample`` read
  the whole table (O(stored size)); ``_encode_sample`` of a position never written gives
  1 in every value (cpprb's initial memory);
- ``Nstep``: ``done`` of a full window counts its last step and a tail flushed by
  ``on_episode_end()`` takes ``next`` of the episode's last step (cpprb drops the first
  and writes memory it never filled for the second); a prioritized step without a
  priority gets this object's largest priority when added, as in cpprb; the MP buffers
  take ``Nstep`` too (cpprb's MP buffers silently ignore it);
- env_dict names ``discount``, ``steps``, ``key``, ``episode``, ``position``,
  ``sequence`` are reserved (ValueError): they are columns of the episodic table's replies;
  a ``table=`` made by an earlier replayd.cpprb (a plain table) has another description
  and raises replayd.AlreadyExists;
- ``next_of`` and ``stack_compress`` store each frame once (replayd.cpprb.pixel_frames: one row
  per transition, stacked on the server; stacks come back on the last axis as transposed
  views). Samples return exactly what ``add`` was given, also where cpprb's memory would
  not (an ``obs`` that does not continue the last ``next_obs`` without on_episode_end);
  a buffer of size N holds N transitions (replayd.cpprb.frame_ring). With ``Nstep``, in
  the MP buffers and for stacks deeper than 64 they are stored as ordinary values;
- ``update_priorities`` does not wait for the server: later requests see it, and an error
  (a NaN priority) is raised by a later ``update_priorities``;
- ``prefetch=True`` (replayd's option, off by default) makes each ``sample`` ask for the
  next one at once: it then does not see what this object adds or updates in between;
- ``mmap_prefix``, ``ctx``, ``backend``, ``logger`` are accepted and ignored (storage lives
  in the server's memory: no files) once they pass cpprb's checks;
- a dtype the wire lacks (longdouble, complex) is stored as its bytes (uint8);
- an item added without a priority gets the table's largest priority (of every process
  using it; this object's first such add sends this object's largest + eps, from 1.0 +
  eps as in cpprb, so the table's largest is at least that from then on);
- ``sample`` on an empty buffer raises ValueError (cpprb's ReplayBuffer raises ValueError
  from numpy; its PrioritizedReplayBuffer returns values never added, with NaN weights);
- the sampling RNG is the server's (seeded per table), not numpy's global one.

The server address is ``address=``, else the environment variable ``REPLAYD_ADDRESS``,
else ``unix:///tmp/replayd.sock``.
"""
from .buffers import (MPPrioritizedReplayBuffer, MPReplayBuffer, PrioritizedReplayBuffer,
                      ReplayBuffer, create_buffer)
from .her import HindsightReplayBuffer
from .laber import LaBER, LaBERlazy, LaBERmax, LaBERmean
from .local_buffers import NstepBuffer, dict2buffer
from .reverse import ReverseReplayBuffer
from .selective import SelectiveReplayBuffer
from .table import DEFAULT_ADDRESS
from .train import train

__all__ = ["ReplayBuffer", "PrioritizedReplayBuffer", "MPReplayBuffer",
           "MPPrioritizedReplayBuffer", "create_buffer", "LaBER", "LaBERmean", "LaBERlazy",
           "LaBERmax", "train", "ReverseReplayBuffer", "SelectiveReplayBuffer",
           "HindsightReplayBuffer", "DEFAULT_ADDRESS", "dict2buffer", "NstepBuffer"]
