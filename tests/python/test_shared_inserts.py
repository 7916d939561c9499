"""Consecutive `insert_async` calls sharing requests over the plane (docs/SHM.md, "Batched
inserts"; client/python/replayd/shm/insert_sharing.py), against the real server binary.

What a user relies on: calls that share a request store exactly the rows the socket
stores, each call's Future holds its own keys, in order; a shared request the server
refuses fails each of its calls with the server's error; a table whose rate limiter holds
inserts back makes each call wait and then succeed, as before; calls held back to share a
request go out when any other request is made, when a result is asked for, when the
request in flight is done, and on close.

To hold calls back deterministically, the first shared request's Future is held (its
request went to the server; the client learns its reply only when the test says so).
While one request is in flight, a group of fewer than SECOND_REQUEST_CALLS calls waits;
the tests that hold calls back hold fewer than that, unless they test that rule.
"""
from __future__ import annotations

import threading
from concurrent import futures as cf
from concurrent.futures import Future
from typing import Any, Dict, List

import numpy as np
import pytest

import replayd
from replayd.shm.insert_sharing import SECOND_REQUEST_CALLS, SHARED_IN_FLIGHT

FIELDS = {"obs": ("float32", (4,)), "act": ("int64", ()), "rew": ("float32", ()),
          "done": ("bool", ())}


def batch(n: int, seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.standard_normal((n, 4)).astype(np.float32),
            "act": rng.integers(-5, 5, n), "rew": rng.standard_normal(n).astype(np.float32),
            "done": rng.integers(0, 2, n).astype(bool)}


def stored(client: replayd.Client, table: str) -> Dict[str, np.ndarray]:
    pages = list(client.read_items(table, page=4096))
    return {name: np.concatenate([page[name] for page in pages]) for name in pages[0]}


class HeldFirstRequest:
    """Wraps a Client's sending of shared requests: records each request's rows, and
    holds the first `held` ones' Futures until `release()` (their requests are sent as
    usual)."""

    def __init__(self, client: replayd.Client, held: int = 1) -> None:
        self.rows: List[int] = []
        self._released = threading.Event()
        real = client._send_shared

        def send(conn: Any, table: str, schema: Any, part: Any, seconds: Any,
                 from_callback: bool) -> "Future[Any]":
            self.rows.append(part.n)
            future = real(conn, table, schema, part, seconds, from_callback)
            if len(self.rows) > held:
                return future
            hold: "Future[Any]" = Future()
            hold.set_running_or_notify_cancel()

            def hand_over() -> None:
                self._released.wait(30)
                error = future.exception(30)
                if error is not None:
                    hold.set_exception(error)
                else:
                    hold.set_result(future.result())
            threading.Thread(target=hand_over, daemon=True).start()
            return hold

        client._send_shared = send  # type: ignore[method-assign]

    def release(self) -> None:
        self._released.set()


def test_shared_calls_store_the_sockets_rows_and_each_gets_its_keys(server, table_name):
    plane_table, socket_table = table_name + "-plane", table_name + "-socket"
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as socket_client:
        held = HeldFirstRequest(plane, held=SHARED_IN_FLIGHT)
        keys: Dict[str, List[np.ndarray]] = {}
        for client, table in ((plane, plane_table), (socket_client, socket_table)):
            client.create_table(table, FIELDS, capacity=600, sampler="prioritized")
            calls = [client.insert_async(table, batch(5 + i % 7, i),
                                         priorities=None if i % 3 else np.full(5 + i % 7, i + 1.0))
                     for i in range(40)]
            if client is plane:
                assert plane._sharing is not None and plane._sharing.pending() > 0
                held.release()
            keys[table] = [call.result(30) for call in calls]
        # Shared: fewer requests than calls, every row in one of them.
        assert len(held.rows) < 40 and sum(held.rows) == sum(5 + i % 7 for i in range(40))
        for i, (mine, theirs) in enumerate(zip(keys[plane_table], keys[socket_table])):
            assert len(mine) == 5 + i % 7
            np.testing.assert_array_equal(mine, theirs)
        flat = np.concatenate(keys[plane_table])
        assert (np.diff(flat.astype(np.int64)) > 0).all()  # in call order
        got, want = stored(plane, plane_table), stored(plane, socket_table)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_refused_shared_request_fails_each_of_its_calls_with_the_servers_error(
        server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as other:
        plane.create_table(table_name, FIELDS, capacity=100)
        held = HeldFirstRequest(plane)
        first = plane.insert_async(table_name, batch(4, 0))
        waiting = [plane.insert_async(table_name, batch(3, i)) for i in range(1, 4)]
        assert plane._sharing is not None and plane._sharing.pending() == 3
        other.drop_table(table_name)  # the group's request will find no table
        held.release()
        assert len(first.result(30)) == 4  # sent before the drop
        errors = [call.exception(30) for call in waiting]
        assert len(held.rows) == 2  # the three calls went as one request
        other.create_table(table_name, FIELDS, capacity=100)
        other.drop_table(table_name)
        with pytest.raises(replayd.NotFound) as alone:
            other.insert(table_name, batch(3, 1))
        for error in errors:
            assert isinstance(error, replayd.NotFound)
            assert (error.code, error.message) == (alone.value.code, alone.value.message)


def test_a_shared_request_refused_for_a_stale_schema_makes_the_next_call_use_the_new_one(
        server, table_name):
    """The table was dropped and made again with other fields by another client: the
    shared calls made with the old fields fail with the server's error, and the client
    then forgets the old schema, so a call with the new fields shares and succeeds."""
    wider = dict(FIELDS, obs=("float32", (6,)))
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as other:
        plane.create_table(table_name, FIELDS, capacity=100)
        shared = HeldFirstRequest(plane, held=0)  # records the shared requests' rows
        plane.insert_async(table_name, batch(2, 0)).result(30)  # schema and rule cached
        other.drop_table(table_name)
        other.create_table(table_name, wider, capacity=100)
        stale = [plane.insert_async(table_name, batch(2, i)) for i in range(3)]
        for call in stale:
            assert isinstance(call.exception(30), replayd.InvalidArgument)
        fields = {f.name: f for f in plane.schema(table_name).fields}
        assert fields["obs"].shape == (6,)  # asked for again: the stale one was dropped
        before = len(shared.rows)
        new_rows = dict(batch(2, 9), obs=np.arange(12, dtype=np.float32).reshape(2, 6))
        keys = plane.insert_async(table_name, new_rows).result(30)
        assert shared.rows[before:] == [2]  # it shared a request: the new fields' rule
        assert len(keys) == 2 and plane.size(table_name) == 2
        np.testing.assert_array_equal(stored(plane, table_name)["obs"], new_rows["obs"])


def test_two_shared_requests_go_at_most_the_second_once_its_group_holds_enough_calls(
        server, table_name):
    """A call finding nothing in flight goes at once; while one request is in flight,
    calls wait until their group holds SECOND_REQUEST_CALLS, which then go as the second;
    with two in flight every later call waits, and goes when one of them is done."""
    assert SHARED_IN_FLIGHT == 2 and SECOND_REQUEST_CALLS > 3  # the other tests hold 3
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(c, held=2)
        first = c.insert_async(table_name, batch(2, 0))
        assert held.rows == [2]
        second = [c.insert_async(table_name, batch(1, 1 + i))
                  for i in range(SECOND_REQUEST_CALLS)]
        assert held.rows == [2, SECOND_REQUEST_CALLS]
        assert c._sharing is not None and c._sharing.pending() == 0
        third = [c.insert_async(table_name, batch(1, 100 + i))
                 for i in range(2 * SECOND_REQUEST_CALLS)]
        assert len(held.rows) == 2 and c._sharing.pending() == 2 * SECOND_REQUEST_CALLS
        held.release()
        keys = [first.result(30)] + [call.result(30) for call in second + third]
        assert held.rows == [2, SECOND_REQUEST_CALLS, 2 * SECOND_REQUEST_CALLS]
        assert [len(k) for k in keys] == [2] + [1] * (3 * SECOND_REQUEST_CALLS)
        flat = np.concatenate(keys)
        assert (np.diff(flat.astype(np.int64)) > 0).all()  # in call order
        got = stored(c, table_name)
        want = [batch(2, 0)] + [batch(1, 1 + i) for i in range(SECOND_REQUEST_CALLS)] + \
            [batch(1, 100 + i) for i in range(2 * SECOND_REQUEST_CALLS)]
        for name in FIELDS:
            np.testing.assert_array_equal(
                got[name], np.concatenate([rows[name] for rows in want]), err_msg=name)


def test_a_table_whose_limiter_holds_inserts_back_makes_each_call_wait_then_succeed(
        server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        # Inserts wait for samples once 2 items exist (1 sample per insert, buffer 1).
        c.create_table(table_name, FIELDS, capacity=1000,
                       rate_limiter=replayd.SampleToInsertRatio(1.0, 1, 1.0))
        c.insert(table_name, batch(2, 0))
        parked = [c.insert_async(table_name, batch(1, 10 + i), timeout=None) for i in range(4)]
        cf.wait(parked, timeout=0.3)
        assert not any(call.done() for call in parked)  # held by the rate limiter
        assert c._sharing is None or c._sharing.pending() == 0  # each its own request
        for _ in range(20):  # each admitted once samples came
            if all(call.done() for call in parked):
                break
            c.sample(table_name, 1, timeout=5)
        keys = [call.result(30) for call in parked]
        assert [len(k) for k in keys] == [1, 1, 1, 1]
        assert c.size(table_name) == 6
        got = stored(c, table_name)
        np.testing.assert_array_equal(
            got["obs"][2:], np.concatenate([batch(1, 10 + i)["obs"] for i in range(4)]))


def test_held_calls_go_out_on_any_other_request_on_result_and_when_the_reply_comes(
        server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(c)
        c.insert_async(table_name, batch(2, 0))
        sharing = c._sharing
        assert sharing is not None
        # Any other request: the group goes first, so it sees the calls' rows.
        for i in range(3):
            c.insert_async(table_name, batch(2, 1 + i))
        assert sharing.pending() == 3
        assert c.size(table_name) == 8 and sharing.pending() == 0
        # result() of a waiting call sends its group.
        calls = [c.insert_async(table_name, batch(2, 10 + i)) for i in range(3)]
        assert sharing.pending() == 3
        assert len(calls[1].result(5)) == 2 and sharing.pending() == 0  # not the 30 s hold
        # Without result(): the group goes once the request in flight is done.
        calls = [c.insert_async(table_name, batch(2, 20 + i)) for i in range(3)]
        held.release()
        done, not_done = cf.wait(calls, timeout=30)
        assert not not_done and c.size(table_name) == 20


def test_close_sends_the_held_calls(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as observer:
        observer.create_table(table_name, FIELDS, capacity=1000)
        c = replayd.Client(server.unix_address, timeout=30)
        held = HeldFirstRequest(c)
        c.insert_async(table_name, batch(2, 0))
        calls = [c.insert_async(table_name, batch(2, 1 + i)) for i in range(3)]
        assert c._sharing is not None and c._sharing.pending() == 3
        c.close()
        held.release()
        for call in calls:  # sent, then the connection closed: keys or ConnectionLost
            error = call.exception(30)
            assert error is None or isinstance(error, replayd.ConnectionLost)
        for _ in range(100):
            if observer.size(table_name) == 8:
                break
            threading.Event().wait(0.05)
        assert observer.size(table_name) == 8


def test_calls_held_when_their_connection_is_lost_fail_and_never_go_on_a_new_one(
        server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(c)
        first = c.insert_async(table_name, batch(2, 0))
        lost = [c.insert_async(table_name, batch(2, 1 + i)) for i in range(3)]
        c.connection().close()  # the connection dies under the held calls
        assert c.size(table_name) == 2  # a new connection: the first request's rows only
        later = c.insert_async(table_name, batch(2, 9))  # calls on the new connection
        held.release()
        error = first.exception(30)  # its reply may have come before the close
        assert error is None or isinstance(error, replayd.ConnectionLost)
        for call in lost:
            assert isinstance(call.exception(30), replayd.ConnectionLost)
        assert len(later.result(30)) == 2
        assert c.size(table_name) == 4


def test_a_held_call_copied_its_rows_so_the_caller_may_reuse_its_arrays(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(c)
        reused = batch(4, 0)
        want = []
        calls = []
        for i in range(4):
            fresh = batch(4, 100 + i)
            for name in reused:
                reused[name][...] = fresh[name]  # the same arrays, new rows
            want.append(fresh)
            calls.append(c.insert_async(table_name, reused))
        assert c._sharing is not None and c._sharing.pending() == 3
        held.release()
        for call in calls:
            call.result(30)
        got = stored(c, table_name)
        for name in FIELDS:
            np.testing.assert_array_equal(
                got[name], np.concatenate([rows[name] for rows in want]), err_msg=name)


def test_shared_calls_futures_work_as_any_future_does(server, table_name):
    """The Futures of calls that shared a request are Futures like any other: threads
    blocked on them wake (several on calls of one request: they share its Condition),
    done callbacks run once each, and concurrent.futures.wait and as_completed see every
    one."""
    with replayd.Client(server.unix_address, timeout=30) as plane:
        plane.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(plane)
        first = plane.insert_async(table_name, batch(4, 0))
        waiting = [plane.insert_async(table_name, batch(3, i)) for i in range(1, 4)]
        assert plane._sharing is not None and plane._sharing.pending() == 3
        called: List[Any] = []
        for call in waiting:
            call.add_done_callback(called.append)
        got: Dict[str, Any] = {}
        blocked = [threading.Thread(target=lambda: got.__setitem__("first", first.result(30))),
                   threading.Thread(target=lambda: got.__setitem__(
                       "wait", cf.wait(waiting, timeout=30)))]
        blocked += [threading.Thread(target=lambda i=i: got.__setitem__(i, waiting[i].result(30)))
                    for i in range(len(waiting))]
        for thread in blocked:
            thread.start()
        held.release()
        for thread in blocked:
            thread.join(30)
        assert len(got["first"]) == 4
        for i, call in enumerate(waiting):
            np.testing.assert_array_equal(got[i], call.result())
            assert len(got[i]) == 3
        done, not_done = got["wait"]
        assert done == set(waiting) and not not_done
        assert sorted(map(id, called)) == sorted(map(id, waiting))  # each once
        assert set(cf.as_completed(waiting, timeout=30)) == set(waiting)
        keys = np.concatenate([first.result()] + [call.result() for call in waiting])
        assert len(keys) == 13 and (np.diff(keys.astype(np.int64)) > 0).all()
        late: List[Any] = []
        waiting[0].add_done_callback(late.append)  # on a done Future: runs at once
        assert late == [waiting[0]] and not waiting[0].cancel()


def test_a_call_of_strided_arrays_shares_and_stores_its_rows(server, table_name):
    """Columns that are views (every other row of a larger array, a transposed copy) share
    a request like contiguous ones and store exactly their rows."""
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        held = HeldFirstRequest(c)
        first = c.insert_async(table_name, batch(2, 0))
        wide = batch(6, 1)
        strided = {name: column[::2] for name, column in wide.items()}
        strided["obs"] = np.asfortranarray(strided["obs"])
        assert not strided["act"].flags.c_contiguous and not strided["obs"].flags.c_contiguous
        call = c.insert_async(table_name, strided)
        assert c._sharing is not None and c._sharing.pending() == 1  # shares, not alone
        held.release()
        assert len(first.result(30)) == 2 and len(call.result(30)) == 3
        got = stored(c, table_name)
        for name in FIELDS:
            np.testing.assert_array_equal(got[name][2:], wide[name][::2], err_msg=name)
