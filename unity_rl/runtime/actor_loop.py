"""The body of an actor process, the same for every backend: ``actor_loop(spec, inbox, outbox)``.

It builds the ``Actor``, reports ``READY`` with the behaviors' specs, waits for the first
weights, then collects until told to stop. In the sync wiring
(``ActorSpec.wait_for_new_weights``) it waits after each final rollout for a publication newer
than the one it used (partial rollouts, ``ActorSpec.partial_interval_s``, go out during the
collection); in the async wiring it only picks up whatever weights have arrived (several
queued: only the newest is loaded). A ``Control`` (``ToActor.CONTROL``) is applied between
collections, in its order among the weights; while one has paused the actor (async flow
control, ``Control.paused``) it starts no collection and only takes commands until resumed.
Any exception is sent back as ``FromActor.ERROR`` (with the traceback text); the builds are
closed in ``finally`` whatever happens. Every wait is sliced (``WAIT_SLICE_S``): between slices the actor beats its heartbeat
and stops when asked or when the learner has gone, so a killed trainer leaves no orphans.
"""
from __future__ import annotations

import queue
import traceback
from typing import Callable, Protocol

from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.messages import ActorError, Command, FromActor, Report, Rollout, ToActor


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

    def send_rollout(rollout: Rollout) -> None:
        outbox.put(Report(FromActor.SEGMENT, spec.actor_id, rollout))

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

    def apply_pending(first: Command | None = None) -> None:
        """``first`` and whatever else has arrived, in order; of several queued weights only
        the newest is loaded."""
        newest = None
        command = first if first is not None else next_command(block=False)
        while command is not None:
            if command.kind is ToActor.WEIGHTS:
                if newest is None or command.weights.version >= newest.weights.version:
                    newest = command
            else:
                apply(command)
            command = next_command(block=False)
        if newest is not None:
            apply(newest)

    try:
        info = actor.start()
        outbox.put(Report(FromActor.READY, spec.actor_id, info))
        while actor.publication < 0:  # the first weights
            apply(next_command(block=True))
        while True:
            while actor.paused:  # async flow control: the learner owes too much training
                apply_pending(next_command(block=True))
            used = actor.publication
            rollout = actor.collect(on_step, send_rollout)
            if rollout is None:
                raise _Stop
            send_rollout(rollout)
            # Sync: block until newer weights. Async: take whatever has arrived, newest last.
            while spec.wait_for_new_weights and actor.publication <= used:
                apply(next_command(block=True))
            apply_pending()
    except _Stop:
        pass
    except Exception as err:  # report every failure to the learner, then exit
        outbox.put(Report(FromActor.ERROR, spec.actor_id, ActorError(
            spec.actor_id, f"{type(err).__module__}.{type(err).__qualname__}", str(err),
            traceback.format_exc())))
    finally:
        actor.close()
