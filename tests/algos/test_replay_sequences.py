"""The replay with memory sequences (``sequence_length`` L, ``memory_dim``): capacity in whole
sequences, writes of whole sequences only, samples of whole sequences through the ring's wrap,
checkpoints, padding skipped by ``newest_obs``, a sequence with a torn row never sampled, and two
spawned writers with a sampling parent on the shared buffer. Kept free of torch so that the
spawned writers start fast."""
from __future__ import annotations

import multiprocessing as mp
from types import SimpleNamespace

import numpy as np
import pytest

from unity_rl.experience import TransitionBatch
from unity_rl.replay import ReplayBuffer, SharedReplayBuffer

L, M, OBS = 4, 12, 5


def _sequence_rows(n_seq, start=0):
    """``n_seq`` sequences whose rows say where they belong: reward = sequence id, obs[:, 0] =
    row within it, memories = sequence id everywhere."""
    n = n_seq * L
    seq = start + np.arange(n) // L
    obs = np.zeros((n, OBS), np.float32)
    obs[:, 0] = np.arange(n) % L
    return SimpleNamespace(obs=obs, actions=np.zeros((n, 4), np.float32), rewards=seq.astype(np.float32),
                           next_obs=obs.copy(), terminated=np.zeros(n, np.float32),
                           action_masks=np.ones((n, 5), np.uint8),
                           memories=np.repeat(seq[:, None], M, 1).astype(np.float32),
                           critic_memories=np.repeat(seq[:, None], M, 1).astype(np.float32),
                           loss_mask=np.ones(n, np.uint8))


def _as_batch(rows):
    return TransitionBatch(**vars(rows))


def _assert_whole_sequences(batch, n_seq):
    assert len(batch.rewards) == n_seq * L
    seq = batch.rewards.reshape(n_seq, L)
    assert (seq == seq[:, :1]).all()                                  # one sequence each
    np.testing.assert_array_equal(batch.obs[:, 0].reshape(n_seq, L), np.tile(np.arange(L), (n_seq, 1)))
    np.testing.assert_array_equal(batch.memories[:, 0], batch.rewards)


@pytest.mark.parametrize("shared", [False, True])
def test_replay_keeps_sequences_whole_through_wraparound(shared):
    kind = SharedReplayBuffer if shared else ReplayBuffer
    buf = kind(30, OBS, 4, seed=0, mask_dim=5, memory_dim=M, sequence_length=L)
    try:
        assert buf.capacity == 32                                      # rounded up to whole L
        with pytest.raises(ValueError, match="whole sequences"):
            buf.add(_as_batch(_sequence_rows(1))._replace(**{
                k: v[:3] for k, v in vars(_sequence_rows(1)).items()}))
        for k in range(5):                                             # 15 sequences into 8
            buf.add(_as_batch(_sequence_rows(3, start=3 * k)))
        batch = buf.sample(16)                                         # 16 // L = 4 sequences
        _assert_whole_sequences(batch, 4)
        assert set(batch.rewards.astype(int)) <= set(range(7, 15))     # the newest 8 survive
        state = buf.state_dict()
        copy = ReplayBuffer(30, OBS, 4, seed=1, mask_dim=5, memory_dim=M, sequence_length=L)
        copy.load_state_dict(state)
        _assert_whole_sequences(copy.sample(40), 10)
    finally:
        buf.close() if shared else None
        if shared:
            buf.unlink()


def test_newest_obs_skips_padding():
    buf = ReplayBuffer(64, OBS, 4, seed=0, memory_dim=M, sequence_length=L, mask_dim=5)
    rows = _sequence_rows(2)
    rows.loss_mask[5:] = 0
    rows.obs[:, 1] = np.arange(8)
    buf.add(_as_batch(rows))
    np.testing.assert_array_equal(buf.newest_obs(3)[:, 1], [2, 3, 4])


def _writer(buf, start, n_seq):
    for k in range(n_seq):
        buf.add(_as_batch(_sequence_rows(1, start=start + k)))
    buf.close()


@pytest.mark.slow
def test_shared_replay_two_spawned_writers_parent_samples_whole_sequences():
    ctx = mp.get_context("spawn")
    with SharedReplayBuffer(400, OBS, 4, seed=5, ctx=ctx, mask_dim=5, memory_dim=M,
                            sequence_length=L) as buf:
        writers = [ctx.Process(target=_writer, args=(buf, 1 + 50 * k, 50)) for k in range(2)]
        for w in writers:
            w.start()
        while any(w.is_alive() for w in writers):  # sample while they write
            if len(buf) >= 2 * L:
                _assert_whole_sequences(buf.sample(8 * L), 8)
        for w in writers:
            w.join(timeout=30)
            assert w.exitcode == 0
        assert len(buf) == 100 * L
        _assert_whole_sequences(buf.sample(64 * L), 64)


def test_a_sequence_with_a_torn_row_is_never_sampled():
    """A row a killed writer left torn (invalid) takes its whole sequence out of sampling."""
    buf = ReplayBuffer(64, OBS, 4, seed=0, mask_dim=5, memory_dim=M, sequence_length=L)
    buf.add(_as_batch(_sequence_rows(4)))
    buf._valid[2 * L + 1] = 0                      # what _repair leaves after a dead writer
    batch = buf.sample(400 * L)
    _assert_whole_sequences(batch, 400)
    assert set(batch.rewards.astype(int)) == {0, 1, 3}
