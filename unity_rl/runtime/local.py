"""The local backend's transport: one spawn-context process per actor, multiprocessing queues.

What to do when an actor dies, hangs or must be replaced is ``supervisor.ActorSupervisor``'s
business (the same rules as Ray); this module only carries messages and ends processes.

Connections (one per arrow, one set per actor *incarnation*, so that a killed actor cannot leave
a lock held or half a message in a channel that another actor or its replacement uses):
- learner -> actor k: ``inbox`` (a ``Queue`` of ``Command``: weights, control or stop), plus a
  shared ``stop`` flag (a lock-free byte) so that a stop is seen within one stream step, even
  mid-segment;
- actor k -> learner: its own ``results`` queue of ``Report`` (ready, segment, error). The
  learner closes its copy of the writing end, so a dead actor's channel ends (EOF) instead of
  blocking on a message cut in half;
- liveness: ``heartbeat``, a shared double the actor sets to ``time.monotonic()`` after every
  stream step and every wait slice. The learner never polls in a loop: it blocks in
  ``multiprocessing.connection.wait`` on every actor's results and process sentinel (a death is
  seen at once) in slices of ``LIVENESS_SLICE_S``; the supervisor reads heartbeat ages between
  slices.

An incarnation is discarded by killing its process, then its builds: they carry its tag
(``TAG_ENV``) and are also remembered as its children, so the replacement's builds start on
the same ports.

No orphans: actors ignore SIGINT (the trainer decides how to stop), turn SIGTERM into SystemExit
(so their ``finally`` closes the builds), ask Linux for SIGTERM when the trainer dies
(PR_SET_PDEATHSIG) and also stop when ``parent_process()`` is gone. ``stop()`` asks politely,
then terminates, then kills the actors and whatever build processes they had started.
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
from dataclasses import dataclass, field
from typing import Any, Sequence

import psutil

from unity_rl.runtime import messages
from unity_rl.runtime.actor_spec import ActorSpec
from unity_rl.runtime.actor_loop import actor_loop
from unity_rl.runtime.allocator import keep_freed_memory
from unity_rl.runtime.backend import (TAG_ENV, kill_tagged_processes, limit_torch_threads,
                                      lower_priority)
from unity_rl.runtime.supervisor import ActorSupervisor, Event, Phase, Slot

logger = logging.getLogger(__name__)

LIVENESS_SLICE_S = 1.0
"""Longest blocking wait on the actors between heartbeat checks."""
KILL_WAIT_S = 5.0
"""Seconds to wait for a killed actor process to be gone."""


@dataclass
class _Link:
    """One incarnation's process and channels."""

    proc: Any
    inbox: Any
    results: Any
    heartbeat: Any
    stop_flag: Any
    eof: bool = False
    """The results channel ended (the process exited, or is exiting)."""
    children: dict = field(default_factory=dict)
    """pid -> psutil.Process of the incarnation's descendants (its builds), last seen."""


class LocalProcessBackend(ActorSupervisor):
    """K actors in K local processes (spawn context: no forked torch or gRPC state).

    Options as ``ActorSupervisor``: ``heartbeat_timeout``, ``start_timeout``, ``stop_timeout``,
    ``max_restarts`` (None: each actor gets the run's build quota, as with ``RayBackend``).
    """

    def __init__(self, specs: Sequence[ActorSpec], **options):
        super().__init__(specs, **options)
        self._ctx = mp.get_context("spawn")

    def actor_pids(self) -> list[int | None]:
        """Process id of each actor's current incarnation, ready or not (actor order)."""
        return [slot.link.proc.pid if slot.link is not None else None for slot in self._slots]

    # -- the transport --------------------------------------------------------------------------
    def _liveness_slice_s(self) -> float:
        return LIVENESS_SLICE_S

    def _launch(self, slot: Slot, spec: ActorSpec) -> None:
        ctx = self._ctx
        inbox, results = ctx.Queue(), ctx.Queue()
        inbox._ignore_epipe = True  # a dead actor's inbox: drop what is left, quietly
        heartbeat, stop_flag = ctx.RawValue("d", time.monotonic()), ctx.RawValue("b", 0)
        proc = ctx.Process(target=_actor_process_main,
                           args=(spec, inbox, results, heartbeat, stop_flag, slot.tag),
                           name=f"unity_rl-actor-{slot.actor_id}", daemon=True)
        with _sigint_ignored():  # inherited through exec: Ctrl-C during the actor's
            proc.start()         # imports reaches the trainer only
        # Only the actor writes results and reads its inbox: without our copies, its death
        # ends its results channel (EOF) and turns writes to its inbox into a quiet EPIPE.
        results._writer.close()
        inbox._reader.close()
        slot.link = _Link(proc, inbox, results, heartbeat, stop_flag)

    def _deliver(self, slot: Slot, command: messages.Command) -> None:
        slot.link.inbox.put(command)

    def _wait(self, timeout: float) -> list[Event]:
        waiting: dict[Any, tuple[Slot, bool]] = {}
        for slot in self._slots:
            if slot.phase in (Phase.STARTING, Phase.RUNNING):
                if not slot.link.eof:
                    waiting[slot.link.results._reader] = (slot, False)
                waiting[slot.link.proc.sentinel] = (slot, True)
        if not waiting:
            time.sleep(timeout)  # nothing to wait on (not started or all stopped)
            return []
        events, exited = [], []
        for obj in mp.connection.wait(list(waiting), timeout):
            slot, is_exit = waiting[obj]
            if is_exit:
                exited.append(slot)
            else:
                events += self._read(slot)
        for slot in exited:
            proc = slot.link.proc
            proc.join(KILL_WAIT_S)
            events += self._read(slot)  # what it sent before it died (an ERROR raises then)
            events.append(Event(slot, slot.generation, lost=(
                f"its process (pid {proc.pid}) exited with code {proc.exitcode} without "
                f"reporting an error")))
        return events

    def _read(self, slot: Slot) -> list[Event]:
        """Every report already in ``slot``'s results channel."""
        link, events = slot.link, []
        while not link.eof:
            try:
                report = link.results.get(block=False)
            except queue.Empty:
                break
            except (EOFError, OSError):  # the actor is gone (maybe mid-message)
                link.eof = True
                break
            events.append(Event(slot, slot.generation, report))
        return events

    def _ready(self, slot: Slot, info: messages.ActorInfo) -> int:
        slot.link.heartbeat.value = time.monotonic()
        slot.link.children.update(_children(info.pid))
        if slot.generation > 1:
            logger.info("actor %d is back (pid %d, builds %s)", slot.actor_id, info.pid,
                        list(info.build_pids))
        return info.pid

    def _beat_ages(self, slots: list[Slot]) -> dict[Slot, float | None]:
        now = time.monotonic()
        return {slot: now - slot.link.heartbeat.value for slot in slots}

    def _hang_reason(self, slot: Slot, age: float | None) -> str:
        return f"no heartbeat for {age:.0f} s (hung in a build step?); pid {slot.link.proc.pid}"

    def _not_started_reason(self) -> str:
        return f"its builds were not up after {self.start_timeout:.0f} s"

    def _discard(self, slot: Slot) -> str:
        link = slot.link
        if link.proc.exitcode is None:  # hung: kill it (its builds would not close anyway)
            link.children.update(_children(link.proc.pid))
            link.proc.kill()
            link.proc.join(KILL_WAIT_S)
        _retire(link)
        killed = kill_tagged_processes([slot.tag])
        _kill_leftovers(link.children.values())
        return f"pid {link.proc.pid}; {len(killed)} leftover build process(es) killed"

    def _stop_actors(self) -> None:
        links = [s.link for s in self._slots if s.link is not None]
        live = [link for link in links if link.proc.exitcode is None]
        for link in live:  # remember build processes while their parent still lives
            link.children.update(_children(link.proc.pid))
            link.stop_flag.value = 1
            with contextlib.suppress(ValueError, OSError):
                link.inbox.put(messages.Command(messages.ToActor.STOP))
        deadline = time.monotonic() + self.stop_timeout
        while any(link.proc.exitcode is None for link in live) and time.monotonic() < deadline:
            _drain(live, 0.2)  # actors flush their queues before they can exit
        for link in live:
            if link.proc.exitcode is None:
                logger.warning("actor process %d did not stop within %.0f s: terminating it",
                               link.proc.pid, self.stop_timeout)
                link.children.update(_children(link.proc.pid))
                link.proc.terminate()
        for link in live:
            link.proc.join(KILL_WAIT_S)
            if link.proc.exitcode is None:
                link.proc.kill()
                link.proc.join(KILL_WAIT_S)
        _drain(live, 0.0)
        for link in links:
            _kill_leftovers(link.children.values())
            _retire(link)
        if self._tags:  # builds restarted by a stream after the last look at an actor's children
            kill_tagged_processes(self._tags)


def _retire(link: _Link) -> None:
    """Closes an incarnation's channels (its process has exited)."""
    for channel in (link.inbox, link.results):
        channel.cancel_join_thread()
        channel.close()
    link.eof = True


def _drain(links: list[_Link], timeout: float) -> None:
    """Discards reports during stop (errors are logged, not raised); waits up to ``timeout``
    for a report or an exit first."""
    readers = {link.results._reader: link for link in links if not link.eof}
    sentinels = [link.proc.sentinel for link in links if link.proc.exitcode is None]
    if timeout > 0 and (readers or sentinels):
        ready = mp.connection.wait(list(readers) + sentinels, timeout)
    else:
        ready = list(readers)
    for obj in ready:
        link = readers.get(obj)
        while link is not None and not link.eof:
            try:
                report = link.results.get(block=False)
            except queue.Empty:
                break
            except (EOFError, OSError):
                link.eof = True
                break
            if report.kind is messages.FromActor.ERROR:
                logger.error("%s", messages.ActorFailedError.from_error(report.payload))


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
    keep_freed_memory()
    lower_priority(spec.niceness)
    parent = mp.parent_process()

    def beat() -> None:
        heartbeat.value = time.monotonic()

    learner_alive = parent.is_alive if parent is not None else (lambda: True)
    code = 0
    try:
        actor_loop(spec, inbox, results, heartbeat=beat, learner_alive=learner_alive,
                   stop_requested=lambda: stop_flag.value != 0)
    except SystemExit as sigterm:  # the trainer died, or stop() stopped waiting
        code = sigterm.code if isinstance(sigterm.code, int) else 1
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the builds are closed: nothing left to save
    # The builds are closed. Skip the interpreter's teardown: torch's takes 1-2 s on a small
    # machine, and stop() waits for it.
    _close_reports(results, reader_gone=code != 0 or not learner_alive())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _close_reports(results, reader_gone: bool) -> None:
    """Flushes the reports still queued into the pipe, unless nobody will read them.

    A report larger than the pipe's buffer blocks the queue's feeder thread until the trainer
    reads it; with the trainer gone, joining that thread would hang the actor (and its builds'
    pipes) forever, so then the queued reports are dropped instead.
    """
    if reader_gone:
        results.cancel_join_thread()
    results.close()
    if not reader_gone:
        results.join_thread()


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
