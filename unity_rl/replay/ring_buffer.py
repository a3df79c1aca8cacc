"""The replay ring buffer of off-policy learners: ``ReplayBuffer`` and the ``ReplaySample`` it draws.

``ReplayBuffer`` keeps a ring of ``capacity`` transitions in private numpy arrays (their layout:
``unity_rl.replay.layout``), and is safe for threads of one process. With ``prioritized=True`` it
samples row i with probability P(i) = p_i^α / Σ p^α and returns importance-sampling weights
(N·P(i))^−β / max_j (N·P(j))^−β (Schaul et al. 2015, arXiv:1511.05952, proportional variant,
stratified sampling over a sum tree: ``unity_rl.replay.prioritized``). With ``sequence_length``
L > 1 and ``memory_dim`` > 0 it stores memory sequences and writes and samples whole sequences of
L rows (``unity_rl.replay.sequences``); prioritised sampling is per row, so it is refused there.

Every read and write of rows happens under the buffer's lock (``_locked``), so no row is ever
seen half-written. Before it touches a row, every mutation writes a *dirty record* (what it is
about to write and the cursor before it) into the control block and publishes the new cursor
only once the rows and priority trees are complete; ``_repair`` undoes what a writer that died
in between left (its rows become invalid and are never sampled until rewritten). In one process
nothing dies holding a thread lock; the shared-memory subclass
(``unity_rl.replay.shared_buffer.SharedReplayBuffer``) swaps the lock for one shared by processes
and calls ``_repair`` when it inherits that lock from a dead holder.

Sampling and priority updates race with writers by design (as in Ape-X): a row sampled now may
be overwritten before its priority comes back; the late priority then lands on the newer row.

Memory: see ``unity_rl.replay.layout`` for the bytes per row. ``state_dict()`` copies the filled
rows: the same cost again, once, in the checkpoint.
"""
from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np

from unity_rl.experience import TransitionBatch
from unity_rl.replay.layout import (DIRTY, DIRTY_N, DIRTY_POS, DIRTY_SIZE, POS, SIZE, Layout,
                                    private_arrays, ring_layout, stored_fields, tree_leaves)
from unity_rl.replay.prioritized import (rebuild_inner_nodes, sample_proportional,
                                         set_leaves)
from unity_rl.replay.sequences import (draw_sequences, newest_real_rows,
                                       spread_over_sequences, whole_sequence_capacity)


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

    ``sampler`` (prioritised only): ``"numpy"`` (default) walks the vectorised sum tree
    (``unity_rl.replay.prioritized``) and draws from ``seed`` (reproducible); ``"cpprb"`` keeps the priorities in cpprb's C++
    segment trees (the optional ``replay`` extra) but draws from cpprb's own unseeded generator,
    so prioritised draws are not reproducible.  Same rows, priorities, weights and
    ``state_dict`` either way.  ``benchmarks/replay_buffers.py`` measured the two within their
    run-to-run spread of each other at 1M rows (results/replay_buffers.json), so the seeded one
    is the default.
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, seed: int | None = 0, *,
                 prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6,
                 sampler: str = "numpy", mask_dim: int = 0, memory_dim: int = 0,
                 sequence_length: int = 1):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if sampler not in ("numpy", "cpprb"):
            raise ValueError(f"sampler must be 'numpy' or 'cpprb', got {sampler!r}")
        self.sequence_length = int(sequence_length)
        """Rows per sequence: writes and samples come in whole sequences (1: single rows)."""
        if self.sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        if self.sequence_length > 1 and prioritized:
            raise ValueError("prioritized replay samples single rows; it cannot sample memory "
                             "sequences (sequence_length > 1)")
        self.capacity = whole_sequence_capacity(capacity, self.sequence_length)
        self.memory_dim = int(memory_dim)
        """Columns of the stored actor and critic memories (0: none stored)."""
        self.obs_dim = int(obs_dim)
        self.act_dim = int(act_dim)
        self.mask_dim = int(mask_dim)
        """Action-mask columns per row (sum of the discrete branches; 0: no masks stored)."""
        self.fields = stored_fields(self.mask_dim, self.memory_dim)
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.seed = seed
        self.sampler = sampler if self.prioritized else "numpy"
        self._tree_size = tree_leaves(self.capacity)
        """Leaves of the priority trees: the first power of two >= capacity."""
        self.rng = np.random.default_rng(seed)
        self._lock: Any = threading.Lock()
        self._cpprb: Any = None
        if self.sampler == "cpprb":
            import cpprb  # noqa: PLC0415 - optional speed-up

            # cpprb holds only the priorities (and a 1-byte dummy column); rows stay here.
            self._cpprb = cpprb.PrioritizedReplayBuffer(
                self.capacity, {"i": {"dtype": np.uint8}}, alpha=self.alpha, eps=self.eps)
            self._dummy = np.zeros(self.capacity, np.uint8)
        self._bind(self._allocate())
        self._init_contents()

    # -- memory layout ---------------------------------------------------------------------
    def _layout(self) -> Layout:
        """Every array the buffer needs, name -> (shape, dtype)."""
        return ring_layout(self.capacity, self.obs_dim, self.act_dim, self.mask_dim,
                           self.memory_dim, prioritized=self.prioritized, sampler=self.sampler)

    def _allocate(self) -> dict[str, np.ndarray]:
        return private_arrays(self._layout())

    def _bind(self, arrays: dict[str, np.ndarray]) -> None:
        self._arrays = arrays
        self._ctl = arrays["ctl"]
        self._valid = arrays["valid"]

    def _init_contents(self) -> None:
        self._ctl[:] = 0
        self._valid[:] = 0
        if self.prioritized:
            self._arrays["max_priority"][0] = 1.0
            if self.sampler == "numpy":
                self._arrays["sum_tree"][:] = 0.0
                self._arrays["min_tree"][:] = np.inf
            else:
                self._arrays["leaves"][:] = 0.0
                self._cpprb.clear()

    # -- locking --------------------------------------------------------------------------------
    class _Held:
        __slots__ = ("buf",)

        def __init__(self, buf: ReplayBuffer):
            self.buf = buf

        def __enter__(self) -> None:
            self.buf._acquire()

        def __exit__(self, *exc: object) -> None:
            self.buf._release()

    def _locked(self) -> ReplayBuffer._Held:
        return ReplayBuffer._Held(self)

    def _acquire(self) -> None:
        self._lock.acquire()

    def _release(self) -> None:
        self._lock.release()

    def _begin_write(self, pos: int, n: int, size: int) -> None:
        """Dirty record: rows [pos, pos+n) (mod capacity) and the priority trees may be torn
        until ``_end_write``; ``size`` is the filled count before the write."""
        ctl = self._ctl
        ctl[DIRTY_POS], ctl[DIRTY_N], ctl[DIRTY_SIZE] = pos, n, size
        ctl[DIRTY] = 1

    def _end_write(self) -> None:
        self._ctl[DIRTY] = 0

    def _repair(self) -> int:
        """Undoes what a writer that died inside ``_begin_write``/``_end_write`` left: its rows
        become invalid (never sampled until rewritten), the cursor goes back to where it was,
        the priority trees are rebuilt from their leaves. Idempotent. Returns the torn rows."""
        ctl = self._ctl
        if not ctl[DIRTY]:
            return 0
        pos, n, size = int(ctl[DIRTY_POS]), int(ctl[DIRTY_N]), int(ctl[DIRTY_SIZE])
        idx = (pos + np.arange(n)) % self.capacity
        self._valid[idx] = 0
        ctl[POS], ctl[SIZE] = pos % self.capacity, size
        if self.prioritized and self.sampler == "numpy":
            self._arrays["sum_tree"][self._tree_size + idx] = 0.0
            self._arrays["min_tree"][self._tree_size + idx] = np.inf
            rebuild_inner_nodes(self._arrays["sum_tree"], self._arrays["min_tree"])
        ctl[DIRTY] = 0
        return n

    # -- public API -------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._ctl[SIZE])

    def add(self, batch: TransitionBatch, priorities: np.ndarray | None = None) -> None:
        """Appends rows, overwriting the oldest once full.

        ``priorities``: [n] raw |TD error| computed by the actor (prioritised buffers only);
        None gives the new rows the maximum priority seen so far.
        """
        n = len(batch.rewards)
        if n == 0:
            return
        if self.mask_dim and batch.action_masks is None:
            batch = batch._replace(action_masks=np.ones((n, self.mask_dim), np.uint8))
        if n % self.sequence_length:
            raise ValueError(f"{n} rows are not whole sequences of {self.sequence_length} "
                             f"(pad each trajectory: trajectories_to_transitions)")
        if self.memory_dim and batch.memories is None:
            raise ValueError("this replay stores memory sequences: the rows need memories, "
                             "critic_memories and loss_mask")
        rows = {name: np.asarray(getattr(batch, name)) for name in self.fields}
        if priorities is not None:
            priorities = np.asarray(priorities, np.float64).reshape(n)
        if n > self.capacity:  # only the newest `capacity` rows survive
            rows = {k: v[-self.capacity:] for k, v in rows.items()}
            priorities = None if priorities is None else priorities[-self.capacity:]
            n = self.capacity
        with self._locked():
            pos, size = int(self._ctl[POS]), int(self._ctl[SIZE])
            self._begin_write(pos, n, size)
            if pos + n <= self.capacity:
                idx: Any = slice(pos, pos + n)
            else:
                idx = (pos + np.arange(n)) % self.capacity
            for name in self.fields:
                self._arrays[name][idx] = rows[name]
            if self.prioritized:
                self._add_priorities(idx, pos, n, priorities)
            self._valid[idx] = 1
            self._ctl[POS] = (pos + n) % self.capacity  # published only once rows are whole
            self._ctl[SIZE] = min(size + n, self.capacity)
            self._end_write()

    def newest_obs(self, n: int) -> np.ndarray:
        """[min(n, len), obs_dim] copy of the observations of the ``n`` rows written last (what
        a learner folds into its normaliser when actors wrote the rows themselves); with
        sequences the ``n`` newest real rows (padding skipped)."""
        with self._locked():
            pos, size = int(self._ctl[POS]), int(self._ctl[SIZE])
            if not self.memory_dim:
                n = min(int(n), size)
                idx = (pos - n + np.arange(n)) % self.capacity
                return self._arrays["obs"][idx].copy()
            rows = newest_real_rows(self._arrays["loss_mask"], pos, size, self.capacity, n)
            return self._arrays["obs"][rows].copy()

    def sample(self, batch_size: int) -> TransitionBatch:
        """``batch_size`` transitions (proportional to priority when prioritised)."""
        return self.sample_indexed(batch_size).batch

    def sample_indexed(self, batch_size: int, beta: float = 0.4) -> ReplaySample:
        """Transitions with their rows and IS weights (exponent ``beta``; ones when uniform)."""
        with self._locked():
            size = int(self._ctl[SIZE])
            if size == 0:
                raise ValueError("cannot sample from an empty replay buffer")
            idx, weights = self._draw(batch_size, beta, size)
            bad = self._torn(idx)
            if bad.any():  # rows torn by a writer that died, until rewritten: redraw those
                if not self._valid[:size].any():
                    raise ValueError("cannot sample: every stored row was torn by a writer "
                                     "that died while adding it")
                for _attempt in range(1000):
                    idx[bad], weights[bad] = self._draw(int(bad.sum()), beta, size)
                    bad = self._torn(idx)
                    if not bad.any():
                        break
                else:
                    raise RuntimeError("replay sampling kept drawing invalid rows")
            batch = TransitionBatch(**{name: self._arrays[name][idx] for name in self.fields})
        return ReplaySample(batch, idx.astype(np.int64), weights)

    def _draw(self, batch_size: int, beta: float, size: int) -> tuple[np.ndarray, np.ndarray]:
        if self.prioritized:
            return self._sample_prioritized(batch_size, beta, size)
        if self.sequence_length > 1:  # whole sequences: ML-Agents' sample_mini_batch
            return draw_sequences(self.rng, size, self.sequence_length, batch_size)
        return self.rng.integers(0, size, batch_size), np.ones(batch_size, np.float32)

    def _torn(self, idx: np.ndarray) -> np.ndarray:
        """[len(idx)] bool: rows to redraw (invalid rows; with sequences, every row of a
        sequence holding one)."""
        bad = ~self._valid[idx].astype(bool)
        if self.sequence_length > 1:
            bad = spread_over_sequences(bad, self.sequence_length)
        return bad

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of rows ``indices`` from raw |TD errors|; a no-op when uniform."""
        if not self.prioritized:
            return
        indices = np.asarray(indices, np.int64)
        priorities = np.asarray(priorities, np.float64).reshape(indices.shape)
        if indices.size == 0:
            return
        with self._locked():
            if self.sampler == "cpprb":
                self._arrays["leaves"][indices] = self._leaf_priorities(priorities)
                self._cpprb.update_priorities(indices, np.abs(priorities))
                return
            pos, size = int(self._ctl[POS]), int(self._ctl[SIZE])
            self._begin_write(pos, 0, size)  # the trees may be torn, no row is
            set_leaves(self._arrays["sum_tree"], self._arrays["min_tree"], indices,
                       self._leaf_priorities(priorities))
            self._end_write()

    # -- checkpointing ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Filled rows, cursor, priorities and sampler RNG (numpy; see the module doc for size)."""
        with self._locked():
            size = int(self._ctl[SIZE])
            state = {
                "capacity": self.capacity, "obs_dim": self.obs_dim, "act_dim": self.act_dim,
                "mask_dim": self.mask_dim, "prioritized": self.prioritized,
                "memory_dim": self.memory_dim, "sequence_length": self.sequence_length,
                "pos": int(self._ctl[POS]), "size": size,
                "rng": self.rng.bit_generator.state,
            }
            for name in self.fields:
                state[name] = self._arrays[name][:size].copy()
            if not self._valid[:size].all():
                state["valid"] = self._valid[:size].copy()
            if self.prioritized:
                state["priorities"] = self._leaves()[:size].copy()
                state["max_priority"] = float(self._arrays["max_priority"][0])
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restores a ``state_dict()`` taken from a buffer of the same shape and kind."""
        for key in ("capacity", "obs_dim", "act_dim", "mask_dim", "prioritized", "memory_dim",
                    "sequence_length"):
            if state.get(key, 1 if key == "sequence_length" else 0) != getattr(self, key):
                raise ValueError(f"replay state has {key}={state[key]!r}, "
                                 f"this buffer has {getattr(self, key)!r}")
        size = int(state["size"])
        with self._locked():
            self._begin_write(0, self.capacity, 0)
            self._init_contents()
            self._begin_write(0, self.capacity, 0)  # _init_contents cleared the record
            for name in self.fields:
                self._arrays[name][:size] = state[name]
            self._valid[:size] = state["valid"] if "valid" in state else 1
            if self.prioritized:
                leaves = np.asarray(state["priorities"], np.float64)
                if self.sampler == "numpy":
                    set_leaves(self._arrays["sum_tree"], self._arrays["min_tree"],
                               np.arange(size), leaves)
                else:
                    self._load_cpprb(leaves, int(state["pos"]), size)
                self._arrays["max_priority"][0] = state["max_priority"]
            self._ctl[POS] = int(state["pos"])
            self._ctl[SIZE] = size
            self._end_write()
        self.rng.bit_generator.state = state["rng"]

    # -- priorities -------------------------------------------------------------------------------
    def _leaf_priorities(self, td_abs: np.ndarray) -> np.ndarray:
        """(|δ| + eps)^α, and tracks the largest |δ| + eps for rows added without a priority."""
        p = np.abs(td_abs) + self.eps
        self._arrays["max_priority"][0] = max(self._arrays["max_priority"][0], float(p.max()))
        return p**self.alpha

    def _leaves(self) -> np.ndarray:
        if self.sampler == "cpprb":
            return self._arrays["leaves"]
        return self._arrays["sum_tree"][self._tree_size:self._tree_size + self.capacity]

    def _add_priorities(self, idx: Any, pos: int, n: int, priorities: np.ndarray | None) -> None:
        if priorities is None:
            raw = np.full(n, self._arrays["max_priority"][0] - self.eps)
            leaf = np.full(n, self._arrays["max_priority"][0] ** self.alpha)
        else:
            raw = np.abs(priorities)
            leaf = self._leaf_priorities(priorities)
        if self.sampler == "numpy":
            rows = np.arange(pos, pos + n) if isinstance(idx, slice) else idx
            set_leaves(self._arrays["sum_tree"], self._arrays["min_tree"], rows, leaf)
            return
        self._arrays["leaves"][idx] = leaf
        if self._cpprb.get_next_index() != pos:
            raise RuntimeError("cpprb priority ring out of step with the rows")
        self._cpprb.add(i=self._dummy[:n], priorities=raw)

    def _load_cpprb(self, leaves: np.ndarray, pos: int, size: int) -> None:
        """Rebuilds cpprb's trees so that its ring position ends at ``pos``."""
        raw = np.maximum(leaves ** (1.0 / self.alpha if self.alpha > 0 else 1.0) - self.eps, 0.0)
        self._arrays["leaves"][:size] = leaves
        self._cpprb.clear()
        if size:
            self._cpprb.add(i=self._dummy[:size], priorities=raw)
        if size == self.capacity and pos:
            self._cpprb.add(i=self._dummy[:pos], priorities=raw[:pos])

    def _sample_prioritized(self, batch_size: int, beta: float,
                            size: int) -> tuple[np.ndarray, np.ndarray]:
        if self.sampler == "cpprb":
            drawn = self._cpprb.sample(batch_size, beta=beta)
            return (np.asarray(drawn["indexes"], np.int64),
                    np.asarray(drawn["weights"], np.float32))
        return sample_proportional(self._arrays["sum_tree"], self._arrays["min_tree"], self.rng,
                                   batch_size, beta, size)
