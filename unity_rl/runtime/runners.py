"""The two wirings of actors and learner: synchronous and asynchronous (issue 3 §4).

Both drive the same pieces: an ``ActorBackend`` (actors anywhere) and a learner with
``version``, ``weights()`` and ``update(list[Trajectory]) -> metrics``.  ``next_update()`` runs
one round: wait for experience, update once, publish the new weights; the trainer owns the loop
around it (step budget, metrics, checkpoints, stopping).

**sync** — every actor collects one segment with the current weights; the learner waits for all
K segments, updates, broadcasts; actors wait for those weights before collecting again (the
``ActorSpec.wait_for_new_weights`` flag).  Policy lag is always 0; the slowest actor paces the
round.

**async** — actors never wait: they stream segments tagged with the version they acted with and
pick up new weights between segments.  The learner updates as soon as at least ``buffer_steps``
agent-steps have arrived, taking also whatever else has already arrived (never waiting for it),
then publishes.  Policy lag = learner version − segment version, measured per segment and logged
(``Policy/Lag`` mean, ``Policy/Lag Max``).

Stale data, decided here: segments whose lag exceeds ``max_policy_lag`` are **dropped** (counted
in ``Policy/Dropped Segments``; their episodes still count for the return statistics and their
steps for the step budget, since the builds did play them).  Segments within the bound are
used as they are: PPO's ratio π_θ/π_behaviour uses the behaviour policy's stored log-probs, so
the clipped surrogate already is an importance-weighted, trust-region-bounded correction for
mild lag, and ``PPOLearner`` recomputes values with the current critic before GAE.  Heavier
corrections (V-trace) would pay off only for lags well beyond what one machine produces; with a
bound of a few versions PPO's clip is the simpler and proven choice (as in APPO / Sample Factory).
"""
from __future__ import annotations

import time
from typing import NamedTuple, Protocol

import numpy as np

from unity_rl.algos.types import Segment, Trajectory
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.messages import PolicyWeights


class Learner(Protocol):
    """What a wiring needs of a learner (``PPOLearner`` fits)."""

    version: int

    def weights(self) -> dict: ...

    def update(self, trajectories: list[Trajectory]) -> dict[str, float]: ...


class Round(NamedTuple):
    """What one ``next_update()`` did."""

    collected_steps: int
    """Agent-steps that arrived in this round (used or dropped)."""
    trained_steps: int
    """Agent-steps the update trained on."""
    episode_returns: list[float]
    """Returns of episodes that ended in the segments of this round."""
    episode_lengths: list[int]
    """Their lengths in decisions."""
    metrics: dict[str, float]
    """Learner metrics plus Policy/Lag, Policy/Lag Max, Policy/Dropped Segments and timings."""


def publish(backend: ActorBackend, learner: Learner) -> None:
    """Broadcasts the learner's current weights, tagged with its version."""
    backend.broadcast(PolicyWeights(int(learner.version), learner.weights()))


def _lag_metrics(lags: list[int], dropped: int) -> dict[str, float]:
    return {"Policy/Lag": float(np.mean(lags)) if lags else float("nan"),
            "Policy/Lag Max": float(max(lags)) if lags else float("nan"),
            "Policy/Dropped Segments": float(dropped)}


class _Wiring:
    """Shared bookkeeping of the two wirings."""

    def __init__(self, backend: ActorBackend, learner: Learner):
        self.backend = backend
        self.learner = learner

    def start(self) -> None:
        """Publishes the initial weights (actors wait for them before acting)."""
        publish(self.backend, self.learner)

    def _update(self, used: list[Segment], arrived: list[Segment], lags: list[int], dropped: int,
                wait_s: float) -> Round:
        trajectories = [t for seg in used for t in seg.trajectories]
        t0 = time.perf_counter()
        metrics = dict(self.learner.update(trajectories)) if trajectories else {}
        update_s = time.perf_counter() - t0
        publish(self.backend, self.learner)
        metrics.update(_lag_metrics(lags, dropped))
        metrics["Runtime/Wait Seconds"] = wait_s
        metrics["Runtime/Update Seconds"] = update_s
        return Round(
            collected_steps=sum(s.agent_steps for s in arrived),
            trained_steps=sum(s.agent_steps for s in used),
            episode_returns=[r for s in arrived for r in s.episode_returns],
            episode_lengths=[n for s in arrived for n in s.episode_lengths],
            metrics=metrics)


def gather_one_segment_per_actor(backend: ActorBackend) -> list[Segment]:
    """Blocks until every actor has delivered its segment of a sync round (in actor order)."""
    by_actor: dict[int, Segment] = {}
    while len(by_actor) < backend.num_actors:
        segment = backend.receive()
        if segment.actor_id in by_actor:
            raise RuntimeError(f"actor {segment.actor_id} sent two segments in one sync round")
        by_actor[segment.actor_id] = segment
    return [by_actor[k] for k in sorted(by_actor)]


class SyncRunner(_Wiring):
    """Gather one segment per actor -> update -> broadcast, in lockstep."""

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        segments = gather_one_segment_per_actor(self.backend)
        lags = [self.learner.version - s.policy_version for s in segments]
        return self._update(segments, segments, lags, 0, time.perf_counter() - t0)


class AsyncRunner(_Wiring):
    """Update on whatever has arrived once a buffer's worth is there; actors never wait."""

    def __init__(self, backend: ActorBackend, learner: Learner, *, buffer_steps: int,
                 max_policy_lag: int):
        super().__init__(backend, learner)
        if buffer_steps < 1 or max_policy_lag < 0:
            raise ValueError("buffer_steps must be >= 1 and max_policy_lag >= 0")
        self.buffer_steps = buffer_steps
        self.max_policy_lag = max_policy_lag
        self.dropped_total = 0
        """Segments dropped for exceeding the lag bound over the whole run."""

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        arrived: list[Segment] = []
        used: list[Segment] = []
        lags: list[int] = []
        dropped = 0
        usable = 0

        def take(segment: Segment) -> None:
            nonlocal dropped, usable
            arrived.append(segment)
            lag = self.learner.version - segment.policy_version
            if lag > self.max_policy_lag:
                dropped += 1
                return
            used.append(segment)
            lags.append(lag)
            usable += segment.agent_steps

        while usable < self.buffer_steps:          # block until a buffer's worth
            take(self.backend.receive())
        while (segment := self.backend.receive(timeout=0)) is not None:  # plus what is there
            take(segment)
        self.dropped_total += dropped
        return self._update(used, arrived, lags, dropped, time.perf_counter() - t0)


def make_runner(mode: str, backend: ActorBackend, learner: Learner, *, buffer_steps: int,
                max_policy_lag: int):
    """The wiring called ``mode`` ('sync' or 'async')."""
    if mode == "sync":
        return SyncRunner(backend, learner)
    if mode == "async":
        return AsyncRunner(backend, learner, buffer_steps=buffer_steps,
                           max_policy_lag=max_policy_lag)
    raise ValueError(f"unknown mode {mode!r}: expected 'sync' or 'async'")
