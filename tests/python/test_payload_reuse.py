"""Large reply payloads are received into reused arrays, but never into one the user can
still see: a sample kept (or any view of it) is never overwritten by a later reply."""
from __future__ import annotations

import gc

import numpy as np

from replayd.wire import PayloadPool


def address_of(array):
    return array.__array_interface__["data"][0]


def test_a_payload_array_is_reused_only_when_nothing_refers_to_it():
    pool = PayloadPool()
    first = pool.take(1 << 20)
    first_address = address_of(first)
    column = first[64:128]  # like a sample's column: a view of the payload
    del first
    second = pool.take(1 << 20)
    assert address_of(second) != first_address  # the view keeps the first one in use
    del second, column
    gc.collect()
    assert address_of(pool.take(1 << 20)) == first_address


def test_small_payloads_and_very_different_sizes_get_fresh_arrays():
    pool = PayloadPool()
    small = pool.take(100)
    assert small.nbytes == 100
    big = pool.take(1 << 20)
    big_address = address_of(big)
    del big
    assert address_of(pool.take(1 << 18)) != big_address  # 4x smaller: not worth pinning 1 MiB
    reused = pool.take((1 << 20) - 8)
    assert address_of(reused) == big_address and reused.nbytes == (1 << 20) - 8


def test_samples_kept_by_the_user_stay_intact_while_later_replies_arrive(client, table_name):
    fields = {"id": (np.int64, ()), "frame": (np.uint8, (128, 128))}  # 16 KiB per item
    client.create_table(table_name, fields, 64)
    ids = np.arange(64)
    frames = (ids[:, None, None] * 7 + np.arange(128)[None, :, None]).astype(np.uint8)
    frames = np.broadcast_to(frames, (64, 128, 128)).copy()
    client.insert(table_name, {"id": ids, "frame": frames})
    kept = [client.sample(table_name, 16) for _ in range(30)]  # 256 KiB payloads
    # Only a column kept (a view); the Sample object itself is gone.
    kept_columns = [(s.data["id"].copy(), s.data["frame"])
                    for s in (client.sample(table_name, 16) for _ in range(10))]
    for _ in range(30):  # replies that would land in a reused array if one were free
        client.sample(table_name, 16)
    for sample in kept:
        np.testing.assert_array_equal(sample.data["frame"], frames[sample.data["id"]])
    for ids_kept, column in kept_columns:
        np.testing.assert_array_equal(column, frames[ids_kept])
