"""The local backend: one spawn-context process per actor, multiprocessing queues between them.

Connections (one per arrow, one set per actor *incarnation*, so that a killed actor cannot leave
a lock held or half a message in a channel that another actor or its replacement uses):
- learner -> actor k: ``inbox`` (a ``Queue`` of ``Command``: weights or stop), plus a shared
  ``stop`` flag (a lock-free byte) so that a stop is seen within one stream step, even
  mid-segment;
- actor k -> learner: its own ``results`` queue of ``Report`` (ready, segment, error). The
  learner closes its copy of the writing end, so a dead actor's channel ends (EOF) instead of
  blocking on a message cut in half;
- liveness: ``heartbeat``, a shared double the actor sets to ``time.monotonic()`` after every
  stream step and every wait slice. The learner never polls in a loop: it blocks in
  ``multiprocessing.connection.wait`` on every actor's results and process sentinel (a death is
  seen at once) in slices of ``LIVENESS_SLICE_S``, and checks heartbeat ages between slices.

Faults, as with Ray: an actor process that exits without reporting an error (killed, crashed)
or whose heartbeat is older than ``heartbeat_timeout`` (it is killed) is replaced by a new
process from the same ``ActorSpec``: the dead actor's builds are killed first (they carry its
incarnation's tag, ``TAG_ENV``, and are also remembered as its children), so the replacement's
builds start on the same ports. Once the replacement is ready it gets the newest weights the
learner broadcast and collects at once (in the sync wiring the round in progress waits for its
rollout; if its predecessor had delivered that round's rollout already, it waits for the next
publication instead). The rollout the dead actor was collecting is lost (``dropped_rollouts``).
Each actor has a restart budget (``max_restarts``); beyond it, ``ActorFailedError`` names the
actor. An actor that reports an exception is never retried. An actor that dies or hangs during
``start()`` fails the start, as with Ray.

No orphans: actors ignore SIGINT (the trainer decides how to stop), turn SIGTERM into SystemExit
(so their ``finally`` closes the builds), ask Linux for SIGTERM when the trainer dies
(PR_SET_PDEATHSIG) and also stop when ``parent_process()`` is gone. ``stop()`` asks politely,
then terminates, then kills the actors and whatever build processes they had started.

Size (over ~400 lines on purpose): starting, watching, re-creating and stopping an actor
process share one per-actor record (channels, heartbeat, incarnations); split, each part would
reach into the others' internals.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import queue
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

import psutil

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

LIVENESS_SLICE_S = 1.0
"""Longest blocking wait on the actors between heartbeat checks."""
KILL_WAIT_S = 5.0
"""Seconds to wait for a killed actor process to be gone."""


@dataclass
class _Slot:
    """Learner-side state of actor k and its current incarnation."""

    spec: ActorSpec
    quota: Any
    """Its restart budget (``RestartQuota``)."""
    proc: Any = None
    inbox: Any = None
    results: Any = None
    heartbeat: Any = None
    stop_flag: Any = None
    eof: bool = False
    """The incarnation's results channel ended (it exited, or is exiting)."""
    phase: str = "new"
    """new | starting | running | stopped."""
    since: float = 0.0
    """time.monotonic() when the incarnation was launched."""
    generation: int = 0
    tag: str = ""
    """``TAG_ENV`` of the incarnation (inherited by its builds)."""
    info: ActorInfo | None = None
    layout: Any = None
    """``ActorInfo.layout()`` of the first incarnation (a replacement must see the same)."""
    sent: int = -1
    """Publication of the last weights sent to this incarnation (-1: none yet)."""
    delivered: int = -1
    """Publication of the last rollout this actor delivered (any incarnation)."""
    restarts: int = 0
    children: dict = field(default_factory=dict)
    """pid -> psutil.Process of the incarnation's descendants (its builds), last seen."""
    history: list = field(default_factory=list)
    """Pid of every incarnation that reported ready."""
    rollouts: list = field(default_factory=list)
    """Rollouts received from each incarnation (launch order)."""

    @property
    def actor_id(self) -> int:
        return self.spec.actor_id

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def collecting(self) -> bool:
        """True when the incarnation holds weights it has not delivered a rollout for."""
        if self.phase != "running" or self.sent < 0:
            return False
        return self.sent > self.delivered or not self.spec.wait_for_new_weights


class LocalProcessBackend(ActorBackend):
    """K actors in K local processes (spawn context: no forked torch or gRPC state).

    max_restarts: re-creations allowed per actor after its process died or hung (-1: no limit);
        None: each actor gets the run's build quota (``max_lifetime_restarts`` with its rate
        limit, from its ``StreamSettings``), as with ``RayBackend``.
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
        """Seconds an actor may take to start its builds and report ready."""
        self.stop_timeout = stop_timeout
        """Seconds stop() waits for actors to close their builds before terminating them."""
        self._ctx = mp.get_context("spawn")
        self._token = uuid.uuid4().hex[:8]
        self._slots = [_Slot(spec, actor_restart_quota(spec, max_restarts))
                       for spec in self.specs]
        self._latest: PolicyWeights | None = None
        """The last weights broadcast (a replacement starts with them)."""
        self._pending: list[Rollout] = []
        self._tags: set[str] = set()
        self._starting = False
        """True inside start(): a dead or hung actor fails the start instead of restarting."""
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> list[ActorInfo]:
        self._starting = True
        try:
            for slot in self._slots:
                self._launch(slot)
            while any(slot.phase != "running" for slot in self._slots):
                self._pump(LIVENESS_SLICE_S)
        except BaseException:
            self.stop()
            raise
        finally:
            self._starting = False
        return [slot.info for slot in self._slots]

    def broadcast(self, weights: PolicyWeights) -> None:
        self._latest = weights
        for slot in self._slots:
            if slot.phase == "running":  # a starting replacement gets them once it is ready
                self._send(slot, weights)

    def receive(self, timeout: float | None = None) -> Rollout | None:
        return receive_in_slices(self._pending, self._pump, timeout, LIVENESS_SLICE_S)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        live = [s for s in self._slots if s.proc is not None and s.proc.exitcode is None]
        for slot in live:  # remember build processes while their parent still lives
            slot.children.update(_children(slot.pid))
            slot.stop_flag.value = 1
            with contextlib.suppress(ValueError, OSError):
                slot.inbox.put(Command(ToActor.STOP))
        deadline = time.monotonic() + self.stop_timeout
        while any(s.proc.exitcode is None for s in live) and time.monotonic() < deadline:
            self._drain(live, 0.2)  # actors flush their queues before they can exit
        for slot in live:
            if slot.proc.exitcode is None:
                logger.warning("actor %d (pid %d) did not stop within %.0f s: terminating it",
                               slot.actor_id, slot.pid, self.stop_timeout)
                slot.children.update(_children(slot.pid))
                slot.proc.terminate()
        for slot in live:
            slot.proc.join(KILL_WAIT_S)
            if slot.proc.exitcode is None:
                slot.proc.kill()
                slot.proc.join(KILL_WAIT_S)
        self._drain(live, 0.0)
        for slot in self._slots:
            _kill_leftovers(slot.children.values())
            self._retire(slot)
            slot.phase = "stopped"
        if self._tags:  # builds restarted by a stream after the last look at an actor's children
            kill_tagged_processes(self._tags)

    def pids(self) -> list[int]:
        out = [s.pid for s in self._slots if s.pid]
        for slot in self._slots:
            if slot.info is not None:
                out.extend(slot.info.build_pids)
        return out

    # -- introspection (tests, logs) ------------------------------------------------------------
    def actor_pids(self) -> list[int | None]:
        return [slot.pid for slot in self._slots]

    def actor_restarts(self) -> list[int]:
        return [slot.restarts for slot in self._slots]

    def incarnations(self) -> list[list[int]]:
        """Pid of every incarnation that reported ready, per actor (actor order)."""
        return [list(slot.history) for slot in self._slots]

    def incarnation_rollouts(self) -> list[list[int]]:
        """Rollouts received from each incarnation of each actor (launch order, actor order)."""
        return [list(slot.rollouts) for slot in self._slots]

    def build_pids(self) -> list[tuple[int, ...]]:
        """Build pids the current incarnation of each actor reported when it was ready."""
        return [slot.info.build_pids if slot.info is not None else () for slot in self._slots]

    # -- one actor's life -----------------------------------------------------------------------
    def _launch(self, slot: _Slot) -> None:
        """Starts a new incarnation of ``slot``'s actor (it reports READY later)."""
        ctx = self._ctx
        slot.generation += 1
        slot.tag = f"unity_rl-{self._token}-actor{slot.actor_id}.{slot.generation}"
        self._tags.add(slot.tag)
        slot.inbox, slot.results = ctx.Queue(), ctx.Queue()
        slot.inbox._ignore_epipe = True  # a dead actor's inbox: drop what is left, quietly
        slot.heartbeat = ctx.RawValue("d", time.monotonic())
        slot.stop_flag = ctx.RawValue("b", 0)
        slot.proc = ctx.Process(
            target=_actor_process_main,
            args=(slot.spec, slot.inbox, slot.results, slot.heartbeat, slot.stop_flag, slot.tag),
            name=f"unity_rl-actor-{slot.actor_id}", daemon=True)
        with _sigint_ignored():  # inherited through exec: Ctrl-C during the actor's
            slot.proc.start()    # imports reaches the trainer only
        # Only the actor writes results and reads its inbox: without our copies, its death
        # ends its results channel (EOF) and turns writes to its inbox into a quiet EPIPE.
        slot.results._writer.close()
        slot.inbox._reader.close()
        slot.eof = False
        slot.phase, slot.since = "starting", time.monotonic()
        slot.info, slot.sent = None, -1
        slot.children = {}
        slot.rollouts.append(0)

    def _send(self, slot: _Slot, weights: PolicyWeights) -> None:
        slot.inbox.put(Command(ToActor.WEIGHTS, weights))
        slot.sent = weights.version

    def _pump(self, timeout: float) -> None:
        """Waits up to ``timeout`` for reports or exits and handles them (rollouts go to
        ``_pending``); then restarts hung actors. Raises ``ActorFailedError``."""
        waiting: dict[Any, tuple[_Slot, int, str]] = {}
        for slot in self._slots:
            if slot.phase not in ("starting", "running"):
                continue
            if not slot.eof:
                waiting[slot.results._reader] = (slot, slot.generation, "report")
            waiting[slot.proc.sentinel] = (slot, slot.generation, "exit")
        ready = mp.connection.wait(list(waiting), max(timeout, 0.0)) if waiting else []
        if not waiting and timeout > 0:
            time.sleep(timeout)  # nothing to wait on (not started or all stopped)
        exited = []
        for obj in ready:
            slot, generation, what = waiting[obj]
            if what == "exit":
                exited.append((slot, generation))
            elif slot.generation == generation:
                self._read(slot)
        for slot, generation in exited:
            if slot.generation == generation:
                self._on_exit(slot)
        self._check_heartbeats()

    def _read(self, slot: _Slot) -> None:
        """Handles every report already in ``slot``'s results channel."""
        while not slot.eof:
            try:
                report = slot.results.get(block=False)
            except queue.Empty:
                return
            except (EOFError, OSError):  # the actor is gone (maybe mid-message)
                slot.eof = True
                return
            self._handle(slot, report)

    def _handle(self, slot: _Slot, report: Report) -> None:
        if report.kind is FromActor.ERROR:
            raise ActorFailedError.from_error(report.payload)
        if report.kind is FromActor.READY:
            self._on_ready(slot, report.payload)
        elif report.kind is FromActor.SEGMENT:
            rollout: Rollout = report.payload
            slot.delivered = max(slot.delivered, rollout.publication)
            slot.rollouts[-1] += 1
            self._pending.append(rollout)
        else:
            raise RuntimeError(f"actor {slot.actor_id} sent an unexpected {report.kind}")

    def _on_ready(self, slot: _Slot, info: ActorInfo) -> None:
        if slot.phase != "starting":
            raise RuntimeError(f"actor {slot.actor_id} reported ready twice")
        if slot.layout is not None and slot.layout != info.layout():
            raise ActorFailedError(slot.actor_id, f"after its restart it sees behaviors "
                                                  f"{info.layout()}, not the ones it trained "
                                                  f"({slot.layout})")
        slot.info, slot.phase = info, "running"
        slot.layout = info.layout()
        slot.history.append(info.pid)
        slot.heartbeat.value = time.monotonic()
        slot.children.update(_children(info.pid))
        if slot.generation > 1:
            logger.info("actor %d is back (pid %d, builds %s)", slot.actor_id, info.pid,
                        list(info.build_pids))
        weights = self._latest
        if weights is None:
            return  # the first broadcast reaches it
        if slot.spec.wait_for_new_weights and slot.delivered >= weights.version:
            return  # sync: its predecessor delivered this round already; wait for the next one
        self._send(slot, weights)

    def _on_exit(self, slot: _Slot) -> None:
        """``slot``'s process exited: its last reports, then an error, a restart or a failure."""
        slot.proc.join(KILL_WAIT_S)
        self._read(slot)  # reports sent before it died (an ERROR raises here)
        why = (f"its process (pid {slot.pid}) exited with code {slot.proc.exitcode} "
               f"without reporting an error")
        if self._starting or self._stopped:
            raise ActorFailedError(slot.actor_id, why)
        self._restart(slot, why)

    def _check_heartbeats(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.phase == "starting" and now - slot.since > self.start_timeout:
                what = "its builds were not up" if slot.generation == 1 else \
                    "its restart: its builds were not up"
                raise ActorFailedError(slot.actor_id, f"{what} after {self.start_timeout:.0f} s")
            if slot.phase == "running" and now - slot.heartbeat.value > self.heartbeat_timeout:
                why = (f"no heartbeat for {now - slot.heartbeat.value:.0f} s (hung in a build "
                       f"step?); pid {slot.pid}")
                if self._starting:
                    raise ActorFailedError(slot.actor_id, why)
                self._restart(slot, f"it hung ({why})")

    def _restart(self, slot: _Slot, why: str) -> None:
        """Replaces a dead or hung actor; its builds are killed before the new one starts."""
        if slot.proc.exitcode is None:  # hung: kill it (its builds would not close anyway)
            slot.children.update(_children(slot.pid))
            slot.proc.kill()
            slot.proc.join(KILL_WAIT_S)
        if slot.collecting:
            self.dropped_rollouts += 1
        old_pid = slot.pid
        self._retire(slot)
        killed = kill_tagged_processes([slot.tag])
        _kill_leftovers(slot.children.values())
        refused = slot.quota.try_consume()
        if refused is not None:
            slot.phase = "stopped"
            raise ActorFailedError(slot.actor_id, f"{why}; not restarted: {refused} "
                                                  f"(restarts of this actor: {slot.restarts})")
        slot.restarts += 1
        self.restarts += 1
        logger.warning("actor %d (pid %s) failed: %s; restarting it (restart %d of this actor; "
                       "%d leftover build process(es) killed)", slot.actor_id, old_pid, why,
                       slot.restarts, len(killed))
        self._launch(slot)

    def _retire(self, slot: _Slot) -> None:
        """Closes the channels of ``slot``'s current incarnation (its process has exited)."""
        if slot.inbox is not None:
            slot.inbox.cancel_join_thread()
            slot.inbox.close()
        if slot.results is not None:
            slot.results.cancel_join_thread()
            slot.results.close()
        slot.eof = True

    def _drain(self, slots: list[_Slot], timeout: float) -> None:
        """Discards reports during stop (errors are logged, not raised); waits up to
        ``timeout`` for a report or an exit first."""
        readers = {s.results._reader: s for s in slots if not s.eof}
        sentinels = [s.proc.sentinel for s in slots if s.proc.exitcode is None]
        if timeout > 0 and (readers or sentinels):
            ready = mp.connection.wait(list(readers) + sentinels, timeout)
        else:
            ready = list(readers)
        for obj in ready:
            slot = readers.get(obj)
            if slot is None:
                continue
            while not slot.eof:
                try:
                    report = slot.results.get(block=False)
                except queue.Empty:
                    break
                except (EOFError, OSError):
                    slot.eof = True
                    break
                if report.kind is FromActor.ERROR:
                    logger.error("%s", ActorFailedError.from_error(report.payload))


# ----------------------------------------------------------------------------------------------
# Inside the actor's process
# ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while starting a child (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _actor_process_main(spec: ActorSpec, inbox, results, heartbeat, stop_flag, tag: str) -> None:
    os.environ[TAG_ENV] = tag  # inherited by the builds: found and killed if this process dies
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _die_with_parent()
    limit_torch_threads(spec.torch_threads)
    parent = mp.parent_process()

    def beat() -> None:
        heartbeat.value = time.monotonic()

    actor_loop(spec, inbox, results, heartbeat=beat,
               learner_alive=(parent.is_alive if parent is not None else (lambda: True)),
               stop_requested=lambda: stop_flag.value != 0)
    # The builds are closed. Flush the reports into the pipe, then skip the interpreter's
    # teardown: torch's takes 1-2 s on a small machine, and stop() waits for it.
    results.close()
    results.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _exit_on_sigterm(signum, frame) -> None:
    sys.exit(128 + signum)


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when the trainer dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError) as err:
        logger.debug("PR_SET_PDEATHSIG unavailable: %s", err)


def _children(pid: int) -> dict[int, psutil.Process]:
    """Descendants of ``pid`` (psutil remembers their start times: pid reuse is detected)."""
    try:
        return {c.pid: c for c in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _kill_leftovers(procs) -> None:
    """Kills build processes that outlived their actor (it was killed before closing them)."""
    from unity_rl.envs.launcher import kill_process_tree

    for proc in procs:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                continue  # gone (is_running is False for a reused pid too)
        except psutil.NoSuchProcess:
            continue
        logger.warning("killing leftover build process %d", proc.pid)
        kill_process_tree(proc.pid)
