"""replayd.sharded: one logical table spread over several replayd servers (shards).

- client.py: `ShardedClient` (tables, inserts, union samples, priority updates).
- episodes.py: episodic tables over shards: `ShardedEpisodeWriter` (each episode on one
  shard), n-step and sequence windows drawn from the union, `read_all` of every shard.
- union.py: global keys (the shard's index in the top `SHARD_BITS` bits), each shard's share
  of a draw, the union Sample with union-wide probabilities and weights.
- client_interface.py: `ShardedClientLike`, what episodes.py uses of a ShardedClient.
"""
from .client import ShardedClient
from .episodes import ShardedEpisodeWriter
from .union import SHARD_BITS

__all__ = ["ShardedClient", "ShardedEpisodeWriter", "SHARD_BITS"]
