"""Memory sequences: trajectories cut into ``sequence_length`` pieces padded at the end, as
mlagents-learn 1.1.0 lays them out in its update buffer (``buffer.py``
``AgentBufferField.get_batch(sequential=True)`` through ``resequence_and_append``; its docstring
says the pads go first, its code puts them last). Sequence k of a padded trajectory starts at
row k·L; padded rows are masked out of every loss (``losses.masked_mean``). Torch-free.
"""
from __future__ import annotations

import numpy as np


def padded_length(length: int, sequence_length: int) -> int:
    """Rows a trajectory of ``length`` steps takes once padded to whole sequences."""
    return -(-int(length) // sequence_length) * sequence_length


def pad_sequences(rows: np.ndarray, sequence_length: int, value: float = 0) -> np.ndarray:
    """``rows`` [T, ...] with ``value`` rows appended up to a multiple of ``sequence_length``."""
    rows = np.asarray(rows)
    missing = padded_length(len(rows), sequence_length) - len(rows)
    if not missing:
        return rows
    pad = np.full((missing, *rows.shape[1:]), value, dtype=rows.dtype)
    return np.concatenate([rows, pad])


def sequence_rows(sequences: np.ndarray, sequence_length: int) -> np.ndarray:
    """The row indices of these sequence indices, each sequence's L rows in order."""
    sequences = np.asarray(sequences, np.int64)
    return (sequences[:, None] * sequence_length + np.arange(sequence_length)).reshape(-1)


def pad_trajectories(rows: np.ndarray, lengths: list[int], sequence_length: int,
                     value: float = 0) -> np.ndarray:
    """Rows of several trajectories one after the other ([sum(lengths), ...]) with each
    trajectory padded to whole sequences (``pad_sequences``); unchanged when L is 1."""
    if sequence_length == 1:
        return np.asarray(rows)
    starts = np.cumsum([0] + list(lengths))
    return np.concatenate([pad_sequences(rows[starts[i]:starts[i + 1]], sequence_length, value)
                           for i in range(len(lengths))])
