"""Replay storage for off-policy trainer types, and everything about it that involves processes.

- ``buffers``: ``ReplayBuffer`` (a numpy ring, optionally prioritised) and
  ``SharedReplayBuffer`` (the same ring in shared memory with a robust process-shared lock,
  written by actor processes: Ape-X);
- ``placement``: ``open_replay`` (private or shared, the one place a shared segment is created)
  and ``release_with`` (a host's shared segment is destroyed when the host goes, never leaked);
- ``snapshots``: replay in checkpoints (``replay_state``, ``restore_replay``) and its cost
  (``replay_footprint``).

Learners never import this package; off-policy hosts (``unity_rl.algorithms.offpolicy``) and
acting policies do, and hold no process plumbing of their own.
"""
from unity_rl.replay.buffers import (ReplayBuffer, ReplayLockTimeout, ReplaySample,
                                     SharedReplayBuffer, per_beta)
from unity_rl.replay.placement import open_replay, release_with
from unity_rl.replay.snapshots import (ReplayFootprint, replay_footprint, replay_state,
                                       restore_replay)

__all__ = ["ReplayBuffer", "ReplayLockTimeout", "ReplaySample", "SharedReplayBuffer", "per_beta",
           "open_replay", "release_with", "ReplayFootprint", "replay_footprint", "replay_state",
           "restore_replay"]
