"""PPO on the algorithm seam (``trainer_type: ppo``): the actors' plan and the learner host.

The host keeps a rollout buffer in front of the pure ``PPOLearner``:

- ``accept(segment)``: the segment's trajectories join the buffer. In the async wiring a segment
  whose policy lag (this behavior's learner version minus the version the actor acted with)
  exceeds ``unity_rl.max_policy_lag`` is dropped (counted in ``Policy/Dropped Segments``; its
  episodes still count for the statistics and its steps for the step budget, since the builds
  did play them). Within the bound, under ``unity_rl.lag_correction: behaviour`` (the default)
  PPO's clipped ratio against the stored behaviour log-probs is the only correction (APPO /
  Sample Factory); under ``decoupled`` each kept trajectory's lag goes to the learner with it
  and the lagged rows train with the decoupled objective (``proximal.py``: the trust region
  centred on the learner's current policy, the behaviour's importance weight on each term).
  Either way the learner recomputes values with its current critic before GAE;
- ``holds_collection()`` (async, ``unity_rl.max_update_backlog``): True while the full buffers
  waiting for the learner outnumber the bound. With 0 the runner pauses the actors as soon as a
  full buffer waits, so they finish the rollout in hand during the update and then wait for its
  weights: collection and update overlap, every segment has lag 1 and none is dropped (the
  pipelined wiring, for a learner slower than its actors; docs/ppo.md);
- ``ready()``: the buffer holds at least ``buffer_size`` agent-steps (ML-Agents' trigger); with
  memory each trajectory counts as padded to whole ``sequence_length`` sequences, as ML-Agents'
  ``_is_ready_update`` counts its padded update buffer; the actors fill their segments in the
  same padded rows (``BehaviorPlan.sequence_length``), so that an update comes every
  ``buffer_size`` padded rows, not every ``buffer_size`` steps;
- ``train(sync)``: one PPO update on the whole buffer (the learned reward signals train inside
  it, once per minibatch, as ML-Agents), then each auxiliary update of the host
  (``unity_rl.algorithms.auxiliary.AuxiliaryUpdate``: behavioral cloning, ``ppo/imitation.py``,
  which ML-Agents runs once after the PPO epochs) on the same buffer, their metrics merged into the update's;
  then the version moves on. The learner gets the agent-steps *collected* so
  far (every segment given to ``accept``, kept or dropped, this buffer included), which drive its
  schedules as ML-Agents' trainer step.

The buffer is not part of checkpoints: a resumed run refills it (at most one buffer of
experience is collected again). The host's auxiliary updates are (``"auxiliary"``: name ->
state); the learner checkpoints its reward signals itself.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

from unity_rl.algorithms.auxiliary import AuxiliaryUpdate
from unity_rl.algorithms.ppo.learner import PPOLearner
from unity_rl.algorithms.sequences import padded_length
from unity_rl.experience import Segment, Trajectory
from unity_rl.runtime.algorithm import Algorithm, BehaviorPlan, HostContext
from unity_rl.runtime.messages import BehaviorInfo
from unity_rl.algorithms.ppo.acting import ppo_policy


class PPOHost:
    """One behavior's PPO learner and rollout buffer (fits ``algorithm.LearnerHost``)."""

    def __init__(self, learner: PPOLearner, *, buffer_steps: int, drop_lag: int | None,
                 auxiliary: Sequence[AuxiliaryUpdate] = (), max_backlog: int | None = None,
                 decoupled: bool = False):
        self.learner = learner
        self.decoupled = decoupled
        """Lagged trajectories train with the decoupled objective (their lags reach the learner)."""
        self.max_backlog = max_backlog
        """async: most full buffers that may wait before the host holds the actors (None: never)."""
        self.sequence_length = int(getattr(learner, "sequence_length", 1))
        """Rows a trajectory is padded to a multiple of in the buffer (1: no memory)."""
        self.auxiliary = list(auxiliary)
        """The host's own auxiliary updates (checkpointed here), run after each PPO update."""
        names = [a.name for a in self.auxiliary]
        if len(set(names)) != len(names):
            raise ValueError(f"auxiliary update names must be unique, got {names}")
        self.buffer_steps = buffer_steps
        self.drop_lag = drop_lag
        """Largest lag kept (None: keep everything, the sync wiring)."""
        self.version = 0
        self._buffer: list[Trajectory] = []
        self._lags: list[int] = []
        """The lag of each buffered trajectory's segment, in ``_buffer``'s order."""
        self._buffered_steps = 0
        self._dropped = 0
        self._episode_lengths: list[int] = []
        """Lengths of the episodes that ended since the last update (``Policy/<Signal> Reward``)."""
        self.collected_steps = learner.agent_steps_collected
        """Agent-steps of every accepted segment so far (the schedules' step)."""

    def accept(self, segment: Segment) -> int | None:
        self.collected_steps += segment.agent_steps  # dropped or not, the builds played them
        self._episode_lengths.extend(segment.episode_lengths or ())
        lag = self.version - segment.policy_version
        if self.drop_lag is not None and lag > self.drop_lag:
            self._dropped += 1
            return None
        kept = [t for t in segment.trajectories if len(t.rewards)]
        self._buffer.extend(kept)
        self._lags.extend([lag] * len(kept))
        if self.sequence_length == 1:
            self._buffered_steps += segment.agent_steps
        else:
            self._buffered_steps += sum(padded_length(len(t.rewards), self.sequence_length)
                                        for t in segment.trajectories)
        return lag

    def ready(self) -> bool:
        return self._buffered_steps >= self.buffer_steps

    def holds_collection(self) -> bool:
        """More full buffers wait than ``max_backlog`` allows (None: never holds; staleness is
        then bounded by dropping, ``max_policy_lag``)."""
        if self.max_backlog is None:
            return False
        return self._buffered_steps // self.buffer_steps > self.max_backlog

    def train(self, sync: bool) -> dict[str, float]:
        trajectories, self._buffer, self._buffered_steps = self._buffer, [], 0
        lags, self._lags = self._lags, []
        metrics: dict[str, float] = {}
        if trajectories:
            lengths, self._episode_lengths = self._episode_lengths, []
            metrics.update(self.learner.update(
                trajectories, collected_steps=self.collected_steps,
                episode_length=float(sum(lengths) / len(lengths)) if lengths else 0.0,
                lags=lags if self.decoupled and any(lags) else None))
            for aux in self.auxiliary:
                metrics.update(aux.update(trajectories))
        metrics["Policy/Dropped Segments"] = float(self._dropped)
        self._dropped = 0
        self.version += 1
        return metrics

    def weights(self) -> dict:
        """What actors act with (no critic)."""
        return self.learner.weights()

    def policy_weights(self) -> dict:
        """The whole network, as saved in ``<Behavior>.pt``."""
        return self.learner.weights(include_critic=True)

    def export_module(self):
        return self.learner.export_module()

    def parameter_count(self) -> int:
        return self.learner.parameter_count()

    def splits_update(self) -> bool:
        return self.learner.splits_update()

    def state_dict(self) -> dict:
        """The learner's state (what ``export.load_policy`` reads), the host's version and its
        auxiliary updates' states."""
        return {**self.learner.state_dict(), "host_version": self.version,
                "auxiliary": {a.name: a.state_dict() for a in self.auxiliary}}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state)
        self.version = int(state["host_version"])
        saved = state.get("auxiliary") or {}
        for aux in self.auxiliary:
            if aux.name in saved:
                aux.load_state_dict(saved[aux.name])
        self.collected_steps = self.learner.agent_steps_collected

    def restart_counters(self) -> None:
        """Weights kept, step counts from zero (``--initialize-from``: fresh schedules)."""
        self.collected_steps = 0
        self.learner.agent_steps_collected = 0
        self.learner.agent_steps_trained = 0

    def close(self) -> None:
        """Nothing outside the process to free."""


class PPOAlgorithm(Algorithm):
    """``trainer_type: ppo``. POCA's algorithm is this one with its own learner and host
    (``learner_class``, ``host_class``), a critic-less actor and groups in the plan."""

    learner_class = PPOLearner
    host_class = PPOHost

    def plan(self) -> BehaviorPlan:
        return self._plan(shared_critic=self.behavior_cfg.hyperparameters.shared_critic)

    def _plan(self, *, shared_critic: bool, collect_groups: bool = False) -> BehaviorPlan:
        rl = self.run_cfg.unity_rl
        return BehaviorPlan(
            policy_factory=functools.partial(
                ppo_policy, network_cfg=self.behavior_cfg.network_settings,
                shared_critic=shared_critic),
            segment_steps=rl.resolve_segment_steps(self.behavior_cfg,
                                                    self.run_cfg.num_actors),
            time_horizon=self.behavior_cfg.time_horizon,
            cut_at_segment_end=rl.trajectory_cuts == "segment",
            collect_groups=collect_groups,
            # segments filled in padded rows, as the buffer counts: an update every buffer_size
            # padded rows, as ML-Agents, not every buffer_size steps (several times as many rows)
            sequence_length=self.behavior_cfg.network_settings.sequence_length)

    def make_host(self, info: BehaviorInfo, ctx: HostContext) -> PPOHost:
        cfg = self.behavior_cfg
        learner = self.learner_class(info.obs_shapes, info.action_spec, cfg.hyperparameters,
                                     cfg.network_settings, device=ctx.device, seed=ctx.seed,
                                     reward_signals=cfg.reward_signals,
                                     goal_indices=info.goal_indices)
        host = self.host_class(learner, buffer_steps=cfg.hyperparameters.buffer_size,
                               drop_lag=ctx.max_policy_lag if ctx.mode == "async" else None,
                               max_backlog=ctx.max_update_backlog if ctx.mode == "async" else None,
                               decoupled=self.run_cfg.unity_rl.lag_correction == "decoupled")
        if cfg.behavioral_cloning is not None:  # once after each update, as ML-Agents
            from unity_rl.algorithms.ppo.imitation import make_behavioral_cloning

            host.auxiliary.append(make_behavioral_cloning(
                cfg.behavioral_cloning, learner, lambda: host.collected_steps, seed=ctx.seed,
                pairing=self.run_cfg.unity_rl.demo_pairing, behavior=self.section))
        return host
