"""Memory sequences in a replay ring (recurrent policies, ``network_settings.memory``).

With ``sequence_length`` L > 1 rows also hold the actor memory and the critic memory each step
started from and a loss mask (0 on rows that pad a sequence), and are written and sampled in whole
sequences of L rows, as mlagents-learn 1.1.0's ``AgentBuffer.sample_mini_batch(batch_size,
sequence_length)``: the capacity is rounded up to a multiple of L (``whole_sequence_capacity``),
every write is a multiple of L rows (``trajectories_to_transitions`` pads each trajectory), so
sequence k always starts at row k·L, and a sample is ``batch_size // L`` random sequence starts,
each with its L rows in order (``draw_sequences``). A sequence with a torn row is redrawn whole
(``spread_over_sequences``). Prioritised sampling is per row, so the buffer refuses it with
sequences. The functions here only compute; the buffer calls them under its lock.
"""
from __future__ import annotations

import numpy as np


def whole_sequence_capacity(capacity: int, sequence_length: int) -> int:
    """``capacity`` rounded up to a multiple of ``sequence_length``."""
    return -(-int(capacity) // sequence_length) * sequence_length


def draw_sequences(rng: np.random.Generator, size: int, sequence_length: int,
                   batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``max(batch_size // L, 1)`` random whole sequences among the first ``size`` rows,
    each sequence's L rows in order, and their (unit) weights."""
    L = sequence_length
    starts = rng.integers(0, size // L, max(batch_size // L, 1)) * L
    idx = (starts[:, None] + np.arange(L)).reshape(-1)
    return idx, np.ones(len(idx), np.float32)


def spread_over_sequences(bad: np.ndarray, sequence_length: int) -> np.ndarray:
    """[len(bad)] bool: every row of a drawn sequence that holds a ``bad`` row."""
    L = sequence_length
    return np.repeat(bad.reshape(-1, L).any(axis=1), L)


def newest_real_rows(loss_mask: np.ndarray, pos: int, size: int, capacity: int,
                     n: int) -> np.ndarray:
    """Ring rows of the ``n`` newest rows that are not padding (loss mask > 0), oldest first;
    ``pos`` is the ring's cursor and ``size`` its filled rows."""
    newest_first = (pos - 1 - np.arange(size)) % capacity
    real = newest_first[loss_mask[newest_first] > 0][:int(n)]
    return real[::-1]
