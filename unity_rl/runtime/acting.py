"""The acting-policy base: what an actor calls on the policy copy of each behavior it trains.

``ActingPolicy`` is the whole contract between ``unity_rl.runtime.actor`` and a trainer type's
acting side (``PPOPolicy``, ``unity_rl.algorithms.offpolicy.acting``): the actor calls exactly
these methods, in this order, and nothing else —

    load_weights(state)              between collections, with what the learner host published
    act(obs, mask, agent_keys=keys)  every step, one batched call for the agents that decide
    step_extras()                    right after act: per-row data stored with those steps
    env_actions(actions)             what the builds receive for act's actions
    episodes_ended(keys)             agents whose episode ended in the step just observed
    finish_segment(segment)          each segment, before it is sent to the learner
    close()                          once, when the actor stops

Contract on ``act``: row i of ``obs`` is the agent ``agent_keys[i]``; rows are independent and
agent order and count may change from call to call (ML-Agents guarantees neither), so per-agent
state (exploration noise, recurrent memories) is kept by key. The actor always passes
``agent_keys``; ``None`` only comes from callers outside an actor (evaluation, tests), which
then have no per-agent state (a memory policy then starts every row from zeros). Per-agent
state lives as long as the actor's policy copy: a re-created actor (or a restarted build, whose
agents end their episodes interrupted) starts its agents from fresh state. Everything but
``act`` and ``load_weights`` does nothing by default.

Imported inside every actor process: numpy and the experience types only.
"""
from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence

import numpy as np

from unity_rl.experience import Segment

AgentKeys = Sequence[Hashable]
"""One key per decision row: (build, agent id) pairs in an actor, anything hashable in tests."""


def stored_memories(store: dict, agent_keys: "AgentKeys | None", n: int,
                    memory_size: int) -> np.ndarray:
    """[n, memory_size]: each row's memory from ``store`` (AgentKey -> [memory_size]); zeros for
    agents not in it (a new episode) or when no keys are given."""
    memory = np.zeros((n, memory_size), np.float32)
    if agent_keys is not None:
        if len(agent_keys) != n:
            raise ValueError(f"{len(agent_keys)} agent keys for {n} observation rows")
        for i, key in enumerate(agent_keys):
            stored = store.get(key)
            if stored is not None:
                memory[i] = stored
    return memory


class ActingPolicy(abc.ABC):
    """One behavior's policy copy inside an actor (see the module doc for the call order)."""

    version: int = -1
    """Version of the loaded weights (-1: none loaded yet)."""

    @abc.abstractmethod
    def load_weights(self, weights: dict) -> None:
        """Loads what the learner host's ``weights()`` published (CPU tensors, plain dicts)."""

    @abc.abstractmethod
    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False, agent_keys: AgentKeys | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[n, obs_dim] raw flat observations -> (actions, logprobs, values) as the
        ``Trajectory`` fields store them (n rows each). ``action_mask``: bool
        [n, sum(branches)], True where allowed. ``deterministic``: no exploration."""

    def step_extras(self) -> dict[str, np.ndarray]:
        """``StepExtras`` field -> one row per row of the last ``act`` call, stored with those
        steps in their trajectories (a memory policy: ``memories``, the memory each agent acted
        from). Default: none."""
        return {}

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """What the builds receive for ``act``'s actions (default: the same)."""
        return actions

    def episodes_ended(self, agent_keys: AgentKeys) -> None:
        """The episodes of these agents ended: drop their per-agent state (default: none)."""

    def finish_segment(self, segment: Segment) -> Segment:
        """Sees each segment before it is sent; returns what to send (default: the same)."""
        return segment

    def close(self) -> None:
        """Frees what the policy holds outside the process (default: nothing)."""
