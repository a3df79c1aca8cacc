"""Replay storage for off-policy trainer types, and everything about it that involves processes.

- ``ring_buffer``: ``ReplayBuffer`` (a numpy ring, optionally prioritised, optionally in memory
  sequences) and the ``ReplaySample`` it draws;
- ``shared_buffer``: ``SharedReplayBuffer`` (the same ring in shared memory, written by actor
  processes: Ape-X), behind the lock of ``process_lock`` (robust, process-shared, bounded
  waits; ``ReplayLockTimeout``);
- ``layout`` (the arrays and control block every ring holds), ``prioritized`` (sum trees,
  stratified sampling, ``per_beta``), ``sequences`` (memory sequences): what the rings compute;
- ``placement``: ``open_replay`` (private or shared, the one place a shared segment is created)
  and ``release_with`` (a host's shared segment is destroyed when the host goes, never leaked);
- ``snapshots``: replay in checkpoints (``replay_state``, ``restore_replay``) and its cost
  (``replay_footprint``).

Learners never import this package; off-policy hosts (``unity_rl.algorithms.offpolicy``) and
acting policies do, and hold no process plumbing of their own.
"""
from unity_rl.replay.placement import open_replay, release_with
from unity_rl.replay.prioritized import per_beta
from unity_rl.replay.process_lock import ReplayLockTimeout
from unity_rl.replay.ring_buffer import ReplayBuffer, ReplaySample
from unity_rl.replay.shared_buffer import SharedReplayBuffer
from unity_rl.replay.snapshots import (ReplayFootprint, replay_footprint, replay_state,
                                       restore_replay)

__all__ = ["ReplayBuffer", "ReplayLockTimeout", "ReplaySample", "SharedReplayBuffer", "per_beta",
           "open_replay", "release_with", "ReplayFootprint", "replay_footprint", "replay_state",
           "restore_replay"]
