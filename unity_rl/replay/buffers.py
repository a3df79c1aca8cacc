"""Replay buffers for off-policy learners: a numpy ring, optionally prioritised, optionally shared.

- ``ReplayBuffer``: a ring of ``capacity`` transitions in private numpy arrays.  With
  ``prioritized=True`` it samples row i with probability P(i) = p_i^α / Σ p^α and returns
  importance-sampling weights (N·P(i))^−β / max_j (N·P(j))^−β (Schaul et al. 2015,
  arXiv:1511.05952, proportional variant, stratified sampling over a sum tree).
- ``SharedReplayBuffer``: the same ring in one ``multiprocessing.shared_memory`` segment guarded by
  one lock that lives in the segment, so that several actor processes write and a learner
  process samples at the same time (Ape-X, Horgan et al. 2018).  It pickles by segment name:
  any process on the same machine can attach (spawned children, queues, workers).

Sampling and priority updates race with writers by design (as in Ape-X): a row sampled now may
be overwritten before its priority comes back; the late priority then lands on the newer row.
Every read and write of rows happens under the lock, so no row is ever seen half-written.

**A process killed while holding the shared lock** (SIGKILL, OOM killer) never freezes the others.
On Linux/glibc the lock is a process-shared *robust* pthread mutex: the kernel records its owner,
and the next process to wait for it is woken with "owner died" instead of waiting forever.
Before it touches a row, every mutation writes a *dirty record* (what it is about to write and
the cursor before it) into the segment and publishes the new cursor only once the rows and
priority trees are complete, so the process that inherits the lock from a dead holder knows
exactly which rows may be torn: it marks them invalid (never sampled again until rewritten;
zero priority), restores the cursor, rebuilds the priority trees, logs a warning naming the dead
pid and carries on.  A holder that is alive but keeps the lock longer than ``lock_timeout``
seconds (stopped, hung) makes the waiter raise ``ReplayLockTimeout`` naming that pid: every wait
is bounded.  Where robust mutexes are missing (not glibc) the lock is a ``multiprocessing`` lock
with the same bounded waits; a dead holder is then reported (``ReplayLockTimeout`` naming the
dead pid) but not recovered.

**Memory sequences** (``sequence_length`` L > 1, ``memory_dim`` > 0: recurrent policies,
``network_settings.memory``): rows also hold the actor memory and the critic memory each step
started from and a loss mask (0 on rows that pad a sequence), and are written and sampled in
whole sequences of L rows, as mlagents-learn 1.1.0's ``AgentBuffer.sample_mini_batch(batch_size,
sequence_length)``: the capacity is rounded up to a multiple of L, every ``add`` is a multiple
of L rows (``trajectories_to_transitions`` pads each trajectory), so sequence k always starts at
row k·L, and a sample is ``batch_size // L`` random sequence starts, each with its L rows in
order. A sequence with a torn row is redrawn whole. Prioritised sampling is per row, so it is
refused with sequences.

Memory: each row takes 4·(2·obs_dim + act_dim + 2) bytes (observation stored twice so that a
truncated episode's final observation fits) plus a 1-byte validity flag (with sequences 8·memory_dim + 1 more),
plus 16 bytes per leaf
of the two priority trees (rounded up to a power of two) when prioritised (8 bytes per row with
the cpprb sampler, plus cpprb's own trees).  ``state_dict()`` copies the filled rows: the
same cost again, once, in the checkpoint.

Size (over ~400 lines on purpose): the uniform, prioritised, sequence and shared-memory buffers
share one storage layout and sum-tree code, and the shared buffer's lock recovery needs that
storage's internals.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import math
import multiprocessing as mp
import os
import threading
import time
from multiprocessing import shared_memory
from typing import Any, NamedTuple

import numpy as np

from unity_rl.experience import TransitionBatch

logger = logging.getLogger(__name__)

_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated")
_MEMORY_FIELDS = ("memories", "critic_memories", "loss_mask")


def _fields(mask_dim: int, memory_dim: int) -> tuple[str, ...]:
    return (_FIELDS + (("action_masks",) if mask_dim else ())
            + (_MEMORY_FIELDS if memory_dim else ()))

DEFAULT_LOCK_TIMEOUT_S = 30.0
"""How long a shared buffer's user waits for a live holder of its lock before raising."""

# Control block (int64) of every buffer: the cursor, then the dirty record and the lock holder.
_POS, _SIZE, _DIRTY, _DIRTY_POS, _DIRTY_N, _DIRTY_SIZE, _HOLDER, _RECOVERIES = range(8)
_CTL_LEN = 8


def per_beta(beta0: float, step: int, max_steps: int) -> float:
    """PER importance-sampling exponent annealed linearly from ``beta0`` to 1 over the run
    (Schaul et al. 2016, §3.4): ``beta0 + (1 - beta0) · step / max_steps``, clamped to
    [beta0, 1]; ``max_steps <= 0`` gives 1."""
    if max_steps <= 0:
        return 1.0
    frac = min(max(step / max_steps, 0.0), 1.0)
    return float(beta0 + (1.0 - beta0) * frac)


class ReplayLockTimeout(TimeoutError):
    """A shared replay buffer's lock stayed held too long; the message names the holder."""


class ReplaySample(NamedTuple):
    """A sampled batch with where it came from (for priority updates) and its IS weights."""

    batch: TransitionBatch
    """The transitions."""
    indices: np.ndarray
    """[n] int64 ring rows, for ``update_priorities``."""
    weights: np.ndarray
    """[n] float32 importance-sampling weights (all ones for uniform sampling)."""


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped by its parent) holds nothing any more
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# ----------------------------------------------------------------------------------------------
# Locks
# ----------------------------------------------------------------------------------------------

class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load_pthread() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for fn in ("pthread_mutexattr_setrobust", "pthread_mutexattr_setpshared",
                   "pthread_mutex_consistent", "pthread_mutex_clocklock"):
            getattr(libc, fn)
    except (OSError, AttributeError):
        return None
    libc.pthread_mutex_clocklock.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                             ctypes.POINTER(_Timespec)]
    for fn in ("pthread_mutex_unlock", "pthread_mutex_consistent", "pthread_mutex_init"):
        getattr(libc, fn).argtypes = [ctypes.c_void_p] + (
            [ctypes.c_void_p] if fn == "pthread_mutex_init" else [])
    return libc


_PTHREAD = _load_pthread() if os.name == "posix" else None
_MUTEX_BYTES = 64
"""Room for a pthread_mutex_t (40 bytes on x86-64 glibc, 48 on aarch64)."""
_CLOCK_MONOTONIC = 1  # Linux; time.monotonic() reads the same clock


class _RobustMutex:
    """A process-shared robust pthread mutex placed in a shared-memory buffer.

    ``acquire`` returns True when the previous owner died holding it (the caller must repair
    what that owner may have left half-done); waits are sliced so signals are still handled.
    """

    def __init__(self, buf: memoryview, offset: int, create: bool):
        self._anchor = ctypes.c_char.from_buffer(buf, offset)  # released in close()
        self._addr = ctypes.addressof(self._anchor)
        if create:
            attr = ctypes.create_string_buffer(64)
            lib = _PTHREAD
            if (lib.pthread_mutexattr_init(attr) or lib.pthread_mutexattr_setpshared(attr, 1)
                    or lib.pthread_mutexattr_setrobust(attr, 1)
                    or lib.pthread_mutex_init(self._addr, attr)):
                raise OSError("cannot initialise a robust process-shared mutex")
            lib.pthread_mutexattr_destroy(attr)

    def acquire_slice(self, seconds: float) -> str:
        """'ok', 'owner_died' or 'timeout' after waiting at most ``seconds``."""
        deadline = time.monotonic() + max(seconds, 0.0)
        ts = _Timespec(int(deadline), int((deadline % 1.0) * 1e9))
        rc = _PTHREAD.pthread_mutex_clocklock(self._addr, _CLOCK_MONOTONIC, ctypes.byref(ts))
        if rc == 0:
            return "ok"
        if rc == errno.EOWNERDEAD:
            _PTHREAD.pthread_mutex_consistent(self._addr)
            return "owner_died"
        if rc == errno.ETIMEDOUT:
            return "timeout"
        raise OSError(rc, f"pthread_mutex_clocklock: {os.strerror(rc)}")

    def release(self) -> None:
        _PTHREAD.pthread_mutex_unlock(self._addr)

    def close(self) -> None:
        self._anchor = None


class _SemLock:
    """Fallback where robust mutexes are missing: a multiprocessing lock, bounded waits, no
    recovery (a dead holder is named in the error)."""

    def __init__(self, lock: Any):
        self.lock = lock

    def acquire_slice(self, seconds: float) -> str:
        return "ok" if self.lock.acquire(timeout=max(seconds, 0.0)) else "timeout"

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------------------------
# The buffer
# ----------------------------------------------------------------------------------------------

class ReplayBuffer:
    """Ring buffer of transitions; uniform or prioritised sampling; one process, thread-safe.

    Sampling is with replacement, over the filled rows only.  Priorities are given as raw
    |TD error| (``add(..., priorities=)``, ``update_priorities``); the buffer stores
    (|δ| + eps)^α.  Rows added without priorities get the largest priority seen so far.
    Checkpoint it with ``state_dict()`` (the buffer itself does not pickle: it holds a lock).

    ``sampler`` (prioritised only): ``"numpy"`` (default) walks this module's vectorised sum
    tree and draws from ``seed`` (reproducible); ``"cpprb"`` keeps the priorities in cpprb's C++
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
        L = self.sequence_length
        self.capacity = -(-int(capacity) // L) * L
        self.memory_dim = int(memory_dim)
        """Columns of the stored actor and critic memories (0: none stored)."""
        self.obs_dim = int(obs_dim)
        self.act_dim = int(act_dim)
        self.mask_dim = int(mask_dim)
        """Action-mask columns per row (sum of the discrete branches; 0: no masks stored)."""
        self.fields = _fields(self.mask_dim, self.memory_dim)
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.seed = seed
        self.sampler = sampler if self.prioritized else "numpy"
        self._tree_size = 1 << max(0, math.ceil(math.log2(self.capacity)))
        """Leaves of the priority trees: the first power of two >= capacity."""
        self._depth = self._tree_size.bit_length() - 1
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
    def _layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Every array the buffer needs, name -> (shape, dtype)."""
        c, f32 = self.capacity, np.dtype(np.float32)
        layout = {
            "obs": ((c, self.obs_dim), f32),
            "actions": ((c, self.act_dim), f32),
            "rewards": ((c,), f32),
            "next_obs": ((c, self.obs_dim), f32),
            "terminated": ((c,), f32),
            **({"action_masks": ((c, self.mask_dim), np.dtype(np.uint8))} if self.mask_dim else {}),
            **({"memories": ((c, self.memory_dim), f32),
                "critic_memories": ((c, self.memory_dim), f32),
                "loss_mask": ((c,), np.dtype(np.uint8))} if self.memory_dim else {}),
            "valid": ((c,), np.dtype(np.uint8)),  # 0: never written, or torn by a dead writer
            "ctl": ((_CTL_LEN,), np.dtype(np.int64)),
        }
        if self.prioritized and self.sampler == "numpy":
            # 1-indexed binary trees: root at 1, leaves at [T, 2T).
            layout["sum_tree"] = ((2 * self._tree_size,), np.dtype(np.float64))
            layout["min_tree"] = ((2 * self._tree_size,), np.dtype(np.float64))
        if self.prioritized:
            layout["max_priority"] = ((1,), np.dtype(np.float64))
        if self.sampler == "cpprb":
            layout["leaves"] = ((c,), np.dtype(np.float64))  # (|δ|+eps)^α, for state_dict
        return layout

    def _allocate(self) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, dtype) for name, (shape, dtype) in self._layout().items()}

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
        ctl[_DIRTY_POS], ctl[_DIRTY_N], ctl[_DIRTY_SIZE] = pos, n, size
        ctl[_DIRTY] = 1

    def _end_write(self) -> None:
        self._ctl[_DIRTY] = 0

    def _repair(self) -> int:
        """Undoes what a writer that died inside ``_begin_write``/``_end_write`` left: its rows
        become invalid (never sampled until rewritten), the cursor goes back to where it was,
        the priority trees are rebuilt from their leaves. Idempotent. Returns the torn rows."""
        ctl = self._ctl
        if not ctl[_DIRTY]:
            return 0
        pos, n, size = int(ctl[_DIRTY_POS]), int(ctl[_DIRTY_N]), int(ctl[_DIRTY_SIZE])
        idx = (pos + np.arange(n)) % self.capacity
        self._valid[idx] = 0
        ctl[_POS], ctl[_SIZE] = pos % self.capacity, size
        if self.prioritized and self.sampler == "numpy":
            self._arrays["sum_tree"][self._tree_size + idx] = 0.0
            self._arrays["min_tree"][self._tree_size + idx] = np.inf
            self._rebuild_trees()
        ctl[_DIRTY] = 0
        return n

    # -- public API -------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._ctl[_SIZE])

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
            pos, size = int(self._ctl[_POS]), int(self._ctl[_SIZE])
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
            self._ctl[_POS] = (pos + n) % self.capacity  # published only once rows are whole
            self._ctl[_SIZE] = min(size + n, self.capacity)
            self._end_write()

    def newest_obs(self, n: int) -> np.ndarray:
        """[min(n, len), obs_dim] copy of the observations of the ``n`` rows written last (what
        a learner folds into its normaliser when actors wrote the rows themselves); with
        sequences the ``n`` newest real rows (padding skipped)."""
        with self._locked():
            pos, size = int(self._ctl[_POS]), int(self._ctl[_SIZE])
            if not self.memory_dim:
                n = min(int(n), size)
                idx = (pos - n + np.arange(n)) % self.capacity
                return self._arrays["obs"][idx].copy()
            newest_first = (pos - 1 - np.arange(size)) % self.capacity
            real = newest_first[self._arrays["loss_mask"][newest_first] > 0][:int(n)]
            return self._arrays["obs"][real[::-1]].copy()

    def sample(self, batch_size: int) -> TransitionBatch:
        """``batch_size`` transitions (proportional to priority when prioritised)."""
        return self.sample_indexed(batch_size).batch

    def sample_indexed(self, batch_size: int, beta: float = 0.4) -> ReplaySample:
        """Transitions with their rows and IS weights (exponent ``beta``; ones when uniform)."""
        with self._locked():
            size = int(self._ctl[_SIZE])
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
        L = self.sequence_length
        if L > 1:  # whole sequences: ML-Agents' sample_mini_batch
            starts = self.rng.integers(0, size // L, max(batch_size // L, 1)) * L
            idx = (starts[:, None] + np.arange(L)).reshape(-1)
            return idx, np.ones(len(idx), np.float32)
        return self.rng.integers(0, size, batch_size), np.ones(batch_size, np.float32)

    def _torn(self, idx: np.ndarray) -> np.ndarray:
        """[len(idx)] bool: rows to redraw (invalid rows; with sequences, every row of a
        sequence holding one)."""
        bad = ~self._valid[idx].astype(bool)
        L = self.sequence_length
        if L > 1:
            bad = np.repeat(bad.reshape(-1, L).any(axis=1), L)
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
            pos, size = int(self._ctl[_POS]), int(self._ctl[_SIZE])
            self._begin_write(pos, 0, size)  # the trees may be torn, no row is
            self._set_leaves(indices, self._leaf_priorities(priorities))
            self._end_write()

    # -- checkpointing ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Filled rows, cursor, priorities and sampler RNG (numpy; see the module doc for size)."""
        with self._locked():
            size = int(self._ctl[_SIZE])
            state = {
                "capacity": self.capacity, "obs_dim": self.obs_dim, "act_dim": self.act_dim,
                "mask_dim": self.mask_dim, "prioritized": self.prioritized,
                "memory_dim": self.memory_dim, "sequence_length": self.sequence_length,
                "pos": int(self._ctl[_POS]), "size": size,
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
                    self._set_leaves(np.arange(size), leaves)
                else:
                    self._load_cpprb(leaves, int(state["pos"]), size)
                self._arrays["max_priority"][0] = state["max_priority"]
            self._ctl[_POS] = int(state["pos"])
            self._ctl[_SIZE] = size
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
            self._set_leaves(rows, leaf)
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

    def _set_leaves(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Writes leaf values and recomputes their ancestors level by level (vectorised).

        Repeated rows are harmless: the last value wins in both trees, and every copy of a
        parent is recomputed from the same children."""
        sum_tree, min_tree = self._arrays["sum_tree"], self._arrays["min_tree"]
        node = rows + self._tree_size
        sum_tree[node] = values
        min_tree[node] = values
        for _ in range(self._depth):
            node >>= 1
            left = node << 1
            right = left + 1
            sum_tree[node] = sum_tree.take(left) + sum_tree.take(right)
            min_tree[node] = np.minimum(min_tree.take(left), min_tree.take(right))

    def _rebuild_trees(self) -> None:
        """Recomputes every inner node from the leaves (after a writer died mid-update)."""
        sum_tree, min_tree = self._arrays["sum_tree"], self._arrays["min_tree"]
        width = self._tree_size
        while width > 1:
            half = width // 2
            sum_tree[half:width] = sum_tree[width:2 * width:2] + sum_tree[width + 1:2 * width:2]
            min_tree[half:width] = np.minimum(min_tree[width:2 * width:2],
                                              min_tree[width + 1:2 * width:2])
            width = half

    def _sample_prioritized(self, batch_size: int, beta: float,
                            size: int) -> tuple[np.ndarray, np.ndarray]:
        if self.sampler == "cpprb":
            drawn = self._cpprb.sample(batch_size, beta=beta)
            return (np.asarray(drawn["indexes"], np.int64),
                    np.asarray(drawn["weights"], np.float32))
        sum_tree = self._arrays["sum_tree"]
        total = sum_tree[1]
        # Stratified: one uniform draw in each of batch_size equal slices of the total mass.
        mass = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        node = np.ones(batch_size, np.int64)
        for _ in range(self._depth):  # descend: go right when the mass exceeds the left subtree
            node <<= 1
            left = sum_tree.take(node)
            go_right = mass >= left
            mass -= left * go_right
            node += go_right
        # Rounding can walk past the last filled row into empty leaves: clamp back.
        idx = np.minimum(node - self._tree_size, size - 1)
        prob = sum_tree[idx + self._tree_size] / total
        min_prob = self._arrays["min_tree"][1] / total
        weights = (prob / min_prob) ** (-beta)  # = (N·P(i))^-β / max_j (N·P(j))^-β
        return idx, weights.astype(np.float32)


class SharedReplayBuffer(ReplayBuffer):
    """``ReplayBuffer`` in shared memory: many writer processes, one (or more) samplers.

    The creating process owns the segment: it must call ``close()`` then ``unlink()`` (or use the
    buffer as a context manager) when every user is done.  Copies received by other processes
    (pickled: ``handle()`` / ``attach()``, or as a ``Process`` argument) attach to the same
    segment and only ``close()``.  Each copy samples with its own RNG (seeded from ``seed`` and
    the process id), so two samplers do not draw the same rows.

    Every wait for the lock is bounded: see the module doc (dead holders are recovered, live
    ones that keep it longer than ``lock_timeout`` seconds raise ``ReplayLockTimeout``).
    ``ctx`` only matters where robust mutexes are missing (its ``Lock()`` is the fallback lock).
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, seed: int | None = 0, *,
                 prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6,
                 ctx: Any = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S,
                 mask_dim: int = 0, memory_dim: int = 0, sequence_length: int = 1):
        self._shm: shared_memory.SharedMemory | None = None
        self._owner = True
        self._mutex: Any = None
        self.lock_timeout = float(lock_timeout)
        self._fallback_lock = None
        if _PTHREAD is None:
            self._fallback_lock = (ctx if ctx is not None else mp.get_context("spawn")).Lock()
        super().__init__(capacity, obs_dim, act_dim, seed, prioritized=prioritized,
                         alpha=alpha, eps=eps, sampler="numpy", mask_dim=mask_dim,
                         memory_dim=memory_dim, sequence_length=sequence_length)
        self._lock = None  # the segment's mutex replaces the thread lock

    @property
    def name(self) -> str:
        """The shared-memory segment's name."""
        assert self._shm is not None
        return self._shm.name

    @property
    def recoveries(self) -> int:
        """How many times a user of this segment recovered the lock from a dead holder."""
        return int(self._ctl[_RECOVERIES])

    def _offsets(self) -> tuple[dict[str, tuple[int, tuple[int, ...], np.dtype]], int]:
        offsets, total = {}, _MUTEX_BYTES  # the mutex comes first
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

    def _make_mutex(self, create: bool) -> Any:
        if self._fallback_lock is not None:
            return _SemLock(self._fallback_lock)
        return _RobustMutex(self._shm.buf, 0, create)

    def _allocate(self) -> dict[str, np.ndarray]:
        _, total = self._offsets()
        self._shm = shared_memory.SharedMemory(create=True, size=max(total, 1))
        self._mutex = self._make_mutex(create=True)
        return self._views()

    # -- the bounded, recovering lock -----------------------------------------------------------
    def _acquire(self) -> None:
        if self._mutex is None:
            raise RuntimeError("this SharedReplayBuffer is closed")
        deadline = time.monotonic() + self.lock_timeout
        while True:
            remaining = deadline - time.monotonic()
            state = self._mutex.acquire_slice(min(0.5, max(remaining, 0.0)))
            if state != "timeout":
                break
            holder = int(self._ctl[_HOLDER])
            if holder and holder != os.getpid() and not _pid_alive(holder) \
                    and self._fallback_lock is not None:
                raise ReplayLockTimeout(
                    f"the shared replay buffer's lock is held by process {holder}, which is "
                    f"dead (killed while holding it); this platform cannot recover it")
            if remaining <= 0:
                alive = "alive" if _pid_alive(holder) else "dead"
                who = f"process {holder} ({alive})" if holder else "an unknown process"
                raise ReplayLockTimeout(
                    f"the shared replay buffer's lock has been held by {who} for more than "
                    f"{self.lock_timeout:.1f} s (stopped or hung?)")
        dead = int(self._ctl[_HOLDER])
        self._ctl[_HOLDER] = os.getpid()
        if state == "owner_died":
            self._ctl[_RECOVERIES] += 1
            try:
                torn = self._repair()
            except BaseException:
                self._release()
                raise
            logger.warning("process %d died holding the shared replay buffer's lock; recovered "
                           "it in process %d (%d rows it was writing marked invalid)",
                           dead, os.getpid(), torn)

    def _release(self) -> None:
        self._ctl[_HOLDER] = 0
        self._mutex.release()

    # -- pickling ---------------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        if self._shm is None:
            raise RuntimeError("cannot pickle a closed SharedReplayBuffer")
        state = {"params": (self.capacity, self.obs_dim, self.act_dim, self.prioritized,
                            self.alpha, self.eps, self.seed, self.mask_dim, self.memory_dim,
                            self.sequence_length),
                 "name": self._shm.name, "lock_timeout": self.lock_timeout}
        if self._fallback_lock is not None:
            state["lock"] = self._fallback_lock  # travels only while spawning
        return state

    def __setstate__(self, state: dict) -> None:
        (self.capacity, self.obs_dim, self.act_dim, self.prioritized,
         self.alpha, self.eps, self.seed, self.mask_dim, self.memory_dim,
         self.sequence_length) = state["params"]
        self.fields = _fields(self.mask_dim, self.memory_dim)
        self.sampler = "numpy"
        self._cpprb = None
        self.lock_timeout = float(state.get("lock_timeout", DEFAULT_LOCK_TIMEOUT_S))
        self._tree_size = 1 << max(0, math.ceil(math.log2(self.capacity)))
        self._depth = self._tree_size.bit_length() - 1
        self.rng = np.random.default_rng(None if self.seed is None else [self.seed, os.getpid()])
        self._lock = None
        self._fallback_lock = None
        if _PTHREAD is None:
            self._fallback_lock = state["lock"]
        self._owner = False
        # Attaching registers the name with the resource tracker, which spawned children share
        # with their parent, so the segment is not unlinked when a child exits.
        self._shm = shared_memory.SharedMemory(name=state["name"])
        self._mutex = self._make_mutex(create=False)
        self._bind(self._views())

    @classmethod
    def attach(cls, handle: dict) -> SharedReplayBuffer:
        """Another process's view of the buffer ``handle()`` describes (it only ``close()``s)."""
        buffer = cls.__new__(cls)
        buffer.__setstate__(handle)
        return buffer

    def handle(self) -> dict:
        """Picklable description of this buffer (segment name and shape) for ``attach``."""
        return self.__getstate__()

    def close(self) -> None:
        """Detaches this process from the segment (every user calls it once)."""
        if self._shm is None or self._mutex is None:
            return
        self._arrays, self._ctl, self._valid = {}, None, None  # drop views before closing
        self._mutex.close()
        self._mutex = None
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

