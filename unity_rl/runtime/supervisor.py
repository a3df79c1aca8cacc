"""One supervisor for the K actors of a run, whatever transport carries their messages.

``ActorSupervisor`` is the ``ActorBackend`` both backends are: it owns one ``Slot`` per actor
and every rule about the actor's life; a subclass (``local.py``: spawned processes and queues;
``ray_backend.py``: Ray actor handles) supplies only the transport, through the hooks at the end
of the class (``_launch``, ``_deliver``, ``_wait``, ``_beat_ages``, ``_discard``,
``_stop_actors`` and a few for names and messages).

The rules, one place for both backends:
- **States.** A slot goes NEW -> STARTING (an incarnation was launched) -> RUNNING (it reported
  READY) -> back to STARTING when it is re-created, and STOPPED at the end. Each launch is a new
  *generation* with its own tag (``TAG_ENV``, inherited by its builds, so that a dead
  incarnation's builds are found and killed without touching its replacement's, which use the
  same ports). A report from an older generation is ignored.
- **Start.** ``start()`` launches every actor and waits until all are RUNNING; any failure
  while starting (an error, a death, a hang, no READY within ``start_timeout``) stops the others
  and raises ``ActorFailedError``.
- **Faults.** An incarnation that dies without reporting an error, or whose heartbeat is older
  than ``heartbeat_timeout``, is discarded (killed, its builds killed) and re-created from its
  ``ActorSpec`` while its restart budget allows (``max_restarts``, or the run's build quota:
  mlagents-learn's ``--max-lifetime-restarts`` with ``--restarts-rate-limit-n`` per
  ``--restarts-rate-limit-period-s``); beyond it ``ActorFailedError`` names the actor. The
  rollout it was collecting is lost (``dropped_rollouts``). An actor that reports an exception
  is never retried.
- **Sync-round handoff.** A replacement gets the newest weights once it is READY, unless the
  actor (an earlier incarnation) already delivered a rollout for that publication in the sync
  wiring: then it waits for the next publication, so a round never gets two rollouts of one
  actor.
- **Control.** ``control(change)`` sends a ``Control`` to every RUNNING actor and adds it to the
  run's control state (``Control.updated``); an incarnation is launched with that state
  (``ActorSpec.control``) and, if it changed while it started, gets it again when READY.

The learner never polls: ``_wait`` blocks on every incarnation at once, in slices of the
backend's ``_liveness_slice_s()``, and heartbeats and start deadlines are checked between
slices.
"""
from __future__ import annotations

import abc
import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple, Sequence

from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.backend import ActorBackend, actor_restart_quota, receive_in_slices
from unity_rl.runtime.messages import (
    ActorFailedError,
    ActorInfo,
    Command,
    Control,
    FromActor,
    PolicyWeights,
    Report,
    Rollout,
    ToActor,
)

logger = logging.getLogger(__name__)


class Phase(Enum):
    """Where one actor slot is in its life."""

    NEW = "new"
    STARTING = "starting"
    """An incarnation was launched and has not reported READY yet."""
    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(eq=False)
class Slot:
    """The supervisor's record of actor k across its incarnations."""

    spec: ActorSpec
    quota: Any
    """Its restart budget (``RestartQuota``)."""
    phase: Phase = Phase.NEW
    generation: int = 0
    """Incarnations launched so far (the current one's number)."""
    tag: str = ""
    """``TAG_ENV`` of the current incarnation (inherited by its builds)."""
    link: Any = None
    """The transport's handle on the current incarnation (process and queues, or Ray actor)."""
    since: float = 0.0
    """time.monotonic() of the current incarnation's launch."""
    seen: float = 0.0
    """time.monotonic() of its last sign of life (a report or a heartbeat answer)."""
    info: ActorInfo | None = None
    """What the current incarnation reported when READY (None while it starts)."""
    layout: Any = None
    """``ActorInfo.layout()`` of the first incarnation (a replacement must see the same)."""
    sent: int = -1
    """Publication of the last weights sent to the current incarnation (-1: none yet)."""
    delivered: int = -1
    """Publication of the last rollout this actor delivered (any incarnation)."""
    control_version: int = 0
    """Number of control changes the current incarnation has (``ActorSupervisor._control``)."""
    restarts: int = 0
    history: list = field(default_factory=list)
    """Per incarnation that reported READY: what the transport calls it (pid, (node, pid))."""
    rollouts: list = field(default_factory=list)
    """Final rollouts received from each incarnation (launch order)."""

    @property
    def actor_id(self) -> int:
        return self.spec.actor_id

    @property
    def collecting(self) -> bool:
        """True when the incarnation holds weights it has not delivered a rollout for."""
        if self.phase is not Phase.RUNNING or self.sent < 0:
            return False
        return self.sent > self.delivered or not self.spec.wait_for_new_weights


class Event(NamedTuple):
    """What the transport saw of one incarnation while it waited."""

    slot: Slot
    generation: int
    """The incarnation it is about (older generations' events are dropped)."""
    report: Report | None = None
    """A report the incarnation sent, or None for a loss."""
    lost: str | None = None
    """Why the incarnation is gone (died without an error report), or None for a report."""


class ActorSupervisor(ActorBackend):
    """Supervises the actors of ``specs`` over a subclass's transport (see the module doc).

    heartbeat_timeout: seconds without a heartbeat after which a RUNNING actor counts as hung
        (default 2 x the builds' timeout_wait + their step timeout + 30 s).
    start_timeout: seconds an incarnation may take to report READY (default builds x
        timeout_wait + 120 s).
    stop_timeout: seconds ``stop()`` waits for actors to close their builds before killing them.
    max_restarts: re-creations allowed per actor (-1: no limit); None: the run's build quota.
    """

    def __init__(self, specs: Sequence[ActorSpec], *, heartbeat_timeout: float | None = None,
                 start_timeout: float | None = None, stop_timeout: float = 20.0,
                 max_restarts: int | None = None):
        super().__init__(specs)
        worst_wait = max(s.stream.timeout_wait for s in self.specs)
        worst_step = max(s.stream.step_timeout or s.stream.timeout_wait for s in self.specs)
        most_builds = max(s.stream.num_builds for s in self.specs)
        self.heartbeat_timeout = (heartbeat_timeout if heartbeat_timeout is not None
                                  else 2 * worst_wait + worst_step + 30.0)
        """Seconds without a heartbeat after which a started actor counts as hung."""
        self.start_timeout = (start_timeout if start_timeout is not None
                              else most_builds * worst_wait + 120.0)
        """Seconds an incarnation may take to start its builds and report ready."""
        self.stop_timeout = stop_timeout
        """Seconds stop() waits for actors to close their builds before killing them."""
        self._slots = [Slot(spec, actor_restart_quota(spec, max_restarts)) for spec in self.specs]
        self._token = uuid.uuid4().hex[:8]
        self._tags: set[str] = set()
        """Every incarnation's tag (stop() kills whatever builds still carry one)."""
        self._latest: PolicyWeights | None = None
        """The newest publication (a replacement starts with it)."""
        self._control: Control | None = None
        """The run's control state: every change so far, merged."""
        self._control_changes = 0
        self._pending: list[Rollout] = []
        """Rollouts received and not handed over yet."""
        self._starting = False
        """True inside start(): a dead or hung actor fails the start instead of restarting."""
        self._stopped = False

    # -- the ActorBackend API -------------------------------------------------------------------
    def start(self) -> list[ActorInfo]:
        self._starting = True
        try:
            self._connect()
            for slot in self._slots:
                self._new_incarnation(slot)
            while any(slot.phase is not Phase.RUNNING for slot in self._slots):
                self._pump(self._liveness_slice_s())
        except BaseException:
            self.stop()
            raise
        finally:
            self._starting = False
        return [slot.info for slot in self._slots]

    def broadcast(self, weights: PolicyWeights) -> None:
        self._latest = weights
        for slot in self._running():  # a starting incarnation gets them once it is ready
            self._send_weights(slot)

    def control(self, change: Control) -> None:
        self._control = (self._control or Control()).updated(change)  # reset: a one-off
        self._control_changes += 1
        for slot in self._running():  # a starting incarnation gets the state once it is ready
            self._deliver(slot, Command(ToActor.CONTROL, control=change))
            slot.control_version = self._control_changes

    def receive(self, timeout: float | None = None) -> Rollout | None:
        return receive_in_slices(self._pending, self._pump, timeout, self._liveness_slice_s())

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self._stop_actors()
        finally:
            for slot in self._slots:
                slot.phase = Phase.STOPPED

    # -- introspection (tests, logs) ------------------------------------------------------------
    def actor_pids(self) -> list[int | None]:
        return [slot.info.pid if slot.info is not None else None for slot in self._slots]

    def pids(self) -> list[int]:
        out = [pid for pid in self.actor_pids() if pid]
        for slot in self._slots:
            if slot.info is not None:
                out.extend(slot.info.build_pids)
        return out

    def actor_restarts(self) -> list[int]:
        return [slot.restarts for slot in self._slots]

    def incarnations(self) -> list[list]:
        """Per actor (actor order): each incarnation that reported ready, as the transport
        names it (local: its pid; Ray: (node id, pid))."""
        return [list(slot.history) for slot in self._slots]

    def incarnation_rollouts(self) -> list[list[int]]:
        """Final rollouts from each incarnation of each actor (launch order, actor order)."""
        return [list(slot.rollouts) for slot in self._slots]

    def build_pids(self) -> list[tuple[int, ...]]:
        """Build pids the current incarnation of each actor reported when it was ready."""
        return [slot.info.build_pids if slot.info is not None else () for slot in self._slots]

    # -- the rules ------------------------------------------------------------------------------
    def _running(self) -> list[Slot]:
        return [slot for slot in self._slots if slot.phase is Phase.RUNNING]

    def _new_incarnation(self, slot: Slot) -> None:
        """Launches the next generation of ``slot``'s actor with the run's control state."""
        slot.generation += 1
        slot.tag = f"unity_rl-{self._token}-actor{slot.actor_id}.{slot.generation}"
        self._tags.add(slot.tag)
        slot.phase, slot.info, slot.sent = Phase.STARTING, None, -1
        slot.since = slot.seen = time.monotonic()
        slot.control_version = self._control_changes
        slot.rollouts.append(0)
        spec = slot.spec
        if self._control is not None:
            spec = dataclasses.replace(spec, control=self._control)
        self._launch(slot, spec)

    def _send_weights(self, slot: Slot) -> None:
        self._deliver(slot, Command(ToActor.WEIGHTS, self._latest))
        slot.sent = self._latest.version

    def _pump(self, timeout: float) -> None:
        """Waits up to ``timeout`` for reports or losses and handles them (rollouts go to
        ``_pending``); then checks start deadlines and heartbeats. Raises ActorFailedError."""
        for event in self._wait(max(timeout, 0.0)):
            if event.generation != event.slot.generation:
                continue  # from an incarnation replaced meanwhile
            if event.lost is not None:
                self._lost(event.slot, event.lost)
            else:
                self._on_report(event.slot, event.report)
        self._check_liveness()

    def _on_report(self, slot: Slot, report: Report) -> None:
        if report.kind is FromActor.ERROR:
            raise ActorFailedError.from_error(report.payload)
        slot.seen = time.monotonic()
        if report.kind is FromActor.READY:
            self._on_ready(slot, report.payload)
        elif report.kind is FromActor.SEGMENT:
            rollout: Rollout = report.payload
            if rollout.final:  # a partial one leaves the collection (and the round) open
                slot.delivered = max(slot.delivered, rollout.publication)
                slot.rollouts[-1] += 1
            self._pending.append(rollout)
        else:
            raise RuntimeError(f"actor {slot.actor_id} sent an unexpected {report.kind}")

    def _on_ready(self, slot: Slot, info: ActorInfo) -> None:
        if slot.phase is not Phase.STARTING:
            raise RuntimeError(f"actor {slot.actor_id} reported ready twice")
        if slot.layout is not None and slot.layout != info.layout():
            raise ActorFailedError(slot.actor_id, f"after its restart it sees behaviors "
                                                  f"{info.layout()}, not the ones it trained "
                                                  f"({slot.layout})")
        slot.info, slot.phase, slot.layout = info, Phase.RUNNING, info.layout()
        slot.history.append(self._ready(slot, info))
        if slot.control_version < self._control_changes:  # changed while it started
            self._deliver(slot, Command(ToActor.CONTROL, control=self._control))
            slot.control_version = self._control_changes
        if self._latest is None:
            return  # the first broadcast reaches it
        if slot.spec.wait_for_new_weights and slot.delivered >= self._latest.version:
            return  # sync: its predecessor delivered this round already; wait for the next one
        self._send_weights(slot)

    def _lost(self, slot: Slot, why: str) -> None:
        """The incarnation died or hung: fails a start (or a stop), else re-creates it."""
        if self._starting or self._stopped:
            raise ActorFailedError(slot.actor_id, why)
        self._restart(slot, why)

    def _check_liveness(self) -> None:
        """Between wait slices: fails incarnations not up in time, replaces hung ones."""
        now = time.monotonic()
        for slot in self._slots:
            if slot.phase is Phase.STARTING and now - slot.since > self.start_timeout:
                why = self._not_started_reason()
                raise ActorFailedError(slot.actor_id,
                                       why if slot.generation == 1 else "its restart: " + why)
        quiet = [slot for slot in self._running() if now - slot.seen > self.heartbeat_timeout]
        if not quiet:
            return
        for slot, age in self._beat_ages(quiet).items():
            if age is not None and age <= self.heartbeat_timeout:
                slot.seen = time.monotonic() - age  # alive (e.g. waiting for weights)
                continue
            self._lost(slot, f"it hung ({self._hang_reason(slot, age)})")

    def _restart(self, slot: Slot, why: str) -> None:
        """Discards a dead or hung incarnation (and its builds), then launches the next one
        if the actor's budget allows."""
        if slot.collecting:  # its rollout is lost with it
            self.dropped_rollouts += 1
        where = self._discard(slot)
        slot.info = None  # readers (build_pids, ...) never see the dead incarnation's builds
        refused = slot.quota.try_consume()
        if refused is not None:
            slot.phase = Phase.STOPPED
            raise ActorFailedError(slot.actor_id, f"{why}; not restarted: {refused} "
                                                  f"(restarts of this actor: {slot.restarts})")
        slot.restarts += 1
        self.restarts += 1
        logger.warning("actor %d (%s) failed: %s; restarting it (restart %d of this actor)",
                       slot.actor_id, where, why, slot.restarts)
        self._new_incarnation(slot)

    # -- the transport: what a backend supplies -------------------------------------------------
    def _connect(self) -> None:
        """Before the first launch (e.g. connect to a cluster)."""

    @abc.abstractmethod
    def _liveness_slice_s(self) -> float:
        """Longest single blocking wait between liveness checks."""

    @abc.abstractmethod
    def _launch(self, slot: Slot, spec: ActorSpec) -> None:
        """Starts a new incarnation from ``spec`` tagged ``slot.tag``; sets ``slot.link``."""

    @abc.abstractmethod
    def _deliver(self, slot: Slot, command: Command) -> None:
        """Sends a WEIGHTS or CONTROL command to the current incarnation (never blocks)."""

    @abc.abstractmethod
    def _wait(self, timeout: float) -> list[Event]:
        """Blocks up to ``timeout`` s on every STARTING or RUNNING incarnation; what it saw."""

    @abc.abstractmethod
    def _ready(self, slot: Slot, info: ActorInfo) -> Any:
        """The incarnation reported READY; returns its entry in ``incarnations()``."""

    @abc.abstractmethod
    def _beat_ages(self, slots: list[Slot]) -> dict[Slot, float | None]:
        """Seconds since each incarnation's last heartbeat; None when it did not answer; a slot
        left out is not judged now (its death shows up in ``_wait``)."""

    @abc.abstractmethod
    def _hang_reason(self, slot: Slot, age: float | None) -> str:
        """Why a hung incarnation counts as hung, for the error or the log."""

    @abc.abstractmethod
    def _not_started_reason(self) -> str:
        """Why an incarnation is not up after ``start_timeout``, for the error."""

    @abc.abstractmethod
    def _discard(self, slot: Slot) -> str:
        """Kills the current incarnation and its builds; says where it was, for the log."""

    @abc.abstractmethod
    def _stop_actors(self) -> None:
        """stop(): asks every incarnation to close its builds, then ends them all."""
