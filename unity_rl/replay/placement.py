"""Where a learner host's replay lives, and its shared memory's lifetime.

``open_replay(..., shared=True)`` creates the ``SharedReplayBuffer`` that actor processes
attach to by the handle riding with the weights (Ape-X); ``shared=False`` a private
``ReplayBuffer`` the host fills from the segments it accepts. The process that creates a shared
buffer owns its segment: ``release_with(owner, replay)`` ties the segment's destruction to an
explicit call (after the final checkpoint) or, failing that, to the owner being collected, so
a segment is never left behind in /dev/shm.
"""
from __future__ import annotations

import weakref
from typing import Callable

from unity_rl.replay.ring_buffer import ReplayBuffer
from unity_rl.replay.shared_buffer import SharedReplayBuffer

SHARED_LOCK_TIMEOUT_S = 10.0
"""Longest wait for a shared buffer's lock while a live process holds it (a dead holder is
recovered at once: ``unity_rl.replay.shared_buffer``)."""


def open_replay(capacity: int, obs_dim: int, act_dim: int, seed: int | None, *, shared: bool,
                prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6,
                mask_dim: int = 0, memory_dim: int = 0,
                sequence_length: int = 1) -> tuple[ReplayBuffer, dict | None]:
    """(buffer, handle): a shared buffer and the picklable handle actors attach with, or a
    private buffer and None. ``mask_dim``: action-mask columns (discrete branches);
    ``memory_dim``, ``sequence_length``: memory sequences (recurrent policies)."""
    args = dict(prioritized=prioritized, alpha=alpha, eps=eps, mask_dim=mask_dim,
                memory_dim=memory_dim, sequence_length=sequence_length)
    if shared:
        replay = SharedReplayBuffer(capacity, obs_dim, act_dim, seed,
                                    lock_timeout=SHARED_LOCK_TIMEOUT_S, **args)
        return replay, replay.handle()
    return ReplayBuffer(capacity, obs_dim, act_dim, seed, **args), None


def release_with(owner: object, replay: ReplayBuffer) -> Callable[[], None]:
    """An idempotent call that frees ``replay``'s shared segment (closes and unlinks it when this
    process created it); also run when ``owner`` is garbage-collected. A no-op for a private
    buffer or an attached (not owned) shared one."""
    if not isinstance(replay, SharedReplayBuffer) or not replay._owner:
        return lambda: None
    return weakref.finalize(owner, _destroy, replay)


def _destroy(replay: SharedReplayBuffer) -> None:
    replay.close()
    replay.unlink()
