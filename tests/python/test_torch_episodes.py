"""replayd.torch on episodic tables: ReplayDataset yielding (B, T, ...) sequence tensors with
their mask, and n-step batches, through a DataLoader."""
from __future__ import annotations

import numpy as np
import pytest

import replayd

torch = pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch, "
                                             "installed by scripts/setup-deps)")
import replayd.torch as rt  # noqa: E402

FIELDS = {"obs": (np.float32, (2,)), "act": (np.uint32, ()), "rew": (np.float32, ()),
          "next_obs": (np.float32, (2,))}
LENGTHS = [4, 6, 3]  # episode e: LENGTHS[e] steps, terminated


@pytest.fixture
def episodic(client, table_name):
    client.create_table(table_name, FIELDS, 100, episodic=True, seed=1)
    with client.episode_writer(table_name, envs=len(LENGTHS)) as writer:
        for e, length in enumerate(LENGTHS):
            for p in range(length):
                writer.append(env=e, obs=np.array([e, p], np.float32), act=np.uint32(p),
                              rew=np.float32(1), next_obs=np.array([e, p + 1], np.float32))
            writer.end_episode(env=e)
    return table_name


def check_sequence_batch(batch, size: int, length: int, burn_in: int) -> None:
    steps = burn_in + length
    assert batch["obs"].shape == (size, steps, 2) and batch["mask"].shape == (size, steps)
    assert batch["mask"].dtype == torch.uint8 and batch["act"].dtype == torch.int64
    assert batch["keys"].shape == (size,) and batch["weights"].dtype == torch.float32
    for row in range(size):
        mask, obs = batch["mask"][row], batch["obs"][row]
        episode = int(obs[burn_in, 0])
        start = int(obs[burn_in, 1])
        for t in range(steps):
            position = start - burn_in + t
            if 0 <= position < LENGTHS[episode]:
                assert mask[t] == 1 and obs[t].tolist() == [episode, position]
                assert int(batch["act"][row, t]) == position
            else:
                assert mask[t] == 0 and obs[t].tolist() == [0, 0]


def test_a_sequence_dataset_yields_sequence_tensors_and_their_mask(client, episodic):
    dataset = rt.ReplayDataset(client, episodic, 5, sequence_length=3, burn_in=2, pad=True,
                               num_batches=4)
    batches = list(torch.utils.data.DataLoader(dataset, batch_size=None))
    assert len(batches) == 4
    for batch in batches:
        assert set(batch) == set(FIELDS) | set(rt.RESERVED_NAMES) | {"mask"}
        check_sequence_batch(batch, 5, 3, 2)


def test_sequence_datasets_pickle_into_dataloader_workers(client, episodic):
    dataset = rt.ReplayDataset(client, episodic, 3, sequence_length=2, stride=2,
                               num_batches=2)
    batches = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2))
    assert len(batches) == 4
    for batch in batches:
        check_sequence_batch(batch, 3, 2, 0)
        assert (batch["obs"][:, 0, 1] % 2 == 0).all()  # starts at multiples of the stride


def test_an_nstep_dataset_yields_returns_discounts_and_bootstraps(client, episodic):
    dataset = rt.ReplayDataset(client, episodic, 16, nstep=3, gamma=0.5, num_batches=3)
    for batch in dataset:
        assert "mask" not in batch
        assert batch["discount"].dtype == batch["rew"].dtype == torch.float32  # the reward's
        assert batch["steps"].dtype == torch.int64
        for row in range(16):
            episode, position = (int(v) for v in batch["obs"][row])
            h = min(3, LENGTHS[episode] - position)
            assert int(batch["steps"][row]) == h
            assert float(batch["rew"][row]) == pytest.approx(sum(0.5 ** i for i in range(h)))
            assert batch["next_obs"][row].tolist() == [episode, position + h]
            terminal = position + h == LENGTHS[episode]
            assert float(batch["discount"][row]) == pytest.approx(0 if terminal else 0.5 ** h)
    assert dataset.batches == 3


def test_sequence_batches_refuse_a_field_named_mask(client, table_name):
    client.create_table(table_name, {"mask": (np.float32, ()), "rew": (np.float32, ()),
                                     "next_obs": (np.float32, ())}, 10, episodic=True)
    with client.episode_writer(table_name) as writer:
        for _ in range(3):
            writer.append(mask=np.float32(1), rew=np.float32(0), next_obs=np.float32(0))
    with pytest.raises(replayd.InvalidArgument, match="field 'mask'"):
        next(iter(rt.ReplayDataset(client, table_name, 2, sequence_length=2)))
    # An n-step batch has no mask entry: the field keeps its name.
    batch = next(iter(rt.ReplayDataset(client, table_name, 2, nstep=1)))
    assert batch["mask"].tolist() == [1.0, 1.0]
    with pytest.raises(replayd.InvalidArgument, match="not both"):
        rt.ReplayDataset(client, table_name, 2, nstep=1, sequence_length=2)
