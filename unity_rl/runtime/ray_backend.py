"""The Ray backend's transport: the same actor loop as the local backend, in Ray actors.

What to do when an actor dies, hangs or must be replaced is ``supervisor.ActorSupervisor``'s
business (the same rules as the local backend); this module only carries messages, places and
ends Ray actors. Each Ray actor (``ray_actor.ActorHost``) runs ``actor_loop.actor_loop`` (the body of
a local actor process) in a thread of its own, over two in-process queues; so the actor loop,
not the driver, decides when to collect, exactly as locally. Connections (one per arrow; the driver is
the trainer's process):
- driver -> actor k: ``deliver_weights.remote(ref)``, one call per publication: the weights go
  into the object store once (``ray.put``) and every actor's call carries that one reference, so
  each node fetches a weights version once whatever its number of actors; ``deliver.remote``
  carries a CONTROL ``Command``. Both run in the default group (one thread, calls in submission
  order) and queue the command on the loop's inbox;
- actor k -> driver: ``next_report.remote(timeout_s)`` hands over the loop's next ``Report``
  (READY, SEGMENT, or ERROR with the traceback text) or None after ``timeout_s``; the driver
  keeps exactly one such call outstanding per actor and blocks in ``ray.wait`` on all of them
  (no polling), in slices of ``LIVENESS_SLICE_S`` between liveness checks;
- control: ``request_stop``, ``beat_age``, ``where`` and ``wait_closed`` run in a concurrency
  group of their own (one thread), so they are answered while the loop steps its builds and a
  ``next_report`` call waits: a stop is seen within one stream step, and an actor that stops
  stepping is found by its heartbeat age (the loop beats after every stream step and every wait
  slice).

Placement: each actor is a Ray actor of ``num_cpus_per_actor`` CPUs, spread over the nodes
(``SPREAD``); its builds are subprocesses of the actor's process, on the actor's node, on ports
``base_port + worker_id`` of its ``ActorSpec`` (distinct for all builds of a run, hence on every
node). The build executable must exist at the same path on every node.

Losses: an actor whose process or node dies (``RayActorError``, a lost result object) is lost
(the supervisor re-creates it on any node with room); the builds it left behind are killed on
its node by a small task (they carry its tag, ``TAG_ENV``, so a replacement's builds on the same
ports are safe). A failure a re-creation cannot fix (the actor class cannot be created there, no
node can place it) raises ``ActorFailedError`` at once.

Ray's lifetime: without an address a local Ray instance is started and shut down by ``stop()``;
with ``address`` ('auto' or 'host:port') the driver connects to that cluster and only
disconnects. A driver that is already connected (``ray.is_initialized()``) is reused and left
connected. Only this module and ``ray_actor.py`` import ray.
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from unity_rl.experience import owned_copy
from unity_rl.runtime import messages
from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.backend import TAG_ENV  # noqa: F401 - the tag its builds carry (tests)
from unity_rl.runtime.messages import ActorFailedError, Command, ToActor
from unity_rl.runtime.ray_actor import RemoteActorHost
from unity_rl.runtime.ray_actor import kill_builds as _kill_builds
from unity_rl.runtime.supervisor import ActorSupervisor, Event, Phase, Slot

logger = logging.getLogger(__name__)

LIVENESS_SLICE_S = 5.0
"""Longest single ``ray.wait`` in ``receive`` between liveness checks of the actors."""
REPORT_WAIT_S = 10.0
"""Longest wait of one ``next_report`` call inside the actor (then it answers None)."""
BEAT_ANSWER_S = 10.0
"""Seconds an actor has to answer a heartbeat question before it counts as hung."""


# ----------------------------------------------------------------------------------------------
# On the driver
# ----------------------------------------------------------------------------------------------

@dataclass
class _Link:
    """One incarnation as a Ray actor."""

    handle: Any
    where_ref: Any
    """``where()`` of the incarnation: ready once the Ray actor exists on a node."""
    node_id: str | None = None
    """Its node once known (until then: its predecessor's, for the clean-up)."""
    ref: Any = None
    """The outstanding ``next_report`` call (None when there is none)."""


class RayBackend(ActorSupervisor):
    """K actors as Ray actors, on a local Ray instance or an existing cluster.

    address: 'auto' or 'host:port' connects to an existing cluster (left running); None uses
        ``RAY_ADDRESS`` when it is set (as Ray's own tools do), else starts a local Ray instance
        (shut down by ``stop()``).
    num_cpus_per_actor: Ray CPUs each actor reserves (its builds run inside that share).
    num_cpus: CPUs of the local Ray instance (default: enough for every actor, at least the
        machine's cores); ignored with an address.
    spread: place actors on as many nodes as possible (Ray's SPREAD strategy).
    max_restarts, start_timeout, heartbeat_timeout, stop_timeout: as ``ActorSupervisor``
        (``start_timeout`` also bounds the wait for a node with free CPUs).
    """

    def __init__(self, specs: Sequence[ActorSpec], *, address: str | None = None,
                 num_cpus_per_actor: float = 1.0, num_cpus: int | None = None,
                 spread: bool = True, **options):
        super().__init__(specs, **options)
        self.address = address if address is not None else (os.environ.get("RAY_ADDRESS") or None)
        self.num_cpus_per_actor = float(num_cpus_per_actor)
        self.num_cpus = num_cpus
        self.spread = spread
        self._weights_ref = None
        """The newest publication in the object store (one ``ray.put`` per version)."""
        self._cleanups: list = []
        """References of submitted leftover-build clean-ups (stop() waits for them, bounded)."""
        self._started_ray = False
        self._connected_ray = False

    # -- introspection (tests, logs) ------------------------------------------------------------
    def node_ids(self) -> list[str | None]:
        """Ray node id of each actor's current incarnation (actor order)."""
        return [slot.link.node_id if slot.link else None for slot in self._slots]

    def actor_handles(self) -> list[Any]:
        """Ray actor handle of each actor's current incarnation (actor order)."""
        return [slot.link.handle if slot.link else None for slot in self._slots]

    # -- connecting -----------------------------------------------------------------------------
    def _connect(self) -> None:
        if ray.is_initialized():
            logger.info("reusing this process's Ray connection (left connected on stop)")
            return
        if self.address is None:
            cpus = self.num_cpus or max(os.cpu_count() or 1,
                                        math.ceil(self.num_actors * self.num_cpus_per_actor))
            t0 = time.perf_counter()
            ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
            self._started_ray = True
            logger.info("started a local Ray instance with %d CPUs in %.1f s", cpus,
                        time.perf_counter() - t0)
            return
        try:
            ray.init(address=self.address, logging_level=logging.WARNING)
        except Exception as err:
            raise RuntimeError(
                f"could not connect to the Ray cluster at {self.address!r}: {err}. Start one "
                f"with `ray start --head` (and `ray start --address=HEAD:PORT` on more nodes), "
                f"pass its address, or leave ray_address unset to start a local Ray instance. "
                f"With token authentication (RAY_AUTH_MODE=token) this process needs the "
                f"cluster's token: RAY_AUTH_TOKEN or the file `ray get-auth-token` shows."
            ) from err
        self._connected_ray = True
        logger.info("connected to the Ray cluster at %s (%d nodes)", self.address,
                    sum(1 for n in ray.nodes() if n.get("Alive")))

    # -- the transport --------------------------------------------------------------------------
    def _liveness_slice_s(self) -> float:
        return LIVENESS_SLICE_S

    def _launch(self, slot: Slot, spec: ActorSpec) -> None:
        options: dict[str, Any] = {"num_cpus": self.num_cpus_per_actor, "name": slot.tag}
        if self.spread:
            options["scheduling_strategy"] = "SPREAD"
        handle = RemoteActorHost.options(**options).remote(spec, slot.tag)
        previous = slot.link.node_id if slot.link is not None else None
        slot.link = _Link(handle, handle.where.remote(), previous)
        self._ask(slot.link)

    @staticmethod
    def _ask(link: _Link) -> None:
        link.ref = link.handle.next_report.remote(REPORT_WAIT_S)

    def _deliver(self, slot: Slot, command: Command) -> None:
        if command.kind is ToActor.WEIGHTS:
            if self._weights_ref is None or self._weights_ref[0] != command.weights.version:
                self._weights_ref = (command.weights.version, ray.put(command.weights))
            slot.link.handle.deliver_weights.remote(self._weights_ref[1])
        else:
            slot.link.handle.deliver.remote(command)

    def _wait(self, timeout: float) -> list[Event]:
        asking = {s.link.ref: s for s in self._slots
                  if s.phase in (Phase.STARTING, Phase.RUNNING) and s.link.ref is not None}
        if not asking:
            time.sleep(timeout)
            return []
        ready, rest = ray.wait(list(asking), num_returns=1, timeout=timeout)
        if ready and rest:  # whatever else has arrived meanwhile
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        events = []
        for ref in ready:
            slot = asking[ref]
            slot.link.ref = None
            report, lost = self._fetch(slot, ref)
            if lost is not None:
                what = "start" if slot.phase is Phase.STARTING else "process"
                events.append(Event(slot, slot.generation, lost=f"its {what} was lost: {lost}"))
                continue
            self._ask(slot.link)
            if report is not None:
                if report.kind is messages.FromActor.SEGMENT:
                    report = report._replace(payload=_writable(report.payload))
                events.append(Event(slot, slot.generation, report))
        return events

    @staticmethod
    def _fetch(slot: Slot, ref) -> tuple[Any, str | None]:
        """(result, None) of a finished call, or (None, why) when the actor or its result was
        lost (a restart can fix that); failures a restart cannot fix raise ActorFailedError."""
        try:
            return ray.get(ref), None
        except ray.exceptions.RayActorError as err:
            if err.actor_init_failed:  # e.g. unity_rl missing or broken on its node
                raise ActorFailedError(slot.actor_id, f"its Ray actor could not be created: "
                                                      f"{err}") from None
            return None, _first_line(err)
        except ray.exceptions.ObjectLostError as err:  # the result's node died with it
            return None, _first_line(err)
        except ray.exceptions.ActorUnschedulableError as err:
            raise ActorFailedError(slot.actor_id, f"Ray cannot place it: {err}") from None
        except ray.exceptions.RayTaskError as err:  # ActorHost reports its own errors
            raise ActorFailedError(slot.actor_id, str(err)) from None

    def _ready(self, slot: Slot, info: messages.ActorInfo) -> tuple[str | None, int]:
        slot.link.node_id = self._node_of(slot.link)
        logger.info("actor %d up on node %s (pid %d, builds %s)", slot.actor_id,
                    (slot.link.node_id or "?")[:8], info.pid, list(info.build_pids))
        return slot.link.node_id, info.pid

    def _beat_ages(self, slots: list[Slot]) -> dict[Slot, float | None]:
        beats = {s.link.handle.beat_age.remote(): s for s in slots}
        ready, _ = ray.wait(list(beats), num_returns=len(beats), timeout=BEAT_ANSWER_S)
        ages: dict[Slot, float | None] = {}
        for ref, slot in beats.items():
            try:
                ages[slot] = ray.get(ref, timeout=0) if ref in ready else None
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                continue  # its next_report call fails too; handled when it is collected
        return ages

    def _hang_reason(self, slot: Slot, age: float | None) -> str:
        return ("no answer to a heartbeat question" if age is None
                else f"no stream step for {age:.0f} s")

    def _not_started_reason(self) -> str:
        try:
            total = ray.cluster_resources().get("CPU", 0.0)
            free = ray.available_resources().get("CPU", 0.0)
        except Exception:  # noqa: BLE001 - only for the message
            total = free = float("nan")
        return (f"it was not up after {self.start_timeout:.0f} s: either no node could place it "
                f"(it needs {self.num_cpus_per_actor:g} CPU; the cluster has {total:g} CPUs, "
                f"{free:g} free) or its builds did not start")

    def _discard(self, slot: Slot) -> str:
        link = slot.link
        ray.kill(link.handle, no_restart=True)  # a dead actor is killed again, harmlessly
        link.ref = None
        cleanup = self._kill_leftover_builds(link, slot.tag)
        if cleanup is not None:  # the replacement need not wait for it: see _kill_builds
            self._cleanups.append(cleanup)
        return f"node {(self._node_of(link) or '?')[:8]}"

    @staticmethod
    def _exists(link: _Link) -> bool:
        """True once the incarnation's Ray actor was created on a node (it may be dead now)."""
        ready, _ = ray.wait([link.where_ref], timeout=0)
        return bool(ready)

    def _node_of(self, link: _Link) -> str | None:
        """Node of an incarnation (known even if it died while starting)."""
        if self._exists(link):
            try:
                return ray.get(link.where_ref, timeout=0)[0]
            except (ray.exceptions.RayError, IndexError) as err:  # died before answering
                logger.debug("node of a lost actor: %s", _first_line(err))
        return link.node_id

    def _kill_leftover_builds(self, link: _Link, tag: str):
        """Submits the clean-up of an incarnation's builds on its node; its reference, or None."""
        node_id = self._node_of(link)
        if node_id is None:
            return None
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=True)
        return _kill_builds.options(scheduling_strategy=strategy).remote(tag)

    # -- stopping -------------------------------------------------------------------------------
    def _stop_actors(self) -> None:
        if not ray.is_initialized():
            return
        try:
            self._stop_ray_actors()
        finally:
            self._weights_ref = None
            if self._started_ray or self._connected_ray:
                ray.shutdown()

    def _stop_ray_actors(self) -> None:
        live = [s for s in self._slots if s.link is not None and s.link.handle is not None]
        # Not created yet (no node had room, or still constructing): no builds to close.
        unborn = [s for s in live if s.phase is Phase.STARTING and not self._exists(s.link)]
        for slot in unborn:
            ray.kill(slot.link.handle, no_restart=True)
        live = [s for s in live if s not in unborn]
        for slot in live:  # the loops stop within one stream step and close their builds
            slot.link.handle.request_stop.remote()
        closing = {slot.link.handle.wait_closed.remote(self.stop_timeout): slot for slot in live}
        ready, _ = ray.wait(list(closing), num_returns=len(closing),
                            timeout=self.stop_timeout + BEAT_ANSWER_S)
        unclean = []
        for ref, slot in closing.items():
            closed = False
            if ref in ready:
                try:
                    closed = bool(ray.get(ref, timeout=0))
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                    closed = False  # dead already: its builds may be left over
            if not closed:
                unclean.append(slot)
        for slot in live:
            ray.kill(slot.link.handle, no_restart=True)
        cleanups = self._cleanups + [ref for ref in (self._kill_leftover_builds(s.link, s.tag)
                                                     for s in unclean) if ref is not None]
        for slot in live + unborn:
            slot.link.handle, slot.link.ref = None, None
        for slot in unclean:
            logger.warning("actor %d did not close its builds within %.0f s: killed it and its "
                           "builds", slot.actor_id, self.stop_timeout)
        if cleanups:  # bounded: a clean-up bound for a dying node may never run
            ray.wait(cleanups, num_returns=len(cleanups), timeout=10.0)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _writable(rollout: messages.Rollout) -> messages.Rollout:
    """The rollout with writable arrays (Ray hands out read-only zero-copy views); every field of
    every NamedTuple in it is kept (``owned_copy``)."""
    return owned_copy(rollout)
