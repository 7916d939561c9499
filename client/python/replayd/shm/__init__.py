"""The client side of the shared-memory data plane (docs/SHM.md).

On one host, over a Unix socket, the server offers a client of its own uid its tables'
column blocks (``map_table``: a memfd the client maps read-only) and staging arenas
(``map_staging``: a memfd both map, which writers fill with rows). Then:

- a sample asks for keys only (``"rows": "keys"``) and the learner copies the rows out of
  the mapping itself (`mapping`); each slot's stamp (the key of the item whose bytes are
  complete in it, written by the server after the bytes) is read after the copy, and a row
  whose stamp no longer holds its key was overwritten meanwhile: it is drawn again
  (`sampling`);
- an insert names rows already written into the writer's staging arena (`staging`,
  ``"staged": {...}``) instead of carrying them, and the server copies them into the table.

The bytes move on the clients' cores; the server's thread decides which slots, keys and
priorities, and who waits. A client that does not use the plane, or talks over TCP, gets
the same results through the socket.
"""
from typing import Any, Dict

from .mapping import TableMapping
from .sampling import PlaneTable, keys_request
from .staging import StagingArena, batch_layout, staged_meta

__all__ = ["TableMapping", "PlaneTable", "keys_request", "StagingArena",
           "batch_layout", "staged_meta", "take_descriptor"]


def take_descriptor(meta: Dict[str, Any]) -> int:
    """The one descriptor a map reply carries (the connection put it in its metadata);
    ProtocolError when it carries none or several (any it carries are closed)."""
    import os

    from ..errors import ProtocolError
    fds = meta.get("descriptors")
    if isinstance(fds, list) and len(fds) == 1:
        return int(fds[0])
    for fd in fds if isinstance(fds, list) else ():
        os.close(fd)
    raise ProtocolError(f"a {meta.get('op', 'map')} reply without its one descriptor: {fds!r}")
