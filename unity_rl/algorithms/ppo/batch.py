"""The buffer as the on-policy updates read it (PPO's ``PPOLearner``, POCA's ``POCALearner``).

- ``PPOBatch``: what one PPO update optimises on, row for row (``PPOLearner.prepare``);
- ``trajectory_obs``: the trajectories' observations as flat rows, and each one's last
  observation (what the value of its end is computed from);
- ``behaviour``: the actions, log-probabilities and action masks the actors stored, each
  trajectory padded to whole memory sequences (zeros; masks all allowed, as ML-Agents pads them);
- ``stored_memories``: the rollout actor memory at each sequence's first step
  (``StepExtras.memories``, never recomputed; zeros where a trajectory has none);
- ``normalized``: advantages normalised once over the buffer (ML-Agents' ``_update_policy``:
  (A − mean) / (std + 1e-10); with memory over the padded buffer, padded rows counting as 0,
  ML-Agents' quirk, TRAINERS.md §10.10).

Pure functions of their arguments; the tensors are made on the ``device`` given.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.sequences import pad_sequences
from unity_rl.experience import Trajectory


class PPOBatch(NamedTuple):
    """What one update optimises on (``PPOLearner.prepare``), row for row."""

    obs: torch.Tensor
    """[N, obs_dim] observations through the normaliser."""
    actions: torch.Tensor
    """[N, C] float32 (hybrid [N, C + B]) or [N, B] int64, as the behaviour took them."""
    logprobs: torch.Tensor
    """[N, K] the behaviour's log-probabilities, one column per action dimension / branch."""
    masks: torch.Tensor | None
    """[N, sum(branches)] bool, True where allowed (None without branches)."""
    values: np.ndarray
    """[N, heads] value estimates (the GAE baselines)."""
    advantages: torch.Tensor
    """[N] mean over signals of GAE, normalised over the buffer."""
    returns: torch.Tensor
    """[N, heads] each head's GAE returns."""
    loss_mask: torch.Tensor | None = None
    """[N] bool, False on the rows that pad memory sequences (None: no memory, no padding)."""
    memories: torch.Tensor | None = None
    """[N / L, memory_size]: the actor memory each sequence starts from (None: no memory)."""
    critic_memories: torch.Tensor | None = None
    """[N / L, memory_size]: the critic memory each sequence starts from (None: no memory)."""
    sequence_length: int = 1
    """L: rows per sequence (1 without memory)."""
    signal_batch: SignalBatch | None = None
    """The same rows as the reward signals read them (raw obs, next obs, actions, dones; padded
    like ``obs`` with memory): each learned signal's update takes the minibatch's rows."""
    reward_metrics: dict | None = None
    """``Policy/<Signal> Reward`` of this buffer (``episode_reward_metrics``)."""
    stale: torch.Tensor | None = None
    """[N] bool, True on the rows acted with older weights (async lag > 0), which train with the
    decoupled objective (``proximal.py``); None: every row on-policy."""


def trajectory_obs(trajectories: Sequence[Trajectory], obs_dim: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(every step's observation [N, obs_dim], each trajectory's last observation [M, obs_dim]),
    float32 rows in trajectory order."""
    obs = np.concatenate([np.asarray(t.obs, np.float32).reshape(-1, obs_dim)
                          for t in trajectories])
    last = np.stack([np.asarray(t.last_obs, np.float32).reshape(obs_dim) for t in trajectories])
    return obs, last


def behaviour(trajectories: Sequence[Trajectory], continuous_size: int,
              discrete_branches: Sequence[int], device: torch.device, sequence_length: int = 1
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(actions, log-probs, action masks) of the behaviour, each trajectory padded to whole
    sequences of ``sequence_length`` (zeros; masks all allowed). Actions are float32 rows when
    there is a continuous part (hybrid: C + B columns), else int64; log-probs one column per
    action dimension / branch (ValueError naming the count otherwise)."""
    def rows(arrays, value=0):
        return np.concatenate([pad_sequences(a, sequence_length, value) for a in arrays])

    def tensor(array, dtype):
        return torch.as_tensor(array, dtype=dtype, device=device)

    # log-probs: one column per action dimension / branch ([T] rows read as one column)
    b_logprobs = tensor(rows([np.asarray(t.logprobs, np.float32).reshape(len(t.rewards), -1)
                              for t in trajectories]), torch.float32)
    num_columns = continuous_size + len(discrete_branches)
    if b_logprobs.shape[1] != num_columns:
        raise ValueError(f"per-action ratios need {num_columns} log-prob columns per step "
                         f"(one per action dimension / branch), got {b_logprobs.shape[1]}")
    b_actions = tensor(rows([np.asarray(t.actions) for t in trajectories]),
                       torch.float32 if continuous_size else torch.int64)
    b_masks = None
    if discrete_branches:
        b_masks = tensor(rows([
            t.action_masks if t.action_masks is not None
            else np.ones((len(t.rewards), sum(discrete_branches)), bool)
            for t in trajectories], True), torch.bool)
    return b_actions, b_logprobs, b_masks


def stored_memories(trajectories: Sequence[Trajectory], sequence_length: int,
                    memory_size: int) -> np.ndarray:
    """[sum of ceil(T / L), memory_size]: the rollout actor memory at each sequence's first
    step (zeros where a trajectory stored none; ValueError when the width is not the network's
    ``memory_size``)."""
    out = []
    for traj in trajectories:
        stored = traj.extras.memories
        n = len(traj.rewards)
        stored = (np.zeros((n, memory_size), np.float32) if stored is None
                  else np.asarray(stored, np.float32).reshape(n, -1))
        if stored.shape[1] != memory_size:
            raise ValueError(f"trajectory memories have {stored.shape[1]} columns, the "
                             f"network's memory_size is {memory_size}")
        out.append(stored[::sequence_length])
    return np.concatenate(out)


def normalized(advantages: np.ndarray) -> np.ndarray:
    """(A − mean) / (std + 1e-10) over the whole buffer."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-10)
