"""Replay buffers for off-policy learners: a numpy ring, optionally prioritised, optionally shared.

- ``ReplayBuffer``: a ring of ``capacity`` transitions in private numpy arrays.  With
  ``prioritized=True`` it samples row i with probability P(i) = p_i^α / Σ p^α and returns
  importance-sampling weights (N·P(i))^−β / max_j (N·P(j))^−β (Schaul et al. 2015,
  arXiv:1511.05952, proportional variant, stratified sampling over a sum tree).
- ``SharedReplayBuffer``: the same ring in one ``multiprocessing.shared_memory`` segment guarded by
  one lock, so that several actor processes write and a learner process samples at the same time
  (Ape-X, Horgan et al. 2018).  It pickles by segment name plus lock handle: pass it to child
  processes as a ``Process`` argument (spawn context); the lock cannot travel any other way.

Sampling and priority updates race with writers by design (as in Ape-X): a row sampled now may
be overwritten before its priority comes back; the late priority then lands on the newer row.
Every read and write of rows happens under the lock, so no row is ever seen half-written.

Memory: each row takes 4·(2·obs_dim + act_dim + 2) bytes (observation stored twice so that a
truncated episode's final observation fits), plus 16 bytes per leaf of the two priority trees
(rounded up to a power of two) when prioritised.  ``state_dict()`` copies the filled rows: the
same cost again, once, in the checkpoint.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import threading
from multiprocessing import shared_memory
from typing import Any, NamedTuple

import numpy as np

from unity_rl.algos.types import TransitionBatch

_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated")


class ReplaySample(NamedTuple):
    """A sampled batch with where it came from (for priority updates) and its IS weights."""

    batch: TransitionBatch
    """The transitions."""
    indices: np.ndarray
    """[n] int64 ring rows, for ``update_priorities``."""
    weights: np.ndarray
    """[n] float32 importance-sampling weights (all ones for uniform sampling)."""


class ReplayBuffer:
    """Ring buffer of transitions; uniform or prioritised sampling; one process, thread-safe.

    Sampling is with replacement, over the filled rows only.  Priorities are given as raw
    |TD error| (``add(..., priorities=)``, ``update_priorities``); the buffer stores
    (|δ| + eps)^α.  Rows added without priorities get the largest priority seen so far.
    Checkpoint it with ``state_dict()`` (the buffer itself does not pickle: it holds a lock).
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, seed: int | None = 0, *,
                 prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.obs_dim = int(obs_dim)
        self.act_dim = int(act_dim)
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.seed = seed
        self._tree_size = 1 << max(0, math.ceil(math.log2(self.capacity)))
        """Leaves of the priority trees: the first power of two >= capacity."""
        self._depth = self._tree_size.bit_length() - 1
        self.rng = np.random.default_rng(seed)
        self._lock: Any = threading.Lock()
        self._bind(self._allocate())
        self._init_contents()

    # -- memory layout ---------------------------------------------------------------------
    def _layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Every array the buffer needs, name -> (shape, dtype)."""
        c, f32 = self.capacity, np.dtype(np.float32)
        layout = {
            "obs": ((c, self.obs_dim), f32),
            "actions": ((c, self.act_dim), f32),
            "rewards": ((c,), f32),
            "next_obs": ((c, self.obs_dim), f32),
            "terminated": ((c,), f32),
            "cursor": ((2,), np.dtype(np.int64)),  # [next row to write, filled rows]
        }
        if self.prioritized:
            # 1-indexed binary trees: root at 1, leaves at [T, 2T).
            layout["sum_tree"] = ((2 * self._tree_size,), np.dtype(np.float64))
            layout["min_tree"] = ((2 * self._tree_size,), np.dtype(np.float64))
            layout["max_priority"] = ((1,), np.dtype(np.float64))
        return layout

    def _allocate(self) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, dtype) for name, (shape, dtype) in self._layout().items()}

    def _bind(self, arrays: dict[str, np.ndarray]) -> None:
        self._arrays = arrays
        self._cursor = arrays["cursor"]

    def _init_contents(self) -> None:
        self._cursor[:] = 0
        if self.prioritized:
            self._arrays["sum_tree"][:] = 0.0
            self._arrays["min_tree"][:] = np.inf
            self._arrays["max_priority"][0] = 1.0

    # -- public API -------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._cursor[1])

    def add(self, batch: TransitionBatch, priorities: np.ndarray | None = None) -> None:
        """Appends rows, overwriting the oldest once full.

        ``priorities``: [n] raw |TD error| computed by the actor (prioritised buffers only);
        None gives the new rows the maximum priority seen so far.
        """
        n = len(batch.rewards)
        if n == 0:
            return
        rows = {name: np.asarray(getattr(batch, name)) for name in _FIELDS}
        if priorities is not None:
            priorities = np.asarray(priorities, np.float64).reshape(n)
        if n > self.capacity:  # only the newest `capacity` rows survive
            rows = {k: v[-self.capacity:] for k, v in rows.items()}
            priorities = None if priorities is None else priorities[-self.capacity:]
            n = self.capacity
        with self._lock:
            pos, size = int(self._cursor[0]), int(self._cursor[1])
            idx = (pos + np.arange(n)) % self.capacity
            for name in _FIELDS:
                self._arrays[name][idx] = rows[name]
            if self.prioritized:
                if priorities is None:
                    leaf = np.full(n, self._arrays["max_priority"][0] ** self.alpha)
                else:
                    leaf = self._leaf_priorities(priorities)
                self._set_leaves(idx, leaf)
            self._cursor[0] = (pos + n) % self.capacity
            self._cursor[1] = min(size + n, self.capacity)

    def sample(self, batch_size: int) -> TransitionBatch:
        """``batch_size`` transitions (proportional to priority when prioritised)."""
        return self.sample_indexed(batch_size).batch

    def sample_indexed(self, batch_size: int, beta: float = 0.4) -> ReplaySample:
        """Transitions with their rows and IS weights (exponent ``beta``; ones when uniform)."""
        with self._lock:
            size = int(self._cursor[1])
            if size == 0:
                raise ValueError("cannot sample from an empty replay buffer")
            if self.prioritized:
                idx, weights = self._sample_prioritized(batch_size, beta, size)
            else:
                idx = self.rng.integers(0, size, batch_size)
                weights = np.ones(batch_size, np.float32)
            batch = TransitionBatch(*(self._arrays[name][idx] for name in _FIELDS))
        return ReplaySample(batch, idx.astype(np.int64), weights)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of rows ``indices`` from raw |TD errors|; a no-op when uniform."""
        if not self.prioritized:
            return
        indices = np.asarray(indices, np.int64)
        priorities = np.asarray(priorities, np.float64).reshape(indices.shape)
        if indices.size == 0:
            return
        with self._lock:
            self._set_leaves(indices, self._leaf_priorities(priorities))

    # -- checkpointing ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Filled rows, cursor, priorities and sampler RNG (numpy; see the module doc for size)."""
        with self._lock:
            size = int(self._cursor[1])
            state = {
                "capacity": self.capacity, "obs_dim": self.obs_dim, "act_dim": self.act_dim,
                "prioritized": self.prioritized,
                "pos": int(self._cursor[0]), "size": size,
                "rng": self.rng.bit_generator.state,
            }
            for name in _FIELDS:
                state[name] = self._arrays[name][:size].copy()
            if self.prioritized:
                leaves = self._arrays["sum_tree"][self._tree_size:self._tree_size + size]
                state["priorities"] = leaves.copy()
                state["max_priority"] = float(self._arrays["max_priority"][0])
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restores a ``state_dict()`` taken from a buffer of the same shape and kind."""
        for key in ("capacity", "obs_dim", "act_dim", "prioritized"):
            if state[key] != getattr(self, key):
                raise ValueError(f"replay state has {key}={state[key]!r}, "
                                 f"this buffer has {getattr(self, key)!r}")
        size = int(state["size"])
        with self._lock:
            self._init_contents()
            for name in _FIELDS:
                self._arrays[name][:size] = state[name]
            if self.prioritized:
                self._set_leaves(np.arange(size), np.asarray(state["priorities"], np.float64))
                self._arrays["max_priority"][0] = state["max_priority"]
            self._cursor[0] = int(state["pos"])
            self._cursor[1] = size
        self.rng.bit_generator.state = state["rng"]

    # -- priority trees -------------------------------------------------------------------------
    def _leaf_priorities(self, td_abs: np.ndarray) -> np.ndarray:
        """(|δ| + eps)^α, and tracks the largest |δ| + eps for rows added without a priority."""
        p = np.abs(td_abs) + self.eps
        self._arrays["max_priority"][0] = max(self._arrays["max_priority"][0], float(p.max()))
        return p**self.alpha

    def _set_leaves(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Writes leaf values and recomputes their ancestors level by level (vectorised)."""
        sum_tree, min_tree = self._arrays["sum_tree"], self._arrays["min_tree"]
        node = rows + self._tree_size
        sum_tree[node] = values  # with repeated rows, the last value wins in both trees
        min_tree[node] = values
        for _ in range(self._depth):
            node = np.unique(node // 2)
            left, right = 2 * node, 2 * node + 1
            sum_tree[node] = sum_tree[left] + sum_tree[right]
            min_tree[node] = np.minimum(min_tree[left], min_tree[right])

    def _sample_prioritized(self, batch_size: int, beta: float,
                            size: int) -> tuple[np.ndarray, np.ndarray]:
        sum_tree = self._arrays["sum_tree"]
        total = sum_tree[1]
        # Stratified: one uniform draw in each of batch_size equal slices of the total mass.
        mass = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        node = np.ones(batch_size, np.int64)
        for _ in range(self._depth):  # descend: go right when the mass exceeds the left subtree
            left = sum_tree[2 * node]
            go_right = mass >= left
            mass = np.where(go_right, mass - left, mass)
            node = 2 * node + go_right
        # Rounding can walk past the last filled row into empty leaves: clamp back.
        idx = np.minimum(node - self._tree_size, size - 1)
        prob = sum_tree[idx + self._tree_size] / total
        min_prob = self._arrays["min_tree"][1] / total
        weights = (prob / min_prob) ** (-beta)  # = (N·P(i))^-β / max_j (N·P(j))^-β
        return idx, weights.astype(np.float32)


class SharedReplayBuffer(ReplayBuffer):
    """``ReplayBuffer`` in shared memory: many writer processes, one (or more) samplers.

    The creating process owns the segment: it must call ``close()`` then ``unlink()`` (or use the
    buffer as a context manager) when every user is done.  Copies received by child processes
    attach to the same segment and only ``close()``.  Each copy samples with its own RNG
    (seeded from ``seed`` and the process id), so two samplers do not draw the same rows.

    Pickling works only while spawning a process (a ``multiprocessing`` lock cannot travel
    through queues or to unrelated processes such as Ray workers).
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, seed: int | None = 0, *,
                 prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6,
                 ctx: Any = None):
        self._shm: shared_memory.SharedMemory | None = None
        self._owner = True
        self._ctx = ctx if ctx is not None else mp.get_context("spawn")
        super().__init__(capacity, obs_dim, act_dim, seed, prioritized=prioritized,
                         alpha=alpha, eps=eps)
        self._lock = self._ctx.Lock()

    @property
    def name(self) -> str:
        """The shared-memory segment's name."""
        assert self._shm is not None
        return self._shm.name

    def _offsets(self) -> tuple[dict[str, tuple[int, tuple[int, ...], np.dtype]], int]:
        offsets, total = {}, 0
        for name, (shape, dtype) in self._layout().items():
            offsets[name] = (total, shape, dtype)
            nbytes = int(np.prod(shape)) * dtype.itemsize
            total += (nbytes + 63) // 64 * 64  # keep every array 64-byte aligned
        return offsets, total

    def _views(self) -> dict[str, np.ndarray]:
        assert self._shm is not None
        offsets, _ = self._offsets()
        return {name: np.ndarray(shape, dtype, buffer=self._shm.buf, offset=off)
                for name, (off, shape, dtype) in offsets.items()}

    def _allocate(self) -> dict[str, np.ndarray]:
        _, total = self._offsets()
        self._shm = shared_memory.SharedMemory(create=True, size=max(total, 1))
        return self._views()

    def __getstate__(self) -> dict:
        if self._shm is None:
            raise RuntimeError("cannot pickle a closed SharedReplayBuffer")
        return {"params": (self.capacity, self.obs_dim, self.act_dim, self.prioritized,
                           self.alpha, self.eps, self.seed),
                "name": self._shm.name, "lock": self._lock}

    def __setstate__(self, state: dict) -> None:
        (self.capacity, self.obs_dim, self.act_dim, self.prioritized,
         self.alpha, self.eps, self.seed) = state["params"]
        self._tree_size = 1 << max(0, math.ceil(math.log2(self.capacity)))
        self._depth = self._tree_size.bit_length() - 1
        self.rng = np.random.default_rng(None if self.seed is None else [self.seed, os.getpid()])
        self._lock = state["lock"]
        self._ctx = None
        self._owner = False
        # Attaching registers the name with the resource tracker, which spawned children share
        # with their parent, so the segment is not unlinked when a child exits.
        self._shm = shared_memory.SharedMemory(name=state["name"])
        self._bind(self._views())

    def close(self) -> None:
        """Detaches this process from the segment (every user calls it once)."""
        if self._shm is None:
            return
        self._arrays, self._cursor = {}, None  # drop views before closing the mapping
        self._shm.close()

    def unlink(self) -> None:
        """Destroys the segment (the creator only, after every user is done)."""
        if not self._owner:
            raise RuntimeError("only the process that created a SharedReplayBuffer may unlink it")
        if self._shm is not None:
            self._shm.unlink()
            self._shm = None

    def __enter__(self) -> SharedReplayBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._owner:
            self.unlink()
