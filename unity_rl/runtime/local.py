"""The local backend: one spawn-context process per actor, multiprocessing queues between them.

Connections (one per arrow):
- learner -> actor k: ``inboxes[k]`` (a ``Queue`` of ``Command``: weights or stop), plus
  ``stop_events[k]`` so that a stop is seen within one stream step, even mid-segment;
- actors -> learner: one shared ``results`` queue of ``Report`` (ready, segment, error);
- liveness: ``heartbeats[k]``, a shared double the actor sets to ``time.monotonic()`` after every
  stream step and every wait slice; the learner never polls in a loop: it blocks on ``results``
  in slices of ``LIVENESS_SLICE_S`` and checks exit codes and heartbeat ages between slices.

No orphans: actors ignore SIGINT (the trainer decides how to stop), turn SIGTERM into SystemExit
(so their ``finally`` closes the builds), ask Linux for SIGTERM when the trainer dies
(PR_SET_PDEATHSIG) and also stop when ``parent_process()`` is gone. ``stop()`` asks politely,
then terminates, then kills the actor and whatever build processes it had started.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
from typing import Sequence

import psutil

from unity_rl.runtime.actor import ActorSpec, actor_loop
from unity_rl.runtime.backend import ActorBackend
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
"""Longest blocking wait on the results queue between liveness checks."""


class LocalProcessBackend(ActorBackend):
    """K actors in K local processes (spawn context: no forked torch or gRPC state)."""

    def __init__(self, specs: Sequence[ActorSpec], *, heartbeat_timeout: float | None = None,
                 start_timeout: float | None = None, stop_timeout: float = 20.0):
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
        self._procs: list = []
        self._inboxes: list = []
        self._stop_events: list = []
        self._heartbeats: list = []
        self._results = None
        self._infos: dict[int, ActorInfo] = {}
        self._children: dict[int, dict[int, psutil.Process]] = {}
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> list[ActorInfo]:
        ctx = self._ctx
        self._results = ctx.Queue()
        try:
            for spec in self.specs:
                inbox, stop_event = ctx.Queue(), ctx.Event()
                heartbeat = ctx.RawValue("d", time.monotonic())
                proc = ctx.Process(
                    target=_actor_process_main,
                    args=(spec, inbox, self._results, heartbeat, stop_event),
                    name=f"unity_rl-actor-{spec.actor_id}", daemon=True)
                with _sigint_ignored():  # inherited through exec: Ctrl-C during the actor's
                    proc.start()         # imports reaches the trainer only
                self._procs.append(proc)
                self._inboxes.append(inbox)
                self._stop_events.append(stop_event)
                self._heartbeats.append(heartbeat)
            deadline = time.monotonic() + self.start_timeout
            while len(self._infos) < self.num_actors:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = [k for k in range(self.num_actors) if k not in self._infos]
                    raise ActorFailedError(missing[0], f"its builds were not up after "
                                                       f"{self.start_timeout:.0f} s")
                report = self._next_report(min(remaining, LIVENESS_SLICE_S))
                if report is None:
                    continue
                if report.kind is not FromActor.READY:
                    raise RuntimeError(f"actor {report.actor_id} sent {report.kind} before ready")
                self._infos[report.actor_id] = report.payload
                self._heartbeats[report.actor_id].value = time.monotonic()
        except BaseException:
            self.stop()
            raise
        return [self._infos[k] for k in range(self.num_actors)]

    def broadcast(self, weights: PolicyWeights) -> None:
        command = Command(ToActor.WEIGHTS, weights)
        for inbox in self._inboxes:
            inbox.put(command)

    def receive(self, timeout: float | None = None) -> Rollout | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            slice_s = LIVENESS_SLICE_S
            if deadline is not None:
                slice_s = max(0.0, min(slice_s, deadline - time.monotonic()))
            report = self._next_report(slice_s)
            if report is not None:
                if report.kind is FromActor.SEGMENT:
                    return report.payload
                raise RuntimeError(f"actor {report.actor_id} sent an unexpected {report.kind}")
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for proc in self._procs:  # remember build processes while their parent still lives
            self._children[proc.pid] = _children(proc.pid)
        for event, inbox in zip(self._stop_events, self._inboxes):
            event.set()
            inbox.put(Command(ToActor.STOP))
        deadline = time.monotonic() + self.stop_timeout
        while any(p.is_alive() for p in self._procs) and time.monotonic() < deadline:
            self._drain(0.2)  # actors flush their queues before they can exit
        for proc in self._procs:
            if proc.is_alive():
                logger.warning("actor %s did not stop within %.0f s: terminating it",
                               proc.name, self.stop_timeout)
                self._children[proc.pid].update(_children(proc.pid))
                proc.terminate()
        for proc in self._procs:
            proc.join(5.0)
            if proc.is_alive():
                proc.kill()
                proc.join(5.0)
        for proc in self._procs:
            _kill_leftovers(self._children.get(proc.pid, {}).values())
        self._drain(0.0)
        for inbox in self._inboxes:
            inbox.cancel_join_thread()
            inbox.close()
        if self._results is not None:
            self._results.cancel_join_thread()
            self._results.close()

    def pids(self) -> list[int]:
        out = [p.pid for p in self._procs if p.pid]
        for info in self._infos.values():
            out.extend(info.build_pids)
        return out

    # -- internals ------------------------------------------------------------------------------
    def _next_report(self, timeout: float) -> Report | None:
        """One report, or None after ``timeout``; raises for failed, dead or hung actors."""
        try:
            report = self._results.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            self._check_liveness()
            return None
        if report.kind is FromActor.ERROR:
            raise ActorFailedError.from_error(report.payload)
        return report

    def _check_liveness(self) -> None:
        now = time.monotonic()
        for k, proc in enumerate(self._procs):
            if proc.exitcode is not None:
                self._raise_final_error()  # an error report may still be on its way
                raise ActorFailedError(k, f"its process (pid {proc.pid}) exited with code "
                                          f"{proc.exitcode} without reporting an error")
            if k in self._infos and now - self._heartbeats[k].value > self.heartbeat_timeout:
                raise ActorFailedError(k, f"no heartbeat for {now - self._heartbeats[k].value:.0f}"
                                          f" s (hung in a build step?); pid {proc.pid}")

    def _raise_final_error(self) -> None:
        try:
            while True:
                report = self._results.get(timeout=0.5)
                if report.kind is FromActor.ERROR:
                    raise ActorFailedError.from_error(report.payload)
        except queue.Empty:
            return

    def _drain(self, timeout: float) -> None:
        """Discards reports during stop; failures are logged, not raised."""
        if self._results is None:
            return
        try:
            while True:
                report = self._results.get(timeout=timeout) if timeout > 0 \
                    else self._results.get_nowait()
                if report.kind is FromActor.ERROR:
                    logger.error("%s", ActorFailedError.from_error(report.payload))
        except queue.Empty:
            return
        except (EOFError, OSError) as err:  # the queue's pipe is gone: nothing left to drain
            logger.debug("results queue closed while draining: %s", err)


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


def _actor_process_main(spec: ActorSpec, inbox, results, heartbeat, stop_event) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _die_with_parent()
    _limit_torch_threads(spec.torch_threads)
    parent = mp.parent_process()

    def beat() -> None:
        heartbeat.value = time.monotonic()

    actor_loop(spec, inbox, results, heartbeat=beat,
               learner_alive=(parent.is_alive if parent is not None else (lambda: True)),
               stop_requested=stop_event.is_set)
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


def _limit_torch_threads(num_threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, num_threads))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError as err:  # already fixed once parallel work ran; harmless
        logger.debug("interop threads already set: %s", err)


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
