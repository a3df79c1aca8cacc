"""The acting side of off-policy (DDPG) training: transitions, the actor's policy, shared replay.

Kept light (numpy, torch, the DDPG policy and the replay buffer; never the trainer) because it is
imported inside every actor process when the actor unpickles its policy factory.

Experience: the actor keeps its ``TrajectoryCollector`` (one per-agent bookkeeping for every
algorithm); ``trajectories_to_transitions`` turns its trajectories into one-step transitions:

    row t of a trajectory:  (obs[t], actions[t], rewards[t], next_obs, terminated)
    next_obs   = obs[t + 1], or ``last_obs`` on the last row
    terminated = 1 only on the last row of a trajectory whose episode really ended

so the three kinds of cut come out right without a second collector: an episode end
(``terminated=True``: no bootstrap), Unity's truncation (``interrupted``: ``last_obs`` is the
final observation, bootstrap from it) and a time-horizon or segment cut (``last_obs`` is the next
decision's observation, bootstrap from it).

The actor's policy (``DDPGActorPolicy``) fits ``Actor`` like ``PPOPolicy`` does — ``act(obs,
action_mask)`` returning (actions, logprobs, values) with dummy logprobs (0) and values (NaN) —
plus the optional hooks ``Actor`` calls when a policy has them (see ``unity_rl.runtime.actor``):
``act(..., agent_keys=)`` for per-agent (Ornstein–Uhlenbeck) noise, ``episodes_ended(keys)`` to
reset that noise, and ``finish_segment(segment)`` where the actor's share of the Ape-X work is done:

- initial priorities (``prioritized: true``): |TD error| of each new transition under the
  critic shipped with the weights, computed by the actor (Ape-X) rather than the learner;
- shared replay (async wiring, local backend): the transitions are written straight into the
  ``SharedReplayBuffer`` and the segment goes to the learner without its trajectories, as a
  receipt (steps, episode returns, policy version);
- otherwise (sync wiring, or the Ray backend, where shared memory does not span nodes) the
  trajectories travel to the learner, the priorities in ``Trajectory.values`` (NaN when none).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.algorithms.ddpg.learner import DDPGPolicy, continuous_action_size
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.replay.buffers import SharedReplayBuffer
from unity_rl.algorithms.types import Segment, Trajectory, TransitionBatch


# ----------------------------------------------------------------------------------------------
# Trajectories -> transitions
# ----------------------------------------------------------------------------------------------

def trajectories_to_transitions(trajectories: Sequence[Trajectory]) -> TransitionBatch:
    """One transition per trajectory row (see the module doc for next_obs and terminated)."""
    if not trajectories:
        raise ValueError("no trajectories to convert")
    obs = np.concatenate([t.obs for t in trajectories]).astype(np.float32, copy=False)
    next_obs = np.concatenate([np.concatenate([t.obs[1:], t.last_obs[None]])
                               for t in trajectories]).astype(np.float32, copy=False)
    terminated = np.concatenate([_terminated_column(t) for t in trajectories])
    actions = np.concatenate([t.actions for t in trajectories]).astype(np.float32, copy=False)
    rewards = np.concatenate([t.rewards for t in trajectories]).astype(np.float32, copy=False)
    return TransitionBatch(obs, actions, rewards, next_obs, terminated)


def _terminated_column(t: Trajectory) -> np.ndarray:
    column = np.zeros(len(t.rewards), np.float32)
    column[-1] = float(t.terminated)
    return column


def carried_priorities(trajectories: Sequence[Trajectory]) -> np.ndarray | None:
    """The actor-side initial priorities carried in ``Trajectory.values`` (None if any is NaN)."""
    values = np.concatenate([np.asarray(t.values, np.float64) for t in trajectories])
    return values if values.size and np.isfinite(values).all() else None


# ----------------------------------------------------------------------------------------------
# The actor's policy
# ----------------------------------------------------------------------------------------------

class DDPGActorPolicy:
    """``DDPGPolicy`` shaped for ``Actor``: exploration, warm-up, priorities, shared replay.

    Weights arrive as ``DDPGHost.actor_weights()``: ``{"ddpg": DDPGLearner.weights(...),
    "agent_steps": collected steps of the run when published, "num_actors": K, "replay": handle
    or None}``.  Warm-up (uniform random actions) lasts while the run's estimated agent-steps are
    below ``warmup_steps``: the published count plus K times this actor's own steps since.
    """

    wants_agent_keys = True
    """``Actor`` passes ``agent_keys`` to ``act`` and calls ``episodes_ended``."""

    def __init__(self, obs_shapes: Any, action_spec: Any, seed: int, *, network_cfg: NetworkConfig,
                 ddpg_cfg: DDPGConfig):
        self.cfg = ddpg_cfg
        self.replay: SharedReplayBuffer | None = None
        self.published_steps = 0
        self.num_actors = 1
        self.acted = 0
        """Rows acted on since the last weights."""
        self.policy: DDPGPolicy | None = None
        try:
            continuous_action_size(action_spec)
        except ValueError as err:
            # The learner refuses this spec with a configuration error naming the behavior (and
            # suggesting PPO) as soon as the actors report ready; failing here first would bury
            # that message under an actor traceback. Without a policy the actor cannot act.
            self._unsupported = str(err)
            return
        self.policy = DDPGPolicy(obs_shapes, action_spec, ddpg_cfg, network_cfg.hidden_units,
                                 network_cfg.num_layers, network_cfg.normalize, seed=seed,
                                 vis_encode_type=network_cfg.vis_encode_type)

    @property
    def version(self) -> int:
        return -1 if self.policy is None else self.policy.version

    def load_weights(self, weights: dict) -> None:
        if self.policy is None:
            raise ValueError(self._unsupported)
        self.policy.load_weights(weights["ddpg"])
        self.published_steps = int(weights["agent_steps"])
        self.num_actors = max(1, int(weights["num_actors"]))
        self.acted = 0
        handle = weights.get("replay")
        if handle is not None and self.replay is None:  # the learner's shared buffer (Ape-X)
            self.replay = SharedReplayBuffer.attach(handle)

    def run_steps(self) -> int:
        """This actor's estimate of the run's collected agent-steps (for warm-up)."""
        return self.published_steps + self.num_actors * self.acted

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False, agent_keys: Sequence[Hashable] | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions [n, act_dim] in [-1, 1], logprobs 0, values NaN): behaviour actions."""
        n = len(obs)
        if deterministic:
            actions = self.policy.act(obs, noise=False)
        else:
            actions = self.policy.explore(obs, self.run_steps(), agent_keys)
        self.acted += n
        return actions, np.zeros(n, np.float32), np.full(n, np.nan, np.float32)

    def episodes_ended(self, agent_keys: Sequence[Hashable]) -> None:
        """Resets the exploration noise of agents whose episode ended."""
        self.policy.reset_noise(agent_keys)

    def finish_segment(self, segment: Segment) -> Segment:
        """Initial priorities, shared-replay writes (module doc); returns what to send."""
        if not segment.trajectories:
            return segment
        with_priorities = self.cfg.prioritized and self.policy.critic is not None
        if self.replay is None and not with_priorities:
            return segment
        batch = trajectories_to_transitions(segment.trajectories)
        priorities = self.policy.td_errors(batch) if with_priorities else None
        if self.replay is not None:
            self.replay.add(batch, priorities)
            return segment._replace(trajectories=[])
        if priorities is None:
            return segment
        out, start = [], 0
        for t in segment.trajectories:
            end = start + len(t.rewards)
            out.append(t._replace(values=priorities[start:end].astype(np.float32)))
            start = end
        return segment._replace(trajectories=out)

    def close(self) -> None:
        if self.replay is not None:
            self.replay.close()
            self.replay = None


def ddpg_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, **options):
    """The actors' picklable factory: a ``DDPGActorPolicy`` (options: network_cfg, ddpg_cfg,
    replay_link)."""
    return DDPGActorPolicy(obs_shapes, action_spec, seed, **options)
