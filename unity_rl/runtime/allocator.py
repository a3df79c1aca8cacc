"""Large temporary arrays reuse freed memory instead of fresh pages from the OS (glibc).

A learner's camera buffers are hundreds of MB (a 2,560-step Visual3DBall buffer is 870 MB of
float32 rows), an actor stacks ~90 MB trajectories, and every one of them is allocated and
freed again at each update. glibc serves allocations above its mmap threshold (at most 32 MB,
dynamically) with fresh pages from the OS, so each one pays a page fault per 4 kB touched;
``np.concatenate`` of one Visual3DBall buffer spent 2.2 s of a ~8 s update on it. With the mmap
and trim thresholds raised (what ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` do
when set before a process starts), freed blocks stay in the heap and the next buffer reuses
them. The cost: a process's resident memory stays at its peak instead of shrinking between
updates.

``keep_freed_memory()`` is called by the processes unity_rl hosts (the trainer at ``train``, each
local or Ray actor at start), never at import. ``UNITY_RL_KEEP_FREED_MEMORY=0`` turns it off;
elsewhere than Linux with glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 30
"""Allocations up to 1 GiB come from the heap; up to 1 GiB of free heap top stays mapped."""
OPT_OUT = "UNITY_RL_KEEP_FREED_MEMORY"


def keep_freed_memory() -> bool:
    """Raises glibc's mmap and trim thresholds for this process; True when it did (module doc)."""
    if os.environ.get(OPT_OUT, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError) as err:  # musl and others: no mallopt
        logger.debug("mallopt unavailable (%s): large arrays keep the default allocator", err)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                         THRESHOLD))
