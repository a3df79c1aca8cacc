"""``keep_freed_memory``: a large array comes from the heap, and once freed its memory stays
there for the next one, instead of fresh pages from the OS (mmap) that are unmapped again at
each free; ``UNITY_RL_KEEP_FREED_MEMORY=0`` leaves the allocator as it was (glibc's counters,
``mallinfo2``). Each case runs in its own interpreter (the setting is
process-wide)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from unity_rl.runtime.allocator import OPT_OUT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or
                                platform.libc_ver()[0] != "glibc", reason="glibc only")

SCRIPT = """
import ctypes, json, numpy as np
from unity_rl.runtime.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
applied = keep_freed_memory()
a = np.ones(200 * 2**20, np.uint8)
during = libc.mallinfo2()
del a
after = libc.mallinfo2()
print(json.dumps({"applied": applied, "mmapped_during": during.hblkhd,
                  "heap_free_after": after.fordblks}))
"""


def _run(opt_out: bool) -> dict:
    env = {**os.environ, OPT_OUT: "0" if opt_out else "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_large_array_comes_from_the_heap_and_its_memory_stays_for_the_next():
    kept, default = _run(opt_out=False), _run(opt_out=True)
    assert kept["applied"] and not default["applied"]
    size = 200 * 2**20
    assert default["mmapped_during"] >= size   # glibc: fresh pages from the OS, unmapped after
    assert kept["mmapped_during"] < size       # from the heap instead
    assert kept["heap_free_after"] >= size     # and kept there, free for the next buffer
