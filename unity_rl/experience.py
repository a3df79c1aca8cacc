"""Experience formats that actors produce and learners consume.

A ``Trajectory`` is one agent's contiguous run of decisions, cut at the end of its episode or at
``time_horizon``; advantages are computed per trajectory, never across agents.  Observations are
flat float32 rows here: every observation of the BehaviorSpec flattened (images CHW, values in
[0, 1] as mlagents-envs decodes them) and concatenated in spec order; networks get the shapes
and split rows back (``unity_rl.algorithms.encoders``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class StepExtras(NamedTuple):
    """Per-step data beside the core fields that only some algorithms produce; each field is
    None when absent, else one row per step of its trajectory (``[T, ...]``).

    A new kind of per-step data is a new field here (default None), never a reuse of a core
    field: every transport copies each field (``owned_copy``), and a consumer that does not know
    a field ignores it. An acting policy fills fields through ``ActingPolicy.step_extras`` (one
    row per agent acting) or ``finish_segment``; the collector fills the group fields
    (``BehaviorPlan.collect_groups``).
    """

    priorities: np.ndarray | None = None
    """[T] float32: initial replay priorities (|TD error| under the critic the actor was shipped;
    off-policy trainers with ``prioritized: true``, computed actor-side as in Ape-X)."""
    memories: np.ndarray | None = None
    """[T, memory_size] float32: the recurrent memory [h | c] that was the actor LSTM's input
    when action t was taken (zeros at an episode's first step), kept per agent by the acting
    policy (ML-Agents' ``memory`` field: ``retrieve_previous_memories``). The learner uses the
    row at the start of each training sequence (``network_settings.memory``)."""
    critic_memories: np.ndarray | None = None
    """[T, memory_size] float32: the critic memory each step's training sequence starts from
    (ML-Agents' ``critic_memory``, computed sequence by sequence when the trajectory is
    processed; off-policy memory policies fill it in ``finish_segment``)."""
    group_obs: np.ndarray | None = None
    """[T, M, obs_dim] float32: the other members' observations at step t (each the one its
    member acted on; ML-Agents' ``group_obs``), padded with NaN to the trajectory's largest group
    M (NaN rows: no member). Filled by a collector with groups (``BehaviorPlan.collect_groups``,
    ``unity_rl.runtime.groups``)."""
    group_actions: np.ndarray | None = None
    """[T, M, action_cols] float32: those members' actions (the action row convention, discrete
    indices as floats), 0 where no member."""
    groupmate_rewards: np.ndarray | None = None
    """[T] float32: the sum of the other members' individual rewards for step t."""
    group_rewards: np.ndarray | None = None
    """[T] float32: the group reward the agent received after action t (``group_reward``)."""
    group_dones: np.ndarray | None = None
    """[T, M] bool: whether each other member's episode had ended at step t (True where none)."""


class Trajectory(NamedTuple):
    """One agent's piece of experience under one policy version."""

    obs: np.ndarray
    """[T, obs_dim] float32: observation at each decision (raw, not normalised)."""
    actions: np.ndarray
    """The action row convention, shared by ``PPOPolicy.act``, trajectories and export:
    continuous-only: [T, C] float32, the unclamped sample (the environment gets
    ``PPOPolicy.env_actions(a)``: clamp(a, -3, 3) / 3 as ML-Agents);
    discrete-only: [T, B] int64, one index per branch;
    hybrid (C continuous + B branches): [T, C + B] float32, the C unclamped continuous values
    followed by the B branch indices stored as floats (``distributions.split_hybrid`` splits it).
    """
    logprobs: np.ndarray
    """[T, K] float32: log-probability of each action under the behaviour policy, one column per
    continuous dimension then per branch (K = C + B; ML-Agents' per-action ratios); [T] is read
    as one column."""
    values: np.ndarray
    """[T] float32: value estimates of the behaviour policy (PPOLearner recomputes values with its
    current critic for GAE); NaN from an acting
    policy without a value head (off-policy)."""
    rewards: np.ndarray
    """[T] float32: reward received after action t (up to the next decision or the end)."""
    last_obs: np.ndarray
    """[obs_dim] float32: observation after the last action (the final observation at an end)."""
    terminated: bool
    """True when the episode really ended after the last action: no bootstrap from last_obs.
    False on truncation (Unity's interrupted) or a time-horizon cut: bootstrap from V(last_obs)."""
    action_masks: np.ndarray | None = None
    """[T, sum(branches)] bool, True where allowed; None when all allowed or no branches."""
    extras: StepExtras = StepExtras()
    """Optional per-step data (replay priorities, ...): see ``StepExtras``."""
    interrupted: bool = False
    """True when Unity interrupted the episode after the last action (max step reached, or a
    restarted build): ``last_obs`` is then the final observation and ``terminated`` is False."""
    next_group_obs: np.ndarray | None = None
    """[M', obs_dim] float32: the other group members' latest observations when the trajectory
    was cut (ML-Agents' ``next_group_obs``, for the group value of ``last_obs``); None without
    groups, [0, obs_dim] for an agent alone in its group."""
    group_continues: bool = False
    """True when some other member's episode had not ended at the trajectory's last step
    (ML-Agents' ``not all_group_dones_reached``): a POCA learner then bootstraps a terminated
    agent's return from the group's value."""


class Segment(NamedTuple):
    """What an actor sends to the learner: trajectories plus bookkeeping."""

    trajectories: list[Trajectory]
    """Agent trajectories collected by one actor since its last segment."""
    policy_version: int
    """Version of the weights the actor acted with (for policy-lag accounting)."""
    actor_id: int
    """Which actor collected it."""
    agent_steps: int
    """Number of agent decisions in this segment (sum of trajectory lengths)."""
    episode_returns: list[float]
    """Returns of the episodes that ended during collection."""
    episode_lengths: list[int]
    """Lengths (in decisions) of the episodes that ended during collection."""
    group_returns: list[float] = []
    """Per agent whose episode ended together with its group's (ML-Agents'
    ``all_group_dones_reached and done_reached``): the group rewards it received over the
    episode (``Environment/Group Cumulative Reward``); empty without groups."""


class TransitionBatch(NamedTuple):
    """Off-policy transitions: row i is (obs, action, reward, next_obs, terminated[, mask])."""

    obs: np.ndarray
    """[n, obs_dim] float32."""
    actions: np.ndarray
    """[n, act_dim] float32: the continuous actions as the build got them, then the discrete
    branch indices stored as floats."""
    rewards: np.ndarray
    """[n] float32."""
    next_obs: np.ndarray
    """[n, obs_dim] float32: the next decision's observation, or the final one at an end."""
    terminated: np.ndarray
    """[n] float32 1.0 where the episode really ended (no bootstrap); 0.0 on truncation."""
    action_masks: np.ndarray | None = None
    """[n, sum(branches)] uint8, 1 where the action was allowed when it was taken (discrete
    branches); None for continuous-only behaviors."""
    memories: np.ndarray | None = None
    """[n, memory_size] float32: the actor memory each step was acted from (memory policies;
    rows then come in whole ``sequence_length`` sequences and the learner reads each sequence's
    first); None without memory."""
    critic_memories: np.ndarray | None = None
    """[n, memory_size] float32: the critic memory each step's sequence starts from (ML-Agents'
    ``critic_memory``); None without memory."""
    loss_mask: np.ndarray | None = None
    """[n] uint8: 1 on real steps, 0 on rows that pad a sequence (masked out of the losses);
    None without memory."""


def owned_copy(value: Any) -> Any:
    """``value`` with every numpy array in it writable: read-only arrays (Ray's zero-copy views)
    are copied, writable ones kept. Walks NamedTuples field by field (rebuilt with every field,
    so a new field travels without code here), lists, tuples and dicts; anything else is kept."""
    if isinstance(value, np.ndarray):
        return value if value.flags.writeable else np.array(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(owned_copy(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(owned_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: owned_copy(v) for k, v in value.items()}
    return value
