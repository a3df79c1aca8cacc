"""The lock that several processes share inside a shared replay segment, and its bounded waits.

On Linux/glibc (``ROBUST_MUTEXES``) the lock is a ``RobustMutex``: a process-shared *robust*
pthread mutex placed in the first ``MUTEX_BYTES`` of the segment. The kernel records its owner,
and the next process to wait for it is woken with "owner died" instead of waiting forever; that
process must then repair what the dead owner may have left half-done (the shared buffer does:
``unity_rl.replay.shared_buffer``). Where robust mutexes are missing the lock is a
``FallbackLock`` around a ``multiprocessing`` lock: the same bounded waits, but a dead holder can
only be reported, not recovered.

Both wait in slices (``acquire_slice``) so that signals are still handled; ``acquire_bounded``
checks the holder between slices, and a wait that lasts longer than the caller's timeout
(``DEFAULT_LOCK_TIMEOUT_S`` unless told) raises ``ReplayLockTimeout`` naming the holder and
whether it is alive. Every wait is bounded.
"""
from __future__ import annotations

import ctypes
import errno
import os
import time
from typing import Any, Callable

DEFAULT_LOCK_TIMEOUT_S = 30.0
"""How long a shared buffer's user waits for a live holder of its lock before raising."""


class ReplayLockTimeout(TimeoutError):
    """A shared replay buffer's lock stayed held too long; the message names the holder."""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (0 and below: no process)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped by its parent) holds nothing any more
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load_pthread() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for fn in ("pthread_mutexattr_setrobust", "pthread_mutexattr_setpshared",
                   "pthread_mutex_consistent", "pthread_mutex_clocklock"):
            getattr(libc, fn)
    except (OSError, AttributeError):
        return None
    libc.pthread_mutex_clocklock.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                             ctypes.POINTER(_Timespec)]
    for fn in ("pthread_mutex_unlock", "pthread_mutex_consistent", "pthread_mutex_init"):
        getattr(libc, fn).argtypes = [ctypes.c_void_p] + (
            [ctypes.c_void_p] if fn == "pthread_mutex_init" else [])
    return libc


_PTHREAD = _load_pthread() if os.name == "posix" else None
ROBUST_MUTEXES = _PTHREAD is not None
"""Whether this platform has process-shared robust mutexes (else ``FallbackLock``)."""
MUTEX_BYTES = 64
"""Room for a pthread_mutex_t (40 bytes on x86-64 glibc, 48 on aarch64)."""
_CLOCK_MONOTONIC = 1  # Linux; time.monotonic() reads the same clock


class RobustMutex:
    """A process-shared robust pthread mutex placed in a shared-memory buffer.

    ``acquire_slice`` says 'owner_died' when the previous owner died holding it (the caller must
    repair what that owner may have left half-done); waits are sliced so signals are still handled.
    """

    def __init__(self, buf: memoryview, offset: int, create: bool):
        self._anchor = ctypes.c_char.from_buffer(buf, offset)  # released in close()
        self._addr = ctypes.addressof(self._anchor)
        if create:
            attr = ctypes.create_string_buffer(64)
            lib = _PTHREAD
            if (lib.pthread_mutexattr_init(attr) or lib.pthread_mutexattr_setpshared(attr, 1)
                    or lib.pthread_mutexattr_setrobust(attr, 1)
                    or lib.pthread_mutex_init(self._addr, attr)):
                raise OSError("cannot initialise a robust process-shared mutex")
            lib.pthread_mutexattr_destroy(attr)

    def acquire_slice(self, seconds: float) -> str:
        """'ok', 'owner_died' or 'timeout' after waiting at most ``seconds``."""
        deadline = time.monotonic() + max(seconds, 0.0)
        ts = _Timespec(int(deadline), int((deadline % 1.0) * 1e9))
        rc = _PTHREAD.pthread_mutex_clocklock(self._addr, _CLOCK_MONOTONIC, ctypes.byref(ts))
        if rc == 0:
            return "ok"
        if rc == errno.EOWNERDEAD:
            _PTHREAD.pthread_mutex_consistent(self._addr)
            return "owner_died"
        if rc == errno.ETIMEDOUT:
            return "timeout"
        raise OSError(rc, f"pthread_mutex_clocklock: {os.strerror(rc)}")

    def release(self) -> None:
        _PTHREAD.pthread_mutex_unlock(self._addr)

    def close(self) -> None:
        self._anchor = None


class FallbackLock:
    """Where robust mutexes are missing: a multiprocessing lock, bounded waits, no recovery (a
    dead holder is named in the error)."""

    def __init__(self, lock: Any):
        self.lock = lock

    def acquire_slice(self, seconds: float) -> str:
        """'ok' or 'timeout' after waiting at most ``seconds``."""
        return "ok" if self.lock.acquire(timeout=max(seconds, 0.0)) else "timeout"

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        pass


def acquire_bounded(mutex: RobustMutex | FallbackLock, timeout: float,
                    holder: Callable[[], int]) -> str:
    """Takes ``mutex``, waiting at most ``timeout`` seconds in slices of 0.5 s: 'ok', or
    'owner_died' (the caller now holds it and must repair). ``holder()`` reads the pid recorded
    as holding it (0: none known). Raises ``ReplayLockTimeout`` naming the holder when the wait
    runs out, or at once when a ``FallbackLock``'s holder is dead (it can never be freed)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        state = mutex.acquire_slice(min(0.5, max(remaining, 0.0)))
        if state != "timeout":
            return state
        pid = holder()
        if isinstance(mutex, FallbackLock) and pid and pid != os.getpid() \
                and not pid_alive(pid):
            raise ReplayLockTimeout(
                f"the shared replay buffer's lock is held by process {pid}, which is "
                f"dead (killed while holding it); this platform cannot recover it")
        if remaining <= 0:
            alive = "alive" if pid_alive(pid) else "dead"
            who = f"process {pid} ({alive})" if pid else "an unknown process"
            raise ReplayLockTimeout(
                f"the shared replay buffer's lock has been held by {who} for more than "
                f"{timeout:.1f} s (stopped or hung?)")
