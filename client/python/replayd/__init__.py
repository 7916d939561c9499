"""replayd: Python client for the replayd replay-buffer server.

    import replayd
    client = replayd.Client("unix:///tmp/replayd.sock")
    client.create_table("replay", {"obs": (np.float32, 4), "act": (np.int64, ())}, 100_000,
                        sampler="prioritized", rate_limiter=replayd.MinSize(1000))
    keys = client.insert("replay", {"obs": obs_batch, "act": act_batch})
    batch = client.sample("replay", 256)           # batch.data["obs"], batch.keys, ...
    client.update_priorities("replay", batch.keys, td_errors)

Depends only on the standard library and numpy. The wire protocol is docs/PROTOCOL.md.
Also here: replayd.torch (tensors, a DataLoader dataset; needs torch, imported only there),
replayd.datasets (Minari and D4RL-style datasets in and out of episodic tables; needs h5py,
imported only there), replayd.testing (throwaway servers, a pytest fixture) and replayd.cli
(replayd-cli, ``python3 -m replayd``).
"""
from .address import Address, parse_address
from .client import Client
from .errors import (AlreadyExists, ConnectionLost, InvalidArgument, NotFound,
                     ProtocolError, ReplayError, ResourceExhausted, ShuttingDown,
                     Unauthenticated, PermissionDenied,
                     TimeoutError)
from .rate_limiters import Custom, MinSize, Queue, RateLimiter, SampleToInsertRatio
from .mixed import MixedSample
from .sample import Sample
from .sampler import Sampler
from .schema import Field, TableSchema
from .sharded import ShardedClient, ShardedEpisodeWriter
from .tables import queue, stack
from .writer import Writer
from .episodes import EpisodeWriter
from .vector_writers import VectorEpisodeWriter, VectorWriter

# The module's former name: ``replayd.frame_fields.CorruptFrame`` (as documented before the
# rename) still names the same class.
from . import pixel_frame_fields

frame_fields = pixel_frame_fields

__version__ = "0.1.0"

__all__ = [
    "Client", "ShardedClient", "Sample", "MixedSample", "Sampler", "Writer", "EpisodeWriter",
    "VectorWriter", "VectorEpisodeWriter",
    "ShardedEpisodeWriter", "Field", "TableSchema", "Address",
    "parse_address",
    "MinSize", "SampleToInsertRatio", "Queue", "Custom", "RateLimiter", "queue", "stack",
    "ReplayError", "InvalidArgument", "NotFound", "AlreadyExists", "TimeoutError",
    "ResourceExhausted", "ShuttingDown", "ProtocolError", "Unauthenticated", "PermissionDenied", "ConnectionLost",
]
