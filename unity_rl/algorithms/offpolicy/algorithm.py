"""``OffPolicyAlgorithm``: the runtime ``Algorithm`` of every off-policy trainer type.

It decides once where replay lives (shared memory in the async wiring on the local backend, the
host's own buffer otherwise: ``unity_rl.algorithms.offpolicy.host``), gives the actors their
plan and builds one ``OffPolicyHost`` per behavior. A trainer type subclasses it with three
things: its ``name``, ``action_size`` (refusing specs it cannot train) and ``make_learner`` /
``policy_factory`` (its learner and its actors' picklable acting-policy factory).
"""
from __future__ import annotations

import abc
from typing import Any, Callable

from unity_rl.algorithms.offpolicy.config import ReplayConfig
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.algorithms.offpolicy.learner import OffPolicyLearner
from unity_rl.envs.types import short_name
from unity_rl.replay import open_replay
from unity_rl.runtime.algorithm import Algorithm, BehaviorPlan, HostContext
from unity_rl.runtime.messages import BehaviorInfo


class OffPolicyAlgorithm(Algorithm):
    """One config section of an off-policy trainer type: replay placement, plan, hosts."""

    name: str = "off-policy"
    """The trainer type ('ddpg', ...): named in errors; keys its learner's checkpoint state."""

    def __init__(self, run_cfg: Any, section: str, behavior_cfg: Any):
        super().__init__(run_cfg, section, behavior_cfg)
        rl = run_cfg.unity_rl
        self.shared_replay = rl.mode == "async" and rl.backend == "local"
        self.hosts: list[OffPolicyHost] = []

    # -- what a trainer type supplies ------------------------------------------------------------
    @abc.abstractmethod
    def action_size(self, action_spec: Any) -> int:
        """Columns of a replay row's action; ValueError (a sentence) for a spec it cannot train."""

    def mask_size(self, action_spec: Any) -> int:
        """Action-mask columns a replay row keeps (default none: continuous-only types)."""
        return 0

    @abc.abstractmethod
    def make_learner(self, info: BehaviorInfo, ctx: HostContext) -> OffPolicyLearner:
        """The behavior's learner (on ``ctx.device``, seeded with ``ctx.seed``)."""

    @abc.abstractmethod
    def policy_factory(self) -> Callable[..., Any]:
        """The actors' picklable ``(obs_shapes, action_spec, seed) -> OffPolicyActingPolicy``."""

    # -- Algorithm -------------------------------------------------------------------------------
    def plan(self) -> BehaviorPlan:
        cfg = self.behavior_cfg
        return BehaviorPlan(
            policy_factory=self.policy_factory(),
            segment_steps=self.run_cfg.unity_rl.resolve_segment_steps(
                cfg, self.run_cfg.num_actors),
            time_horizon=cfg.time_horizon,
            cut_at_segment_end=self.run_cfg.unity_rl.trajectory_cuts == "segment")

    def make_host(self, info: BehaviorInfo, ctx: HostContext) -> OffPolicyHost:
        from unity_rl.errors import ConfigError

        behavior = short_name(info.name)
        try:
            act_dim = self.action_size(info.action_spec)
        except ValueError as err:
            raise ConfigError(self.run_cfg.source or "config", f"behaviors.{behavior}",
                              "trainer_type",
                              f"{self.name} cannot train behavior {behavior}: {err}") from None
        cfg: ReplayConfig = self.behavior_cfg.hyperparameters
        learner = self.make_learner(info, ctx)
        # shared: actors attach by name (the handle rides with the weights)
        network = self.behavior_cfg.network_settings  # memory: whole sequences, memories stored
        replay, handle = open_replay(cfg.buffer_size, info.obs_dim, act_dim, ctx.seed,
                                     shared=self.shared_replay, prioritized=cfg.prioritized,
                                     alpha=cfg.per_alpha, eps=cfg.per_eps,
                                     mask_dim=self.mask_size(info.action_spec),
                                     memory_dim=network.memory_size,
                                     sequence_length=network.sequence_length)
        host = OffPolicyHost(learner, replay, name=self.name, num_actors=ctx.num_actors,
                             replay_handle=handle, max_steps=self.behavior_cfg.max_steps,
                             max_backlog=ctx.max_update_backlog if ctx.mode == "async" else None)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        """Frees the shared replay segments (call after the final checkpoint)."""
        for host in self.hosts:
            host.close()
