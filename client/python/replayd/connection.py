"""Connection: one socket to a replayd server, owned by one process.

Threading: any number of threads may `submit` at once. Frames are written whole under a
send lock with scatter/gather ``sendmsg`` (column buffers are not concatenated). Replies
are matched to futures by request id, so requests pipeline freely and replies may arrive in
any order.

Who reads the socket: a caller that waits for its own reply (`wait`) reads it itself, and
dispatches any other replies it meets, while no other thread reads; callers waiting at the
same time take turns (one reads, the others wait for their future or for their turn). That
saves a wake-up of a second thread per synchronous call. The first request whose caller
does not wait at once (``caller_waits=False``: the _async calls, the Writer) starts a daemon
reader thread, which from then on reads every reply; waiting callers then just wait.
The reader thread runs under SCHED_BATCH where Linux allows it (`_never_preempt_callers`):
woken by a reply on a core the caller's thread is using, it waits for that thread to block
or its time slice to end instead of preempting it.

Futures may complete in the reader thread or in another caller's: callbacks added to them
must be quick and must not wait for another reply on the same connection.

A private connection never starts the reader thread (``reader_thread=False``): one thread
uses it, and `wait` always reads the socket itself (the prefetching Sampler's connection).

Lifetime: a connection is dead once the socket fails or closes; every request in flight
then fails with ConnectionLost and is not repeated. A dead connection is never revived;
the Client opens a new one. After fork, the child must `abandon` (never `close`) the
parent's connection: shutting the shared socket down would cut the parent off too.

Descriptors: on a connection the server offers the shared-memory plane to (docs/SHM.md),
replies may carry file descriptors (SCM_RIGHTS, with the first byte of their frame); such
a connection reads with ``recvmsg`` and hands each reply its descriptors in its metadata
(``meta["descriptors"]``: a list of fds the decoder takes ownership of). A reply nobody
waits for has its descriptors closed.
"""
from __future__ import annotations

import array
import builtins
import collections
import functools
import os
import select
import socket
import threading
import time
import weakref
from concurrent import futures
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .address import Address, unreachable_hint
from .errors import (ConnectionLost, ProtocolError, ReplayError, ResourceExhausted,
                     TimeoutError, error_from_reply)
from .wire import KIND_REPLY, Allocator, Frame, FrameReader, encode_frame

__all__ = ["Connection", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
_MAX_IOV = 512  # buffers per sendmsg call, well under IOV_MAX (1024 on Linux)
_MAX_DESCRIPTORS = 8  # per received message; the server sends one per reply
# As ints: the socket module's flags are enum members, whose operators cost about 0.4 us
# each, paid on every reply.
_MSG_CMSG_CLOEXEC = int(socket.MSG_CMSG_CLOEXEC)
_MSG_CTRUNC = int(socket.MSG_CTRUNC)
_ANCILLARY_BYTES = socket.CMSG_SPACE(_MAX_DESCRIPTORS * array.array("i").itemsize)
_HELLO_TIMEOUT_S = 30.0  # when the client has no timeout: a peer that never answers hello

Decoder = Callable[[Dict[str, Any], np.ndarray], Any]


class Connection:
    """A live socket plus its reader thread. Create one with `Connection.open`."""

    def __init__(self, address: Address, sock: socket.socket, *,
                 reader_thread: bool = True) -> None:
        self.address = address
        self.pid = os.getpid()
        self.limits: Dict[str, int] = {}
        self.server: Dict[str, Any] = {}
        self._sock = sock
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards _pending, _next_id, _dead
        self._pending: Dict[int, Tuple[Future[Any], Optional[Decoder]]] = {}
        self._next_id = 1
        self._dead: Optional[str] = None  # why the connection died
        # Called first by submit and submit_all: sends what an owner holds back to share
        # one request (shm/insert_sharing.py), so that requests go in the order made.
        self.before_submit: Optional[Callable[[], None]] = None
        self._note = ""  # what the server said before closing, if anything
        self._reader: Optional[threading.Thread] = None  # started by the first async request
        self._may_start_reader = reader_thread
        # Whoever reads the socket (a waiting caller, or the reader thread for good) sets
        # _reading under _read_turn and uses _frames, which keeps a partial frame between turns.
        self._allocators: Dict[int, Allocator] = {}  # request id -> its payload allocator
        self._frames = FrameReader(allocators=self._allocators)
        self._reading = False
        self._read_turn = threading.Condition(self._lock)
        # The shared-memory plane (hello): offered to this connection, or why not.
        self.shm_offered = False
        self.shm_reason = "not asked for"
        self._descriptors: "collections.deque[int]" = collections.deque()  # received, unclaimed

    @classmethod
    def open(cls, address: Address, *, timeout: Optional[float] = None,
             client_name: str = "replayd-python",
             token: Optional[str] = None, reader_thread: bool = True,
             shm: bool = False) -> "Connection":
        """Connects, sends ``hello`` (with `token` when given) and checks the protocol
        version. `shm`: ask whether the shared-memory plane is offered (``shm_offered``,
        ``shm_reason``); only a Unix-socket connection asks.

        `timeout` (seconds) bounds the connect and the hello round trip (None: connect
        without a limit, wait for hello at most 30 s). Raises ConnectionLost when the
        server cannot be reached, ProtocolError when it does not speak protocol 1, and
        ReplayError with code ``unauthenticated`` when a TCP server requires a token and
        `token` is missing or wrong.
        """
        try:
            sock = address.connect(timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {address}: {exc}"
                                 f"{unreachable_hint(address, exc)}") from None
        conn = cls(address, sock, reader_thread=reader_thread)
        try:
            request: Dict[str, Any] = {"op": "hello", "protocol": PROTOCOL_VERSION,
                                       "client": client_name}
            if token is not None:
                request["token"] = token
            if shm and address.scheme == "unix":
                request["shm"] = True
            hello = conn.call(request,
                              timeout=_HELLO_TIMEOUT_S if timeout is None else timeout)
            if hello.get("protocol") != PROTOCOL_VERSION:
                raise ProtocolError(f"server at {address} speaks protocol "
                                    f"{hello.get('protocol')!r}, this client speaks "
                                    f"{PROTOCOL_VERSION}")
        except BaseException:
            conn.close()
            raise
        conn.server = hello
        offer = hello.get("shm")
        if isinstance(offer, Mapping):
            conn.shm_offered = bool(offer.get("offered"))
            conn.shm_reason = str(offer.get("reason", ""))
        elif shm:
            conn.shm_reason = ("the server does not offer shared memory" if address.scheme == "unix"
                               else "shared memory is offered on Unix sockets only")
        limits = hello.get("limits")
        if isinstance(limits, Mapping):
            conn.limits = {k: int(v) for k, v in limits.items() if isinstance(v, (int, float))}
        return conn

    @property
    def alive(self) -> bool:
        """False once the socket failed or was closed."""
        return self._dead is None

    def submit(self, meta: Union[Dict[str, Any], bytes], buffers: Sequence[Any] = (),
               decode: Optional[Decoder] = None, *,
               caller_waits: bool = False,
               allocate: Optional[Allocator] = None) -> Tuple[int, Future[Any]]:
        """Sends one request and returns (request id, future of its result).

        The frame is fully handed to the kernel before this returns, so the caller may
        reuse `buffers` at once. The future's result is ``decode(meta, payload)`` of the
        reply, or the reply's metadata when `decode` is None; it fails with the server's
        error, or ConnectionLost if the connection dies first. `caller_waits`: the caller
        calls `wait` at once, so no reader thread is needed for this request. `allocate`:
        where to receive the reply's payload (see wire.FrameReader); it is called in the
        thread that reads the reply.
        Raises ConnectionLost (dead connection, failed send) or ResourceExhausted (frame
        larger than the server's limits, checked before sending).
        """
        hook = self.before_submit
        if hook is not None:
            hook()
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()  # a sent request cannot be cancelled
        with self._lock:
            if self._dead is not None:
                raise ConnectionLost(self._dead_message())
            if not caller_waits and self._reader is None and self._may_start_reader:
                self._start_reader()
            request_id = self._next_id
            self._next_id += 1
            self._pending[request_id] = (future, decode)
            if allocate is not None:
                self._allocators[request_id] = allocate
        try:
            pieces = encode_frame(request_id, meta, buffers)
            self._check_limits(pieces)
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
                self._allocators.pop(request_id, None)
            raise
        self._send(pieces)
        return request_id, future

    def submit_all(self, requests: Sequence[Tuple[Union[Dict[str, Any], bytes], Sequence[Any],
                                                  Optional[Decoder]]], *,
                   caller_waits: bool = False) -> List[Tuple[int, Future[Any]]]:
        """Sends several requests (metadata, buffers, decoder each) in one write, so the
        server reads them together (a mixed batch's, one per table); returns (request id,
        future) of each, in order. As `submit` otherwise; when it raises, none of them
        was sent."""
        hook = self.before_submit
        if hook is not None:
            hook()
        sent: List[Tuple[int, Future[Any]]] = []
        with self._lock:
            if self._dead is not None:
                raise ConnectionLost(self._dead_message())
            if not caller_waits and self._reader is None and self._may_start_reader:
                self._start_reader()
            for _, _, decode in requests:
                future: Future[Any] = Future()
                future.set_running_or_notify_cancel()
                self._pending[self._next_id] = (future, decode)
                sent.append((self._next_id, future))
                self._next_id += 1
        try:
            pieces: List[Any] = []
            for (request_id, _), (meta, buffers, _) in zip(sent, requests):
                frame = encode_frame(request_id, meta, buffers)
                self._check_limits(frame)
                pieces += frame
        except BaseException:
            with self._lock:
                for request_id, _ in sent:
                    self._pending.pop(request_id, None)
            raise
        self._send(pieces)
        return sent

    def _send(self, pieces: List[Any]) -> None:
        """Writes whole frames in one go; a failed write kills the connection."""
        try:
            with self._send_lock:
                _send_all(self._sock, pieces)
        except OSError as exc:
            self._kill(f"sending to {self.address} failed: {exc}")
            raise ConnectionLost(self._dead_message()) from None

    def wait(self, request_id: int, future: Future[Any], timeout: Optional[float]) -> Any:
        """The result of a submitted request, waiting at most `timeout` seconds (None:
        forever). On expiry the request is forgotten (a late reply is dropped) and
        replayd.TimeoutError is raised; the request may still execute on the server.
        Without a reader thread, the calling thread reads replies meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._reader is None:
            self._read_until(future, timeout)
        try:  # one deadline for both waits: the timeout is honoured once, not twice
            return future.result(None if deadline is None else
                                 max(0.0, deadline - time.monotonic()))
        except ReplayError:
            raise
        except (futures.TimeoutError, builtins.TimeoutError):
            self.forget(request_id)
            raise TimeoutError(f"no reply from {self.address} within {timeout:g} s "
                               f"(the request may still execute on the server)") from None

    def wait_done(self, future: Future[Any], timeout: float) -> bool:
        """Waits up to `timeout` seconds for `future` (reading replies meanwhile when there
        is no reader thread); True when it is done. Unlike `wait`, it neither raises nor
        forgets the request."""
        deadline = time.monotonic() + timeout
        if self._reader is None:
            self._read_until(future, timeout)
        if future.done():  # the usual case: no waiter to set up
            return True
        done, _ = futures.wait([future], max(0.0, deadline - time.monotonic()))
        return bool(done)

    def call(self, meta: Dict[str, Any], buffers: Sequence[Any] = (),
             decode: Optional[Decoder] = None, *, timeout: Optional[float] = None) -> Any:
        """`submit` then `wait`."""
        request_id, future = self.submit(meta, buffers, decode, caller_waits=True)
        return self.wait(request_id, future, timeout)

    def forget(self, request_id: int) -> None:
        """Stops waiting for a request: its reply, if it comes, is dropped."""
        with self._lock:
            self._pending.pop(request_id, None)
            self._allocators.pop(request_id, None)

    def close(self) -> None:
        """Closes the socket; requests in flight fail with ConnectionLost. Idempotent.
        Only for the process that opened the connection (see `abandon`)."""
        if os.getpid() != self.pid:
            self.abandon()
            return
        self._kill("the connection was closed by the client")
        if self._reader is not None and threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)
        self._sock.close()

    def abandon(self) -> None:
        """In a forked child: releases this process's copy of the socket without touching
        the connection the parent still uses (no shutdown, so no FIN while the parent holds
        it) and without taking locks a parent thread may have held at fork time."""
        self._dead = "the connection belongs to the parent process"
        try:
            fd = self._sock.detach()
            if fd >= 0:
                os.close(fd)
        except OSError:
            pass

    def __del__(self) -> None:
        # Wakes and ends the reader thread of a connection nobody holds any more.
        if getattr(self, "pid", None) == os.getpid() and getattr(self, "_dead", "") is None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- reader side -------------------------------------------------------------------

    def notice_close(self) -> None:
        """Without a reader thread and while no caller reads: handles what the server sent
        unasked (its last error before closing an idle connection, the end of the stream),
        so that a connection the server closed is seen dead before a request goes out on
        it. Costs one poll system call; nothing with a reader thread."""
        if self._reader is not None:
            return  # set once, never unset: the reader thread handles the stream
        with self._read_turn:
            if self._reading or self._reader is not None or self._dead is not None:
                return
            self._reading = True
        try:
            while self._dead is None and self._readable(0):
                self._read_once()
        except OSError as exc:
            self._kill(f"connection lost: {exc}")
        finally:
            self._end_turn()

    def _start_reader(self) -> None:
        """Starts the reader thread (called with _lock held). It takes the socket over once
        the caller reading it now, if any, is done."""
        self._reader = threading.Thread(target=_read_loop, args=(weakref.ref(self),),
                                        name=f"replayd-reader {self.address}", daemon=True)
        self._reader.start()

    def _take_turn(self, future: Future[Any], deadline: Optional[float]) -> bool:
        """Waits until this caller may read the socket (True, with _reading set) or needs
        not: its future is done, the connection died, the reader thread runs or the
        deadline passed (False)."""
        with self._read_turn:
            while not future.done() and self._dead is None and self._reader is None:
                if not self._reading:
                    self._reading = True
                    return True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._read_turn.wait(remaining)
        return False

    def _readable(self, timeout: float) -> bool:
        """Whether the socket has bytes (or its end) within `timeout` seconds. poll, not
        select: select fails on descriptors past 1023, which a process holding many files
        (or many staging arenas) has."""
        poller = select.poll()
        poller.register(self._sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(max(0.0, timeout) * 1000.0))

    def _read_until(self, future: Future[Any], timeout: Optional[float]) -> None:
        """Without a reader thread: reads and dispatches replies, in turn with other waiting
        callers, until `future` is done, the connection dies (which fails it), a reader
        thread takes over or `timeout` seconds pass."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._take_turn(future, deadline):
            return
        try:
            while not future.done() and self._dead is None and self._reader is None:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._readable(remaining):
                        return
                if self._read_once():
                    with self._read_turn:  # other waiters: their reply may be in
                        self._read_turn.notify_all()
        except OSError as exc:
            self._kill(f"connection lost: {exc}")
        finally:
            self._end_turn()

    def _read_once(self) -> int:
        """One receive by the thread whose turn it is: dispatches the frames it completes and
        returns how many. The end of the stream or an error kills the connection (0)."""
        try:
            received = self._receive(self._frames.buffer())
            if received == 0:
                self._kill("the server closed the connection" if self._frames.idle else
                           "the server closed the connection in the middle of a reply")
                return 0
            frames = self._frames.advance(received)
            for frame in frames:
                self._dispatch(frame)
            return len(frames)
        except ProtocolError as exc:
            self._kill(f"unreadable reply from the server: {exc.message}")
        except OSError as exc:
            self._kill(f"connection lost: {exc}")
        return 0

    def _receive(self, buffer: memoryview) -> int:
        """One receive into `buffer`: ``recv_into``, or on a connection offered the plane
        ``recvmsg_into``, queueing the descriptors that arrived (they belong to the next
        replies that announce descriptors, in order)."""
        if not self.shm_offered:
            return self._sock.recv_into(buffer)
        return _receive_with_descriptors(self._sock, buffer, descriptors=self._descriptors,
                                         lock=self._lock)

    def _end_turn(self) -> None:
        with self._read_turn:
            self._reading = False
            self._read_turn.notify_all()

    def _dispatch(self, frame: Frame) -> None:
        if frame.kind != KIND_REPLY:
            raise ProtocolError(f"server sent a frame of kind {frame.kind}, expected a reply")
        error = frame.meta.get("error")
        descriptors = frame.meta.get("descriptors")
        with self._lock:
            entry = self._pending.pop(frame.request_id, None)
            self._allocators.pop(frame.request_id, None)
            if descriptors is not None:
                count = descriptors if isinstance(descriptors, int) else -1
                if not 0 <= count <= len(self._descriptors):
                    raise ProtocolError(f"a reply announces {descriptors!r} descriptors, "
                                        f"{len(self._descriptors)} arrived")
                frame.meta["descriptors"] = [self._descriptors.popleft() for _ in range(count)]
        if entry is None and descriptors is not None:
            for fd in frame.meta["descriptors"]:
                os.close(fd)
        if entry is None:
            if error is not None:
                # An error for a request nobody waits for (or id 0: a broken frame). The
                # server closes after the fatal ones; keep its words for the next failure.
                self._note = str(error_from_reply(error))
            return
        future, decode = entry
        if error is not None:
            exc = error_from_reply(error)
            if exc.code in ("shutting_down", "protocol_error"):
                self._note = str(exc)
            future.set_exception(exc)
            return
        try:
            result = frame.meta if decode is None else decode(frame.meta, frame.payload)
        except ReplayError as exc:
            future.set_exception(exc)
        except Exception as exc:  # a reply we cannot interpret
            future.set_exception(ProtocolError(f"cannot decode reply: {exc!r}"))
        else:
            future.set_result(result)

    def _kill(self, reason: str) -> None:
        """Marks the connection dead, wakes the reader, fails every pending request."""
        with self._lock:
            if self._dead is None:
                self._dead = reason
            pending, self._pending = self._pending, {}
            self._allocators.clear()
            self._read_turn.notify_all()
            while self._descriptors:
                os.close(self._descriptors.popleft())
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if pending:
            message = self._dead_message()
            for future, _ in pending.values():
                future.set_exception(ConnectionLost(message))

    def _dead_message(self) -> str:
        message = self._dead or "connection lost"
        if self._note:
            message += f" (server said: {self._note})"
        return message

    def _check_limits(self, pieces: List[Any]) -> None:
        total = sum(memoryview(p).nbytes for p in pieces)
        max_frame = self.limits.get("max_frame_bytes")
        if max_frame is not None and total > max_frame:
            raise ResourceExhausted(f"request of {total} bytes exceeds the server's "
                                    f"max_frame_bytes {max_frame}; send smaller batches")
        max_meta = self.limits.get("max_meta_bytes")
        meta_bytes = int.from_bytes(bytes(pieces[0][16:20]), "little")
        if max_meta is not None and meta_bytes > max_meta:
            raise ResourceExhausted(f"request metadata of {meta_bytes} bytes exceeds the "
                                    f"server's max_meta_bytes {max_meta}")


def _receive_with_descriptors(sock: socket.socket, buffer: memoryview, *,
                              descriptors: "collections.deque[int]",
                              lock: threading.Lock) -> int:
    """``recvmsg_into`` `buffer`, appending the descriptors that came with the bytes to
    `descriptors` (under `lock`). Returns the bytes received."""
    received, ancillary, flags, _ = sock.recvmsg_into([buffer], _ANCILLARY_BYTES,
                                                      _MSG_CMSG_CLOEXEC)
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            with lock:
                descriptors.extend(fds)
    if flags & _MSG_CTRUNC:
        raise ProtocolError("the server sent more descriptors in one message than expected")
    return received


def _send_all(sock: socket.socket, pieces: List[Any]) -> None:
    """Writes every byte of `pieces` with as few sendmsg calls as the kernel allows."""
    views = [memoryview(p) for p in pieces]
    first = 0
    while first < len(views):
        sent = sock.sendmsg(views[first:first + _MAX_IOV])
        while sent:
            size = views[first].nbytes
            if sent >= size:
                sent -= size
                first += 1
            else:
                views[first] = views[first][sent:]
                sent = 0


def _never_preempt_callers() -> None:
    """Puts the calling thread (the reader) under SCHED_BATCH, where Linux allows it: a
    thread of that policy woken up does not preempt the running one. A reply arriving
    while the caller's thread runs Python on the same core would otherwise preempt it only
    to find the interpreter's lock held and sleep again (two context switches for
    nothing, about one per insert_async call of 64 rows; docs/BENCHMARKS.md); the reply
    is read as soon as the caller blocks (waiting for a result, sending) or its time slice
    ends. Where the policy cannot be set (not Linux, refused), nothing changes but speed."""
    set_policy = getattr(os, "sched_setscheduler", None)
    batch = getattr(os, "SCHED_BATCH", None)
    if set_policy is None or batch is None:
        return
    try:
        set_policy(0, batch, os.sched_param(0))  # 0: the calling thread
    except OSError:
        pass


def _read_loop(ref: "weakref.ref[Connection]") -> None:
    """The reader thread: once no waiting caller reads, takes the socket for good and
    dispatches frames until it ends.

    Holds only a weak reference to its Connection between frames, so an unreferenced
    connection can be collected (its __del__ shuts the socket down, which ends this loop).
    """
    _never_preempt_callers()
    conn = ref()
    if conn is None:
        return
    sock, reader, turn = conn._sock, conn._frames, conn._read_turn
    with turn:
        while conn._reading and conn._dead is None:
            turn.wait()
        conn._reading = True
        turn.notify_all()  # waiting callers now wait for their futures instead
    receive: Callable[[memoryview], int] = sock.recv_into
    if conn.shm_offered:
        descriptors, lock = conn._descriptors, conn._lock
        receive = functools.partial(_receive_with_descriptors, sock, descriptors=descriptors,
                                    lock=lock)
    del conn
    reason = "the server closed the connection"
    try:
        while True:
            buffer = reader.buffer()
            received = receive(buffer)
            del buffer
            if received == 0:
                if not reader.idle:
                    reason = "the server closed the connection in the middle of a reply"
                break
            frames = reader.advance(received)
            conn = ref()
            if conn is None:
                return
            for frame in frames:
                conn._dispatch(frame)
            del conn
    except ProtocolError as exc:
        reason = f"unreadable reply from the server: {exc.message}"
    except OSError as exc:
        reason = f"connection lost: {exc}"
    except Exception as exc:  # never leave requests waiting on a dead reader
        reason = f"reader thread failed: {exc!r}"
    conn = ref()
    if conn is not None:
        conn._kill(reason)
