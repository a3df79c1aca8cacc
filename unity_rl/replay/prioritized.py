"""Prioritised experience replay's arithmetic (Schaul et al. 2015, arXiv:1511.05952, the
proportional variant): the sum and min trees, stratified sampling with importance-sampling
weights, and the annealed IS exponent β.

A tree pair is two float64 arrays of 2·T nodes (T = ``layout.tree_leaves(capacity)``, a power of
two), 1-indexed: the root at 1, the leaves at [T, 2T). A leaf holds a row's priority
p_i = (|δ_i| + eps)^α (0 in the sum tree and +inf in the min tree while the row is empty or torn);
an inner node holds the sum (min) of its children. The functions here only compute: they take the
arrays (private or views of shared memory) and never lock; the buffer calls them under its lock.
"""
from __future__ import annotations

import numpy as np


def per_beta(beta0: float, step: int, max_steps: int) -> float:
    """PER importance-sampling exponent annealed linearly from ``beta0`` to 1 over the run
    (Schaul et al. 2016, §3.4): ``beta0 + (1 - beta0) · step / max_steps``, clamped to
    [beta0, 1]; ``max_steps <= 0`` gives 1."""
    if max_steps <= 0:
        return 1.0
    frac = min(max(step / max_steps, 0.0), 1.0)
    return float(beta0 + (1.0 - beta0) * frac)


def _leaves_and_depth(sum_tree: np.ndarray) -> tuple[int, int]:
    leaves = len(sum_tree) // 2
    return leaves, leaves.bit_length() - 1


def set_leaves(sum_tree: np.ndarray, min_tree: np.ndarray, rows: np.ndarray,
               values: np.ndarray) -> None:
    """Writes leaf values of ``rows`` and recomputes their ancestors level by level (vectorised).

    Repeated rows are harmless: the last value wins in both trees, and every copy of a
    parent is recomputed from the same children."""
    leaves, depth = _leaves_and_depth(sum_tree)
    node = rows + leaves
    sum_tree[node] = values
    min_tree[node] = values
    for _ in range(depth):
        node >>= 1
        left = node << 1
        right = left + 1
        sum_tree[node] = sum_tree.take(left) + sum_tree.take(right)
        min_tree[node] = np.minimum(min_tree.take(left), min_tree.take(right))


def rebuild_inner_nodes(sum_tree: np.ndarray, min_tree: np.ndarray) -> None:
    """Recomputes every inner node from the leaves (after a writer died mid-update)."""
    width = len(sum_tree) // 2
    while width > 1:
        half = width // 2
        sum_tree[half:width] = sum_tree[width:2 * width:2] + sum_tree[width + 1:2 * width:2]
        min_tree[half:width] = np.minimum(min_tree[width:2 * width:2],
                                          min_tree[width + 1:2 * width:2])
        width = half


def sample_proportional(sum_tree: np.ndarray, min_tree: np.ndarray, rng: np.random.Generator,
                        batch_size: int, beta: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` rows drawn with P(i) = p_i / Σ p over the first ``size`` rows, and their
    IS weights (N·P(i))^−β / max_j (N·P(j))^−β as float32.

    Stratified: one uniform draw in each of ``batch_size`` equal slices of the total mass."""
    leaves, depth = _leaves_and_depth(sum_tree)
    total = sum_tree[1]
    mass = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
    node = np.ones(batch_size, np.int64)
    for _ in range(depth):  # descend: go right when the mass exceeds the left subtree
        node <<= 1
        left = sum_tree.take(node)
        go_right = mass >= left
        mass -= left * go_right
        node += go_right
    # Rounding can walk past the last filled row into empty leaves: clamp back.
    idx = np.minimum(node - leaves, size - 1)
    prob = sum_tree[idx + leaves] / total
    min_prob = min_tree[1] / total
    weights = (prob / min_prob) ** (-beta)  # = (N·P(i))^-β / max_j (N·P(j))^-β
    return idx, weights.astype(np.float32)
