"""Off-policy (DDPG) training over the same actors and backends as PPO: sync and async (Ape-X).

What the trainer plugs in for ``trainer_type: ddpg`` (``DDPGTraining``: the actors' policy
factory, the learner host, the runner), wired as::

    sync  (any backend)       actors --Segment(trajectories)--> runner --transitions--> ReplayBuffer
                               ^                                  |  updates_owed() updates
                               +-------- weights (version v+1) ---+  (actors wait for them)

    async, local backend      actors --transitions (+ initial priorities)--> SharedReplayBuffer
    (Ape-X)                   actors --Segment receipt (steps, returns, version)--> runner
                              runner: sample <- SharedReplayBuffer, update, new priorities ->
                              runner --weights (every round that trained)--> actors (never wait)

    async, Ray backend        as local async, but shared memory does not span nodes: segments
                              carry their trajectories (and actor-side priorities) and the
                              runner inserts them into its own ReplayBuffer

- **Replay ratio.** The learner owes ``updates_owed(collected agent-steps, updates done)``
  gradient updates (``replay_ratio`` per agent-step after ``warmup_steps``). The sync runner pays
  all of them every round. The async runner pays them in chunks of at most
  ``updates_per_round`` and looks at the backend between chunks; it blocks on the backend only
  when nothing is owed, so it never runs ahead of the data (the ratio is an upper bound) and
  never waits for a particular actor. When the actors produce faster than it trains, the debt
  grows (``Runtime/Update Backlog``) and the achieved ratio (``Runtime/Replay Ratio``) falls
  below the configured one: Ape-X's trade of sample efficiency for wall time.
- **Versions and lag.** A version is one publication of weights (sync: one per round, which is
  what lets sync actors wait for "newer" weights even during warm-up). Policy lag is measured
  per arrived segment as learner version minus the segment's version (``Policy/Lag``, CSV
  ``policy_lag``) and in gradient updates (``Policy/Lag Updates``). Nothing is dropped for lag:
  replay is off-policy by design, and ``unity_rl.max_policy_lag`` does not apply to DDPG.
- **Resume.** The replay buffer is part of the checkpoint (``DDPGHost.state_dict``), so
  ``--resume`` continues with the buffer it had: 4·(2·obs_dim + act_dim + 2) bytes per stored
  transition (+16 with ``prioritized``) in every kept checkpoint — 80 B for 3DBall, so 16 MB
  for 200k transitions; see docs/ddpg.md. With the async wiring the snapshot may hold a few
  segments whose receipts the learner had not counted yet: extra, valid experience.
"""
from __future__ import annotations

import functools
import logging
import time
import weakref
from typing import Any, NamedTuple

import numpy as np
import torch

from unity_rl.algos.ddpg import DDPGConfig, DDPGLearner, continuous_action_size, updates_owed
from unity_rl.algos.replay import ReplayBuffer
from unity_rl.algos.types import Segment, TransitionBatch
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.messages import ActorInfo, PolicyWeights
from unity_rl.runtime.offpolicy_actor import (
    ReplayLink,
    carried_priorities,
    trajectories_to_transitions,
)
from unity_rl.runtime.policies import ddpg_policy
from unity_rl.runtime.runners import Round, gather_one_segment_per_actor

logger = logging.getLogger(__name__)

UPDATES_PER_ROUND = 200
"""async: most gradient updates between two looks at the backend (and two metrics rows)."""
REPLAY_LOCK_TIMEOUT_S = 10.0
"""How long a checkpoint waits for the shared replay buffer's lock."""
_LAG_HISTORY = 4096
"""Versions remembered for measuring lag in gradient updates."""


# ----------------------------------------------------------------------------------------------
# The learner host: DDPGLearner + replay + counters
# ----------------------------------------------------------------------------------------------

class DDPGHost:
    """The learner side of a DDPG run: the pure learner, its replay buffer and the step counts.

    ``version`` counts publications (see the module doc); ``agent_steps`` counts collected
    agent-steps (what the replay ratio is measured against). Fits the trainer as a learner:
    ``version``, ``weights()`` (the deterministic policy, for ``<Behavior>.pt``),
    ``export_module()``, ``state_dict()`` / ``load_state_dict()``.
    """

    def __init__(self, learner: DDPGLearner, replay: ReplayBuffer, *, num_actors: int,
                 replay_handle: dict | None = None, replay_lock: Any = None):
        self.learner = learner
        self.cfg: DDPGConfig = learner.cfg
        self.replay = replay
        self.num_actors = num_actors
        self.replay_handle = replay_handle
        """Where actors find the shared buffer (None: they send their transitions)."""
        self.replay_lock = replay_lock
        """The shared buffer's lock (checked before a checkpoint copies the buffer)."""
        self.version = 0
        self.agent_steps = 0
        self._updates_at: dict[int, int] = {0: 0}
        """version -> gradient updates done when it was published (recent versions only)."""
        self._closer = None
        if hasattr(replay, "unlink"):  # a SharedReplayBuffer we own: never leak the segment
            self._closer = weakref.finalize(self, _close_shared, replay)

    @property
    def updates(self) -> int:
        """Gradient updates done."""
        return self.learner.updates

    # -- publishing -----------------------------------------------------------------------------
    def next_version(self) -> int:
        """A new version number for the weights about to be published."""
        self.version += 1
        self._updates_at[self.version] = self.updates
        if len(self._updates_at) > _LAG_HISTORY:
            del self._updates_at[min(self._updates_at)]
        return self.version

    def actor_weights(self) -> dict:
        """What ``DDPGActorPolicy.load_weights`` takes (critic included when prioritized)."""
        return {"ddpg": self.learner.weights(include_critic=self.cfg.prioritized),
                "agent_steps": self.agent_steps, "num_actors": self.num_actors,
                "replay": self.replay_handle}

    def weights(self) -> dict:
        """The deterministic policy (actor, normaliser, updates), as saved in ``<Behavior>.pt``."""
        return self.learner.weights()

    def export_module(self) -> torch.nn.Module:
        return self.learner.export_module()

    def lag(self, segment: Segment) -> tuple[int, float]:
        """(versions, gradient updates) between the segment's weights and the current ones."""
        versions = self.version - segment.policy_version
        then = self._updates_at.get(segment.policy_version)
        return versions, (float(self.updates - then) if then is not None else float("nan"))

    # -- data -----------------------------------------------------------------------------------
    def add(self, segments: list[Segment]) -> int:
        """Counts the segments' agent-steps and stores the transitions they carry; returns
        the number of transitions stored (0 for receipts: their actors wrote them already)."""
        stored = 0
        for segment in segments:
            self.agent_steps += segment.agent_steps
            if not segment.trajectories:
                continue
            batch = trajectories_to_transitions(segment.trajectories)
            priorities = carried_priorities(segment.trajectories) if self.cfg.prioritized else None
            self.replay.add(batch, priorities)
            stored += len(batch.rewards)
        return stored

    def updates_owed(self) -> int:
        return updates_owed(self.agent_steps, self.updates, self.cfg)

    # -- training -------------------------------------------------------------------------------
    def train(self, num_updates: int) -> dict[str, float]:
        """``num_updates`` gradient updates on replay samples; returns their mean metrics."""
        cfg, replay, learner = self.cfg, self.replay, self.learner
        sums: dict[str, float] = {}
        done = 0
        if len(replay) > 0:
            for _ in range(num_updates):
                if cfg.prioritized:
                    sample = replay.sample_indexed(cfg.batch_size, cfg.per_beta)
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
                "updates": self.updates, "agent_steps": self.agent_steps,
                "replay": self._replay_state()}

    def _replay_state(self) -> dict | None:
        """The buffer's state; None if an actor died holding the shared lock (a SIGKILL in the
        middle of a write): the checkpoint is then saved without it rather than never."""
        if self.replay_lock is not None:
            if not self.replay_lock.acquire(timeout=REPLAY_LOCK_TIMEOUT_S):
                logger.error("the shared replay buffer stayed locked for %.0f s (an actor killed "
                             "while writing?): checkpoint saved without it",
                             REPLAY_LOCK_TIMEOUT_S)
                return None
            self.replay_lock.release()
        return self.replay.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["ddpg"])
        self.version = int(state["version"])
        self.agent_steps = int(state["agent_steps"])
        self._updates_at = {self.version: self.updates}
        if state["replay"] is None:
            logger.warning("the checkpoint holds no replay buffer: training resumes on an empty "
                           "one (warm-up is not repeated)")
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


# ----------------------------------------------------------------------------------------------
# The wirings
# ----------------------------------------------------------------------------------------------

class _OffPolicyWiring:
    """Shared bookkeeping of the two DDPG wirings (``next_update() -> Round`` like PPO's)."""

    def __init__(self, backend: ActorBackend, host: DDPGHost):
        self.backend = backend
        self.host = host

    def start(self) -> None:
        """Publishes the initial weights (actors wait for them before acting)."""
        self.publish()

    def publish(self) -> None:
        version = self.host.next_version()
        self.backend.broadcast(PolicyWeights(version, self.host.actor_weights()))

    def _round(self, arrived: list[Segment], lags: list[tuple[int, float]],
               metrics: dict[str, float], wait_s: float, update_s: float) -> Round:
        versions = [v for v, _ in lags]
        in_updates = [u for _, u in lags if np.isfinite(u)]
        metrics.update({
            "Policy/Lag": float(np.mean(versions)) if versions else float("nan"),
            "Policy/Lag Max": float(max(versions)) if versions else float("nan"),
            "Policy/Lag Updates": float(np.mean(in_updates)) if in_updates else float("nan"),
            "Runtime/Wait Seconds": wait_s,
            "Runtime/Update Seconds": update_s,
        })
        steps = sum(s.agent_steps for s in arrived)
        return Round(collected_steps=steps, trained_steps=steps,
                     episode_returns=[r for s in arrived for r in s.episode_returns],
                     episode_lengths=[n for s in arrived for n in s.episode_lengths],
                     metrics=metrics)


class DDPGSyncRunner(_OffPolicyWiring):
    """One segment per actor -> replay -> every owed update -> publish, in lockstep."""

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        segments = gather_one_segment_per_actor(self.backend)
        lags = [self.host.lag(s) for s in segments]
        t1 = time.perf_counter()
        self.host.add(segments)
        metrics = self.host.train(self.host.updates_owed())
        self.publish()
        return self._round(segments, lags, metrics, t1 - t0, time.perf_counter() - t1)


class ApeXRunner(_OffPolicyWiring):
    """Trains continuously on replay while actors keep stepping (Horgan et al. 2018, Ape-X)."""

    def __init__(self, backend: ActorBackend, host: DDPGHost, *,
                 updates_per_round: int = UPDATES_PER_ROUND):
        super().__init__(backend, host)
        if updates_per_round < 1:
            raise ValueError("updates_per_round must be >= 1")
        self.updates_per_round = updates_per_round

    def next_update(self) -> Round:
        t0 = time.perf_counter()
        arrived: list[Segment] = []
        while (segment := self.backend.receive(timeout=0)) is not None:  # whatever is there
            arrived.append(segment)
        if not arrived and self.host.updates_owed() == 0:
            arrived.append(self.backend.receive())  # caught up with the data: wait for more
            while (segment := self.backend.receive(timeout=0)) is not None:
                arrived.append(segment)
        lags = [self.host.lag(s) for s in arrived]
        t1 = time.perf_counter()
        self.host.add(arrived)
        owed = self.host.updates_owed()
        metrics = self.host.train(min(owed, self.updates_per_round))
        if metrics["Runtime/Updates This Round"] > 0:
            self.publish()
        return self._round(arrived, lags, metrics, t1 - t0, time.perf_counter() - t1)


# ----------------------------------------------------------------------------------------------
# What the trainer plugs in
# ----------------------------------------------------------------------------------------------

class DDPGTraining:
    """``trainer_type: ddpg`` for the trainer: policy factory, learner host, runner, clean-up.

    Replay placement (decided here, once): shared memory written by the actors for the async
    wiring on the local backend; a learner-side buffer fed from segments otherwise (sync wiring:
    the learner waits for the segments anyway; Ray: shared memory does not span nodes).
    """

    def __init__(self, cfg: Any, behavior: Any):
        self.cfg = cfg
        self.behavior = behavior
        rl = cfg.unity_rl
        self.mode = rl.mode
        self.shared_replay = rl.mode == "async" and rl.backend == "local"
        self.link = ReplayLink() if self.shared_replay else None
        self.host: DDPGHost | None = None

    def policy_factory(self):
        """The actors' picklable ``(obs_dim, action_spec, seed) -> DDPGActorPolicy``."""
        return functools.partial(ddpg_policy, network_cfg=self.behavior.network_settings,
                                 ddpg_cfg=self.behavior.hyperparameters,
                                 replay_link=self.link)

    def make_learner(self, info: ActorInfo, device: str, num_threads: int,
                     seed: int) -> DDPGHost:
        from unity_rl.config import ConfigError

        try:
            act_dim = continuous_action_size(info.action_spec)
        except ValueError as err:
            name = info.behavior_name.split("?", 1)[0]
            raise ConfigError(self.cfg.source or "config", f"behaviors.{name}", "trainer_type",
                              f"ddpg cannot train behavior {name}: {err}") from None
        ddpg_cfg: DDPGConfig = self.behavior.hyperparameters
        network = self.behavior.network_settings
        learner = DDPGLearner(info.obs_dim, info.action_spec, ddpg_cfg, network.hidden_units,
                              network.num_layers, network.normalize, device=device,
                              num_threads=num_threads, seed=seed)
        replay_args = dict(prioritized=ddpg_cfg.prioritized, alpha=ddpg_cfg.per_alpha,
                           eps=ddpg_cfg.per_eps)
        handle = None
        if self.link is not None:
            replay = self.link.create(ddpg_cfg.buffer_size, info.obs_dim, act_dim, seed,
                                      **replay_args)
            handle = ReplayLink.handle(replay)
        else:
            replay = ReplayBuffer(ddpg_cfg.buffer_size, info.obs_dim, act_dim, seed,
                                  **replay_args)
        self.host = DDPGHost(learner, replay, num_actors=self.cfg.unity_rl.num_actors,
                             replay_handle=handle,
                             replay_lock=None if self.link is None else self.link.lock)
        return self.host

    def make_runner(self, backend: ActorBackend, host: DDPGHost):
        if self.mode == "sync":
            return DDPGSyncRunner(backend, host)
        if self.mode == "async":
            return ApeXRunner(backend, host)
        raise ValueError(f"unknown mode {self.mode!r}: expected 'sync' or 'async'")

    def close(self) -> None:
        """Frees the shared replay segment (call after the final checkpoint)."""
        if self.host is not None:
            self.host.close()


class ReplayFootprint(NamedTuple):
    """Memory of a replay buffer (and of its copy in each checkpoint)."""

    bytes_per_transition: int
    full_bytes: int


def replay_footprint(capacity: int, obs_dim: int, act_dim: int,
                     prioritized: bool = False) -> ReplayFootprint:
    """Bytes per stored transition and for a full buffer (see ``unity_rl.algos.replay``)."""
    per_row = 4 * (2 * obs_dim + act_dim + 2) + (16 if prioritized else 0)
    return ReplayFootprint(per_row, per_row * capacity)
