"""The replay ring in shared memory, written by many actor processes at once (Ape-X, Horgan et
al. 2018): ``SharedReplayBuffer``.

It is ``unity_rl.replay.ring_buffer.ReplayBuffer`` with its arrays placed in one
``multiprocessing.shared_memory`` segment (``unity_rl.replay.layout.segment_offsets``) behind a
lock that lives in the same segment (``unity_rl.replay.process_lock``), so that several actor
processes write and a learner process samples at the same time. It pickles by segment name: any
process on the same machine can attach (spawned children, queues, workers). Only the creating
process unlinks the segment.

**A process killed while holding the shared lock** (SIGKILL, OOM killer) never freezes the others.
On Linux/glibc the lock is a robust mutex: the next process to wait for it is woken with "owner
died", and, since every mutation leaves a dirty record in the control block until its rows and
priority trees are complete (``ReplayBuffer._begin_write``), that process knows exactly which
rows may be torn: ``ReplayBuffer._repair`` marks them invalid (never sampled again until
rewritten; zero priority), restores the cursor and rebuilds the priority trees; a warning names
the dead pid, and everyone carries on. A holder that is alive but keeps the lock longer than
``lock_timeout`` seconds (stopped, hung) makes the waiter raise ``ReplayLockTimeout`` naming that
pid: every wait is bounded. Where robust mutexes are missing (not glibc) the lock is a
``multiprocessing`` lock with the same bounded waits; a dead holder is then reported
(``ReplayLockTimeout`` naming the dead pid) but not recovered.

Prioritised sampling uses the numpy sum trees only (cpprb's trees live outside the segment).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from unity_rl.replay.layout import HOLDER, RECOVERIES, segment_offsets, stored_fields, tree_leaves
from unity_rl.replay.process_lock import (DEFAULT_LOCK_TIMEOUT_S, MUTEX_BYTES, ROBUST_MUTEXES,
                                          FallbackLock, RobustMutex, acquire_bounded)
from unity_rl.replay.ring_buffer import ReplayBuffer

logger = logging.getLogger(__name__)


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
        if not ROBUST_MUTEXES:
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
        return int(self._ctl[RECOVERIES])

    def _offsets(self) -> tuple[dict[str, tuple[int, tuple[int, ...], np.dtype]], int]:
        return segment_offsets(self._layout(), MUTEX_BYTES)  # the mutex comes first

    def _views(self) -> dict[str, np.ndarray]:
        assert self._shm is not None
        offsets, _ = self._offsets()
        return {name: np.ndarray(shape, dtype, buffer=self._shm.buf, offset=off)
                for name, (off, shape, dtype) in offsets.items()}

    def _make_mutex(self, create: bool) -> Any:
        if self._fallback_lock is not None:
            return FallbackLock(self._fallback_lock)
        return RobustMutex(self._shm.buf, 0, create)

    def _allocate(self) -> dict[str, np.ndarray]:
        _, total = self._offsets()
        self._shm = shared_memory.SharedMemory(create=True, size=max(total, 1))
        self._mutex = self._make_mutex(create=True)
        return self._views()

    # -- the bounded, recovering lock -----------------------------------------------------------
    def _acquire(self) -> None:
        if self._mutex is None:
            raise RuntimeError("this SharedReplayBuffer is closed")
        state = acquire_bounded(self._mutex, self.lock_timeout, lambda: int(self._ctl[HOLDER]))
        dead = int(self._ctl[HOLDER])
        self._ctl[HOLDER] = os.getpid()
        if state == "owner_died":
            self._ctl[RECOVERIES] += 1
            try:
                torn = self._repair()
            except BaseException:
                self._release()
                raise
            logger.warning("process %d died holding the shared replay buffer's lock; recovered "
                           "it in process %d (%d rows it was writing marked invalid)",
                           dead, os.getpid(), torn)

    def _release(self) -> None:
        self._ctl[HOLDER] = 0
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
        self.fields = stored_fields(self.mask_dim, self.memory_dim)
        self.sampler = "numpy"
        self._cpprb = None
        self.lock_timeout = float(state.get("lock_timeout", DEFAULT_LOCK_TIMEOUT_S))
        self._tree_size = tree_leaves(self.capacity)
        self.rng = np.random.default_rng(None if self.seed is None else [self.seed, os.getpid()])
        self._lock = None
        self._fallback_lock = None
        if not ROBUST_MUTEXES:
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
