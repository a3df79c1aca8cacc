"""The Ray backend: the same actor loop as the local backend, in Ray actors (issue 4 §2).

Each Ray actor (``ActorHost``) runs ``actor.actor_loop`` (the body of a local actor process) in a
thread of its own, over two in-process queues; so the actor loop, not the driver, decides when
to collect (sync: one rollout per publication; async: keep collecting with the newest weights),
exactly as locally. Connections (one per arrow; the driver is the trainer's process):
- driver -> actor k: ``deliver_weights.remote(ref)``, one call per publication: ``broadcast``
  puts the weights into the object store once (``ray.put``) and every actor's call carries that
  one reference, so each node fetches a weights version once whatever its number of actors;
  the call queues a WEIGHTS ``Command`` on the loop's inbox;
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

Faults: an actor whose process or node dies (``RayActorError``, a lost result object) or that
stops stepping (heartbeat) is re-created from its ``ActorSpec`` on any node with room; once it
is ready it gets the newest weights (in the sync wiring only if its predecessor had not
delivered that publication's rollout yet), and the learner keeps its state. The builds the old
incarnation left behind are killed on its node meanwhile: they carry its tag (``TAG_ENV``), so a
replacement's builds on the same ports are safe. Each actor has a restart budget (by default the
run's build restart quota, see ``RayBackend``); beyond it ``ActorFailedError`` names the actor.
An exception inside an actor (e.g. its builds out of restarts: the ``AgentStream`` already
restarts crashed builds) is not retried: it raises ``ActorFailedError`` with the actor's
traceback, as locally.

Ray's lifetime: without an address a local Ray instance is started and shut down by ``stop()``;
with ``address`` ('auto' or 'host:port') the driver connects to that cluster and only
disconnects. A driver that is already connected (``ray.is_initialized()``) is reused and left
connected. Only this module imports ray.

Size (over ~400 lines on purpose): the Ray actor class, placement, liveness, re-creation and
clean-up share one per-actor slot and must stay the only module that imports ray.
"""
from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from unity_rl.algorithms.types import owned_copy
from unity_rl.envs.launcher import RestartQuota
from unity_rl.runtime.actor import ActorSpec, actor_loop
from unity_rl.runtime.backend import (
    TAG_ENV,
    ActorBackend,
    actor_restart_quota,
    kill_tagged_processes,
    limit_torch_threads,
    receive_in_slices,
)
from unity_rl.runtime.messages import (
    ActorFailedError,
    ActorInfo,
    Command,
    FromActor,
    PolicyWeights,
    Report,
    Rollout,
    ToActor,
)

logger = logging.getLogger(__name__)

LIVENESS_SLICE_S = 5.0
"""Longest single ``ray.wait`` in ``receive`` between liveness checks of the actors."""
REPORT_WAIT_S = 10.0
"""Longest wait of one ``next_report`` call inside the actor (then it answers None)."""
BEAT_ANSWER_S = 10.0
"""Seconds an actor has to answer a heartbeat question before it counts as hung."""
CONTROL = "control"
"""Concurrency group of the methods answered while the loop steps and ``next_report`` waits."""
REPORTS = "reports"
"""Concurrency group of ``next_report`` (its wait must not hold up weights or control)."""
# TAG_ENV (from backend.py, shared with the local backend) marks the builds of one actor
# incarnation, so that its leftovers can be found and killed without touching the builds of its
# replacement, which use the same ports.


# ----------------------------------------------------------------------------------------------
# Inside the Ray actor's process
# ----------------------------------------------------------------------------------------------

class ActorHost:
    """Hosts ``actor_loop`` for one ``ActorSpec`` in a thread of a Ray actor process.

    The loop's inbox and outbox are in-process queues; the methods below are the Ray-facing
    ends of them. ``deliver_weights`` runs in the default group (one thread, calls in submission
    order), ``next_report`` in ``REPORTS`` and the control methods in ``CONTROL``, so none of
    them waits for another.
    """

    def __init__(self, spec: ActorSpec, tag: str):
        self.spec = spec
        os.environ[TAG_ENV] = tag  # inherited by the builds this process launches
        limit_torch_threads(spec.torch_threads)
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

    def deliver_weights(self, weights: PolicyWeights) -> None:
        """Queues a publication for the loop (it loads the newest between rollouts)."""
        self._inbox.put(Command(ToActor.WEIGHTS, weights))

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
def _kill_builds(tag: str) -> list[int]:
    """Kills the build processes on this node launched by the actor incarnation ``tag``.

    A killed actor leaves its builds behind (they run in their own session); its replacement
    may already run builds on the same ports on this node, so builds are told apart by the
    ``TAG_ENV`` they inherited, not by port.
    """
    return kill_tagged_processes([tag], builds_only=True)


# ----------------------------------------------------------------------------------------------
# On the driver
# ----------------------------------------------------------------------------------------------

@dataclass
class _Slot:
    """Driver-side state of actor k (its current incarnation)."""

    spec: ActorSpec
    quota: RestartQuota
    handle: Any = None
    where_ref: Any = None
    """``where()`` of the current incarnation: ready once the Ray actor exists on a node."""
    ref: Any = None
    """The outstanding ``next_report`` call (None when there is none)."""
    phase: str = "new"
    """new | starting | running | stopped."""
    since: float = 0.0
    """time.monotonic() of the launch (starting) or of the last report (running)."""
    info: ActorInfo | None = None
    node_id: str | None = None
    sent: int = -1
    """Publication of the last weights delivered to this incarnation (-1: none yet)."""
    delivered: int = -1
    """Publication of the last rollout this actor delivered (any incarnation)."""
    restarts: int = 0
    generation: int = 0
    tag: str = ""
    """``TAG_ENV`` value of the current incarnation (and of its builds)."""
    history: list = field(default_factory=list)
    """(node_id, pid) of every incarnation that reported ready."""

    @property
    def actor_id(self) -> int:
        return self.spec.actor_id

    @property
    def collecting(self) -> bool:
        """True when the incarnation holds weights it has not delivered a rollout for."""
        if self.phase != "running" or self.sent < 0:
            return False
        return self.sent > self.delivered or not self.spec.wait_for_new_weights


class RayBackend(ActorBackend):
    """K actors as Ray actors, on a local Ray instance or an existing cluster.

    address: 'auto' or 'host:port' connects to an existing cluster (left running); None uses
        ``RAY_ADDRESS`` when it is set (as Ray's own tools do), else starts a local Ray instance
        (shut down by ``stop()``).
    num_cpus_per_actor: Ray CPUs each actor reserves (its builds run inside that share).
    max_restarts: re-creations allowed per actor after its process or node died (-1: no limit);
        None: each actor gets the run's build quota (``max_lifetime_restarts`` with its rate limit
        ``restarts_rate_limit_n`` per ``restarts_rate_limit_period_s`` from its ``StreamSettings``).
    num_cpus: CPUs of the local Ray instance (default: enough for every actor, at least the
        machine's cores); ignored with an address.
    start_timeout, heartbeat_timeout, stop_timeout: as in ``LocalProcessBackend`` (defaults from
        the builds' timeouts); ``start_timeout`` also bounds the wait for a node with free CPUs.
    spread: place actors on as many nodes as possible (Ray's SPREAD strategy).
    """

    def __init__(self, specs: Sequence[ActorSpec], *, address: str | None = None,
                 num_cpus_per_actor: float = 1.0, max_restarts: int | None = None,
                 num_cpus: int | None = None, start_timeout: float | None = None,
                 heartbeat_timeout: float | None = None, stop_timeout: float = 20.0,
                 spread: bool = True):
        super().__init__(specs)
        if max_restarts is not None and max_restarts < -1:
            raise ValueError("max_restarts must be >= -1 (-1: no limit) or None")
        self.address = address if address is not None else (os.environ.get("RAY_ADDRESS") or None)
        self.num_cpus_per_actor = float(num_cpus_per_actor)
        self.num_cpus = num_cpus
        worst_wait = max(s.stream.timeout_wait for s in self.specs)
        worst_step = max(s.stream.step_timeout or s.stream.timeout_wait for s in self.specs)
        most_builds = max(s.stream.num_builds for s in self.specs)
        self.start_timeout = (start_timeout if start_timeout is not None
                              else most_builds * worst_wait + 120.0)
        """Seconds an actor may take to be placed, start its builds and report ready."""
        self.heartbeat_timeout = (heartbeat_timeout if heartbeat_timeout is not None
                                  else 2 * worst_wait + worst_step + 30.0)
        """Seconds without a heartbeat (the loop beats after every stream step and wait slice)
        after which an actor counts as hung."""
        self.stop_timeout = stop_timeout
        """Seconds stop() waits for actors to close their builds before killing them."""
        self.spread = spread
        self.restarts = 0
        """Actor re-creations so far (all actors)."""
        self._token = uuid.uuid4().hex[:8]
        self._slots = [_Slot(spec, self._quota(spec, max_restarts)) for spec in self.specs]
        self._latest: PolicyWeights | None = None
        self._latest_ref = None
        """The newest publication and its object-store reference (replacements get it)."""
        self._pending: list[Rollout] = []
        """Rollouts received and not handed over yet."""
        self._cleanups: list = []
        """References of submitted leftover-build clean-ups (stop() waits for them, bounded)."""
        self._started_ray = False
        self._connected_ray = False
        self._stopped = False

    @staticmethod
    def _quota(spec: ActorSpec, max_restarts: int | None) -> RestartQuota:
        return actor_restart_quota(spec, max_restarts)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> list[ActorInfo]:
        try:
            self._connect()
            for slot in self._slots:
                self._launch(slot)
            while any(slot.phase == "starting" for slot in self._slots):
                self._pump(LIVENESS_SLICE_S)  # fails an actor not up after start_timeout
        except BaseException:
            self.stop()
            raise
        return [slot.info for slot in self._slots]

    def broadcast(self, weights: PolicyWeights) -> None:
        self._latest = weights
        self._latest_ref = ray.put(weights)
        for slot in self._slots:
            if slot.phase == "running":  # a starting replacement gets them once it is ready
                self._send(slot)

    def receive(self, timeout: float | None = None) -> Rollout | None:
        return receive_in_slices(self._pending, self._pump, timeout, LIVENESS_SLICE_S)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if not ray.is_initialized():
            return
        try:
            self._stop_actors()
        finally:
            self._latest_ref = None
            if self._started_ray or self._connected_ray:
                ray.shutdown()

    def pids(self) -> list[int]:
        out = []
        for slot in self._slots:
            if slot.info is not None:
                out.append(slot.info.pid)
                out.extend(slot.info.build_pids)
        return out

    # -- introspection (tests, logs) ------------------------------------------------------------
    def node_ids(self) -> list[str | None]:
        """Ray node id of each actor's current incarnation (actor order)."""
        return [slot.node_id for slot in self._slots]

    def actor_handles(self) -> list[Any]:
        """Ray actor handle of each actor's current incarnation (actor order)."""
        return [slot.handle for slot in self._slots]

    def actor_pids(self) -> list[int | None]:
        """Process id of each actor's current incarnation, on its node (actor order)."""
        return [slot.info.pid if slot.info is not None else None for slot in self._slots]

    def incarnations(self) -> list[list[tuple[str, int]]]:
        """(node id, pid) of every incarnation that reported ready, per actor (actor order)."""
        return [list(slot.history) for slot in self._slots]

    def actor_restarts(self) -> list[int]:
        """Re-creations of each actor so far."""
        return [slot.restarts for slot in self._slots]

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

    # -- one actor's life -----------------------------------------------------------------------
    def _launch(self, slot: _Slot) -> None:
        """Creates the slot's Ray actor (its loop starts the builds, then reports READY)."""
        slot.generation += 1
        slot.tag = f"unity_rl-{self._token}-actor{slot.actor_id}.{slot.generation}"
        options: dict[str, Any] = {"num_cpus": self.num_cpus_per_actor, "name": slot.tag}
        if self.spread:
            options["scheduling_strategy"] = "SPREAD"
        slot.handle = RemoteActorHost.options(**options).remote(slot.spec, slot.tag)
        slot.where_ref = slot.handle.where.remote()
        slot.phase, slot.since, slot.sent = "starting", time.monotonic(), -1
        self._ask(slot)

    def _ask(self, slot: _Slot) -> None:
        slot.ref = slot.handle.next_report.remote(REPORT_WAIT_S)

    def _send(self, slot: _Slot) -> None:
        slot.handle.deliver_weights.remote(self._latest_ref)
        slot.sent = self._latest.version

    def _pump(self, timeout: float) -> None:
        """Waits up to ``timeout`` for reports and handles them (rollouts go to ``_pending``);
        then checks liveness. Raises ``ActorFailedError``."""
        asking = {s.ref: s for s in self._slots if s.ref is not None}
        if not asking:
            time.sleep(timeout)
            return
        ready, rest = ray.wait(list(asking), num_returns=1, timeout=timeout)
        if ready and rest:  # whatever else has arrived meanwhile
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in ready:
            slot = asking[ref]
            slot.ref = None
            report, lost = self._fetch(slot, ref)
            if lost is not None:
                self._on_lost(slot, lost)
                continue
            self._ask(slot)
            if report is not None:
                self._handle(slot, report)
        self._check_liveness()

    def _handle(self, slot: _Slot, report: Report) -> None:
        if report.kind is FromActor.ERROR:
            raise ActorFailedError.from_error(report.payload)
        slot.since = time.monotonic()
        if report.kind is FromActor.READY:
            self._on_ready(slot, report.payload)
        elif report.kind is FromActor.SEGMENT:
            rollout: Rollout = report.payload
            slot.delivered = max(slot.delivered, rollout.publication)
            self._pending.append(_writable(rollout))
        else:
            raise RuntimeError(f"actor {slot.actor_id} sent an unexpected {report.kind}")

    def _on_ready(self, slot: _Slot, info: ActorInfo) -> None:
        if slot.phase != "starting":
            raise RuntimeError(f"actor {slot.actor_id} reported ready twice")
        if slot.info is not None and info.layout() != slot.info.layout():
            raise ActorFailedError(slot.actor_id, f"after its restart it sees behaviors "
                                                  f"{info.layout()}, not the ones it trained "
                                                  f"({slot.info.layout()})")
        slot.node_id = self._node_of(slot)
        slot.info, slot.phase = info, "running"
        slot.history.append((slot.node_id, info.pid))
        logger.info("actor %d up on node %s (pid %d, builds %s)", slot.actor_id,
                    (slot.node_id or "?")[:8], info.pid, list(info.build_pids))
        if self._latest is None:
            return  # the first broadcast reaches it
        if slot.spec.wait_for_new_weights and slot.delivered >= self._latest.version:
            return  # sync: its predecessor delivered this round already; wait for the next one
        self._send(slot)

    def _on_lost(self, slot: _Slot, lost: str) -> None:
        """The actor or its answer is gone: a start failure, or a restart."""
        if self._starting_up() or self._stopped:
            raise ActorFailedError(slot.actor_id, f"it died while starting: {lost}"
                                   if slot.phase == "starting" else f"it died: {lost}")
        what = "start" if slot.phase == "starting" else "process"
        self._restart(slot, f"its {what} was lost: {lost}")

    def _starting_up(self) -> bool:
        """True while ``start()`` waits for the first incarnations (a failure fails the run)."""
        return any(s.phase == "starting" and s.generation == 1 for s in self._slots)

    @staticmethod
    def _fetch(slot: _Slot, ref) -> tuple[Any, str | None]:
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

    def _check_liveness(self) -> None:
        """Between wait slices: restarts hung actors, fails actors that cannot be placed."""
        now = time.monotonic()
        for slot in self._slots:
            if slot.phase == "starting" and now - slot.since > self.start_timeout:
                if slot.generation == 1:
                    raise ActorFailedError(slot.actor_id, self._not_started_reason())
                raise ActorFailedError(slot.actor_id, "its restart: " + self._not_started_reason())
        quiet = [s for s in self._slots if s.phase == "running"
                 and now - s.since > self.heartbeat_timeout]
        if not quiet:
            return
        beats = {s.handle.beat_age.remote(): s for s in quiet}
        ready, _ = ray.wait(list(beats), num_returns=len(beats), timeout=BEAT_ANSWER_S)
        for ref, slot in beats.items():
            try:
                age = ray.get(ref, timeout=0) if ref in ready else None
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                continue  # its next_report call fails too; handled when it is collected
            if age is not None and age <= self.heartbeat_timeout:
                slot.since = time.monotonic() - age  # alive (e.g. waiting for weights)
                continue
            why = ("no answer to a heartbeat question" if age is None
                   else f"no stream step for {age:.0f} s")
            self._restart(slot, f"it hung ({why})")

    def _restart(self, slot: _Slot, why: str) -> None:
        """Re-creates a dead or hung actor; the builds it left behind are killed meanwhile."""
        if slot.collecting:  # its rollout is lost with it
            self.dropped_rollouts += 1
        ray.kill(slot.handle, no_restart=True)  # a dead actor is killed again, harmlessly
        slot.ref = None
        node = (self._node_of(slot) or "?")[:8]
        cleanup = self._kill_leftover_builds(slot)
        if cleanup is not None:  # the replacement need not wait for it: see _kill_builds
            self._cleanups.append(cleanup)
        refused = slot.quota.try_consume()
        if refused is not None:
            slot.phase = "stopped"
            raise ActorFailedError(slot.actor_id, f"{why}; not restarted: {refused} "
                                                  f"(restarts of this actor: {slot.restarts})")
        slot.restarts += 1
        self.restarts += 1
        logger.warning("actor %d (node %s) failed: %s; restarting it (restart %d of this actor)",
                       slot.actor_id, node, why, slot.restarts)
        self._launch(slot)

    @staticmethod
    def _exists(slot: _Slot) -> bool:
        """True once the slot's current Ray actor was created on a node (it may be dead now)."""
        if slot.where_ref is None:
            return False
        ready, _ = ray.wait([slot.where_ref], timeout=0)
        return bool(ready)

    def _node_of(self, slot: _Slot) -> str | None:
        """Node of the slot's current incarnation (known even if it died while starting)."""
        if self._exists(slot):
            try:
                return ray.get(slot.where_ref, timeout=0)[0]
            except Exception:  # noqa: BLE001 - died before answering: the last known node
                pass
        return slot.node_id

    def _kill_leftover_builds(self, slot: _Slot):
        """Submits the clean-up of ``slot``'s builds on its node; its reference, or None."""
        node_id = self._node_of(slot)
        if node_id is None:
            return None
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=True)
        return _kill_builds.options(scheduling_strategy=strategy).remote(slot.tag)

    def _not_started_reason(self) -> str:
        try:
            total = ray.cluster_resources().get("CPU", 0.0)
            free = ray.available_resources().get("CPU", 0.0)
        except Exception:  # noqa: BLE001 - only for the message
            total = free = float("nan")
        return (f"it was not up after {self.start_timeout:.0f} s: either no node could place it "
                f"(it needs {self.num_cpus_per_actor:g} CPU; the cluster has {total:g} CPUs, "
                f"{free:g} free) or its builds did not start")

    # -- stopping -------------------------------------------------------------------------------
    def _stop_actors(self) -> None:
        live = [s for s in self._slots if s.handle is not None]
        # Not created yet (no node had room, or still constructing): no builds to close.
        unborn = [s for s in live if s.phase == "starting" and not self._exists(s)]
        for slot in unborn:
            ray.kill(slot.handle, no_restart=True)
        live = [s for s in live if s not in unborn]
        for slot in live:  # the loops stop within one stream step and close their builds
            slot.handle.request_stop.remote()
        closing = {slot.handle.wait_closed.remote(self.stop_timeout): slot for slot in live}
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
            ray.kill(slot.handle, no_restart=True)
        for slot in live + unborn:
            slot.handle, slot.ref, slot.phase = None, None, "stopped"
        cleanups = self._cleanups + [ref for ref in (self._kill_leftover_builds(s)
                                                     for s in unclean) if ref is not None]
        for slot in unclean:
            logger.warning("actor %d did not close its builds within %.0f s: killed it and its "
                           "builds", slot.actor_id, self.stop_timeout)
        if cleanups:  # bounded: a clean-up bound for a dying node may never run
            ray.wait(cleanups, num_returns=len(cleanups), timeout=10.0)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _writable(rollout: Rollout) -> Rollout:
    """The rollout with writable arrays (Ray hands out read-only zero-copy views); every field of
    every NamedTuple in it is kept (``owned_copy``)."""
    return owned_copy(rollout)
