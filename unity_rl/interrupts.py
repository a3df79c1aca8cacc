"""Stopping on a signal: SIGTERM becomes ``Terminated`` (a ``KeyboardInterrupt``), so Ctrl-C and
SIGTERM take the same clean stop, and the exit status still says which one it was
(``exit_status``: 130 for SIGINT, 143 for SIGTERM, as a shell reports them)."""
from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread by ``sigterm_raises``)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_raises():
    """Inside, SIGTERM raises ``Terminated`` in the main thread (restored on exit); elsewhere
    than the main thread, signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_status(interrupt: BaseException | None) -> int:
    """128 + the signal's number: 143 for ``Terminated``, 130 for any other KeyboardInterrupt."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)
