"""DDPG on the algorithm seam (``trainer_type: ddpg``): the actors' plan and the learner host.

Replay placement (decided in ``DDPGAlgorithm``, once): shared memory written by the actors in
the async wiring on the local backend (Ape-X, Horgan et al. 2018); a learner-side buffer fed
from segments otherwise (sync: the learner waits for the segments anyway; Ray: shared memory
does not span nodes), the actors' initial priorities riding in ``Trajectory.values``::

    async, local              actors --transitions (+ initial priorities)--> SharedReplayBuffer
                              actors --segment receipt (steps, returns, version)--> host.accept
    otherwise                 actors --segment (trajectories)--> host.accept --> ReplayBuffer
    both                      host.train: sample <- replay, update, new priorities -> replay

- **Replay ratio.** The host owes ``updates_owed(collected agent-steps, updates done)``
  gradient updates (``replay_ratio`` per agent-step after ``warmup_steps``). ``train(sync=True)``
  pays all of them (the sync round); ``train(sync=False)`` pays at most ``UPDATES_PER_ROUND``,
  so the async runner looks at the backend between chunks and never waits for a particular
  actor. ``ready()`` is "something is owed": the host never runs ahead of the data (the ratio is
  an upper bound). When actors produce faster than it trains, the debt grows
  (``Runtime/Update Backlog``) and the achieved ratio (``Runtime/Replay Ratio``) falls below the
  configured one: Ape-X's trade of sample efficiency for wall time.
- **Versions and lag.** The host's version moves on with every ``train`` that updated (and every
  sync round). Policy lag is measured per accepted segment in versions (``Policy/Lag``) and in
  gradient updates (``Policy/Lag Updates``). Nothing is dropped for lag: replay is off-policy
  by design, and ``unity_rl.max_policy_lag`` does not apply to DDPG.
- **Resume.** With ``save_replay_buffer: true`` (ML-Agents' key, off by default) the replay
  buffer is part of the checkpoint (``DDPGHost.state_dict``):
  4·(2·obs_dim + act_dim + 2) bytes per stored transition (+16 with ``prioritized``) in every
  kept checkpoint — 80 B for 3DBall, so 16 MB for 200k transitions; see docs/ddpg.md. With the
  async wiring the snapshot may hold a few segments whose receipts were not counted yet: extra,
  valid experience.
"""
from __future__ import annotations

import functools
import logging
import weakref
from typing import Any, NamedTuple

import numpy as np
import torch

from unity_rl.algorithms.ddpg.config import DDPGConfig, updates_owed
from unity_rl.algorithms.ddpg.learner import DDPGLearner, continuous_action_size
from unity_rl.replay.buffers import ReplayBuffer, ReplayLockTimeout, SharedReplayBuffer, per_beta
from unity_rl.algorithms.types import Segment, TransitionBatch
from unity_rl.runtime.algorithm import Algorithm, BehaviorPlan, HostContext
from unity_rl.runtime.messages import BehaviorInfo
from unity_rl.algorithms.ddpg.acting import carried_priorities, ddpg_policy, trajectories_to_transitions

logger = logging.getLogger(__name__)

UPDATES_PER_ROUND = 200
"""async: most gradient updates of one ``train`` (between two looks at the backend)."""
REPLAY_LOCK_TIMEOUT_S = 10.0
"""Longest wait for the shared replay buffer's lock while a live process holds it (a dead
holder is recovered at once: ``unity_rl.replay.buffers``)."""
_LAG_HISTORY = 4096
"""Versions remembered for measuring lag in gradient updates."""


# ----------------------------------------------------------------------------------------------
# The learner host: DDPGLearner + replay + counters
# ----------------------------------------------------------------------------------------------

class DDPGHost:
    """One behavior's DDPG learner, replay buffer and step counts (fits ``LearnerHost``).

    ``agent_steps`` counts collected agent-steps (what the replay ratio is measured against).
    """

    def __init__(self, learner: DDPGLearner, replay: ReplayBuffer, *, num_actors: int,
                 replay_handle: dict | None = None, max_steps: int = 0,
                 updates_per_round: int = UPDATES_PER_ROUND):
        self.learner = learner
        self.cfg: DDPGConfig = learner.cfg
        self.replay = replay
        self.num_actors = num_actors
        self.replay_handle = replay_handle
        """Where actors find the shared buffer (None: they send their transitions)."""
        self.max_steps = max_steps
        """The behavior's max_steps: PER's beta reaches 1 there (0: beta stays as configured)."""
        self.updates_per_round = updates_per_round
        self.version = 0
        self.agent_steps = 0
        self._updates_at: dict[int, int] = {0: 0}
        """version -> gradient updates done when it was published (recent versions only)."""
        self._lag_updates: list[float] = []
        self._updates_offset = 0
        """Learner updates that belong to another run (``restart_counters``)."""
        self._closer = None
        if hasattr(replay, "unlink"):  # a SharedReplayBuffer we own: never leak the segment
            self._closer = weakref.finalize(self, _close_shared, replay)

    @property
    def updates(self) -> int:
        """Gradient updates done in this run."""
        return self.learner.updates - self._updates_offset

    def restart_counters(self) -> None:
        """Weights kept, step counts from zero (``--initialize-from``): warm-up and the replay
        ratio start afresh."""
        self.agent_steps = 0
        self._updates_offset = self.learner.updates
        self._updates_at = {self.version: 0}

    # -- the seam -------------------------------------------------------------------------------
    def accept(self, segment: Segment) -> int | None:
        """Counts the segment's agent-steps and stores the transitions it carries (receipts
        carry none: their actors wrote them already); returns the lag in versions."""
        self.agent_steps += segment.agent_steps
        if segment.trajectories:
            batch = trajectories_to_transitions(segment.trajectories)
            priorities = carried_priorities(segment.trajectories) if self.cfg.prioritized else None
            self.replay.add(batch, priorities)
        then = self._updates_at.get(segment.policy_version)
        if then is not None:
            self._lag_updates.append(float(self.updates - then))
        return self.version - segment.policy_version

    def ready(self) -> bool:
        return self.updates_owed() > 0 and len(self.replay) > 0

    def train(self, sync: bool) -> dict[str, float]:
        owed = self.updates_owed()
        metrics = self._train(owed if sync else min(owed, self.updates_per_round))
        lags, self._lag_updates = self._lag_updates, []
        metrics["Policy/Lag Updates"] = float(np.mean(lags)) if lags else float("nan")
        if sync or metrics["Runtime/Updates This Round"] > 0:
            self.version += 1
            self._updates_at[self.version] = self.updates
            if len(self._updates_at) > _LAG_HISTORY:
                del self._updates_at[min(self._updates_at)]
        return metrics

    def weights(self) -> dict:
        """What ``DDPGActorPolicy.load_weights`` takes (critic included when prioritized)."""
        return {"ddpg": self.learner.weights(include_critic=self.cfg.prioritized),
                "agent_steps": self.agent_steps, "num_actors": self.num_actors,
                "replay": self.replay_handle}

    def policy_weights(self) -> dict:
        """The deterministic policy (actor, normaliser, updates), as saved in ``<Behavior>.pt``."""
        return self.learner.weights()

    def export_module(self) -> torch.nn.Module:
        return self.learner.export_module()

    def updates_owed(self) -> int:
        return updates_owed(self.agent_steps, self.updates, self.cfg)

    # -- training -------------------------------------------------------------------------------
    def _train(self, num_updates: int) -> dict[str, float]:
        """``num_updates`` gradient updates on replay samples; returns their mean metrics."""
        cfg, replay, learner = self.cfg, self.replay, self.learner
        sums: dict[str, float] = {}
        done = 0
        if len(replay) > 0:
            for _ in range(num_updates):
                if cfg.prioritized:
                    beta = (per_beta(cfg.per_beta, self.agent_steps, self.max_steps)
                            if self.max_steps else cfg.per_beta)
                    sample = replay.sample_indexed(cfg.batch_size, beta)
                    step = learner.update(sample.batch, sample.weights)
                    replay.update_priorities(sample.indices, learner.td_errors)
                else:
                    step = learner.update(replay.sample(cfg.batch_size))
                for key, value in step.items():
                    sums[key] = sums.get(key, 0.0) + value
                done += 1
        metrics = {key: value / done for key, value in sums.items()}
        learning_steps = max(0, self.agent_steps - cfg.warmup_steps)
        metrics.update({
            "Policy/Updates": float(self.updates),
            "Runtime/Updates This Round": float(done),
            "Runtime/Replay Size": float(len(replay)),
            "Runtime/Replay Ratio": self.updates / learning_steps if learning_steps else 0.0,
            "Runtime/Update Backlog": float(self.updates_owed()),
        })
        return metrics

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Learner, counters and the replay buffer's filled rows (see the module doc for size)."""
        return {"ddpg": self.learner.state_dict(), "version": self.version,
                "updates": self.updates, "updates_offset": self._updates_offset,
                "agent_steps": self.agent_steps,
                "replay": self._replay_state()}

    def _replay_state(self) -> dict | None:
        """The buffer's rows when ``save_replay_buffer`` (ML-Agents' switch) is on; None when it
        is off, or when a live process kept the shared lock past its timeout (the checkpoint is
        then saved without the buffer rather than never)."""
        if not self.cfg.save_replay_buffer:
            return None
        try:
            return self.replay.state_dict()
        except ReplayLockTimeout as err:
            logger.error("%s: checkpoint saved without the replay buffer", err)
            return None

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["ddpg"])
        self.version = int(state["version"])
        self.agent_steps = int(state["agent_steps"])
        self._updates_offset = int(state.get("updates_offset", 0))
        self._updates_at = {self.version: self.updates}
        if state["replay"] is None:
            logger.warning("the checkpoint holds no replay buffer (save_replay_buffer: false): "
                           "training resumes on an empty one (warm-up is not repeated)")
            return
        restore_replay(self.replay, state["replay"])

    def close(self) -> None:
        """Destroys a shared buffer's segment (after the final checkpoint); idempotent."""
        if self._closer is not None:
            self._closer()


def _close_shared(replay) -> None:
    replay.close()
    replay.unlink()


def restore_replay(replay: ReplayBuffer, state: dict) -> None:
    """Loads a ``ReplayBuffer.state_dict()``; when capacity or kind changed (a new
    ``buffer_size`` or ``prioritized`` on resume) re-adds the rows oldest first instead (the
    newest ``capacity`` survive; priorities kept when both are prioritized)."""
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
    batch = TransitionBatch(*(np.asarray(state[f])[order] for f in TransitionBatch._fields))
    priorities = None
    if state["prioritized"] and replay.prioritized:
        # stored leaves are (|δ| + eps)^α: back to raw |δ| for add()
        leaves = np.asarray(state["priorities"], np.float64)[order]
        alpha = replay.alpha if replay.alpha > 0 else 1.0
        priorities = np.maximum(leaves ** (1.0 / alpha) - replay.eps, 0.0)
    replay.add(batch, priorities)
    logger.info("replay buffer resized on resume: %d of %d stored transitions kept",
                len(replay), size)


class DDPGAlgorithm(Algorithm):
    """``trainer_type: ddpg``: replay placement decided here, once (see the module doc)."""

    def __init__(self, run_cfg: Any, section: str, behavior_cfg: Any):
        super().__init__(run_cfg, section, behavior_cfg)
        rl = run_cfg.unity_rl
        self.shared_replay = rl.mode == "async" and rl.backend == "local"
        self.hosts: list[DDPGHost] = []

    def plan(self) -> BehaviorPlan:
        """The actors' picklable ``(obs_shapes, action_spec, seed) -> DDPGActorPolicy``."""
        cfg = self.behavior_cfg
        return BehaviorPlan(
            policy_factory=functools.partial(ddpg_policy, network_cfg=cfg.network_settings,
                                             ddpg_cfg=cfg.hyperparameters),
            segment_steps=self.run_cfg.unity_rl.resolve_segment_steps(cfg),
            time_horizon=cfg.time_horizon,
            cut_at_segment_end=self.run_cfg.unity_rl.trajectory_cuts == "segment")

    def make_host(self, info: BehaviorInfo, ctx: HostContext) -> DDPGHost:
        from unity_rl.config import ConfigError

        name = info.name.split("?", 1)[0]
        try:
            act_dim = continuous_action_size(info.action_spec)
        except ValueError as err:
            raise ConfigError(self.run_cfg.source or "config", f"behaviors.{name}",
                              "trainer_type", f"ddpg cannot train behavior {name}: {err}") from None
        ddpg_cfg: DDPGConfig = self.behavior_cfg.hyperparameters
        network = self.behavior_cfg.network_settings
        obs_dim = info.obs_dim
        learner = DDPGLearner(info.obs_shapes, info.action_spec, ddpg_cfg,
                              network.hidden_units, network.num_layers, network.normalize,
                              device=ctx.device, seed=ctx.seed,
                              vis_encode_type=network.vis_encode_type)
        replay_args = dict(prioritized=ddpg_cfg.prioritized, alpha=ddpg_cfg.per_alpha,
                           eps=ddpg_cfg.per_eps)
        handle = None
        if self.shared_replay:  # actors attach by name (the handle rides with the weights)
            replay = SharedReplayBuffer(ddpg_cfg.buffer_size, obs_dim, act_dim, ctx.seed,
                                        lock_timeout=REPLAY_LOCK_TIMEOUT_S, **replay_args)
            handle = replay.handle()
        else:
            replay = ReplayBuffer(ddpg_cfg.buffer_size, obs_dim, act_dim, ctx.seed, **replay_args)
        host = DDPGHost(learner, replay, num_actors=ctx.num_actors, replay_handle=handle,
                        max_steps=self.behavior_cfg.max_steps)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        """Frees the shared replay segments (call after the final checkpoint)."""
        for host in self.hosts:
            host.close()


class ReplayFootprint(NamedTuple):
    """Memory of a replay buffer (and of its copy in each checkpoint)."""

    bytes_per_transition: int
    full_bytes: int


def replay_footprint(capacity: int, obs_dim: int, act_dim: int,
                     prioritized: bool = False) -> ReplayFootprint:
    """Bytes per stored transition and for a full buffer (see ``unity_rl.replay.buffers``)."""
    per_row = 4 * (2 * obs_dim + act_dim + 2) + (16 if prioritized else 0)
    return ReplayFootprint(per_row, per_row * capacity)
