"""Port bookkeeping for builds: build i of a run listens on ``base_port + worker_id_start + i``.

No module state: every function checks the live system. ``find_free_port_block`` is for tests
and benchmarks that must not collide with other runs on the same machine.
"""
from __future__ import annotations

import socket
import tempfile
import time
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from unity_rl.errors import UserError


class PortInUseError(UserError, RuntimeError):
    """A build's port is taken; the message names the port and, when known, the owner."""


def port_owner(port: int) -> str | None:
    """'pid 123 (python3)' for the process listening on ``port``, or None when unknown."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, PermissionError, OSError):
        return None
    for conn in conns:
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            if conn.pid is None:
                return "an unknown process"
            try:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
            except psutil.Error:
                return f"pid {conn.pid}"
    return None


def is_port_free(port: int) -> bool:
    """True when nothing listens on ``port`` on any local address (what gRPC will bind)."""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((addr, port))
            except OSError as err:
                if family == socket.AF_INET6 and err.errno in (97, 99):  # no IPv6 here
                    continue
                return False
    return True


PORT_RELEASE_WAIT_S = 3.0
"""How long a launch waits for a taken port before it reports it: a build of a just-killed actor
can still be on its way out when the actor's replacement starts its own."""


def check_port_free(port: int, *, build: int, wait_s: float = PORT_RELEASE_WAIT_S) -> None:
    """Raises PortInUseError naming ``port``, its owner and what to do, when it is taken (and
    stays taken for ``wait_s`` seconds)."""
    deadline = time.monotonic() + wait_s
    while not is_port_free(port):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    else:
        return
    owner = port_owner(port)
    who = f" by {owner}" if owner else ""
    raise PortInUseError(
        f"Port {port} for build {build} is already in use{who}. Another run (or a build left "
        f"over from one) is listening there: stop it, or pick free ports with --base-port "
        f"(build i uses base_port + i)."
    )


def _port_lock(port: int) -> FileLock:
    # not thread-local: builds are launched from worker threads and stopped from the main one
    return FileLock(str(Path(tempfile.gettempdir()) / f"unity_rl-port-{port}.lock"),
                    thread_local=False)


def is_port_claimed(port: int) -> bool:
    """True when another unity_rl run holds the lock of ``port`` (see acquire_port_lock)."""
    lock = _port_lock(port)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def acquire_port_lock(port: int) -> FileLock:
    """Claims ``port`` for this process until the lock is released.

    gRPC servers bind with SO_REUSEPORT, so two runs that check a port at the same moment could
    both bind it and receive each other's builds. An exclusive lock file per port (in the temp
    folder, released by the OS if the process dies) closes that race between unity_rl runs.
    """
    lock = _port_lock(port)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise PortInUseError(
            f"Port {port} is claimed by another unity_rl run on this machine (lock file "
            f"{lock.lock_file}). Use another --base-port for one of the runs."
        ) from None
    return lock


def find_free_port_block(count: int, start: int = 20000, stop: int = 60000) -> int:
    """First port p >= start such that p..p+count-1 are all free right now."""
    port = start
    while port + count <= stop:
        taken = next((p for p in range(port, port + count)
                      if not is_port_free(p) or is_port_claimed(p)), None)
        if taken is None:
            return port
        port = taken + 1
    raise PortInUseError(f"No block of {count} free ports between {start} and {stop}.")
