"""A call blocked by a rate limiter says once, after a few seconds, what holds it; samples,
writers and samplers print short reprs."""
from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

import replayd
import replayd.wait_notice

NOTICE_S = 0.2


@pytest.fixture(autouse=True)
def short_notice(monkeypatch):
    monkeypatch.setattr(replayd.wait_notice, "WAIT_NOTICE_S", NOTICE_S)


def later(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def notices(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "replayd"]


def test_sample_waiting_for_min_size_logs_once_why(client, address, table_name, caplog):
    client.create_table(table_name, {"x": (np.float32, ())}, 100,
                        rate_limiter=replayd.MinSize(50))
    client.insert(table_name, {"x": np.zeros(3, np.float32)})
    timer = later(0.6, lambda: replayd.Client(address).insert(
        table_name, {"x": np.zeros(60, np.float32)}))
    with caplog.at_level(logging.WARNING, logger="replayd"):
        sample = replayd.Client(address).sample(table_name, 4)  # without a timeout
    timer.join()
    assert len(sample) == 4
    assert notices(caplog) == [
        f"replayd: sample of 4 items from table '{table_name}' has waited {NOTICE_S:g} s: "
        f"the table holds 3 items and its rate limiter samples from 50 (min_size_to_sample)"]


def test_a_sample_with_a_timeout_logs_nothing_and_its_timeout_says_why(client, table_name,
                                                                       caplog):
    client.create_table(table_name, {"x": (np.float32, ())}, 100,
                        rate_limiter=replayd.MinSize(50))
    client.insert(table_name, {"x": np.zeros(3, np.float32)})
    with caplog.at_level(logging.WARNING, logger="replayd"):
        with pytest.raises(replayd.TimeoutError) as failure:
            client.sample(table_name, 4, timeout=NOTICE_S * 3)
    assert notices(caplog) == []
    assert failure.value.message.endswith(
        "; at the timeout: the table holds 3 items and its rate limiter samples from 50 "
        "(min_size_to_sample)"), failure.value.message


def test_an_insert_and_a_sampler_that_time_out_say_why(client, table_name):
    client.create_queue(table_name, {"x": (np.float32, ())}, size=5)
    client.insert(table_name, {"x": np.zeros(5, np.float32)})
    with pytest.raises(replayd.TimeoutError,
                       match="at the timeout: inserts are ahead of samples \\(5 inserted, "
                             "0 sampled"):
        client.insert(table_name, {"x": np.zeros(1, np.float32)}, timeout=0.3)
    with pytest.raises(replayd.TimeoutError, match="at the timeout: inserts are ahead"):
        with client.writer(table_name, batch=1, timeout=0.3) as writer:
            writer.append(x=1.0)
    client.sample(table_name, 5)  # empties the queue
    with pytest.raises(replayd.TimeoutError, match="at the timeout: .*sampl"):
        with client.sampler(table_name, 2, timeout=0.3) as batches:
            next(batches)


def test_a_quick_call_logs_nothing(client, table_name, caplog):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    with caplog.at_level(logging.WARNING, logger="replayd"):
        client.insert(table_name, {"x": np.zeros(3, np.float32)})
        client.sample(table_name, 2)
        with client.sampler(table_name, 2) as batches:
            next(batches)
    assert notices(caplog) == []


def test_writer_held_by_a_queue_limiter_logs_once_why(client, address, table_name, caplog):
    client.create_table(table_name, {"x": (np.float32, ())}, 100, sampler="fifo",
                        rate_limiter=replayd.Queue(5))
    timer = later(0.6, lambda: replayd.Client(address).sample(table_name, 5))
    with caplog.at_level(logging.WARNING, logger="replayd"):
        with replayd.Client(address).writer(table_name, batch=5, max_in_flight=1) as writer:
            for _ in range(10):  # the second batch waits until 5 are sampled
                writer.append(x=1.0)
    timer.join()
    messages = notices(caplog)
    assert len(messages) == 1, messages
    assert f"insert of 5 items into table '{table_name}'" in messages[0]
    assert "inserts are ahead of samples (5 inserted, 0 sampled" in messages[0]


def test_sampler_consumer_waiting_logs_once_why(client, address, table_name, caplog):
    client.create_table(table_name, {"x": (np.float32, ())}, 100,
                        rate_limiter=replayd.MinSize(20))
    with caplog.at_level(logging.WARNING, logger="replayd"):
        with client.sampler(table_name, 8) as batches:
            timer = later(0.6, lambda: replayd.Client(address).insert(
                table_name, {"x": np.zeros(30, np.float32)}))
            assert len(next(batches)) == 8
            timer.join()
    messages = notices(caplog)
    assert len(messages) == 1, messages
    assert "the table holds 0 items and its rate limiter samples from 20" in messages[0]


def test_reprs_are_short_and_never_print_the_data(client, table_name):
    client.create_table(table_name, {"frame": (np.uint8, (84, 84, 4)), "act": (np.int64, ())},
                        100)
    client.insert(table_name, {"frame": np.zeros((10, 84, 84, 4), np.uint8),
                               "act": np.arange(10)})
    sample = client.sample(table_name, 32)
    text = repr(sample)
    assert len(text) < 200, text
    assert text.startswith("<replayd.Sample n=32 {frame: uint8[84, 84, 4], act: int64[]} keys=[")
    with client.writer(table_name, batch=4) as writer:
        writer.append(frame=np.zeros((84, 84, 4), np.uint8), act=1)
        assert repr(writer) == (f"<replayd.Writer table='{table_name}' batch=4 buffered=1 "
                                f"in_flight=0 written=0 open>")
    with client.sampler(table_name, 16, prefetch=2) as batches:
        assert repr(batches).startswith(f"<replayd.Sampler table='{table_name}' "
                                        f"batch_size=16 prefetch=2 ready=")


def test_a_mixed_sample_with_a_timeout_logs_nothing_and_says_which_table_held_it(
        client, table_name, caplog):
    held, ready = f"{table_name}-held", f"{table_name}-ready"
    client.create_table(held, {"x": (np.float32, ())}, 100, rate_limiter=replayd.MinSize(50))
    client.create_table(ready, {"x": (np.float32, ())}, 100)
    for table in (held, ready):
        client.insert(table, {"x": np.zeros(3, np.float32)})
    try:
        with caplog.at_level(logging.WARNING, logger="replayd"):
            with pytest.raises(replayd.TimeoutError) as failure:
                client.sample({held: 0.5, ready: 0.5}, 4, timeout=NOTICE_S * 3)
        assert notices(caplog) == []
        assert f"table '{held}'" in failure.value.message
        assert failure.value.message.endswith(
            "; at the timeout: the table holds 3 items and its rate limiter samples from 50 "
            "(min_size_to_sample)"), failure.value.message
    finally:
        client.drop_table(held)
        client.drop_table(ready)
