"""What POCA's centralised critic reads before an update, and the returns made from what it gives
(``POCALearner.prepare``; ML-Agents 1.1.0's ``poca/trainer.py`` and ``poca/optimizer_torch.py``).

- ``group_rows``: the groupmates' rows of a buffer as padded arrays: their observations at every
  step ([N, M, obs_dim], NaN where no member: the critic's absent-member marker), their
  observations when each trajectory ends ([M_traj, M, obs_dim], for V(s_next)) and their action
  rows ([N, M, C + B], 0 where no member); M is the buffer's largest group less one;
- ``values_by_sequence``: with memory, values and baselines ``sequence_length`` steps at a time
  (ML-Agents' ``_evaluate_by_sequence_team``) from a value memory and a baseline memory, both
  carried from trajectory to trajectory and never dropped at an episode end (ML-Agents keeps them
  under agent id "", its trainer passing none); the carries go in and come back out, the learner
  keeps them (``value_memory``, ``baseline_memory``; not checkpointed, as ML-Agents');
- ``lambda_return``: ML-Agents' TD(λ) returns (not GAE).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from unity_rl.algorithms.poca.model import POCACritic
from unity_rl.experience import Trajectory


def lambda_return(r: np.ndarray, value_estimates: np.ndarray, gamma: float, lambd: float,
                  value_next: float) -> np.ndarray:
    """ML-Agents' ``trainer_utils.lambda_return`` (TD(λ), not GAE), float32 as its arrays."""
    returns = np.zeros_like(r)
    returns[-1] = r[-1] + gamma * value_next
    for t in reversed(range(0, r.size - 1)):
        returns[t] = gamma * lambd * returns[t + 1] + r[t] + (1 - lambd) * gamma * value_estimates[t + 1]
    return returns


def group_rows(trajectories: Sequence[Trajectory], obs_dim: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(groupmates' observations [N, M, obs_dim], their observations at each trajectory's end
    [len(trajectories), M, obs_dim], their action rows [N, M, C + B]), raw (module doc)."""
    mates = _padded([_group_obs(t, obs_dim) for t in trajectories], obs_dim)
    next_mates = _padded([_next_group_obs(t, obs_dim)[None] for t in trajectories], obs_dim)
    first = trajectories[0]
    action_cols = np.asarray(first.actions).reshape(len(first.rewards), -1).shape[1]
    mates_actions = _padded([_group_actions(t, action_cols) for t in trajectories], action_cols,
                            fill=0.0)
    return mates, next_mates, mates_actions


def values_by_sequence(critic: POCACritic, obs, mates, mates_actions, last_obs, next_mates,
                       lengths: list[int], sequence_length: int,
                       value_memory: torch.Tensor | None, baseline_memory: torch.Tensor | None):
    """ML-Agents' ``_evaluate_by_sequence_team``, trajectory after trajectory: values and
    baselines ``sequence_length`` steps at a time (the leftover last), each sequence from the
    memories the previous one left, the first from the carried ``value_memory`` /
    ``baseline_memory`` (None: zeros); V(s_next) from the value memory after the last step.
    Returns (values [N, K], baselines [N, K], next values [M, K], the value and the baseline
    memory each sequence starts from [sum of ceil(T / L), memory_size], the two carries after
    the last trajectory)."""
    L = sequence_length
    value_enc = critic.value_encoding(obs, mates)  # rows are independent before the LSTM
    baseline_enc = critic.baseline_encoding(obs, mates, mates_actions)
    next_enc = critic.value_encoding(last_obs, next_mates)
    zeros = obs.new_zeros(1, critic.memory_size)
    values, baselines, next_values, value_starts, baseline_starts = [], [], [], [], []
    offset = 0
    for i, length in enumerate(lengths):
        v_mem = zeros if value_memory is None else value_memory
        b_mem = zeros if baseline_memory is None else baseline_memory
        for begin in range(0, length, L):
            rows = slice(offset + begin, offset + min(begin + L, length))
            size = rows.stop - rows.start
            value_starts.append(v_mem)
            baseline_starts.append(b_mem)
            v, v_mem = critic.heads(*(e[rows] for e in value_enc), v_mem, size)
            b, b_mem = critic.heads(*(e[rows] for e in baseline_enc), b_mem, size)
            values.append(v)
            baselines.append(b)
        offset += length
        next_values.append(critic.heads(*(e[i:i + 1] for e in next_enc), v_mem, 1)[0])
        # ML-Agents' POCA keeps both under agent id "" for every trajectory, never reset
        value_memory, baseline_memory = v_mem, b_mem
    numpy = lambda parts: torch.cat(parts).cpu().numpy()  # noqa: E731
    return (numpy(values), numpy(baselines), numpy(next_values), torch.cat(value_starts),
            torch.cat(baseline_starts), value_memory, baseline_memory)


def _group_obs(traj: Trajectory, obs_dim: int) -> np.ndarray:
    """[T, M, obs_dim] groupmates' observations of a trajectory (M = 0 without groups)."""
    g = traj.extras.group_obs
    if g is None:
        return np.zeros((len(traj.rewards), 0, obs_dim), np.float32)
    return np.asarray(g, np.float32).reshape(len(traj.rewards), -1, obs_dim)


def _group_actions(traj: Trajectory, action_cols: int) -> np.ndarray:
    g = traj.extras.group_actions
    if g is None:
        return np.zeros((len(traj.rewards), 0, action_cols), np.float32)
    return np.asarray(g, np.float32).reshape(len(traj.rewards), -1, action_cols)


def _next_group_obs(traj: Trajectory, obs_dim: int) -> np.ndarray:
    g = traj.next_group_obs
    if g is None:
        return np.zeros((0, obs_dim), np.float32)
    return np.asarray(g, np.float32).reshape(-1, obs_dim)


def _padded(parts: list[np.ndarray], width: int, fill: float = np.nan) -> np.ndarray:
    """Concatenates [T_i, M_i, width] arrays along rows, padded to the largest M with ``fill``."""
    m = max(p.shape[1] for p in parts)
    out = np.full((sum(len(p) for p in parts), m, width), fill, np.float32)
    row = 0
    for p in parts:
        out[row:row + len(p), :p.shape[1]] = p
        row += len(p)
    return out
