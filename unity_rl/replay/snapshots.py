"""Replay buffers in checkpoints: saving (bounded by the shared lock), restoring into a buffer of
another capacity or kind, and what a saved buffer costs.

Cost: only the filled rows are saved, 4·(2·obs_dim + act_dim + 2) bytes each (+16 with
``prioritized``), once per kept checkpoint (``replay_footprint``).
"""
from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

from unity_rl.experience import TransitionBatch
from unity_rl.replay.process_lock import ReplayLockTimeout
from unity_rl.replay.ring_buffer import ReplayBuffer

logger = logging.getLogger(__name__)


def replay_state(replay: ReplayBuffer) -> dict | None:
    """``replay.state_dict()``, or None when a live process kept the shared lock past its
    timeout (logged: the checkpoint is then saved without the buffer rather than never)."""
    try:
        return replay.state_dict()
    except ReplayLockTimeout as err:
        logger.error("%s: checkpoint saved without the replay buffer", err)
        return None


def restore_replay(replay: ReplayBuffer, state: dict) -> None:
    """Loads a ``ReplayBuffer.state_dict()``; when capacity or kind changed (a new
    ``buffer_size`` or ``prioritized`` on resume) re-adds the rows oldest first instead (the
    newest ``capacity`` survive; priorities kept when both are prioritized)."""
    if (state.get("memory_dim", 0), state.get("sequence_length", 1)) != (
            replay.memory_dim, replay.sequence_length):
        raise ValueError(f"the checkpoint's replay buffer holds memory sequences of "
                         f"{state.get('sequence_length', 1)} rows with "
                         f"{state.get('memory_dim', 0)} memory columns, this run "
                         f"{replay.sequence_length} and {replay.memory_dim}: "
                         f"network_settings.memory changed; resume without the replay")
    same = all(state[k] == getattr(replay, k) for k in ("capacity", "prioritized"))
    if same:
        replay.load_state_dict(state)
        return
    if (state["obs_dim"], state["act_dim"]) != (replay.obs_dim, replay.act_dim):
        raise ValueError(f"the checkpoint's replay buffer holds {state['obs_dim']} observations "
                         f"and {state['act_dim']} actions per row, this run "
                         f"{replay.obs_dim} and {replay.act_dim}")
    size, pos = int(state["size"]), int(state["pos"])
    order = np.arange(size) if size < state["capacity"] else (pos + np.arange(size)) % size
    batch = TransitionBatch(**{f: np.asarray(state[f])[order] for f in TransitionBatch._fields
                               if state.get(f) is not None})
    priorities = None
    if state["prioritized"] and replay.prioritized:
        # stored leaves are (|δ| + eps)^α: back to raw |δ| for add()
        leaves = np.asarray(state["priorities"], np.float64)[order]
        alpha = replay.alpha if replay.alpha > 0 else 1.0
        priorities = np.maximum(leaves ** (1.0 / alpha) - replay.eps, 0.0)
    replay.add(batch, priorities)
    logger.info("replay buffer resized on resume: %d of %d stored transitions kept",
                len(replay), size)


class ReplayFootprint(NamedTuple):
    """Memory of a replay buffer (and of its copy in each checkpoint)."""

    bytes_per_transition: int
    full_bytes: int


def replay_footprint(capacity: int, obs_dim: int, act_dim: int,
                     prioritized: bool = False, memory_dim: int = 0) -> ReplayFootprint:
    """Bytes per stored transition and for a full buffer (see ``unity_rl.replay.layout``;
    ``memory_dim``: actor and critic memories and a loss mask per row)."""
    per_row = (4 * (2 * obs_dim + act_dim + 2) + (16 if prioritized else 0)
               + (8 * memory_dim + 1 if memory_dim else 0))
    return ReplayFootprint(per_row, per_row * capacity)
