"""The actor role: one ``AgentStream`` over its builds plus a policy copy (Sample Factory's sampler).

Contract:
- an actor acts for every agent that requests a decision, in one batched ``policy.act`` call per
  stream step (rows are independent: agent order and count may change from step to step);
- ``collect()`` returns a ``Segment`` of at least ``segment_steps`` completed agent-steps (it stops
  at the first stream step that reaches the count; a step adds one transition per agent), tagged
  with the version of the weights it acted with. Weights change only between segments, so every
  step of a segment was taken under that one version (an action still waiting for its reward at a
  segment's end opens the agent's next piece and keeps the logprob of the policy that took it);
- ``actor_loop`` is the backend-independent body of an actor process: it reports ``READY`` with
  the behavior spec, waits for the first weights, then collects segments until told to stop.
  In the sync wiring (``ActorSpec.wait_for_new_weights``) it waits after each segment for weights
  newer than those it used; in the async wiring it only picks up whatever weights have arrived.
  Any exception is sent back as ``FromActor.ERROR`` (with the traceback text); the builds are
  closed in ``finally`` whatever happens.

The actor never builds the learner (no optimiser state): it rebuilds its policy from a picklable
``policy_factory(obs_dim, action_spec, seed)`` and loads CPU weights shipped as plain dicts.
"""
from __future__ import annotations

import logging
import os
import queue
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

import numpy as np

from unity_rl.algos.types import Segment
from unity_rl.runtime.collector import TrajectoryCollector
from unity_rl.runtime.messages import (
    ActorError,
    ActorInfo,
    Command,
    FromActor,
    PolicyWeights,
    Report,
    ToActor,
)

logger = logging.getLogger(__name__)


class Policy(Protocol):
    """What an actor needs of a policy copy (``unity_rl.algos.ppo.PPOPolicy`` fits).

    Optional hooks, used when present (DDPG's ``unity_rl.runtime.offpolicy_actor``): with
    ``wants_agent_keys = True``, ``act`` also gets ``agent_keys=`` (the decision rows' agents) and
    ``episodes_ended(keys)`` is called for the agents of each step's terminal rows;
    ``finish_segment(segment) -> segment`` sees each segment before it is sent.
    """

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def load_weights(self, weights: dict) -> None: ...


PolicyFactory = Callable[[int, Any, int], Policy]
"""(obs_dim, action_spec, seed) -> a policy copy; must pickle (a module-level function or a
``functools.partial`` of one) because it travels to the actor's process."""


@dataclass(frozen=True)
class StreamSettings:
    """How an actor opens its ``AgentStream`` (everything pickles)."""

    env_path: str
    """Build executable."""
    num_builds: int = 1
    """Builds this actor owns."""
    base_port: int = 5005
    """Port of worker 0 of the run; the actor's builds use base_port + worker_id."""
    worker_id_start: int = 0
    """Worker id of the actor's first build (distinct ranges per actor: distinct ports)."""
    no_graphics: bool = True
    """Pass -nographics -batchmode to the builds."""
    time_scale: float = 20.0
    """Engine time scale."""
    env_args: tuple[str, ...] = ()
    """Extra command-line arguments for every build."""
    seed: int = 0
    """Seed sent to the builds."""
    timeout_wait: float = 60.0
    """Seconds a build may take to connect."""
    step_timeout: float | None = None
    """Seconds a build may take to answer a step (None: timeout_wait)."""
    behavior_name: str | None = None
    """Behavior to train (None: the build's only behavior)."""
    log_dir: str | None = None
    """Folder for the builds' logs."""
    max_lifetime_restarts: int = 10
    """Build restarts allowed over the actor's life (-1: unlimited)."""
    restarts_rate_limit_n: int = 1
    """Restarts allowed per rate-limit period (-1: unlimited)."""
    restarts_rate_limit_period_s: float = 60.0
    """Length of the rate-limit period."""
    env_parameters: tuple[tuple[str, Any], ...] = ()
    """Environment parameters sent to the builds: (name, float or sampler spec)."""

    def open(self):
        """Starts the builds and returns the ``AgentStream`` over them."""
        from unity_rl.envs.agent_stream import AgentStream
        from unity_rl.envs.launcher import RestartQuota

        quota = RestartQuota(self.max_lifetime_restarts, self.restarts_rate_limit_n,
                             self.restarts_rate_limit_period_s)
        return AgentStream(
            self.env_path, num_builds=self.num_builds, base_port=self.base_port,
            worker_id_start=self.worker_id_start, no_graphics=self.no_graphics,
            time_scale=self.time_scale, env_args=self.env_args, seed=self.seed,
            timeout_wait=self.timeout_wait, behavior_name=self.behavior_name,
            log_dir=self.log_dir, step_timeout=self.step_timeout, restart_quota=quota,
            env_parameters=dict(self.env_parameters))


@dataclass(frozen=True)
class ActorSpec:
    """Everything one actor needs, as the wiring hands it to a backend."""

    actor_id: int
    """Index of the actor, 0..K-1."""
    stream: StreamSettings
    """Its builds."""
    policy_factory: PolicyFactory
    """Builds the policy copy (see ``PolicyFactory``)."""
    segment_steps: int
    """Completed agent-steps per segment."""
    time_horizon: int
    """Per-agent trajectory cut (ML-Agents' time_horizon)."""
    wait_for_new_weights: bool
    """Sync wiring: after each segment, wait for weights newer than those used."""
    seed: int = 0
    """Seed of the policy's action sampling."""
    torch_threads: int = 1
    """Intra-op threads of the actor's torch (1: the builds need the other cores)."""
    stream_factory: Optional[Callable[[], Any]] = field(default=None, compare=False)
    """Tests: replaces ``stream.open()`` with a stand-in stream (must pickle for processes)."""

    def open_stream(self):
        return self.stream_factory() if self.stream_factory is not None else self.stream.open()


class Actor:
    """One stream over the actor's builds, a policy copy and a trajectory collector."""

    def __init__(self, spec: ActorSpec):
        self.spec = spec
        self.stream = None
        self.policy: Policy | None = None
        self.version = -1
        self.collector = TrajectoryCollector(spec.time_horizon)
        self._result = None
        self._obs: np.ndarray | None = None
        self._continuous = True
        self._empty_actions: np.ndarray | None = None
        self.restarts = 0

    def start(self) -> ActorInfo:
        """Starts the builds, resets them and builds the policy copy."""
        spec = self.spec
        self.stream = spec.open_stream()
        behavior_spec = self.stream.spec
        result = self.stream.reset()
        self._obs = self.collector.observe(result)
        self._result = result
        obs_dim = int(sum(int(np.prod(o.shape)) for o in behavior_spec.observation_specs))
        action_spec = behavior_spec.action_spec
        self._continuous = action_spec.continuous_size > 0
        width = action_spec.continuous_size or len(action_spec.discrete_branches)
        self._empty_actions = np.zeros((0, width), np.float32 if self._continuous else np.int64)
        self.policy = spec.policy_factory(obs_dim, action_spec, spec.seed)
        build_pids = ()
        builds = getattr(self.stream, "builds", None)
        if builds is not None and hasattr(builds, "pids"):
            build_pids = tuple(int(p) for p in builds.pids() if p)
        obs_shapes = tuple(tuple(int(d) for d in o.shape) for o in behavior_spec.observation_specs)
        return ActorInfo(spec.actor_id, self.stream.behavior_name, obs_dim, obs_shapes, action_spec,
                         len(result.decisions.keys), os.getpid(), build_pids)

    def set_weights(self, weights: PolicyWeights) -> None:
        self.policy.load_weights(weights.state)
        self.version = weights.version

    def collect(self, on_step: Callable[[], bool] | None = None) -> Segment | None:
        """Steps the builds until ``segment_steps`` agent-steps are complete.

        ``on_step()`` runs after every stream step (heartbeat); when it returns True the
        collection is abandoned and None is returned (the actor is being stopped).
        """
        collector, stream, policy = self.collector, self.stream, self.policy
        target = self.spec.segment_steps
        result, obs = self._result, self._obs
        keyed = getattr(policy, "wants_agent_keys", False)
        while collector.completed_steps < target:
            decisions = result.decisions
            if decisions.keys:
                if keyed:
                    actions, logprobs, values = policy.act(obs, decisions.action_mask,
                                                           agent_keys=decisions.keys)
                else:
                    actions, logprobs, values = policy.act(obs, decisions.action_mask)
                collector.record(decisions.keys, obs, actions, logprobs, values,
                                 decisions.action_mask)
                result = stream.step(actions)  # the stream clips continuous actions to ±1
            else:
                result = stream.step(self._empty_actions)
            if result.restarted:
                self.restarts += len(result.restarted)
                for build, reason in result.restarted.items():
                    logger.warning("actor %d: build %d restarted: %s",
                                   self.spec.actor_id, build, reason)
            obs = collector.observe(result)
            if keyed and result.terminals.keys:
                policy.episodes_ended(result.terminals.keys)
            self._result, self._obs = result, obs
            if on_step is not None and on_step():
                return None
        trajectories = collector.flush()
        returns, lengths = collector.pop_episodes()
        segment = Segment(trajectories=trajectories, policy_version=self.version,
                          actor_id=self.spec.actor_id,
                          agent_steps=sum(len(t.rewards) for t in trajectories),
                          episode_returns=returns, episode_lengths=lengths)
        finish = getattr(policy, "finish_segment", None)
        return finish(segment) if finish is not None else segment

    def close(self) -> None:
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
            if command.weights.version >= actor.version:
                actor.set_weights(command.weights)
            return
        raise ValueError(f"unknown command {command.kind!r}")

    try:
        info = actor.start()
        outbox.put(Report(FromActor.READY, spec.actor_id, info))
        while actor.version < 0:  # the first weights
            apply(next_command(block=True))
        while True:
            used = actor.version
            segment = actor.collect(on_step)
            if segment is None:
                raise _Stop
            outbox.put(Report(FromActor.SEGMENT, spec.actor_id, segment))
            # Sync: block until newer weights. Async: take whatever has arrived, newest last.
            while spec.wait_for_new_weights and actor.version <= used:
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
