"""Exceptions raised by the replayd client.

Every error the server reports becomes an instance of one `ReplayError` subclass chosen by
the wire error code; `code` and `message` carry the server's words unchanged. Errors the
client detects itself (bad arguments it cannot even encode, a lost connection, a reply it
cannot parse) use the same classes with the matching code.
"""
from __future__ import annotations

import builtins
from typing import Any, Mapping, Optional

__all__ = [
    "ReplayError",
    "InvalidArgument",
    "NotFound",
    "AlreadyExists",
    "TimeoutError",
    "ResourceExhausted",
    "ShuttingDown",
    "ProtocolError",
    "PermissionDenied",
    "ConnectionLost",
    "error_from_reply",
]


class ReplayError(Exception):
    """Base class of every replayd error.

    Attributes:
        code: the wire error code (``"invalid_argument"``, ``"not_found"``, ...), or a
            client-side code such as ``"connection_lost"``.
        message: the server's message (or the client's, for client-side errors).
    """

    code: str = "unknown"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"

    def __reduce__(self) -> Any:
        # Keep code and message when an error crosses a process boundary.
        return (type(self), (self.message, self.code))


class InvalidArgument(ReplayError, ValueError):
    """The request was well framed but wrong (shape, dtype, unknown op or key, ...)."""

    code = "invalid_argument"


class NotFound(ReplayError, LookupError):
    """The named table does not exist (or was dropped while the request waited)."""

    code = "not_found"


class AlreadyExists(ReplayError):
    """``create_table`` of a name in use with a different description."""

    code = "already_exists"


class TimeoutError(ReplayError, builtins.TimeoutError):  # noqa: A001 - deliberate name
    """A sample or insert waited longer than its timeout, on the server or in the client."""

    code = "timeout"


class ResourceExhausted(ReplayError):
    """A server limit would be exceeded (batch items, bytes, waiting requests, ...)."""

    code = "resource_exhausted"


class ShuttingDown(ReplayError):
    """The server is stopping; the request was not executed."""

    code = "shutting_down"


class ProtocolError(ReplayError):
    """The framing is broken, or a peer does not speak protocol version 1."""

    code = "protocol_error"


class Unauthenticated(ReplayError, PermissionError):
    """The server requires a token on this TCP connection and none, or a wrong one, was
    given (`Client(..., token=...)` or REPLAYD_TOKEN). The server closed the connection."""

    code = "unauthenticated"


class PermissionDenied(ReplayError, PermissionError):
    """This connection may not do it: the shared-memory plane (docs/SHM.md) is offered
    only over a Unix socket to a client of the server's uid; the message says why not."""

    code = "permission_denied"


class ConnectionLost(ReplayError, ConnectionError):
    """The connection closed (or could not be opened) before the reply arrived.

    A request that was in flight may or may not have been executed; it is never repeated
    automatically. The next call on the client opens a new connection.
    """

    code = "connection_lost"


_BY_CODE: Mapping[str, "type[ReplayError]"] = {
    cls.code: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, TimeoutError, ResourceExhausted,
                ShuttingDown, ProtocolError, Unauthenticated, PermissionDenied, ConnectionLost)
}


def error_from_reply(error: Any) -> ReplayError:
    """Builds the exception for a failed reply's ``{"code": ..., "message": ...}`` object.

    Unknown codes become a plain `ReplayError` that keeps the code, so a newer server's
    codes still surface with their message.
    """
    if not isinstance(error, Mapping):
        return ProtocolError(f"malformed error reply: {error!r}")
    code = str(error.get("code", "unknown"))
    message = str(error.get("message", ""))
    cls: "type[ReplayError]" = _BY_CODE.get(code, ReplayError)
    return cls(message, code)
