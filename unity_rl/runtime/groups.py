"""Groupmates' data for each agent step: ML-Agents' ``AgentProcessor`` group bookkeeping.

Used by ``TrajectoryCollector(groups=True)`` (a ``BehaviorPlan`` with ``collect_groups``, e.g.
``trainer_type: poca``). A group is ``(build, group_id)`` with ``group_id > 0`` (Unity's
SimpleMultiAgentGroup; ids are unique per build); groupmates share the lane's behavior.

Contract, step for step as ML-Agents 1.1.0's ``agent_processor.py`` (TRAINERS.md §3):

- ``note(rows)``: for every row (terminal rows of a message first, then its decision rows) whose
  agent has an action waiting for its reward, the agent's *status* in its group becomes
  (observation it acted on, that action, the reward now, done = terminal row), and its
  *current* observation the row's. Statuses persist from message to message: a groupmate absent
  from a message keeps its last one (``_group_status``, ``_current_group_obs``).
- ``mates(key, group)``: a completed step's groupmate data, from the statuses of every *other*
  member at that moment (``AgentExperience.group_status``): their observations, actions,
  rewards and dones.
- ``next_obs(key, group)``: the other members' current observations (``next_group_obs`` of a
  trajectory cut now).
- ``forget(keys)``: terminated agents leave their groups once the whole message is processed,
  so a groupmate's later steps have one member fewer (``_clear_group_status_and_obs``).

The collector calls ``note`` for a message's terminal rows before it closes them and for its
decision rows after the terminals are closed, as ML-Agents does; an agent's first decision
after its episode's end therefore gives no status (its action is not known yet).
"""
from __future__ import annotations

from typing import Hashable, NamedTuple

import numpy as np


class Status(NamedTuple):
    """One member's latest step, as its groupmates see it (ML-Agents' ``AgentStatus``)."""

    obs: np.ndarray
    action: np.ndarray
    reward: float
    done: bool


class MatesRow(NamedTuple):
    """The groupmates of one agent step (one entry per other member)."""

    obs: list[np.ndarray]
    actions: list[np.ndarray]
    rewards: list[float]
    dones: list[bool]


NO_MATES = MatesRow([], [], [], [])


class GroupTracker:
    """Statuses and current observations of the members of every group (see module doc)."""

    def __init__(self) -> None:
        self._status: dict[Hashable, dict[Hashable, Status]] = {}
        self._current: dict[Hashable, dict[Hashable, np.ndarray]] = {}

    def note(self, key: Hashable, group: Hashable | None, obs: np.ndarray, action: np.ndarray,
             reward: float, done: bool, current_obs: np.ndarray) -> None:
        """Records ``key``'s status in ``group`` (None: no group, nothing recorded)."""
        if group is None:
            return
        self._status.setdefault(group, {})[key] = Status(obs, action, reward, done)
        self._current.setdefault(group, {})[key] = current_obs

    def mates(self, key: Hashable, group: Hashable | None) -> MatesRow:
        if group is None or group not in self._status:
            return NO_MATES
        others = [s for k, s in self._status[group].items() if k != key]
        return MatesRow([s.obs for s in others], [s.action for s in others],
                        [s.reward for s in others], [s.done for s in others])

    def next_obs(self, key: Hashable, group: Hashable | None) -> list[np.ndarray]:
        if group is None or group not in self._current:
            return []
        return [o for k, o in self._current[group].items() if k != key]

    def forget(self, keys) -> None:
        """Terminated agents leave every group they were in."""
        for table in (self._status, self._current):
            for group in list(table):
                members = table[group]
                for key in keys:
                    members.pop(key, None)
                if not members:
                    del table[group]

    def clear(self) -> None:
        self._status.clear()
        self._current.clear()


def stack_mates(rows: list[MatesRow], obs_dim: int, action_dim: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A trajectory's groupmate rows as arrays padded to its largest group M:
    (obs [T, M, obs_dim] float32, NaN where no member; actions [T, M, action_dim] float32, 0 where
    none; rewards [T] float32 summed over members; dones [T, M] bool, True where none)."""
    t = len(rows)
    m = max((len(r.obs) for r in rows), default=0)
    obs = np.full((t, m, obs_dim), np.nan, np.float32)
    actions = np.zeros((t, m, action_dim), np.float32)
    dones = np.ones((t, m), bool)
    rewards = np.zeros(t, np.float32)
    for i, r in enumerate(rows):
        k = len(r.obs)
        if k:
            obs[i, :k] = np.stack(r.obs).reshape(k, obs_dim)
            actions[i, :k] = np.stack(r.actions).reshape(k, action_dim)
            dones[i, :k] = r.dones
            rewards[i] = np.float32(sum(r.rewards))
    return obs, actions, rewards, dones
