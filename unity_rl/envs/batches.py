"""Building and concatenating ``DecisionBatch``/``TerminalBatch`` from mlagents-envs steps.

Contract: a batch holds the rows of one behavior, with the protocol's ``group_id`` and
``group_reward`` per row; observations are converted with
``convert_obs`` (only PNG-compressed observations become uint8, everything else stays float32
exactly as sent); concatenation keeps row order (builds in the order given).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from mlagents_envs.base_env import BehaviorSpec, DecisionSteps, TerminalSteps

from unity_rl.envs.behavior import allowed_mask, convert_obs
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch


def decision_batch(build: int, name: str, steps: DecisionSteps, spec: BehaviorSpec,
                   png: Sequence[bool]) -> DecisionBatch:
    return DecisionBatch(
        keys=[AgentKey(build, name, int(i)) for i in steps.agent_id],
        obs=convert_obs(steps.obs, png),
        reward=steps.reward,
        action_mask=allowed_mask(steps, spec.action_spec),
        group_id=np.asarray(steps.group_id, np.int32),
        group_reward=np.asarray(steps.group_reward, np.float32),
    )


def terminal_batch(build: int, name: str, steps: TerminalSteps,
                   png: Sequence[bool]) -> TerminalBatch:
    return TerminalBatch(
        keys=[AgentKey(build, name, int(i)) for i in steps.agent_id],
        obs=convert_obs(steps.obs, png),
        reward=steps.reward,
        interrupted=steps.interrupted,
        group_id=np.asarray(steps.group_id, np.int32),
        group_reward=np.asarray(steps.group_reward, np.float32),
    )


def empty_steps(spec: BehaviorSpec) -> tuple[DecisionSteps, TerminalSteps]:
    return DecisionSteps.empty(spec), TerminalSteps.empty(spec)


def cut_episodes(last: DecisionBatch | None) -> TerminalBatch | None:
    """Terminal rows (interrupted, reward 0, last observation) for the agents of ``last``."""
    if last is None or not last.keys:
        return None
    n = len(last.keys)
    return TerminalBatch(last.keys, last.obs, np.zeros(n, np.float32), np.ones(n, bool),
                         group_ids(last), np.zeros(n, np.float32))


def group_ids(batch: DecisionBatch | TerminalBatch) -> np.ndarray:
    """[n] int32 group ids of ``batch`` (zeros for a hand-made batch without them)."""
    if batch.group_id is None:
        return np.zeros(len(batch.keys), np.int32)
    return np.asarray(batch.group_id, np.int32)


def group_rewards(batch: DecisionBatch | TerminalBatch) -> np.ndarray:
    """[n] float32 group rewards of ``batch`` (zeros for a hand-made batch without them)."""
    if batch.group_reward is None:
        return np.zeros(len(batch.keys), np.float32)
    return np.asarray(batch.group_reward, np.float32)


def row_slices(counts: list[int]) -> list[slice]:
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(counts))]


def _concat_obs(parts: list[list[np.ndarray]]) -> list[np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return [np.concatenate(arrays, axis=0) for arrays in zip(*parts)]


def concat_decisions(parts: list[DecisionBatch]) -> DecisionBatch:
    if len(parts) == 1:
        return parts[0]
    masks = [p.action_mask for p in parts]
    return DecisionBatch(
        keys=[k for p in parts for k in p.keys],
        obs=_concat_obs([p.obs for p in parts]),
        reward=np.concatenate([p.reward for p in parts]),
        action_mask=None if masks[0] is None else np.concatenate(masks),
        group_id=np.concatenate([group_ids(p) for p in parts]),
        group_reward=np.concatenate([group_rewards(p) for p in parts]),
    )


def concat_terminals(parts: list[TerminalBatch]) -> TerminalBatch:
    if len(parts) == 1:
        return parts[0]
    return TerminalBatch(
        keys=[k for p in parts for k in p.keys],
        obs=_concat_obs([p.obs for p in parts]),
        reward=np.concatenate([p.reward for p in parts]),
        interrupted=np.concatenate([p.interrupted for p in parts]),
        group_id=np.concatenate([group_ids(p) for p in parts]),
        group_reward=np.concatenate([group_rewards(p) for p in parts]),
    )
