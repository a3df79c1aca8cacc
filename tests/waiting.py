"""Waiting on another process or thread in a test: poll a condition up to a deadline.

A test that waits on something another process changes (a build connecting, a replacement
actor, a file being written, a process exiting) never sleeps a fixed time, counts a fixed number
of iterations, or reads the state once: on a loaded machine the other side can be arbitrarily
late. It polls with ``wait_until`` instead, whose deadline is generous (it only costs time when
the test fails) and whose failure message says what it waited for and what it saw last.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, what: str = "a condition",
               interval: float = 0.05, describe: Callable[[], object] | None = None) -> T:
    """Calls ``predicate()`` every ``interval`` s until it returns something truthy; returns it.

    Raises ``AssertionError("timed out after {timeout} s waiting for {what} ...")`` once
    ``timeout`` seconds have passed, with the last value seen (or ``describe()``, when given,
    to say more about the state at the deadline). The predicate is always called at least once
    more after the deadline, so a slow poll never fails on a condition that did come true.
    """
    deadline = time.monotonic() + timeout
    while True:
        late = time.monotonic() >= deadline
        value = predicate()
        if value:
            return value
        if late:
            seen = describe() if describe is not None else value
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} "
                                 f"(last seen: {seen!r})")
        time.sleep(interval)
