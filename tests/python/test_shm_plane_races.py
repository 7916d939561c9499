"""Races of samples over the shared-memory plane (docs/SHM.md) against the real binary.

What a user relies on: a table dropped and created again while it is sampled over the
plane is a NotFound (as the C++ PlaneSampler says it, and as a socket sample of a table
dropped meanwhile), never a ProtocolError; a sample whose rows keep changing under the
copy (their stamps never settle) stops redrawing at its call's timeout, or without one
after MAX_REDRAW_ROUNDS rounds, with an error that says so, instead of redrawing forever.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List

import numpy as np
import pytest

import replayd
from replayd.shm.mapping import TableMapping
from replayd.shm.sampling import MAX_REDRAW_ROUNDS

FIELDS = {"id": ("int64", ()), "check": ("int64", ()), "wide": ("float32", (64,))}
CAPACITY = 64
RECREATIONS = 50  # the race showed 5-6 times per 40 recreations
HANG_S = 30.0  # a call still running after this is taken as redrawing forever


def rows(generation: int) -> Dict[str, np.ndarray]:
    ids = generation * 1000 + np.arange(CAPACITY, dtype=np.int64)
    return {"id": ids, "check": ids * 7,
            "wide": np.repeat(ids.astype(np.float32)[:, None], 64, axis=1)}


def create(client: replayd.Client, name: str, generation: int) -> None:
    client.create_table(name, FIELDS, capacity=CAPACITY, remover="fifo",
                        rate_limiter=replayd.MinSize(1))
    client.insert(name, rows(generation))


def assert_whole(data: Dict[str, np.ndarray]) -> None:
    np.testing.assert_array_equal(data["check"], data["id"] * 7)
    np.testing.assert_array_equal(data["wide"][:, 0], data["id"].astype(np.float32))


def sample_once(client: replayd.Client, name: str) -> Dict[str, np.ndarray]:
    return client.sample(name, 16, timeout=2).data


def sample_async_once(client: replayd.Client, name: str) -> Dict[str, np.ndarray]:
    return client.sample_async(name, 16, timeout=2).result(10).data


def sampler_once(client: replayd.Client, name: str) -> Dict[str, np.ndarray]:
    with client.sampler(name, 16, prefetch=2, timeout=2) as sampler:
        return sampler.get(timeout=5).data


@pytest.mark.parametrize("draw", [sample_once, sample_async_once, sampler_once],
                         ids=["sample", "sample_async", "sampler"])
def test_a_table_dropped_and_recreated_while_sampled_over_the_plane_is_never_a_protocol_error(
        server, table_name, draw: Callable[[replayd.Client, str], Dict[str, np.ndarray]]):
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert c.shm_enabled()
        create(c, table_name, 0)
        assert c.plane_table(table_name) is not None
    done = threading.Event()
    failures: List[BaseException] = []
    attempts = [0]  # the learner's draws so far, successful or not

    def recreate() -> None:
        try:
            with replayd.Client(server.unix_address, timeout=30) as c:
                for generation in range(1, RECREATIONS + 1):
                    # At least one draw between recreations (whatever the machine's speed),
                    # so that draws race every drop.
                    seen = attempts[0]
                    deadline = time.monotonic() + 5
                    while attempts[0] == seen and time.monotonic() < deadline:
                        time.sleep(0.001)
                    c.drop_table(table_name)
                    create(c, table_name, generation)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            done.set()

    samples = not_found = 0
    with replayd.Client(server.unix_address, timeout=30) as learner:
        thread = threading.Thread(target=recreate, daemon=True)
        thread.start()
        while not done.is_set():
            try:
                assert_whole(draw(learner, table_name))
                samples += 1
            except (replayd.NotFound, replayd.TimeoutError):
                not_found += 1  # dropped meanwhile, or not filled again yet
            attempts[0] += 1
        thread.join(30)
    assert not failures, failures
    assert samples >= RECREATIONS // 2  # sampled all along, not only between recreations


@pytest.mark.parametrize("way", ["sample", "sample_async", "sampler"])
def test_a_table_replaced_between_a_draw_and_its_redraw_is_not_found_not_mixed_rows(
        server, table_name, monkeypatch, way):
    client = replayd.Client(server.unix_address, timeout=30)
    create(client, table_name, 0)
    assert client.plane_table(table_name) is not None
    other = replayd.Client(server.unix_address, timeout=30)
    gather = TableMapping.gather
    replaced: List[bool] = []

    def replace_then_report_changed(self: TableMapping, keys: np.ndarray, out: Any,
                                    first: int = 0, slots: Any = None) -> np.ndarray:
        gather(self, keys, out, first, slots)
        if replaced:
            return np.zeros(0, np.intp)
        replaced.append(True)  # the first gather: the table is replaced under it
        other.drop_table(table_name)
        create(other, table_name, 1)
        return np.arange(len(keys))  # every row drawn again, from the new table

    monkeypatch.setattr(TableMapping, "gather", replace_then_report_changed)
    calls: Dict[str, Callable[[], Any]] = {
        "sample": lambda: client.sample(table_name, 8),
        "sample_async": lambda: client.sample_async(table_name, 8).result(HANG_S),
        "sampler": lambda: first_batch(client.sampler(table_name, 8)),
    }
    with pytest.raises(replayd.NotFound, match="was dropped or replaced while it was sampled"):
        calls[way]()
    assert replaced
    client.close()
    other.close()


# -- rows whose stamps never settle -----------------------------------------------------


@pytest.fixture
def stamps_never_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gather in this process reports every row changed under the copy, as when a
    same-uid process keeps zeroing the table's stamps."""
    gather = TableMapping.gather

    def every_row_changed(self: TableMapping, keys: np.ndarray, out: Any, first: int = 0,
                          slots: Any = None) -> np.ndarray:
        gather(self, keys, out, first, slots)
        return np.arange(len(keys))

    monkeypatch.setattr(TableMapping, "gather", every_row_changed)


def outcome_within(call: Callable[[], Any], limit_s: float = HANG_S) -> BaseException:
    """The exception `call` raises, run in a thread that must end within `limit_s`."""
    result: List[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still redrawing after {limit_s:g} s"
    assert isinstance(result[0], BaseException), f"returned {result[0]!r}"
    return result[0]


def first_batch(sampler: replayd.Sampler) -> Any:
    with sampler:
        return sampler.get(timeout=1)


def filled(server: Any, name: str, timeout: Any) -> replayd.Client:
    client = replayd.Client(server.unix_address, timeout=timeout)
    create(client, name, 0)
    assert client.plane_table(name) is not None
    return client


@pytest.mark.parametrize("way", ["sample", "sample_async", "sampler"])
def test_a_plane_sample_whose_rows_never_settle_ends_at_its_timeout(
        server, table_name, stamps_never_settle, way):
    client = filled(server, table_name, 30)
    calls: Dict[str, Callable[[], Any]] = {
        "sample": lambda: client.sample(table_name, 8, timeout=1),
        "sample_async": lambda: client.sample_async(table_name, 8, timeout=1).result(HANG_S),
        "sampler": lambda: first_batch(client.sampler(table_name, 8)),
    }
    error = outcome_within(calls[way])
    assert isinstance(error, replayd.TimeoutError), repr(error)
    assert "kept changing under the copy" in str(error)
    assert "timeout of 1 s" in str(error)
    client.close()


def test_a_plane_sample_without_a_timeout_gives_up_after_max_redraw_rounds(
        server, table_name, stamps_never_settle):
    client = filled(server, table_name, None)
    error = outcome_within(lambda: client.sample(table_name, 8, timeout=None))
    assert isinstance(error, replayd.ResourceExhausted), repr(error)
    assert "kept changing under the copy" in str(error)
    assert f"{MAX_REDRAW_ROUNDS} rounds" in str(error)
    client.close()
