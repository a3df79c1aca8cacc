"""The seam between the learner host and its actors: where the actors run is a backend's business.

A backend starts K actors from their ``ActorSpec``s, broadcasts ``PolicyWeights``, hands over the
``Rollout``s they produce and stops them.  The wirings (``runners.py``) and the trainer only talk
to this interface, so local processes (``local.py``) and Ray (``ray_backend.py``) are interchangeable.

Contract of every implementation:
- ``start()`` returns one ``ActorInfo`` per actor, in actor order, once every actor's builds are
  up; any actor failure while starting raises ``ActorFailedError`` (after stopping the others);
- ``broadcast(weights)`` never blocks on a slow actor;
- ``receive(timeout)`` blocks until a rollout arrives (None after ``timeout`` seconds); an actor
  that raised, died or stopped answering raises ``ActorFailedError`` naming it, with the
  actor's traceback text when there is one;
- ``stop()`` is idempotent and leaves no actor and no build process behind.
"""
from __future__ import annotations

import abc
from typing import Sequence

from unity_rl.runtime.actor import ActorSpec
from unity_rl.runtime.messages import ActorInfo, PolicyWeights, Rollout


class ActorBackend(abc.ABC):
    """Runs the actors of one training run."""

    def __init__(self, specs: Sequence[ActorSpec]):
        if not specs:
            raise ValueError("a backend needs at least one actor")
        self.specs = list(specs)

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
    def receive(self, timeout: float | None = None) -> Rollout | None:
        """The next rollout from any actor; None when ``timeout`` passes first."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stops every actor and its builds (idempotent)."""

    def pids(self) -> list[int]:
        """Process ids this backend started (actors and builds), for tests and memory reports."""
        return []

    def __enter__(self) -> "ActorBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def make_backend(name: str, specs: Sequence[ActorSpec], **options) -> ActorBackend:
    """The backend called ``name`` ('local' or 'ray') over ``specs``."""
    if name == "local":
        from unity_rl.runtime.local import LocalProcessBackend
        return LocalProcessBackend(specs, **options)
    if name == "ray":
        try:
            from unity_rl.runtime.ray_backend import RayBackend
        except ImportError as err:
            raise ValueError("backend 'ray' is not available in this installation "
                             f"({err}); use backend: local") from err
        return RayBackend(specs, **options)
    raise ValueError(f"unknown backend {name!r}: expected 'local' or 'ray'")
