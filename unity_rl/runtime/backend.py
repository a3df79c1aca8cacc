"""The seam between the learner host and its actors: where the actors run is a backend's business.

A backend starts K actors from their ``ActorSpec``s, broadcasts ``PolicyWeights`` and ``Control``
changes, hands over the ``Rollout``s they produce and stops them.  The wirings (``runners.py``)
and the trainer only talk to this interface, so local processes (``local.py``) and Ray
(``ray_backend.py``) are interchangeable. Both are an ``ActorSupervisor`` (``supervisor.py``: the
per-actor state machine, restarts, timeouts) over their own transport; ``wiring.make_backend``
picks one. This module imports neither.

Contract of every implementation:
- ``start()`` returns one ``ActorInfo`` per actor, in actor order, once every actor's builds are
  up; any actor failure while starting raises ``ActorFailedError`` (after stopping the others);
- ``broadcast(weights)`` never blocks on a slow actor;
- ``control(change)`` sends a ``Control`` to every actor (applied between collections) and adds
  it to the run's control state, which an actor re-created later starts with;
- ``receive(timeout)`` blocks until a rollout arrives (None after ``timeout`` seconds); an actor
  that raised, died or stopped answering raises ``ActorFailedError`` naming it, with the
  actor's traceback text when there is one;
- ``stop()`` is idempotent and leaves no actor and no build process behind.

Faults (both backends): an actor whose process dies without reporting an error, or that stops
answering (heartbeat), is re-created from its ``ActorSpec`` (its builds relaunched on the same
ports once the dead actor's builds are killed) and starts with the newest weights; the rollout it
was collecting is lost (``dropped_rollouts``). Each actor has a restart budget
(``actor_restart_quota``); beyond it ``ActorFailedError`` names the actor. An actor that reports
an exception (``FromActor.ERROR``) is never retried. ``restarts`` counts re-creations (all
actors), ``actor_restarts()`` per actor.
"""
from __future__ import annotations

import abc
import logging
import os
import time
from typing import Any, Callable, Collection, Sequence

import psutil

from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.messages import ActorInfo, Control, PolicyWeights, Rollout

logger = logging.getLogger(__name__)

TAG_ENV = "UNITY_RL_ACTOR_TAG"
"""Environment variable that marks the builds of one actor incarnation (builds inherit the
actor's environment), so that a dead actor's leftovers can be found and killed without touching
the builds of its replacement, which use the same ports."""


def actor_restart_quota(spec: ActorSpec, max_restarts: int | None):
    """The restart budget of one actor (a ``RestartQuota``): ``max_restarts`` re-creations over
    the run (-1: no limit, no rate limit), or None: the run's build quota from ``spec.stream``
    (``max_lifetime_restarts`` with its rate limit ``restarts_rate_limit_n`` per
    ``restarts_rate_limit_period_s``)."""
    from unity_rl.envs.launcher import RestartQuota

    if max_restarts is not None:
        if max_restarts < -1:
            raise ValueError("max_restarts must be >= -1 (-1: no limit) or None")
        return RestartQuota(max_restarts, -1, 60.0)
    return RestartQuota(*spec.stream.restart_quota)


def lower_priority(niceness: int) -> None:
    """Adds ``niceness`` to this process's (an actor's, before it launches builds, which
    inherit it); 0: unchanged. A system that refuses it leaves the priority with a warning."""
    if niceness <= 0:
        return
    try:
        os.nice(niceness)
    except OSError as exc:
        logger.warning("could not lower the actor's CPU priority by %d (%s); it runs at the "
                       "learner's", niceness, exc)


def limit_torch_threads(num_threads: int) -> None:
    """An actor process's torch: ``num_threads`` intra-op threads (its builds need the other
    cores) and one inter-op thread. Called by the process that hosts the actor, never a learner."""
    import torch

    torch.set_num_threads(max(1, num_threads))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already fixed once parallel work ran; harmless
        logger.debug("torch inter-op threads already fixed in this process")


def receive_in_slices(pending: list, pump: Callable[[float], None], timeout: float | None,
                      slice_s: float) -> Any:
    """``ActorBackend.receive`` over a backend's ``pending`` rollouts and its ``pump(seconds)``,
    which waits up to that long for reports (appending rollouts to ``pending``) and then checks
    liveness: pumps in slices of at most ``slice_s`` until a rollout is pending (it is popped)
    or ``timeout`` passes (None)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not pending:
        wait_s = slice_s
        if deadline is not None:
            wait_s = max(0.0, min(slice_s, deadline - time.monotonic()))
        pump(wait_s)
        if not pending and deadline is not None and time.monotonic() >= deadline:
            return None
    return pending.pop(0)


def kill_tagged_processes(tags: Collection[str], *, builds_only: bool = False) -> list[int]:
    """Kills (with their process trees) the processes of this machine whose ``TAG_ENV`` is one
    of ``tags``; with ``builds_only`` only ML-Agents builds (``--mlagents-port`` in their
    command line). Returns the pids killed."""
    from unity_rl.envs.launcher import kill_process_tree

    tags = set(tags)
    me = os.getpid()
    killed = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid == me:
            continue
        try:
            if builds_only and "--mlagents-port" not in (proc.info.get("cmdline") or ()):
                continue
            if proc.environ().get(TAG_ENV) not in tags:
                continue
            kill_process_tree(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # gone meanwhile, or another user's (not ours to kill): expected, silent
        except (psutil.Error, OSError) as err:
            logger.debug("leftover check of pid %d: %s", proc.pid, err)
            continue
        killed.append(proc.pid)
    return killed


class ActorBackend(abc.ABC):
    """Runs the actors of one training run."""

    def __init__(self, specs: Sequence[ActorSpec]):
        if not specs:
            raise ValueError("a backend needs at least one actor")
        self.specs = list(specs)
        self.restarts = 0
        """Actor re-creations so far (all actors)."""
        self.dropped_rollouts = 0
        """Rollouts lost with a dead or hung actor (it was collecting when it was replaced)."""

    @property
    def num_actors(self) -> int:
        return len(self.specs)

    @abc.abstractmethod
    def start(self) -> list[ActorInfo]:
        """Starts every actor and waits until its builds are up."""

    @abc.abstractmethod
    def broadcast(self, weights: PolicyWeights) -> None:
        """Sends the same weights to every actor."""

    @abc.abstractmethod
    def control(self, change: Control) -> None:
        """Sends a control change to every actor; a re-created actor starts with all of them."""

    @abc.abstractmethod
    def receive(self, timeout: float | None = None) -> Rollout | None:
        """The next rollout from any actor; None when ``timeout`` passes first."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stops every actor and its builds (idempotent)."""

    def pids(self) -> list[int]:
        """Process ids this backend started (actors and builds), for tests and memory reports."""
        return []

    def actor_pids(self) -> list[int | None]:
        """Process id of each actor's current incarnation (actor order; None when unknown)."""
        return [None] * self.num_actors

    def actor_restarts(self) -> list[int]:
        """Re-creations of each actor so far (actor order)."""
        return [0] * self.num_actors

    def __enter__(self) -> "ActorBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
