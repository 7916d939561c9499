"""replayd.torch: batches as tensors sharing the received memory, ReplayDataset with a
DataLoader, priority updates from tensors, and the CUDA path where a GPU exists."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import replayd

torch = pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch, "
                                             "installed by scripts/setup-deps)")
import replayd.torch as rt  # noqa: E402

FIELDS = {"obs": (np.float32, 4), "u16": (np.uint16, ()), "u32": (np.uint32, 2),
          "u64": (np.uint64, ()), "flag": (np.bool_, ())}


@pytest.fixture
def table(client, table_name):
    client.create_table(table_name, FIELDS, 1000, sampler="prioritized", priority_exponent=1.0)
    n = 50
    data = {"obs": np.arange(n * 4, dtype=np.float32).reshape(n, 4),
            "u16": np.full(n, 65535, np.uint16), "u32": np.full((n, 2), 2**32 - 1, np.uint32),
            "u64": np.arange(n, dtype=np.uint64) + np.uint64(2**63),
            "flag": np.arange(n) % 2 == 0}
    keys = client.insert(table_name, data)
    return table_name, {int(k): i for i, k in enumerate(keys)}, data


def test_batch_tensors_share_memory_with_the_received_arrays(client, table):
    name, row_of, data = table
    sample = client.sample(name, 32)
    batch = rt.as_tensors(sample)
    for field in ("obs", "flag", "u64"):
        assert batch[field].data_ptr() == sample.data[field].ctypes.data, field
    assert batch["keys"].data_ptr() == sample.keys.ctypes.data
    assert batch["keys"].dtype == torch.int64 and batch["u64"].dtype == torch.int64
    assert batch["u16"].dtype == torch.int32 and batch["u32"].dtype == torch.int64
    assert batch["weights"].dtype == torch.float32
    assert batch["times_sampled"].dtype == torch.int64
    rows = [row_of[int(k)] for k in sample.keys]
    np.testing.assert_array_equal(batch["obs"].numpy(), data["obs"][rows])
    assert batch["u16"].tolist() == [65535] * 32
    assert batch["u32"].flatten().tolist() == [2**32 - 1] * 64
    assert (batch["u64"].numpy().view(np.uint64) == data["u64"][rows]).all()


def test_dataset_through_a_dataloader_yields_batch_dicts(client, table):
    name, row_of, data = table
    dataset = rt.ReplayDataset(client, name, 16, num_batches=3)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    batches = list(loader)
    assert len(batches) == 3 and dataset.batches == 3
    for batch in batches:
        assert set(batch) == set(FIELDS) | set(rt.RESERVED_NAMES)
        assert batch["obs"].shape == (16, 4) and batch["obs"].device.type == "cpu"
        rows = [row_of[int(k)] for k in batch["keys"].numpy().view(np.uint64)]
        np.testing.assert_array_equal(batch["obs"].numpy(), data["obs"][rows])


def test_a_dataset_whose_batches_are_dropped_gathers_each_into_the_same_memory(server,
                                                                               table_name):
    """Over the plane, a batch is gathered when taken: once the consumer has dropped a
    batch, the dataset holds it no longer either, and the next one reuses its memory.
    (A ``for batch in dataset`` loop still holds the previous batch while the next is
    gathered: two blocks in turn.)"""
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, {"frame": ("uint8", (64, 64))}, 100)
        c.insert(table_name, {"frame": np.zeros((100, 64, 64), np.uint8)})
        assert c.plane_table(table_name) is not None
        dataset = rt.ReplayDataset(c, table_name, 32, num_batches=6)
        batches = iter(dataset)
        addresses = [next(batches)["frame"].data_ptr() for _ in range(6)]
    assert len(addresses) == 6 and len(set(addresses)) == 1


def test_a_view_kept_of_a_dropped_batch_keeps_its_values_while_later_batches_come(server,
                                                                                table_name):
    """A pooled block is reused only when nothing refers to it: a view of one tensor
    (not the tensor, not the dict) is enough to keep the batch's memory out of the pool."""
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, {"frame": ("uint8", (64, 64))}, 100)
        c.insert(table_name, {"frame": np.repeat(np.arange(100, dtype=np.uint8), 64 * 64)
                              .reshape(100, 64, 64)})
        assert c.plane_table(table_name) is not None
        batches = iter(rt.ReplayDataset(c, table_name, 32, num_batches=8))
        batch = next(batches)
        kept = batch["frame"][:, 0]  # a view: the tensor and the dict are dropped
        expected = kept.clone()
        del batch
        for later in batches:
            assert later["frame"].data_ptr() != kept.data_ptr()
        assert torch.equal(kept, expected)


def test_dataloader_workers_each_sample_on_their_own_connection(client, table):
    name, _, _ = table
    dataset = rt.ReplayDataset(client, name, 8, num_batches=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    batches = list(loader)
    assert len(batches) == 4  # 2 per worker
    assert all(b["obs"].shape == (8, 4) for b in batches)


def test_update_priorities_takes_tensors(client, table):
    name, row_of, _ = table
    keys = torch.tensor(sorted(row_of), dtype=torch.int64)  # as batches give them
    priorities = torch.zeros(len(keys))
    priorities[7] = 1.0
    dataset = rt.ReplayDataset(client, name, 64)
    assert dataset.update_priorities(keys, priorities) == 0
    sample = client.sample(name, 64)
    assert set(sample.keys.tolist()) == {int(keys[7])}


def test_a_field_named_like_a_batch_entry_is_refused(client, table_name):
    client.create_table(table_name, {"weights": (np.float32, ())}, 10)
    client.insert(table_name, {"weights": np.ones(3, np.float32)})
    with pytest.raises(replayd.InvalidArgument, match="'weights'"):
        rt.as_tensors(client.sample(table_name, 2))


def test_importing_the_client_does_not_import_torch():
    code = ("import sys, replayd, replayd.testing, replayd.cpprb, replayd.cli\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device here: the pinned-buffer, side-stream path runs "
                           "only where a GPU exists")
def test_cuda_batches_arrive_on_the_device_with_the_sampled_values(client, table):
    name, row_of, data = table
    dataset = rt.ReplayDataset(client, name, 32, device="cuda", num_batches=20)
    count = 0
    for batch in dataset:
        assert batch["obs"].device.type == "cuda"
        keys = batch["keys"].cpu().numpy().view(np.uint64)
        rows = [row_of[int(k)] for k in keys]
        np.testing.assert_array_equal(batch["obs"].cpu().numpy(), data["obs"][rows])
        assert batch["u16"].cpu().tolist() == [65535] * 32
        dataset.update_priorities(batch["keys"], batch["weights"] + 1)
        count += 1
    assert count == 20


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has a CUDA device")
def test_a_cuda_device_without_one_is_refused_at_construction_saying_why(client, table):
    name, _, _ = table
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(replayd.InvalidArgument,
                           match=r"sees no CUDA device .*torch.cuda.is_available\(\) is False"):
            rt.ReplayDataset(client, name, 32, device=device)
    dataset = rt.ReplayDataset(client, name, 32, device="cpu", num_batches=1)
    assert next(iter(dataset))["obs"].device.type == "cpu"
