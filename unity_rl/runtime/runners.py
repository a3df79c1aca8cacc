"""The two wirings of actors and learner hosts: how rollouts reach the hosts (one per behavior).

Both drive every behavior's ``LearnerHost`` through the same calls (``runtime/algorithm.py``),
so PPO, DDPG or a mix of them in one run are wired alike; ``next_update()`` returns a ``Round``
with, per behavior, the agent-steps and episodes that arrived and the metrics of the training
done for it (if any); ``on_arrival``, when set, sees the arrived part before any training.

**sync** — every actor collects one rollout with the current weights (``ActorSpec.
wait_for_new_weights``; a rollout ends when one of its behaviors has its segment's worth; what
finished before may come ahead in partial rollouts, ``Rollout.final`` False, counted by
``on_arrival`` as they come); the runner waits for all K final rollouts, hands the segments to
their hosts (each actor's partial ones first, actors in order), lets every host with work
due ``train(sync=True)`` (PPO: one update once its buffer is full; DDPG: every update owed) and
publishes; actors wait for that publication before collecting again. A behavior's weights change
only when it trains, and actors always act with the newest: policy lag is 0 for every behavior,
and the slowest actor paces the round.

**async** — actors never wait: they stream rollouts tagged with the version each behavior acted
with and pick up new weights between rollouts. The runner takes whatever has arrived (blocking
only when no host has work due), hands the segments to their hosts (a host may drop stale data:
PPO beyond ``max_policy_lag``), gives every host with work due one unit of training
(``train(sync=False)``: PPO one update once its buffer is full, DDPG at most a chunk of owed
updates) and publishes when anything trained. Policy lag = host version − segment version,
measured per accepted segment (``Policy/Lag`` mean, ``Policy/Lag Max``). Flow control: while
any host ``holds_collection()`` (a replay-ratio host owing more updates than
``unity_rl.max_update_backlog``) the actors are paused between rollouts (``Control.paused``),
and resumed when none holds (``Runtime/Actors Paused``: 1 for a round that ended paused).
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, NamedTuple

import numpy as np

from unity_rl.runtime.algorithm import LearnerHost
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.messages import BehaviorWeights, Control, PolicyWeights, Rollout


class BehaviorRound(NamedTuple):
    """What one ``next_update()`` did for one behavior."""

    collected_steps: int
    """Agent-steps of this behavior that arrived (used or dropped)."""
    episode_returns: list[float]
    """Returns of this behavior's episodes that ended in the arrived segments."""
    episode_lengths: list[int]
    """Their lengths in decisions."""
    metrics: dict[str, float] | None
    """Learner metrics plus lag and timings when the host trained this round; None otherwise."""


class Round(NamedTuple):
    """What one ``next_update()`` did."""

    behaviors: dict[str, BehaviorRound]
    """Full behavior name -> its part of the round (every host, maybe with nothing)."""
    rollouts: int
    """Rollouts that arrived."""
    build_restarts: int
    """Build restarts the arrived rollouts report."""


class _Wiring:
    """Shared bookkeeping of the two wirings: hosts, publication, per-behavior accounting."""

    def __init__(self, backend: ActorBackend, hosts: Mapping[str, LearnerHost]):
        if not hosts:
            raise ValueError("a wiring needs at least one learner host")
        self.backend = backend
        self.hosts = dict(hosts)
        self.publication = 0
        """Number of the last publication (``PolicyWeights.version``)."""
        self.finished: set[str] = set()
        """Behaviors that reached their max_steps: their data is counted, no longer trained on."""
        self.before_publish: Callable[[], None] | None = None
        """Called at the start of every publication, before the weights go out (self-play: its
        schedules run there, so that a sync actor gets their control before the weights)."""
        self.on_arrival: Callable[[dict[str, BehaviorRound]], None] | None = None
        """Called with what arrived (parts with ``metrics`` None) before any host trains on
        it: once per round, and in sync mode also once per partial rollout as it comes. The
        session counts agent-steps and episodes there, so a summary window closes as soon as
        its agent-steps have arrived, as mlagents-learn's does, not after the update."""

    def finish(self, name: str) -> None:
        """Stops training behavior ``name`` (its actors keep acting with its last weights)."""
        self.finished.add(name)

    def _training(self):
        return [(n, h) for n, h in self.hosts.items() if n not in self.finished]

    def start(self) -> None:
        """Publishes the initial weights (actors wait for them before acting)."""
        self.publish()

    def publish(self) -> None:
        """Broadcasts every host's current weights as one new publication."""
        if self.before_publish is not None:
            self.before_publish()
        self.publication += 1
        self.backend.broadcast(PolicyWeights(self.publication, {
            name: BehaviorWeights(int(host.version), host.weights())
            for name, host in self.hosts.items()}))

    def _accept(self, rollouts: list[Rollout]) -> dict[str, list[int]]:
        """Hands each segment to its behavior's host; returns the accepted lags per behavior."""
        lags: dict[str, list[int]] = {name: [] for name in self.hosts}
        for rollout in rollouts:
            for name, segment in rollout.segments.items():
                host = self.hosts.get(name)
                if host is None:
                    raise RuntimeError(f"actor {rollout.actor_id} sent a segment of behavior "
                                       f"{name!r}, which has no learner in this run")
                lag = None if name in self.finished else host.accept(segment)
                if lag is not None:
                    lags[name].append(lag)
        return lags

    def _arrived(self, rollouts: list[Rollout]) -> None:
        """Tells ``on_arrival`` what arrived this round, before anything trains on it."""
        if self.on_arrival is not None:
            self.on_arrival(self._parts(rollouts, {}, {}, 0.0))

    def _round(self, rollouts: list[Rollout], lags: dict[str, list[int]],
               trained: dict[str, dict[str, float]], wait_s: float) -> Round:
        return Round(self._parts(rollouts, lags, trained, wait_s), len(rollouts),
                     sum(r.restarts for r in rollouts))

    def _parts(self, rollouts: list[Rollout], lags: dict[str, list[int]],
               trained: dict[str, dict[str, float]], wait_s: float) -> dict[str, BehaviorRound]:
        parts = {}
        for name in self.hosts:
            segments = [r.segments[name] for r in rollouts if name in r.segments]
            metrics = trained.get(name)
            if metrics is not None:
                metrics = {**metrics, **_lag_metrics(lags[name]),
                           "Runtime/Wait Seconds": wait_s,
                           "Runtime/Actor Restarts": float(getattr(self.backend, "restarts", 0)),
                           "Runtime/Dropped Rollouts":
                               float(getattr(self.backend, "dropped_rollouts", 0))}
            parts[name] = BehaviorRound(
                collected_steps=sum(s.agent_steps for s in segments),
                episode_returns=[r for s in segments for r in s.episode_returns],
                episode_lengths=[n for s in segments for n in s.episode_lengths],
                metrics=metrics)
        return parts


def _lag_metrics(lags: list[int]) -> dict[str, float]:
    return {"Policy/Lag": float(np.mean(lags)) if lags else float("nan"),
            "Policy/Lag Max": float(max(lags)) if lags else float("nan")}


def _timed_train(host: LearnerHost, sync: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    metrics = dict(host.train(sync))
    metrics["Runtime/Update Seconds"] = time.perf_counter() - t0
    return metrics


def gather_one_rollout_per_actor(backend: ActorBackend,
                                 on_partial: Callable[[Rollout], None] | None = None
                                 ) -> list[Rollout]:
    """Blocks until every actor has delivered its final rollout of a sync round; returns every
    rollout of the round, each actor's partial ones (``Rollout.final`` False, in the order it
    sent them, each shown to ``on_partial`` as it arrives) before its final one, actors in
    order, so that what the hosts accept does not depend on timing."""
    finals: dict[int, Rollout] = {}
    partials: dict[int, list[Rollout]] = {}
    while len(finals) < backend.num_actors:
        rollout = backend.receive()
        if rollout.actor_id in finals:
            raise RuntimeError(f"actor {rollout.actor_id} sent two rollouts in one sync round")
        if rollout.final:
            finals[rollout.actor_id] = rollout
            continue
        partials.setdefault(rollout.actor_id, []).append(rollout)
        if on_partial is not None:
            on_partial(rollout)
    return [r for k in sorted(finals) for r in [*partials.get(k, ()), finals[k]]]


class SyncRunner(_Wiring):
    """Gather one collection per actor -> every host trains -> publish, in lockstep."""

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        rollouts = gather_one_rollout_per_actor(self.backend,
                                                lambda partial: self._arrived([partial]))
        wait_s = time.perf_counter() - t0
        lags = self._accept(rollouts)
        self._arrived([r for r in rollouts if r.final])
        trained = {name: _timed_train(host, sync=True)
                   for name, host in self._training() if host.ready()}
        self.publish()
        return self._round(rollouts, lags, trained, wait_s)


class AsyncRunner(_Wiring):
    """Train whatever is due on whatever has arrived; actors wait only while a host holds them."""

    def __init__(self, backend: ActorBackend, hosts: Mapping[str, LearnerHost]):
        super().__init__(backend, hosts)
        self.paused = False
        """Whether the actors were last told to pause."""
        self.pauses = 0
        """Times the actors were paused in this run."""

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        rollouts = self._drain()
        lags = self._accept(rollouts)
        while not rollouts and not any(h.ready() for _, h in self._training()):
            rollouts = [self.backend.receive()] + self._drain()  # nothing due: wait for data
            for name, more in self._accept(rollouts).items():
                lags[name].extend(more)
        wait_s = time.perf_counter() - t0
        self._arrived(rollouts)
        self._flow_control()  # pause at once if what arrived put a host beyond its bound
        trained = {name: _timed_train(host, sync=False)
                   for name, host in self._training() if host.ready()}
        if trained:
            self.publish()
        self._flow_control()  # resume once it has paid enough
        for metrics in trained.values():
            metrics["Runtime/Actors Paused"] = float(self.paused)
        return self._round(rollouts, lags, trained, wait_s)

    def _flow_control(self) -> None:
        """Pauses the actors while any host holds them, resumes them when none does."""
        hold = any(host.holds_collection() for _, host in self._training())
        if hold != self.paused:
            self.backend.control(Control(paused=hold))
            self.paused = hold
            self.pauses += hold

    def _drain(self) -> list[Rollout]:
        out = []
        while (rollout := self.backend.receive(timeout=0)) is not None:
            out.append(rollout)
        return out


def make_runner(mode: str, backend: ActorBackend, hosts: Mapping[str, LearnerHost]):
    """The wiring called ``mode`` ('sync' or 'async')."""
    if mode == "sync":
        return SyncRunner(backend, hosts)
    if mode == "async":
        return AsyncRunner(backend, hosts)
    raise ValueError(f"unknown mode {mode!r}: expected 'sync' or 'async'")
