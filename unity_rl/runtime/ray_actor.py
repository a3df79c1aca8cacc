"""The Ray actor of the Ray backend: ``actor_loop.actor_loop`` in a thread, behind Ray methods.

``ActorHost`` runs the loop (the body of a local actor process) over two in-process queues; its
methods are the Ray-facing ends of them, in three concurrency groups so that none waits for
another: the default group (one thread, calls in submission order) queues commands
(``deliver_weights``, ``deliver``), ``REPORTS`` hands over the loop's reports (``next_report``)
and ``CONTROL`` answers stop, heartbeat and placement questions while the loop steps its builds.
``kill_builds`` is the task that kills a dead incarnation's builds on its node. The driver side
is ``ray_backend.py``; these two are the only modules that import ray.
"""
from __future__ import annotations

import os
import queue
import threading
import time

import ray

from unity_rl.runtime import messages
from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.actor_loop import actor_loop
from unity_rl.runtime.allocator import keep_freed_memory
from unity_rl.runtime.backend import (TAG_ENV, kill_tagged_processes, limit_torch_threads,
                                      lower_priority)
from unity_rl.runtime.messages import Command, Report, ToActor

CONTROL = "control"
"""Concurrency group of the methods answered while the loop steps and ``next_report`` waits."""
REPORTS = "reports"
"""Concurrency group of ``next_report`` (its wait must not hold up weights or control)."""


class ActorHost:
    """Hosts ``actor_loop`` for one ``ActorSpec`` in a thread of a Ray actor process.

    The loop's inbox and outbox are in-process queues; the methods below are the Ray-facing
    ends of them. ``deliver_weights`` and ``deliver`` run in the default group (one thread,
    calls in submission order), ``next_report`` in ``REPORTS`` and the control methods in
    ``CONTROL``, so none of them waits for another.
    """

    def __init__(self, spec: ActorSpec, tag: str):
        self.spec = spec
        os.environ[TAG_ENV] = tag  # inherited by the builds this process launches
        limit_torch_threads(spec.torch_threads)
        keep_freed_memory()
        lower_priority(spec.niceness)
        self._inbox: queue.Queue[Command] = queue.Queue()
        self._outbox: queue.Queue[Report] = queue.Queue()
        self._stop = threading.Event()
        self._last_beat = time.monotonic()
        self._loop = threading.Thread(target=self._run, name=f"actor-{spec.actor_id}",
                                      daemon=True)
        self._loop.start()

    def _run(self) -> None:
        actor_loop(self.spec, self._inbox, self._outbox, heartbeat=self._beat,
                   stop_requested=self._stop.is_set)

    def _beat(self) -> None:
        self._last_beat = time.monotonic()

    def deliver_weights(self, weights: messages.PolicyWeights) -> None:
        """Queues a publication for the loop (it loads the newest between rollouts)."""
        self._inbox.put(Command(ToActor.WEIGHTS, weights))

    def deliver(self, command: Command) -> None:
        """Queues another command (a CONTROL change) for the loop, after the weights sent
        before it."""
        self._inbox.put(command)

    @ray.method(concurrency_group=REPORTS)
    def next_report(self, timeout_s: float) -> Report | None:
        """The loop's next report, or None when none came within ``timeout_s`` seconds."""
        try:
            return self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            return None

    @ray.method(concurrency_group=CONTROL)
    def request_stop(self) -> None:
        """The loop stops after its current stream step (or wait slice) and closes its builds."""
        self._stop.set()
        self._inbox.put(Command(ToActor.STOP))

    @ray.method(concurrency_group=CONTROL)
    def wait_closed(self, timeout_s: float) -> bool:
        """True once the loop has ended (its builds closed), waiting up to ``timeout_s``."""
        self._loop.join(timeout_s)
        return not self._loop.is_alive()

    @ray.method(concurrency_group=CONTROL)
    def where(self) -> tuple[str, int]:
        """(node id, pid) of this actor, answered as soon as it exists, even while it starts."""
        return ray.get_runtime_context().get_node_id(), os.getpid()

    @ray.method(concurrency_group=CONTROL)
    def beat_age(self) -> float:
        """Seconds since the loop's last heartbeat (stream step or wait slice)."""
        return time.monotonic() - self._last_beat


RemoteActorHost = ray.remote(concurrency_groups={CONTROL: 1, REPORTS: 1}, max_restarts=0,
                             max_task_retries=0)(ActorHost)
"""``ActorHost`` as a Ray actor class: Ray never restarts it by itself; ``RayBackend`` re-creates
a dead actor from its spec (so it can count, clean up and hand over the newest weights)."""


@ray.remote(num_cpus=0, max_retries=0)
def kill_builds(tag: str) -> list[int]:
    """Kills the build processes on this node launched by the actor incarnation ``tag``.

    A killed actor leaves its builds behind (they run in their own session); its replacement
    may already run builds on the same ports on this node, so builds are told apart by the
    ``TAG_ENV`` they inherited, not by port.
    """
    return kill_tagged_processes([tag], builds_only=True)
