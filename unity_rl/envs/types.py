"""Plain data types shared by the environment layer and the trainers.

Contract: an agent is identified by ``AgentKey(build, behavior, agent_id)`` and by nothing else.
Neither the order nor the number of agents in a batch is stable from one step to the next: an
agent may appear late, be destroyed, or be absent from a step in which it requested no decision.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class AgentKey(NamedTuple):
    """Identity of one agent across the whole run."""

    build: int
    """Index of the build (worker) that hosts the agent, 0..num_builds-1."""
    behavior: str
    """Behavior name, as in the build's BehaviorSpec."""
    agent_id: int
    """Unity's agent id; stable across the agent's episodes within one build process."""


class DecisionBatch(NamedTuple):
    """Agents that requested a decision in one Unity step, for one behavior of one build."""

    keys: list[AgentKey]
    """One key per row."""
    obs: list[np.ndarray]
    """One array per observation of the BehaviorSpec, each shaped [n, *obs_shape]."""
    reward: np.ndarray
    """[n] float32: reward gathered since the agent's previous decision."""
    action_mask: np.ndarray | None
    """[n, sum(branches)] bool, True where the action is *allowed*; None without discrete branches."""
    group_id: np.ndarray | None = None
    """[n] int32: the agent's ``SimpleMultiAgentGroup`` id in its build, 0 for no group (the
    protocol's ``AgentInfoProto.group_id``); ids are unique per build only, so a group is
    ``(build, group_id)``. The environment layer always fills it; None only in hand-made batches
    (read as all 0)."""
    group_reward: np.ndarray | None = None
    """[n] float32: the group reward gathered since the agent's previous decision (``AddGroupReward``
    / ``SetGroupReward``, the same value for every member); None read as 0."""


class TerminalBatch(NamedTuple):
    """Agents whose episode ended in one Unity step, for one behavior of one build."""

    keys: list[AgentKey]
    """One key per row."""
    obs: list[np.ndarray]
    """Final observations, one array per observation of the BehaviorSpec, each [n, *obs_shape]."""
    reward: np.ndarray
    """[n] float32: reward gathered since the agent's previous decision, the last one included."""
    interrupted: np.ndarray
    """[n] bool: True when the episode was cut by max step (truncation), False for a real end."""
    group_id: np.ndarray | None = None
    """[n] int32: the group the agent belonged to when its episode ended (0: none); see
    ``DecisionBatch.group_id``."""
    group_reward: np.ndarray | None = None
    """[n] float32: group reward since the agent's previous decision, the last one included."""


def short_name(behavior: str) -> str:
    """'3DBall?team=0' -> '3DBall' (a behavior's name without Unity's ``?team=N``)."""
    return behavior.split("?", 1)[0]
