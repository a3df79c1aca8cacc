"""An actor whose trainer is gone exits even with a report stuck in the results pipe.

The stuck report is one larger than the pipe's buffer that nobody reads: the queue's feeder
thread blocks on it. ``_close_reports(reader_gone=True)`` drops it and the process exits;
joining the feeder instead (what happens when the reader is still thought to be there) hangs,
which is how a SIGKILLed trainer once left its actors, and their builds, running.
"""
from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from unity_rl.runtime.local import _close_reports

pytestmark = pytest.mark.timeout(120)


def _report_then_exit(results, reader_gone: bool) -> None:
    results.put(np.zeros(1 << 20, dtype=np.uint8))   # 1 MiB: far more than a pipe buffer
    _close_reports(results, reader_gone=reader_gone)
    os._exit(0)


def _run(reader_gone: bool, timeout: float):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()   # never read here: the trainer is gone
    proc = ctx.Process(target=_report_then_exit, args=(results, reader_gone))
    proc.start()
    proc.join(timeout)
    alive = proc.is_alive()
    if alive:
        proc.kill()
        proc.join()
    return alive, proc.exitcode


def test_actor_exits_when_nobody_reads_its_reports():
    alive, code = _run(reader_gone=True, timeout=60)
    assert not alive and code == 0


def test_flushing_reports_nobody_reads_would_hang():
    alive, _ = _run(reader_gone=False, timeout=5)
    assert alive   # the hang the trainer-gone path avoids
