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
  served at its own pace; the others keep filling). With ``ActorSpec.partial_interval_s`` (the
  sync wiring) the trajectories finished so far also go out during the collection, at most
  that often, as partial rollouts (``Rollout.final`` False; a lane that cuts at the segment
  end keeps its trajectories for the final one). Weights change only between collections; a
  segment is tagged with the version its lane acted with (a trajectory that grew over several
  collections holds older steps too, with the log-probs of the policies that took them, as in
  ML-Agents);
- a ``Control`` (environment parameters, self-play lanes, a reset of every build) is applied
  between collections (``apply_control``); ``ActorSpec.control``, the run's control state when
  the actor was created, is applied before the builds' first reset.

What an actor is given is ``actor_spec``; the body of an actor process around it, over any pair
of channels, is ``actor_loop``.

The actor never builds a learner (no optimiser state): it rebuilds each policy from a picklable
``policy_factory(obs_shapes, action_spec, seed)`` (plus ``goal_indices=``, the GOAL_SIGNAL
observations, when the BehaviorSpec has any) and loads CPU weights shipped as plain dicts.
It reaches a policy only through ``unity_rl.runtime.acting.ActingPolicy`` (always passing the
decision rows' agent keys to ``act``).

The trajectory cutting is ``collector.py``, supervision ``supervisor.py``.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import numpy as np

from unity_rl.experience import Segment
from unity_rl.runtime.acting import ActingPolicy
from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.collector import TrajectoryCollector
from unity_rl.runtime.messages import (
    SNAPSHOT_VERSION,
    ActorInfo,
    BehaviorInfo,
    Control,
    PolicyWeights,
    Rollout,
    goal_indices_of,
)

logger = logging.getLogger(__name__)


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
        self.sent_rows = 0
        """Rows of the collection in progress already sent in partial rollouts."""

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
        return self.collector.finished_rows + self.sent_rows

    @property
    def has_finished(self) -> bool:
        """Finished trajectories wait that a partial rollout may carry (``segment(final=False)``;
        a lane that cuts at the segment end sends its trajectories only with the final one)."""
        return not self.plan.cut_at_segment_end and self.collector.finished_rows > 0

    def segment(self, actor_id: int, final: bool = True) -> Segment:
        """The collection's trajectories so far: the final segment ends the collection (a lane
        that cuts at the segment end cuts its open trajectories then); a partial one holds the
        finished trajectories only (``has_finished``), and the collection goes on."""
        collector = self.collector
        if not final:
            if self.plan.cut_at_segment_end:
                trajectories = []
            else:
                self.sent_rows += collector.finished_rows
                trajectories = collector.take()
        else:
            trajectories = (collector.flush() if self.plan.cut_at_segment_end
                            else collector.take())
            self.sent_rows = 0
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
        self.paused = False
        """Flow control (``Control.paused``): collect nothing until resumed."""
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
        if control.paused is not None:
            self.paused = control.paused
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

    def collect(self, on_step: Callable[[], bool] | None = None,
                send_partial: Callable[[Rollout], None] | None = None) -> Rollout | None:
        """Steps the builds until the collection is complete (see the module doc).

        ``on_step()`` runs after every stream step (heartbeat); when it returns True the
        collection is abandoned and None is returned (the actor is being stopped).
        ``send_partial``: with ``ActorSpec.partial_interval_s``, called with a partial rollout
        (``Rollout.final`` False) of the trajectories finished so far, at most that often.
        """
        restarts = 0
        interval = self.spec.partial_interval_s
        partial_due = time.monotonic() + (interval or 0.0)
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
            if (send_partial is not None and interval is not None
                    and time.monotonic() >= partial_due and not self._complete()
                    and any(lane.has_finished for lane in self.lanes.values())):
                send_partial(self._rollout(final=False, restarts=0))
                partial_due = time.monotonic() + interval
        self.restarts += restarts
        return self._rollout(final=True, restarts=restarts)

    def _rollout(self, final: bool, restarts: int) -> Rollout:
        return Rollout(self.spec.actor_id, self.publication,
                       {name: lane.segment(self.spec.actor_id, final)
                        for name, lane in self.lanes.items()}, restarts, final)

    def _complete(self) -> bool:
        return any(lane.collected >= lane.plan.segment_steps for lane in self.lanes.values())

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.close()
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.close()
