"""The prefetching sampler and the batching writer."""
from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pytest

import replayd
from waiting import wait_until


def make_queue(client, name, capacity=1000):
    """A FIFO queue: each item is sampled exactly once, in insertion order."""
    client.create_table(name, {"id": (np.int64, ()), "obs": (np.float32, 3)}, capacity,
                        sampler="fifo", max_times_sampled=1)


def ids_of(n, start=0):
    ids = np.arange(start, start + n)
    return {"id": ids, "obs": np.repeat(ids[:, None], 3, axis=1).astype(np.float32)}


def test_sampler_yields_batches_in_request_order(client, table_name):
    make_queue(client, table_name)
    client.insert(table_name, ids_of(60))
    with client.sampler(table_name, 4, prefetch=3) as sampler:
        got = [next(sampler).data["id"].tolist() for _ in range(15)]
    assert sum(got, []) == list(range(60))


def test_sampler_keeps_requests_in_flight_and_waits_for_items(client, table_name):
    make_queue(client, table_name)
    with client.sampler(table_name, 2, prefetch=4) as sampler:
        assert wait_until(lambda: client.table_info(table_name)["waiting"]["samples"] == 4)
        client.insert(table_name, ids_of(20))
        assert [next(sampler).data["id"].tolist() for _ in range(3)] == [[0, 1], [2, 3],
                                                                         [4, 5]]
        # 4 fetched requests ahead of the consumer at most: ready queue + in flight.
        assert wait_until(lambda: client.size(table_name) <= 20 - 2 * 7)


def test_sampler_close_stops_its_thread_and_cancels_waiting_requests(client, table_name):
    make_queue(client, table_name)
    sampler = client.sampler(table_name, 1, prefetch=5)
    assert wait_until(lambda: client.table_info(table_name)["waiting"]["samples"] == 5)
    start = time.monotonic()
    sampler.close()
    assert time.monotonic() - start < 2
    assert not sampler._thread.is_alive()
    with pytest.raises(StopIteration):
        next(sampler)
    assert wait_until(lambda: client.table_info(table_name)["waiting"]["samples"] == 0)
    sampler.close()  # idempotent


def transform_threads(client, table_name, over_plane):
    """The names of the threads a sampler's transform ran in, for 5 batches."""
    client.create_table(table_name, {"x": (np.float32, 2)}, 100)
    client.insert(table_name, {"x": np.ones((10, 2), np.float32)})
    threads = set()

    def transform(sample):
        threads.add(threading.current_thread().name)
        return sample.data["x"].sum(), sample.weights

    with client.sampler(table_name, 8, prefetch=2, transform=transform) as sampler:
        assert (sampler._thread is None) == over_plane
        for _, (total, weights) in zip(range(5), sampler):
            assert total == 16 and weights.shape == (8,)
        # Over the plane one reply holds 2 x prefetch = 4 batches: the 5th batch taken is the
        # first of the second reply, 3 more wait (two requests of 2 would leave 1).
        assert not over_plane or sampler.ready == 3
    return threads


def test_sampler_transform_runs_in_the_background_thread(address, table_name):
    # Through the socket; over shared memory there is no background thread (below).
    with replayd.Client(address, timeout=30, shm=False) as client:
        threads = transform_threads(client, table_name, over_plane=False)
    assert threads and threading.current_thread().name not in threads


def test_over_shared_memory_the_sampler_gathers_and_transforms_in_the_consumer(server,
                                                                              table_name):
    with replayd.Client(server.unix_address, timeout=30) as client:
        threads = transform_threads(client, table_name, over_plane=True)
    assert threads == {threading.current_thread().name}


def test_sampler_errors_are_raised_in_turn_then_iteration_ends(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    client.insert(table_name, {"x": [1.0]})
    calls = []

    def transform(sample):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return sample

    sampler = client.sampler(table_name, 1, prefetch=2, transform=transform)
    next(sampler), next(sampler)
    with pytest.raises(RuntimeError, match="boom"):
        next(sampler)
    with pytest.raises(StopIteration):
        next(sampler)


def test_sampler_reports_a_dropped_table(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    sampler = client.sampler(table_name, 1)
    time.sleep(0.05)
    client.drop_table(table_name)
    with pytest.raises(replayd.NotFound):
        next(sampler)
    assert list(sampler) == []


def test_sampler_get_times_out_and_sampler_server_timeout(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    with client.sampler(table_name, 1) as sampler:
        with pytest.raises(replayd.TimeoutError):
            sampler.get(timeout=0.1)
    with client.sampler(table_name, 1, timeout=0.1) as sampler:
        with pytest.raises(replayd.TimeoutError):
            next(sampler)


def test_writer_batches_and_flushes_on_close(client, table_name):
    make_queue(client, table_name)
    with client.writer(table_name, batch=16) as writer:
        for i in range(15):
            writer.append(id=i, obs=[i, i, i])
        time.sleep(0.05)
        assert client.size(table_name) == 0  # still buffered: no round trip per item
        writer.append({"id": 15, "obs": np.full(3, 15, np.float32)})  # fills the batch
        for i in range(16, 40):
            writer.append(id=i, obs=[i, i, i])
    assert writer.items_written == 40 and writer.pending == 0
    assert client.size(table_name) == 40
    sample = client.sample(table_name, 40)
    assert sample.data["id"].tolist() == list(range(40))  # in order
    with pytest.raises(replayd.ReplayError, match="closed"):
        writer.append(id=1, obs=[1, 1, 1])


def test_writer_batch_defaults_to_about_64_kib_of_items(client, table_name):
    """Small transitions go 1024 to a request (a request's fixed cost would otherwise be
    as much as theirs), large ones 64, and in between as many as fill 64 KiB."""
    sizes = {"tiny": (np.float32, 4, 2000), "mid": (np.uint8, 504, 2000),
             "large": (np.uint8, 56448, 100)}
    for suffix, (dtype, shape, capacity) in sizes.items():
        client.create_table(f"{table_name}_{suffix}", {"x": (dtype, shape)}, capacity)
    batches = {suffix: client.writer(f"{table_name}_{suffix}").batch for suffix in sizes}
    assert batches == {"tiny": 1024, "mid": 128, "large": 64}  # mid: 512 bytes with priority
    with client.writer(f"{table_name}_tiny", batch=10) as writer:
        assert writer.batch == 10
    # Never more than the table holds: an insert larger than the table is refused.
    client.create_table(f"{table_name}_small", {"x": (np.float32, 4)}, 300)
    with client.writer(f"{table_name}_small") as writer:
        assert writer.batch == 300
        for i in range(1000):
            writer.append(x=np.full(4, i, np.float32))
    assert writer.items_written == 1000 and client.size(f"{table_name}_small") == 300


def test_writer_sends_a_partial_batch_whose_first_item_is_max_delay_old(client, table_name):
    """A slow explorer's items become sampleable within about max_delay of being appended,
    however large the batch; with max_delay=None only a full batch (or flush) sends."""
    make_queue(client, table_name)
    with client.writer(table_name, batch=1000, max_delay=0.05) as writer:
        writer.append(id=0, obs=[0, 0, 0])
        time.sleep(0.1)
        assert client.size(table_name) == 0  # an append sends it, not a timer
        writer.append(id=1, obs=[1, 1, 1])  # finds item 0 older than max_delay: sends both
        assert wait_until(lambda: client.size(table_name) == 2)
        writer.append(id=2, obs=[2, 2, 2])  # the first of a new batch
        writer.append(id=3, obs=[3, 3, 3])
        time.sleep(0.1)
        assert client.size(table_name) == 2  # items 2 and 3 wait for another append
    assert client.sample(table_name, 4).data["id"].tolist() == [0, 1, 2, 3]
    with client.writer(table_name, batch=1000, max_delay=None) as writer:
        writer.append(id=4, obs=[4, 4, 4])
        time.sleep(0.1)
        writer.append(id=5, obs=[5, 5, 5])
        time.sleep(0.1)
        assert client.size(table_name) == 0 and writer.pending == 2
    assert client.size(table_name) == 2
    with pytest.raises(replayd.InvalidArgument, match="max_delay"):
        client.writer(table_name, max_delay=-1)


def test_writer_with_priorities(client, table_name):
    client.create_table(table_name, {"i": (np.int64, ())}, 100, sampler="prioritized",
                        priority_exponent=1.0)
    with client.writer(table_name, batch=4) as writer:
        writer.append(i=0, priority=0.0)
        writer.append(i=1, priority=0.0)
        writer.append(i=2)  # switches to server-assigned priorities: sends [0, 1] first
        writer.append(i=3, priority=5.0)
    assert client.size(table_name) == 4
    ids = client.sample(table_name, 200).data["i"]
    assert set(ids.tolist()) == {2, 3}  # items 0 and 1 have priority 0


def test_writer_takes_numpy_scalars_of_the_fields_dtype_without_conversion(client,
                                                                          table_name):
    """Environments hand out numpy scalars (np.float32 rewards, np.int64 actions): of the
    field's exact dtype they are written as they are (try_append accepts them), stored
    bit for bit, including values a float64 would not hold."""
    dtypes = {"u8": np.uint64, "i8": np.int64, "f2": np.float16, "f4": np.float32,
              "b": np.bool_, "u1": np.uint8}
    client.create_table(table_name, {name: (dtype, ()) for name, dtype in dtypes.items()},
                        100, sampler="fifo", max_times_sampled=1)
    items = [{"u8": np.uint64(2**64 - 1), "i8": np.int64(-2**63), "f2": np.float16(0.1),
              "f4": np.float32(0.1), "b": np.bool_(True), "u1": np.uint8(255)},
             {"u8": np.uint64(2**53 + 1), "i8": np.int64(2**63 - 1),
              "f2": np.float16(-65504), "f4": np.float32(np.nextafter(np.float32(1), 2)),
              "b": np.bool_(False), "u1": np.uint8(0)}]
    with client.writer(table_name, batch=4) as writer:
        for item in items:
            assert writer.try_append(item)
        # A numpy scalar of another dtype is converted by append's rules, not taken as is.
        assert not writer.try_append({**items[0], "f4": np.float16(0.5)})
        writer.append({**items[0], "f4": np.float16(0.5)})
    data = client.sample(table_name, 3).data
    for name, dtype in dtypes.items():
        assert data[name].dtype == np.dtype(dtype)
        assert data[name][:2].tobytes() == np.array([item[name] for item in items],
                                                    dtype).tobytes(), name
    assert data["f4"][2] == np.float32(0.5)


def test_writer_rejects_bad_items_at_once(client, table_name):
    make_queue(client, table_name)
    with client.writer(table_name, batch=4) as writer:
        with pytest.raises(replayd.InvalidArgument, match="unknown field 'nope'"):
            writer.append(id=1, obs=[1, 2, 3], nope=1)
        with pytest.raises(replayd.InvalidArgument, match="obs"):
            writer.append(id=1, obs=[1, 2])
        with pytest.raises(replayd.InvalidArgument, match="id"):
            writer.append(id=1.5, obs=[1, 2, 3])
        writer.append(id=1, obs=[1, 2, 3])
    assert client.size(table_name) == 1


def test_writer_surfaces_errors_of_background_batches(client, table_name):
    make_queue(client, table_name)
    writer = client.writer(table_name, batch=2)
    client.drop_table(table_name)
    writer.append(id=1, obs=[1, 2, 3])
    writer.append(id=2, obs=[1, 2, 3])  # sent now; the server answers not_found
    with pytest.raises(replayd.NotFound):
        writer.flush()
    writer.close()


def test_writer_waits_when_too_many_batches_are_in_flight(client, table_name):
    client.create_table(table_name, {"x": (np.int64, ())}, 100, sampler="fifo",
                        max_times_sampled=1, rate_limiter=replayd.Queue(4))
    writer = client.writer(table_name, batch=2, max_in_flight=2)
    done = threading.Event()

    def produce():
        for i in range(12):
            writer.append(x=i)
        writer.flush()
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    time.sleep(0.2)
    assert not done.is_set()  # held: queue of 4 full, 2 batches waiting
    got = []
    while len(got) < 12:
        got += client.sample(table_name, 1, timeout=5).data["x"].tolist()
    thread.join(5)
    assert done.is_set() and got == list(range(12))


def test_samplers_and_writers_do_not_pickle(client, table_name):
    make_queue(client, table_name)
    with client.writer(table_name) as writer, client.sampler(table_name, 1) as sampler:
        for obj in (writer, sampler):
            with pytest.raises(TypeError, match="pickle the Client"):
                pickle.dumps(obj)
