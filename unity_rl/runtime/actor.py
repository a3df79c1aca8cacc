"""The actor role: one ``AgentStream`` over its builds plus a policy copy per behavior.

Contract:
- an actor trains every behavior its builds report (or the one ``StreamSettings.behaviors``
  names); each gets a *lane*: the policy copy built by its ``BehaviorPlan`` (looked up by the
  behavior's name in ``ActorSpec.plans``, else ``ActorSpec.default_plan``; neither is an error
  naming the behavior), a ``TrajectoryCollector`` and the latest observations;
- every stream step acts for every agent of every lane that requests a decision, one batched
  ``policy.act`` call per lane (rows are independent: agent order and count may change);
- ``collect()`` returns a ``Rollout``: one ``Segment`` per lane, holding the trajectories
  finished since the last one (cut at ``time_horizon`` or an episode end; with
  ``BehaviorPlan.cut_at_segment_end`` every open trajectory is cut too). A collection ends as
  soon as one lane has ``segment_steps`` agent-steps in it (each finished trajectory counted
  padded to whole ``BehaviorPlan.sequence_length`` sequences: the rows a memory learner's
  buffer gives it) (so a behavior that decides often is
  served at its own pace; the others keep filling). Weights change only between collections; a
  segment is tagged with the version its lane acted with (a trajectory that grew over several
  collections holds older steps too, with the log-probs of the policies that took them, as in
  ML-Agents);
- ``actor_loop`` is the backend-independent body of an actor process: it reports ``READY`` with
  the behaviors' specs, waits for the first weights, then collects until told to stop. In the
  sync wiring (``ActorSpec.wait_for_new_weights``) it waits after each rollout for a
  publication newer than the one it used; in the async wiring it only picks up whatever weights
  have arrived. A ``Control`` (``ToActor.CONTROL``) is applied between collections, in its
  order among the weights (``ActorSpec.control``, the run's control state when the actor was
  created, before the builds' first reset). Any exception is sent back as ``FromActor.ERROR``
  (with the traceback text); the builds are closed in ``finally`` whatever happens.

The actor never builds a learner (no optimiser state): it rebuilds each policy from a picklable
``policy_factory(obs_shapes, action_spec, seed)`` (plus ``goal_indices=``, the GOAL_SIGNAL
observations, when the BehaviorSpec has any) and loads CPU weights shipped as plain dicts.
It reaches a policy only through ``unity_rl.runtime.acting.ActingPolicy`` (always passing the
decision rows' agent keys to ``act``).

Size (about 400 lines): the actor, its lanes and ``actor_loop`` share one contract (above) and
read best together; the trajectory cutting is ``collector.py``, supervision ``supervisor.py``.
"""
from __future__ import annotations

import logging
import os
import queue
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

import numpy as np

from unity_rl.experience import Segment
from unity_rl.runtime.acting import ActingPolicy
from unity_rl.envs.behavior import ALL_BEHAVIORS
from unity_rl.envs.settings import DEFAULTS as LAUNCH_DEFAULTS
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.collector import TrajectoryCollector
from unity_rl.runtime.messages import (
    ActorError,
    ActorInfo,
    BehaviorInfo,
    Command,
    SNAPSHOT_VERSION,
    Control,
    FromActor,
    PolicyWeights,
    Report,
    Rollout,
    ToActor,
    goal_indices_of,
)

logger = logging.getLogger(__name__)

PolicyFactory = Callable[[Any, Any, int], ActingPolicy]
"""(obs_shapes, action_spec, seed[, goal_indices=]) -> a policy copy; must pickle (a module-level function or a
``functools.partial`` of one) because it travels to the actor's process."""



@dataclass(frozen=True)
class StreamSettings:
    """How an actor opens its ``AgentStream`` (everything pickles)."""

    env_path: str
    """Build executable."""
    num_builds: int = 1
    """Builds this actor owns."""
    worker_id_start: int = 0
    """Worker id of the actor's first build (distinct ranges per actor: distinct ports)."""
    seed: int = 0
    """Seed sent to the builds (build i gets seed + i)."""
    behaviors: tuple[str, ...] = (ALL_BEHAVIORS,)
    """Behaviors to train (short or full names), or ``(ALL_BEHAVIORS,)``."""
    other_behaviors: str = "error"
    """What agents of behaviors not trained get: 'error' (raise) or 'zeros' (zero actions)."""
    launch: Any = None
    """The run's ``unity_rl.envs.launcher.LaunchSettings`` (ports, flags, engine, timeouts)."""
    restart_quota: tuple[int, int, float] = LAUNCH_DEFAULTS.restart_limits
    """Build restarts: (lifetime, per period, period seconds); -1 for unlimited."""

    @property
    def timeout_wait(self) -> float:
        """Seconds a build may take to connect."""
        return float((self.launch or LAUNCH_DEFAULTS).timeout_wait)

    @property
    def step_timeout(self) -> float | None:
        """Seconds a build may take to answer a step."""
        return self.launch.answer_timeout if self.launch is not None else None

    def open(self):
        """Starts the builds and returns the ``AgentStream`` over them."""
        from unity_rl.envs.agent_stream import AgentStream
        from unity_rl.envs.launcher import RestartQuota

        return AgentStream.from_settings(
            self.launch, num_builds=self.num_builds, worker_id_start=self.worker_id_start,
            seed=self.seed, behaviors=list(self.behaviors),
            other_behaviors=self.other_behaviors, restart_quota=RestartQuota(*self.restart_quota))


class BehaviorSettingsError(ValueError):
    """The builds have a behavior the config has no settings for (raised by ``plan_for``)."""


@dataclass(frozen=True)
class ActorSpec:
    """Everything one actor needs, as the wiring hands it to a backend."""

    actor_id: int
    """Index of the actor, 0..K-1."""
    stream: StreamSettings
    """Its builds."""
    plans: tuple[tuple[str, BehaviorPlan], ...]
    """(config section name, plan) per behavior section; a name matches a behavior's full or
    short name."""
    wait_for_new_weights: bool
    """Sync wiring: after each rollout, wait for a newer publication."""
    default_plan: BehaviorPlan | None = None
    """Plan for behaviors without a section (ML-Agents' default_settings); None: an error."""
    seed: int = 0
    """Seed of the policies' action sampling."""
    torch_threads: int = 1
    """Intra-op threads of the actor's torch (1: the builds need the other cores)."""
    niceness: int = 0
    """Added to the actor process's niceness before it launches its builds (they inherit it)."""
    control: Control | None = None
    """The run's control state to start with (a re-created actor gets the latest one)."""
    stream_factory: Optional[Callable[[], Any]] = field(default=None, compare=False)
    """Tests: replaces ``stream.open()`` with a stand-in stream (must pickle for processes)."""

    def open_stream(self):
        return self.stream_factory() if self.stream_factory is not None else self.stream.open()

    def plan_for(self, behavior: str) -> BehaviorPlan:
        """The plan of a behavior (full name); ``BehaviorSettingsError`` when there is none."""
        for name, plan in self.plans:
            if name in (behavior, behavior.split("?", 1)[0]):
                return plan
        if self.default_plan is not None:
            return self.default_plan
        known = [name for name, _ in self.plans]
        raise BehaviorSettingsError(f"the builds have behavior '{behavior}' but the config has no settings "
                         f"for it (sections: {known}): add behaviors.{behavior.split('?', 1)[0]} "
                         f"or default_settings, or train only some behaviors with --behavior")


class _Lane:
    """One behavior inside an actor: its policy copy, collector and pending decisions."""

    def __init__(self, name: str, plan: BehaviorPlan, behavior_spec: Any, seed: int):
        self.name = name
        self.plan = plan
        self.obs_shapes = tuple(tuple(int(d) for d in o.shape)
                                for o in behavior_spec.observation_specs)
        self.action_spec = behavior_spec.action_spec
        self.goal_indices = goal_indices_of(behavior_spec.observation_specs)
        # goal observations reach the policy only when there are some: factories written for
        # the three-argument call keep working on builds without goal signals
        goals = {"goal_indices": self.goal_indices} if self.goal_indices else {}
        self.policy = plan.policy_factory(self.obs_shapes, self.action_spec, seed, **goals)
        if not isinstance(self.policy, ActingPolicy):
            raise TypeError(f"behavior {name}: the policy factory made a "
                            f"{type(self.policy).__name__}, not an ActingPolicy")
        self.collector = TrajectoryCollector(plan.time_horizon, plan.sequence_length,
                                             plan.collect_groups)
        self.version = -1
        self.fixed = False
        """Self-play: the lane acts with an opponent snapshot (publications pass it by)."""
        self.result = None
        self.obs: np.ndarray | None = None

    def observe(self, result) -> None:
        self.obs = self.collector.observe(result)
        if result.terminals.keys:
            self.policy.episodes_ended(result.terminals.keys)
        self.result = result

    def act(self) -> np.ndarray | None:
        """What the builds receive for this lane's decision rows (None when none is waiting)."""
        decisions = self.result.decisions
        if not decisions.keys:
            return None
        actions, logprobs, values = self.policy.act(self.obs, decisions.action_mask,
                                                    agent_keys=decisions.keys)
        self.collector.record(decisions.keys, self.obs, actions, logprobs, values,
                              decisions.action_mask, self.policy.step_extras())
        return self.policy.env_actions(actions)

    @property
    def collected(self) -> int:
        """Agent-steps toward this lane's next segment (finished trajectories padded to whole
        sequences: ``BehaviorPlan.sequence_length``)."""
        if self.plan.cut_at_segment_end:
            return self.collector.completed_steps
        return self.collector.finished_rows

    def segment(self, actor_id: int) -> Segment:
        collector = self.collector
        trajectories = collector.flush() if self.plan.cut_at_segment_end else collector.take()
        returns, lengths = self.collector.pop_episodes()
        segment = Segment(trajectories=trajectories, policy_version=self.version,
                          actor_id=actor_id,
                          agent_steps=sum(len(t.rewards) for t in trajectories),
                          episode_returns=returns, episode_lengths=lengths,
                          group_returns=self.collector.pop_group_returns())
        return self.policy.finish_segment(segment)

    def info(self) -> BehaviorInfo:
        return BehaviorInfo(self.name, self.obs_shapes, self.action_spec,
                            len(self.result.decisions.keys), self.goal_indices)

    def close(self) -> None:
        self.policy.close()


class Actor:
    """One stream over the actor's builds and one lane per trained behavior."""

    def __init__(self, spec: ActorSpec):
        self.spec = spec
        self.stream = None
        self.lanes: dict[str, _Lane] = {}
        self.publication = -1
        """``PolicyWeights.version`` of the loaded weights (-1: none yet)."""
        self.restarts = 0
        self._pending_lanes: dict = {}
        """Lane policies of a control applied before the lanes exist (the start-up control)."""

    def start(self) -> ActorInfo:
        """Starts the builds, resets them and builds one policy copy per behavior."""
        spec = self.spec
        self.stream = spec.open_stream()
        if spec.control is not None:  # before the first reset: it carries them to the builds
            self.apply_control(spec.control)
        results = self.stream.reset_all()
        seeds = np.random.SeedSequence(spec.seed).spawn(len(self.stream.behavior_names))
        for name, seq in zip(self.stream.behavior_names, seeds):
            lane = _Lane(name, spec.plan_for(name), self.stream.specs[name],
                         int(seq.generate_state(1)[0]))
            lane.observe(results[name])
            self.lanes[name] = lane
        if self._pending_lanes:
            pending, self._pending_lanes = self._pending_lanes, {}
            self._set_lanes(pending)
        build_pids = ()
        builds = getattr(self.stream, "builds", None)
        if builds is not None and hasattr(builds, "pids"):
            build_pids = tuple(int(p) for p in builds.pids() if p)
        return ActorInfo(spec.actor_id, {name: lane.info() for name, lane in self.lanes.items()},
                         os.getpid(), build_pids)

    def set_weights(self, weights: PolicyWeights) -> None:
        for name, behavior_weights in weights.behaviors.items():
            lane = self.lanes.get(name)
            if lane is not None and not lane.fixed:
                lane.policy.load_weights(behavior_weights.state)
                lane.version = behavior_weights.version
        self.publication = weights.version

    def apply_control(self, control: Control) -> None:
        """Applies a control change to the builds (between collections)."""
        if control.env_parameters:
            setter = getattr(self.stream, "set_environment_parameters", None)
            if setter is None:
                raise TypeError(f"actor {self.spec.actor_id}: its stream "
                                f"({type(self.stream).__name__}) takes no environment parameters")
            setter(dict(control.env_parameters))
        if control.lanes:
            if self.lanes:
                self._set_lanes(control.lanes)
            else:
                self._pending_lanes.update(control.lanes)
        if control.reset_episodes and self.lanes:
            self.reset_episodes()

    def _set_lanes(self, lanes: dict) -> None:
        """Self-play: each named lane loads its weights and keeps them (an opponent snapshot,
        its segments tagged ``SNAPSHOT_VERSION``) or follows the publications again."""
        for name, lane_policy in lanes.items():
            lane = self.lanes.get(name)
            if lane is None:
                continue  # a behavior these builds do not have (or not trained here)
            lane.policy.load_weights(lane_policy.weights.state)
            lane.fixed = bool(lane_policy.fixed)
            lane.version = SNAPSHOT_VERSION if lane.fixed else lane_policy.weights.version

    def reset_episodes(self) -> None:
        """Resets every build (they read the parameters just sent): as mlagents-learn's reset
        for ``require_reset``, every agent's open trajectory is dropped and its episode neither
        ends nor counts; the policies forget the agents' per-agent state."""
        results = self.stream.reset_all()
        for name, lane in self.lanes.items():
            dropped = lane.collector.drop_open()
            if dropped:
                lane.policy.episodes_ended(dropped)
            lane.observe(results[name])
        logger.info("actor %d: builds reset (a lesson with require_reset ended)",
                    self.spec.actor_id)

    def collect(self, on_step: Callable[[], bool] | None = None) -> Rollout | None:
        """Steps the builds until the collection is complete (see the module doc).

        ``on_step()`` runs after every stream step (heartbeat); when it returns True the
        collection is abandoned and None is returned (the actor is being stopped).
        """
        restarts = 0
        while not self._complete():
            actions = {}
            for name, lane in self.lanes.items():
                lane_actions = lane.act()
                if lane_actions is not None:
                    actions[name] = lane_actions
            results = self.stream.step_all(actions)
            for name, lane in self.lanes.items():
                lane.observe(results[name])
            restarted = next(iter(results.values())).restarted if results else {}
            for build, reason in restarted.items():
                restarts += 1
                logger.warning("actor %d: build %d restarted: %s", self.spec.actor_id, build,
                               reason)
            if on_step is not None and on_step():
                return None
        self.restarts += restarts
        return Rollout(self.spec.actor_id, self.publication,
                       {name: lane.segment(self.spec.actor_id)
                        for name, lane in self.lanes.items()}, restarts)

    def _complete(self) -> bool:
        return any(lane.collected >= lane.plan.segment_steps for lane in self.lanes.values())

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.close()
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.close()


# ----------------------------------------------------------------------------------------------
# The body of an actor process, over any pair of channels
# ----------------------------------------------------------------------------------------------

class Inbox(Protocol):
    """learner -> actor channel (a multiprocessing or Ray queue fits)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Command: ...


class Outbox(Protocol):
    """actor -> learner channel."""

    def put(self, item: Report) -> None: ...


class _Stop(Exception):
    """Internal: the learner asked the actor to stop (or went away)."""


WAIT_SLICE_S = 1.0
"""Longest single blocking wait of an actor on its inbox (between liveness checks)."""


def actor_loop(spec: ActorSpec, inbox: Inbox, outbox: Outbox,
               heartbeat: Callable[[], None] = lambda: None,
               learner_alive: Callable[[], bool] = lambda: True,
               stop_requested: Callable[[], bool] = lambda: False) -> None:
    """Runs one actor until STOP; errors are reported on ``outbox``; builds always closed.

    ``heartbeat()`` is called after every stream step and every wait slice; ``learner_alive()``
    and ``stop_requested()`` are checked at the same points (a vanished learner stops the actor,
    so a killed trainer leaves no orphans).
    """
    actor = Actor(spec)

    def next_command(block: bool) -> Command | None:
        """The next command; blocks in slices, checking the learner is still there."""
        while True:
            try:
                return inbox.get(block=block, timeout=WAIT_SLICE_S if block else None)
            except queue.Empty:
                if not block:
                    return None
            heartbeat()
            if stop_requested() or not learner_alive():
                raise _Stop

    def on_step() -> bool:
        heartbeat()
        return stop_requested() or not learner_alive()

    def apply(command: Command) -> None:
        if command.kind is ToActor.STOP:
            raise _Stop
        if command.kind is ToActor.WEIGHTS:
            if command.weights.version >= actor.publication:
                actor.set_weights(command.weights)
            return
        if command.kind is ToActor.CONTROL:
            actor.apply_control(command.control)
            return
        raise ValueError(f"unknown command {command.kind!r}")

    try:
        info = actor.start()
        outbox.put(Report(FromActor.READY, spec.actor_id, info))
        while actor.publication < 0:  # the first weights
            apply(next_command(block=True))
        while True:
            used = actor.publication
            rollout = actor.collect(on_step)
            if rollout is None:
                raise _Stop
            outbox.put(Report(FromActor.SEGMENT, spec.actor_id, rollout))
            # Sync: block until newer weights. Async: take whatever has arrived, newest last.
            while spec.wait_for_new_weights and actor.publication <= used:
                apply(next_command(block=True))
            newest = None  # several versions may be queued: load only the newest
            while (command := next_command(block=False)) is not None:
                if command.kind is ToActor.WEIGHTS:
                    if newest is None or command.weights.version >= newest.weights.version:
                        newest = command
                else:
                    apply(command)
            if newest is not None:
                apply(newest)
    except _Stop:
        pass
    except Exception as err:  # report every failure to the learner, then exit
        outbox.put(Report(FromActor.ERROR, spec.actor_id, ActorError(
            spec.actor_id, f"{type(err).__module__}.{type(err).__qualname__}", str(err),
            traceback.format_exc())))
    finally:
        actor.close()
