"""Server addresses: ``unix:///path/to.sock`` or ``tcp://host:port``.

Pure parsing and socket creation; no state. Thread-safe.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

SEND_BUFFER_BYTES = 4 << 20  # SO_SNDBUF of client sockets, bytes

__all__ = ["Address", "parse_address", "DEFAULT_ADDRESS", "unreachable_hint"]


@dataclass(frozen=True)
class Address:
    """A parsed server address.

    Attributes:
        scheme: ``"unix"`` or ``"tcp"``.
        path: the socket path (unix only).
        host, port: where to connect (tcp only). IPv6 hosts are written ``[::1]``.
    """

    scheme: str
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.scheme == "unix":
            return f"unix://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"

    def connect(self, timeout: Optional[float]) -> socket.socket:
        """Opens a blocking stream socket to this address.

        `timeout` (seconds, None = the OS default) bounds only the connect itself; the
        returned socket is in blocking mode without a timeout. TCP sockets get TCP_NODELAY.
        Raises OSError when the connection cannot be made.
        """
        if self.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Union[str, Tuple[Any, ...]] = self.path
        else:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, target = infos[0]
            sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(target)
            sock.settimeout(None)
            # Whole insert batches fit the send buffer (the kernel caps it at wmem_max), so
            # the server reads them in large pieces and an explorer keeps its share of the
            # server next to a learner receiving large samples.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
            if self.scheme == "tcp":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        return sock


def parse_address(address: Union[str, Address]) -> Address:
    """Parses ``unix:///path`` or ``tcp://host:port``; raises ValueError naming the problem."""
    if isinstance(address, Address):
        return address
    if not isinstance(address, str):
        raise TypeError(f"address must be a string like 'unix:///tmp/replayd.sock' or "
                        f"'tcp://127.0.0.1:7700', got {type(address).__name__}")
    if address.startswith("unix://"):
        path = address[len("unix://"):]
        if not path:
            raise ValueError(f"address {address!r}: missing socket path "
                             "(expected unix:///path/to.sock)")
        return Address("unix", path=path)
    if address.startswith("tcp://"):
        rest = address[len("tcp://"):].rstrip("/")
        if rest.startswith("["):
            host, sep, port_text = rest[1:].partition("]:")
        else:
            host, sep, port_text = rest.rpartition(":")
        if not sep or not host:
            raise ValueError(f"address {address!r}: expected tcp://host:port")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"address {address!r}: port {port_text!r} is not a number") from None
        if not 0 < port < 65536:
            raise ValueError(f"address {address!r}: port {port} out of range 1..65535")
        return Address("tcp", host=host, port=port)
    raise ValueError(f"address {address!r}: expected unix:///path or tcp://host:port")


#: Where `./scripts/run` (config/replayd.json) and the client's examples expect a server.
DEFAULT_ADDRESS = "unix:///tmp/replayd.sock"


def unreachable_hint(address: Address, error: OSError) -> str:
    """What a failed connect to `address` means and how to start a server there, as a
    sentence to append to the error (empty for failures it cannot explain)."""
    if isinstance(error, FileNotFoundError) and address.scheme == "unix":
        what = f": no server listens there (no socket file {address.path})"
    elif isinstance(error, ConnectionRefusedError):
        what = (f": no server listens there (the socket file {address.path} is left from "
                f"one that stopped)" if address.scheme == "unix" else
                f": no server listens on port {address.port} of {address.host}")
    else:
        return ""
    if str(address) == DEFAULT_ADDRESS:
        where = "with no flags (it listens there by default)"
    elif address.scheme == "unix":
        where = f"with --unix {address.path} --tcp ''"
    else:
        where = f"with --tcp {address.host}:{address.port} --unix ''"
    return (f"{what}. Start one: `./scripts/run` in a replayd checkout builds the server and "
            f"starts it on {DEFAULT_ADDRESS} and tcp://127.0.0.1:7700; or run the binary "
            f"(build/service/replayd, `replayd` once installed) {where}")
