"""The one algorithm seam: what PPO, DDPG (and any future trainer type) plug into the runtime.

An algorithm is chosen per config section by ``trainer_type`` through the trainer-type registry
(``unity_rl.algorithms.registry``; each type's ``SPEC.algorithm``) — the runtime never looks at
the name. It supplies two things:

- before the actors start, a picklable ``BehaviorPlan`` (how actors act for and collect its
  behaviors: the policy-copy factory, segment size, time horizon);
- once the builds have reported the behavior's spec, a ``LearnerHost`` per behavior: the pure
  learner plus whatever the algorithm keeps beside it (PPO's rollout buffer, DDPG's replay and
  replay ratio). The runners (``runners.py``) drive every host through the same calls, so
  the sync/async wirings and the trainer never branch on the algorithm:

      accept(segment) -> lag | None   data arrived (None: dropped or not needed)
      ready()                        async: an update is due
      train(sync)                    one unit of work (sync: everything due this round)
      weights()                      what the actors' policy copies load
      holds_collection()             async: actors should pause (training owed beyond a bound)
      state_dict() / load_state_dict()  checkpoints (restart_counters: --initialize-from)

A host never starts processes or touches torch's process-wide state: the learner host process
(the trainer) owns seeds, threads and devices.
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

from unity_rl.experience import Segment
from unity_rl.runtime.messages import BehaviorInfo

if TYPE_CHECKING:
    import torch


class BehaviorPlan(NamedTuple):
    """How an actor acts for and collects one behavior (pickles: it travels to actors)."""

    policy_factory: Callable[..., Any]
    """``(obs_shapes, action_spec, seed) -> policy copy`` (module-level function or partial);
    called with ``goal_indices=`` too when the BehaviorSpec has GOAL_SIGNAL observations."""
    segment_steps: int
    """Completed agent-steps of this behavior per segment (per actor), each finished trajectory
    counted padded to whole ``sequence_length`` sequences (see there)."""
    time_horizon: int
    """Per-agent trajectory cut (ML-Agents' time_horizon)."""
    cut_at_segment_end: bool = False
    """Also cut every open trajectory when a segment ends (``unity_rl.trajectory_cuts:
    segment``); False: only at time_horizon or an episode end, as ML-Agents."""
    sequence_length: int = 1
    """Rows a finished trajectory counts for toward ``segment_steps``: its length rounded up to
    a multiple of this (memory policies: ``network_settings.memory.sequence_length``), the rows
    it takes in the learner's padded buffer, which is what ML-Agents' ``_is_ready_update``
    compares with ``buffer_size``. 1: its steps. (With ``cut_at_segment_end`` the completed
    steps count, unpadded: the cut comes after the count.)"""
    collect_groups: bool = False
    """Also collect each step's groupmate data, group rewards and group returns
    (``TrajectoryCollector(groups=True)``, ``unity_rl.runtime.groups``): a centralised-critic
    trainer (POCA)."""


class HostContext(NamedTuple):
    """What the trainer hands an algorithm when it builds a host."""

    device: str
    """Learner device ('cpu', 'cuda', ...)."""
    seed: int
    """Seed of the behavior's learner (network init, shuffling, replay sampling)."""
    num_actors: int
    """Actors of the run."""
    mode: str
    """'sync' or 'async'."""
    max_policy_lag: int
    """async: largest accepted lag (versions) where the algorithm drops stale data."""
    max_update_backlog: int | None = None
    """async: most updates a host may owe before it holds the actors (replay-ratio hosts:
    gradient updates; PPO: full buffers) (``unity_rl.max_update_backlog``); None: never."""


class LearnerHost(Protocol):
    """One behavior's learner side, as the runners and the trainer use it (see module doc)."""

    version: int
    """This behavior's learner version; segments report the one they acted with."""

    def accept(self, segment: Segment) -> int | None: ...

    def ready(self) -> bool: ...

    def train(self, sync: bool) -> dict[str, float]: ...

    def weights(self) -> dict: ...

    def holds_collection(self) -> bool:
        """async: True while this host wants every actor to pause between rollouts (it owes
        more training than it allows itself to owe); the runner pauses the actors while any host
        holds and resumes them when none does. PPO holds only with a ``max_update_backlog``
        (full buffers waiting); otherwise it bounds staleness by dropping segments beyond
        ``max_policy_lag``."""
        ...

    def policy_weights(self) -> dict: ...

    def export_module(self) -> torch.nn.Module: ...

    def parameter_count(self) -> int:
        """Elements of the parameters one update optimises (the trainer sizes its torch
        threads by the largest; ``training.wiring.learner_torch_threads``)."""
        ...

    def splits_update(self) -> bool:
        """Whether each minibatch step of the learner's update is two independent halves that
        may run side by side on two cores (``algorithms/update_halves.py``)."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def restart_counters(self) -> None: ...

    def close(self) -> None: ...


class Algorithm(abc.ABC):
    """One config section's algorithm: its plan for actors and its hosts for the learner side."""

    def __init__(self, run_cfg: Any, section: str, behavior_cfg: Any):
        self.run_cfg = run_cfg
        self.section = section
        """The config section ('3DBall', or 'default_settings')."""
        self.behavior_cfg = behavior_cfg

    @abc.abstractmethod
    def plan(self) -> BehaviorPlan:
        """How actors act for and collect this section's behaviors."""

    @abc.abstractmethod
    def make_host(self, info: BehaviorInfo, ctx: HostContext) -> LearnerHost:
        """The learner side of one behavior whose spec the builds reported."""

    def close(self) -> None:
        """Frees what the algorithm holds across hosts (after the final checkpoint)."""
