"""The off-policy learner host: an ``OffPolicyLearner`` + a replay buffer + step counters, on
the runtime seam (fits ``runtime.algorithm.LearnerHost``), for every off-policy trainer type.

Replay placement (decided once, in ``OffPolicyAlgorithm``): shared memory written by the actors
in the async wiring on the local backend (Ape-X, Horgan et al. 2018); a learner-side buffer fed
from segments otherwise (sync: the learner waits for the segments anyway; Ray: shared memory
does not span nodes), the actors' initial priorities riding in ``Trajectory.extras``::

    async, local              actors --transitions (+ initial priorities)--> SharedReplayBuffer
                              actors --segment receipt (steps, returns, version)--> host.accept
    otherwise                 actors --segment (trajectories)--> host.accept --> ReplayBuffer
    both                      host.train: sample <- replay, learner.update, |δ| -> priorities

- **Replay ratio.** The host owes ``cfg.updates_owed(collected agent-steps, updates done)``
  gradient updates (``replay_ratio`` per agent-step after ``warmup_steps``). ``train(sync=True)``
  pays all of them (the sync round); ``train(sync=False)`` pays at most ``updates_per_round``,
  so the async runner looks at the backend between chunks and never waits for a particular
  actor. ``ready()`` is "something is owed": the host never runs ahead of the data (the ratio is
  an upper bound). When actors produce faster than it trains, the debt grows
  (``Runtime/Update Backlog``). With ``max_backlog`` (``unity_rl.max_update_backlog``, async
  only) the host then holds the actors (``holds_collection``) from the moment it owes more than
  ``max_backlog`` updates until it owes at most half of that, so the achieved ratio
  (``Runtime/Replay Ratio``) stays at the configured one, up to the bound and the rollouts in
  flight; without it the debt grows and the ratio falls: Ape-X's trade of sample efficiency for
  wall time.
- **Versions and lag.** The host's version moves on with every ``train`` that updated (and every
  sync round). Policy lag is measured per accepted segment in versions (``Policy/Lag``) and in
  gradient updates (``Policy/Lag Updates``). Nothing is dropped for lag: replay is off-policy
  by design, and ``unity_rl.max_policy_lag`` does not apply.
- **Checkpoints.** ``state_dict()`` is ``{<trainer type>: learner state, "version", "updates",
  "updates_offset", "agent_steps", "replay"}``; the replay rows only with
  ``save_replay_buffer: true`` (ML-Agents' key, off by default), at the cost
  ``unity_rl.replay.replay_footprint`` gives; ``"auxiliary"``: name -> state of each auxiliary
  update (behavioral cloning). With the async wiring the snapshot may hold a few
  segments whose receipts were not counted yet: extra, valid experience.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from unity_rl.algorithms.auxiliary import AuxiliaryUpdate
from unity_rl.algorithms.offpolicy.acting import carried_priorities, trajectories_to_transitions
from unity_rl.algorithms.offpolicy.config import ReplayConfig
from unity_rl.algorithms.offpolicy.learner import OffPolicyLearner
from unity_rl.experience import Segment
from unity_rl.replay import ReplayBuffer, per_beta, release_with, replay_state, restore_replay

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

UPDATES_PER_ROUND = 200
"""async: most gradient updates of one ``train`` (between two looks at the backend)."""
_LAG_HISTORY = 4096
"""Versions remembered for measuring lag in gradient updates."""


class OffPolicyHost:
    """One behavior's off-policy learner, replay buffer and step counts (fits ``LearnerHost``).

    ``agent_steps`` counts collected agent-steps (what the replay ratio is measured against).
    ``name`` (the trainer type) keys the learner's state in ``state_dict``.
    """

    def __init__(self, learner: OffPolicyLearner, replay: ReplayBuffer, *, name: str,
                 num_actors: int, replay_handle: dict | None = None, max_steps: int = 0,
                 updates_per_round: int = UPDATES_PER_ROUND, max_backlog: int | None = None,
                 auxiliary: Sequence[AuxiliaryUpdate] = ()):
        self.learner = learner
        self.auxiliary = list(auxiliary)
        """Updates run once after each gradient update (SAC's behavioral cloning, as ML-Agents
        runs ``bc_module.update()`` once per SAC update step); checkpointed under their names."""
        self.cfg: ReplayConfig = learner.cfg
        self.replay = replay
        self.name = name
        self.num_actors = num_actors
        self.replay_handle = replay_handle
        """Where actors find the shared buffer (None: they send their transitions)."""
        self.max_steps = max_steps
        """The behavior's max_steps: PER's beta reaches 1 there (0: beta stays as configured)."""
        self.updates_per_round = updates_per_round
        self.max_backlog = max_backlog
        """Updates owed beyond which the host holds the actors (None: never)."""
        self._holding = False
        self.version = 0
        self.agent_steps = 0
        self._updates_at: dict[int, int] = {0: 0}
        """version -> gradient updates done when it was published (recent versions only)."""
        self._lag_updates: list[float] = []
        self._updates_offset = 0
        """Learner updates that belong to another run (``restart_counters``)."""
        self._release = release_with(self, replay)
        """Destroys a shared buffer we created (``close``, or when this host is collected)."""

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
            replay = self.replay
            batch = trajectories_to_transitions(segment.trajectories, replay.mask_dim,
                                                self.cfg.interrupted_next_obs,
                                                replay.sequence_length, replay.memory_dim)
            priorities = carried_priorities(segment.trajectories) if self.cfg.prioritized else None
            replay.add(batch, priorities)
            real = batch.obs if batch.loss_mask is None else batch.obs[batch.loss_mask > 0]
            self.learner.observe(real)
        elif segment.agent_steps:  # a receipt: its actor wrote the rows into the shared replay
            self.learner.observe(self.replay.newest_obs(segment.agent_steps))
        then = self._updates_at.get(segment.policy_version)
        if then is not None:
            self._lag_updates.append(float(self.updates - then))
        return self.version - segment.policy_version

    def ready(self) -> bool:
        return self.updates_owed() > 0 and len(self.replay) >= self.cfg.min_replay_rows()

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

    def holds_collection(self) -> bool:
        """Holds from owing more than ``max_backlog`` updates until owing at most half of it,
        and only while it can train (the replay has its first minibatch)."""
        if self.max_backlog is None:
            return False
        owed = self.updates_owed()
        if owed > self.max_backlog:
            self._holding = len(self.replay) >= self.cfg.min_replay_rows()
        elif owed <= self.max_backlog // 2:
            self._holding = False
        return self._holding

    def weights(self) -> dict:
        """What ``OffPolicyActingPolicy.load_weights`` takes (the critic too when prioritized:
        the actors compute initial priorities)."""
        return {"policy": self.learner.weights(include_critic=self.cfg.prioritized),
                "agent_steps": self.agent_steps, "num_actors": self.num_actors,
                "replay": self.replay_handle}

    def policy_weights(self) -> dict:
        """The deterministic policy, as saved in ``<Behavior>.pt``."""
        return self.learner.weights()

    def export_module(self) -> torch.nn.Module:
        return self.learner.export_module()

    def parameter_count(self) -> int:
        return self.learner.parameter_count()

    def splits_update(self) -> bool:
        return False  # the critic's step feeds the actor's: one after the other

    def updates_owed(self) -> int:
        return self.cfg.updates_owed(self.agent_steps, self.updates)

    # -- training -------------------------------------------------------------------------------
    def _train(self, num_updates: int) -> dict[str, float]:
        """``num_updates`` gradient updates on replay samples; returns their mean metrics."""
        cfg, replay, learner = self.cfg, self.replay, self.learner
        sums: dict[str, float] = {}
        done = 0
        learner.agent_steps = self.agent_steps
        if len(replay) >= cfg.min_replay_rows():
            for _ in range(num_updates):
                if cfg.prioritized:
                    beta = (per_beta(cfg.per_beta, self.agent_steps, self.max_steps)
                            if self.max_steps else cfg.per_beta)
                    sample = replay.sample_indexed(cfg.batch_size, beta)
                    step, td_errors = learner.update(sample.batch, sample.weights)
                    replay.update_priorities(sample.indices, td_errors)
                else:
                    step, _ = learner.update(replay.sample(cfg.batch_size))
                for aux in self.auxiliary:
                    step = {**step, **aux.update()}
                for key, value in step.items():
                    sums[key] = sums.get(key, 0.0) + value
                done += 1
        metrics = {key: value / done for key, value in sums.items()}
        metrics.update(self._train_reward_signals())
        learning_steps = max(0, self.agent_steps - cfg.warmup_steps)
        metrics.update({
            "Policy/Updates": float(self.updates),
            "Runtime/Updates This Round": float(done),
            "Runtime/Replay Size": float(len(replay)),
            "Runtime/Replay Ratio": self.updates / learning_steps if learning_steps else 0.0,
            "Runtime/Update Backlog": float(self.updates_owed()),
        })
        return metrics

    def _train_reward_signals(self) -> dict[str, float]:
        """The learner's learned reward signals (if it has any), on minibatches of their own at
        their own rate (SAC: ``reward_signal_steps_per_update``, after the policy updates, as
        ML-Agents' ``_update_reward_signals``); their mean metrics."""
        owed = getattr(self.learner, "reward_signal_updates_owed", None)
        if owed is None or len(self.replay) < self.cfg.min_replay_rows():
            return {}
        sums: dict[str, float] = {}
        count = owed()
        for _ in range(count):
            for key, value in self.learner.update_reward_signals(
                    self.replay.sample(self.cfg.batch_size)).items():
                sums[key] = sums.get(key, 0.0) + value
        return {key: value / count for key, value in sums.items()}

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Learner, counters and (``save_replay_buffer``) the replay buffer's filled rows."""
        return {self.name: self.learner.state_dict(), "version": self.version,
                "updates": self.updates, "updates_offset": self._updates_offset,
                "agent_steps": self.agent_steps,
                "replay": replay_state(self.replay) if self.cfg.save_replay_buffer else None,
                "auxiliary": {a.name: a.state_dict() for a in self.auxiliary}}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state[self.name])
        self.version = int(state["version"])
        self.agent_steps = int(state["agent_steps"])
        self._updates_offset = int(state.get("updates_offset", 0))
        self._updates_at = {self.version: self.updates}
        saved = state.get("auxiliary") or {}
        for aux in self.auxiliary:
            if aux.name in saved:
                aux.load_state_dict(saved[aux.name])
        if state["replay"] is None:
            logger.warning("the checkpoint holds no replay buffer (save_replay_buffer: false): "
                           "training resumes on an empty one (warm-up is not repeated)")
            return
        restore_replay(self.replay, state["replay"])

    def close(self) -> None:
        """Destroys a shared buffer's segment (after the final checkpoint); idempotent."""
        self._release()
