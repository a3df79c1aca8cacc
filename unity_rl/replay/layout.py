"""Storage layout of a replay ring: which arrays a buffer holds, and the control block.

Every replay buffer (private or shared) keeps its rows in the arrays ``ring_layout`` names, so
that the shared-memory buffer can place the very same arrays in one segment
(``segment_offsets``) and the lock-recovery code can read the control block of any buffer.

- Rows: ``stored_fields`` (transition fields; ``action_masks`` when masks are stored; actor and
  critic memories and a loss mask for memory sequences) plus ``valid`` (0: never written, or torn
  by a writer that died) — 4·(2·obs_dim + act_dim + 2) bytes per row (the observation is stored
  twice so that a truncated episode's final observation fits), 1 byte of validity, and with
  memories 8·memory_dim + 1 bytes more.
- Priority trees (prioritised, numpy sampler): ``sum_tree`` and ``min_tree``, 1-indexed binary
  trees with ``tree_leaves(capacity)`` leaves (16 bytes per leaf for the two); with the cpprb
  sampler ``leaves`` (8 bytes per row) plus cpprb's own trees; ``max_priority`` either way.
- Control block ``ctl`` (int64, ``CTL_LEN`` slots at the indices below): the cursor (``POS``,
  ``SIZE``), the dirty record a writer leaves while rows may be torn (``DIRTY``, ``DIRTY_POS``,
  ``DIRTY_N``, ``DIRTY_SIZE``), the pid holding the lock (``HOLDER``) and how many times the lock
  was recovered from a dead holder (``RECOVERIES``).
"""
from __future__ import annotations

import math

import numpy as np

TRANSITION_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated")
MEMORY_FIELDS = ("memories", "critic_memories", "loss_mask")

# Control block (int64) of every buffer: the cursor, then the dirty record and the lock holder.
POS, SIZE, DIRTY, DIRTY_POS, DIRTY_N, DIRTY_SIZE, HOLDER, RECOVERIES = range(8)
CTL_LEN = 8

SEGMENT_ALIGN = 64
"""Every array of a shared segment starts on a multiple of this many bytes."""

Layout = dict[str, tuple[tuple[int, ...], np.dtype]]
"""Array name -> (shape, dtype)."""


def stored_fields(mask_dim: int, memory_dim: int) -> tuple[str, ...]:
    """The ``TransitionBatch`` fields a buffer stores per row."""
    return (TRANSITION_FIELDS + (("action_masks",) if mask_dim else ())
            + (MEMORY_FIELDS if memory_dim else ()))


def tree_leaves(capacity: int) -> int:
    """Leaves of the priority trees: the first power of two >= ``capacity``."""
    return 1 << max(0, math.ceil(math.log2(capacity)))


def ring_layout(capacity: int, obs_dim: int, act_dim: int, mask_dim: int, memory_dim: int, *,
                prioritized: bool, sampler: str) -> Layout:
    """Every array a buffer of this shape needs, name -> (shape, dtype)."""
    c, f32 = capacity, np.dtype(np.float32)
    layout = {
        "obs": ((c, obs_dim), f32),
        "actions": ((c, act_dim), f32),
        "rewards": ((c,), f32),
        "next_obs": ((c, obs_dim), f32),
        "terminated": ((c,), f32),
        **({"action_masks": ((c, mask_dim), np.dtype(np.uint8))} if mask_dim else {}),
        **({"memories": ((c, memory_dim), f32),
            "critic_memories": ((c, memory_dim), f32),
            "loss_mask": ((c,), np.dtype(np.uint8))} if memory_dim else {}),
        "valid": ((c,), np.dtype(np.uint8)),  # 0: never written, or torn by a dead writer
        "ctl": ((CTL_LEN,), np.dtype(np.int64)),
    }
    if prioritized and sampler == "numpy":
        # 1-indexed binary trees: root at 1, leaves at [T, 2T).
        leaves = tree_leaves(capacity)
        layout["sum_tree"] = ((2 * leaves,), np.dtype(np.float64))
        layout["min_tree"] = ((2 * leaves,), np.dtype(np.float64))
    if prioritized:
        layout["max_priority"] = ((1,), np.dtype(np.float64))
    if sampler == "cpprb":
        layout["leaves"] = ((c,), np.dtype(np.float64))  # (|δ|+eps)^α, for state_dict
    return layout


def private_arrays(layout: Layout) -> dict[str, np.ndarray]:
    """Zeroed numpy arrays for ``layout`` (a buffer in this process only)."""
    return {name: np.zeros(shape, dtype) for name, (shape, dtype) in layout.items()}


def segment_offsets(layout: Layout, start: int) -> tuple[dict[str, tuple[int, tuple[int, ...],
                                                                          np.dtype]], int]:
    """Where each array of ``layout`` lies in one segment whose first ``start`` bytes are taken:
    name -> (byte offset, shape, dtype), and the segment's total bytes."""
    offsets, total = {}, start
    for name, (shape, dtype) in layout.items():
        offsets[name] = (total, shape, dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        total += (nbytes + SEGMENT_ALIGN - 1) // SEGMENT_ALIGN * SEGMENT_ALIGN
    return offsets, total
