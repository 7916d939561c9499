"""InsertWindow (client/python/replayd/insert_window.py): the slots of a Client's
insert_async calls in flight. No server: its terms are a BoundedSemaphore's, which a caller
keeping calls in flight relies on (a call beyond the window waits for a slot, a done call's
slot wakes exactly one waiter per slot, giving back more than was taken is a bug)."""
from __future__ import annotations

import threading
import time
from typing import List

import pytest

from replayd.insert_window import InsertWindow


def test_slots_are_taken_until_none_is_free():
    window = InsertWindow(3)
    assert [window.acquire(blocking=False) for _ in range(4)] == [True, True, True, False]
    assert window.free == 0
    window.release(2)
    assert window.free == 2 and window.acquire(blocking=False)


def test_giving_back_more_than_was_taken_is_refused_and_changes_nothing():
    window = InsertWindow(2)
    window.acquire()
    with pytest.raises(ValueError, match="only 1 are taken"):
        window.release(2)
    assert window.free == 1
    with pytest.raises(ValueError, match="at least one slot"):
        InsertWindow(0)


def test_a_caller_beyond_the_window_waits_and_each_slot_given_back_wakes_one():
    window = InsertWindow(2)
    window.acquire()
    window.acquire()
    woke: List[int] = []
    lock = threading.Lock()

    def wait_for_a_slot(i: int) -> None:
        window.acquire()
        with lock:
            woke.append(i)

    waiters = [threading.Thread(target=wait_for_a_slot, args=(i,)) for i in range(3)]
    for thread in waiters:
        thread.start()
    deadline = time.monotonic() + 10
    while window._waiting < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert window._waiting == 3 and not woke  # all three blocked, none took a slot
    window.release(2)  # two slots: two waiters, not three
    deadline = time.monotonic() + 10
    while len(woke) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)
    assert len(woke) == 2 and window.free == 0
    window.release()
    for thread in waiters:
        thread.join(10)
    assert len(woke) == 3 and not any(t.is_alive() for t in waiters)
    assert window.free == 0
    window.release(2)
    assert window.free == 2
