"""The local backend replaces dead and hung actors (as Ray does): fake streams, then one real run.

Over in-process fake streams (no builds): an actor SIGKILLed mid-run in the sync and the async
wiring is replaced and its replacement's rollouts arrive; a hung actor is replaced after the
heartbeat timeout; a spent budget is a clear error naming the actor; repeated kills at random
times within the budget leave the run going. End to end: ``train`` on the 3DBall stand-in with
actor 0 SIGKILLed once training started finishes its steps, its replacement's build on the same
port, and nothing is left behind.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import random
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.runtime.fakes import BEHAVIOR, FakeStream
from tests.runtime.helpers import RandomKiller, assert_gone, live_descendants, tiny_config
from tests.runtime.test_wirings import host_for, spec, weights_of
from tests.waiting import wait_until
from unity_rl.runtime.actor_spec import StreamSettings
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.messages import ActorFailedError
from unity_rl.runtime.runners import AsyncRunner, SyncRunner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]   # actor processes killed and hung


class HangOnceStream(FakeStream):
    """A fake whose first incarnation hangs in step ``hang_at`` (it leaves ``marker`` behind, so
    a replacement from the same spec does not)."""

    def __init__(self, marker: str, hang_at: int = 20, **kwargs):
        super().__init__(**kwargs)
        self.marker = Path(marker)
        self.hang_at = hang_at
        self.first = not self.marker.exists()
        self.marker.touch()

    def step(self, actions):
        if self.first and self.steps + 1 >= self.hang_at:
            time.sleep(3600)
        return super().step(actions)


def recording(backend: LocalProcessBackend) -> list:
    """Wraps ``backend.receive``: the list gets (actor id, publication) of every rollout."""
    seen = []
    receive = backend.receive

    def wrapped(timeout=None):
        rollout = receive(timeout)
        if rollout is not None:
            seen.append((rollout.actor_id, rollout.publication))
        return rollout

    backend.receive = wrapped
    return seen


# ----------------------------------------------------------------------------------------------
# fake streams
# ----------------------------------------------------------------------------------------------

def test_sigkilled_actor_is_replaced_in_the_sync_wiring():
    # slow steps: the kill lands while actor 1 collects the round's rollout
    specs = [spec(0, sync=True), spec(1, sync=True, step_delay=0.05)]
    with LocalProcessBackend(specs, max_restarts=3) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        seen = recording(backend)
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        for _ in range(2):
            runner.next_update()
        old = backend.actor_pids()[1]
        os.kill(old, signal.SIGKILL)   # just published: actor 1 is collecting
        before = len(seen)
        lags = []
        for _ in range(4):
            done = runner.next_update().behaviors[BEHAVIOR]
            lags.append(done.metrics["Policy/Lag"])
        assert backend.restarts == 1 and backend.actor_restarts() == [0, 1]
        assert backend.dropped_rollouts == 1
        [first, second] = backend.incarnations()[1]
        assert first == old != second == backend.actor_pids()[1]
        assert backend.incarnation_rollouts()[1][1] == 4   # the replacement served every round
        # every later round had one rollout of each actor, acted with the newest weights
        after = seen[before:]
        assert sorted(a for a, _ in after) == [0] * 4 + [1] * 4
        assert lags == [0.0] * 4
        assert host.version == 6
        pids = backend.pids()
    assert_gone([old, *pids])
    assert live_descendants() == []


def test_sync_replacement_of_an_actor_that_had_delivered_waits_for_the_next_round():
    """Actor 1 dies after delivering its rollout of the round: its replacement must not send a
    second one for that round (the runner would get two from actor 1), only the next round's."""
    specs = [spec(0, sync=True, step_delay=0.05), spec(1, sync=True)]
    with LocalProcessBackend(specs, max_restarts=3) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        backend.broadcast(weights_of(host, 1))
        first = backend.receive(timeout=60)
        assert (first.actor_id, first.publication) == (1, 1)   # the fast one
        os.kill(backend.actor_pids()[1], signal.SIGKILL)
        second = backend.receive(timeout=60)
        assert (second.actor_id, second.publication) == (0, 1)
        extra = []
        wait_until(lambda: extra.append(backend.receive(timeout=0.2))   # until the replacement
                   or len(backend.incarnations()[1]) >= 2,               # is up
                   timeout=120, what="the replacement of actor 1", interval=0)
        extra.append(backend.receive(timeout=1.0))
        assert [r for r in extra if r is not None] == []        # it waits for new weights
        assert backend.dropped_rollouts == 0                    # it had nothing in flight
        backend.broadcast(weights_of(host, 2))
        got = sorted((r.actor_id, r.publication) for r in (backend.receive(timeout=60),
                                                           backend.receive(timeout=60)))
        assert got == [(0, 2), (1, 2)]
        assert backend.restarts == 1
    assert live_descendants() == []


def test_sigkilled_actor_is_replaced_in_the_async_wiring():
    specs = [spec(0, sync=False, segment_steps=32), spec(1, sync=False, segment_steps=32)]
    with LocalProcessBackend(specs, max_restarts=3) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR], buffer_size=64, drop_lag=4)
        runner = AsyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        while host.version < 2:
            runner.next_update()
        old = backend.actor_pids()[0]
        os.kill(old, signal.SIGKILL)
        # the other actor carries on alone; the replacement joins once it is up
        deadline = time.monotonic() + 90
        while len(backend.incarnation_rollouts()[0]) < 2 \
                or backend.incarnation_rollouts()[0][1] < 3:
            assert time.monotonic() < deadline, "the replacement sent no rollouts"
            runner.next_update()
        assert backend.restarts == 1 and backend.actor_restarts() == [1, 0]
        assert backend.dropped_rollouts == 1           # async: it was always collecting
        assert backend.incarnations()[0][0] == old != backend.actor_pids()[0]
        version = host.version
        for _ in range(3):
            runner.next_update()
        assert host.version > version
    assert_gone([old])
    assert live_descendants() == []


def test_hung_actor_is_replaced_after_the_heartbeat_timeout(tmp_path):
    hang = functools.partial(HangOnceStream, str(tmp_path / "hung"), hang_at=10, seed=1,
                             build=1)
    specs = [spec(0, sync=True), spec(1, sync=True, stream_factory=hang)]
    # 6 s: long enough that the healthy actor never looks hung on a loaded machine
    with LocalProcessBackend(specs, max_restarts=1, heartbeat_timeout=6.0) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        hung = backend.actor_pids()[1]
        t0 = time.monotonic()
        runner.next_update()                     # waits for the replacement's rollout
        waited = time.monotonic() - t0
        assert waited >= 6.0
        assert backend.restarts == 1 and backend.actor_restarts() == [0, 1]
        assert backend.dropped_rollouts == 1
        assert backend.actor_pids()[1] != hung
        for _ in range(2):
            runner.next_update()
        assert host.version == 3
    assert_gone([hung])
    assert live_descendants() == []


def test_an_actor_that_always_hangs_fails_once_its_budget_is_spent():
    specs = [spec(0, sync=True, step_delay=120.0)]   # its first step never ends
    with LocalProcessBackend(specs, max_restarts=1, heartbeat_timeout=2.0,
                             stop_timeout=2.0) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        with pytest.raises(ActorFailedError) as failure:
            runner.next_update()
        assert backend.restarts == 1 and len(backend.incarnations()[0]) == 2
        pids = backend.incarnations()[0]
    text = str(failure.value)
    assert failure.value.actor_id == 0 and failure.value.error is None
    assert text.startswith("actor 0 failed: it hung (no heartbeat for")
    assert "not restarted: all 1 lifetime restarts are used" in text
    assert_gone(pids)
    assert live_descendants() == []


@pytest.mark.parametrize("budget", ["max_restarts", "build quota"])
def test_spent_budget_is_a_clear_error_naming_the_actor(budget):
    specs = [spec(0, sync=False), spec(1, sync=False)]
    if budget == "max_restarts":
        options = {"max_restarts": 1}
        reason = "all 1 lifetime restarts are used"
    else:  # the default: the run's build restart quota (here 1 per minute)
        specs[1] = dataclasses.replace(
            specs[1], stream=StreamSettings("fake", restart_quota=(5, 1, 60.0)))
        options = {}
        reason = "1 restart(s) per 60 s allowed"
    with LocalProcessBackend(specs, **options) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR], buffer_size=64)
        runner = AsyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        runner.next_update()
        os.kill(backend.actor_pids()[1], signal.SIGKILL)
        wait_until(lambda: (runner.next_update(), backend.restarts)[1] == 1, what="a restart")
        wait_until(lambda: (runner.next_update(), backend.incarnations()[1])[1][1:],
                   what="the replacement")
        os.kill(backend.actor_pids()[1], signal.SIGKILL)
        with pytest.raises(ActorFailedError) as failure:   # once the backend sees the death
            wait_until(lambda: runner.next_update() and False, timeout=120, interval=0,
                       what="the second kill to fail the run")
        assert backend.restarts == 1
    text = str(failure.value)
    assert failure.value.actor_id == 1
    assert text.startswith("actor 1 failed: its process (pid ")
    assert "exited with code -9 without reporting an error; not restarted: " + reason in text
    assert "(restarts of this actor: 1)" in text
    assert live_descendants() == []


def test_an_actor_error_is_not_retried():
    specs = [spec(0, sync=True), spec(1, sync=True, crash_after=40)]
    with LocalProcessBackend(specs, max_restarts=-1) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        with pytest.raises(ActorFailedError) as failure:
            for _ in range(10):
                runner.next_update()
        assert backend.restarts == 0
    assert failure.value.actor_id == 1 and failure.value.error is not None
    assert "fake build crashed at step 41" in str(failure.value)
    assert "traceback in actor 1" in str(failure.value)
    assert live_descendants() == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_repeated_kills_at_random_times_within_the_budget(mode):
    sync = mode == "sync"
    specs = [spec(k, sync=sync, segment_steps=32, step_delay=0.005) for k in range(2)]
    rng = random.Random(7 if sync else 11)
    with LocalProcessBackend(specs, max_restarts=10) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR], buffer_size=64)
        runner = (SyncRunner if sync else AsyncRunner)(backend, {BEHAVIOR: host})
        runner.start()
        killer = RandomKiller(backend, rng, kills=5, pause=(0.0, 1.5)).start()
        while killer.alive():
            runner.next_update()
        assert killer.errors == []
        version = host.version
        for _ in range(3):
            runner.next_update()
        assert host.version >= version + (3 if sync else 1)
        assert backend.restarts == 5 and sum(backend.actor_restarts()) == 5
        assert backend.dropped_rollouts <= 5
    assert_gone(killer.killed)
    assert live_descendants() == []


# ----------------------------------------------------------------------------------------------
# end to end on the 3DBall stand-in
# ----------------------------------------------------------------------------------------------

def _alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            continue
    return out


def _connected(pids) -> bool:
    """Every process in ``pids`` has a TCP connection (a build connects to the trainer's port)."""
    try:
        return all(psutil.Process(pid).net_connections("tcp") for pid in pids)
    except psutil.Error:
        return False


def _ports_of(pids) -> list[int]:
    ports = []
    for pid in pids:
        try:
            args = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        ports += [int(b) for a, b in zip(args, args[1:]) if a == "--mlagents-port"]
    return ports


@pytest.mark.timeout(300)
def test_train_goes_on_after_an_actor_is_sigkilled(tmp_path, free_base_port, monkeypatch):
    from unity_rl.metrics import read_progress
    from unity_rl.training import trainer, wiring
    from unity_rl.training.wiring import make_backend

    made = []

    def remember(name, specs, **options):
        made.append(make_backend(name, specs, **options))
        return made[-1]

    monkeypatch.setattr(wiring, "make_backend", remember)
    port = free_base_port(2)
    run_dir = tmp_path / "run"
    facts: dict = {}

    def kill_when_training() -> None:
        csv = run_dir / "3DBall" / "progress.csv"
        deadline = time.monotonic() + 150
        while not (made and csv.exists() and len(csv.read_text().splitlines()) > 2):
            if time.monotonic() > deadline:
                facts["error"] = "the run did not train"
                return
            time.sleep(0.1)
        backend = made[0]
        facts["old_builds"] = backend.build_pids()[0]
        facts["old_ports"] = _ports_of(facts["old_builds"])
        facts["updates"] = len(csv.read_text().splitlines()) - 1
        facts["pid"] = backend.actor_pids()[0]
        os.kill(facts["pid"], signal.SIGKILL)
        # the replacement is up once its own build (not the dead actor's: the backend counts
        # the restart a moment before it forgets the old builds) runs with its port and has
        # connected; a single read can come too early, so poll

        def replacement_connected():
            if backend.actor_restarts()[0] != 1:
                return None
            builds = backend.build_pids()[0]
            if not builds or not set(builds).isdisjoint(facts["old_builds"]):
                return None
            ports = _ports_of(builds)
            return (builds, ports) if ports and _connected(builds) else None

        try:
            facts["new_builds"], facts["new_ports"] = wait_until(
                replacement_connected, timeout=120, what="the replacement build to connect",
                describe=lambda: (backend.actor_restarts(), backend.build_pids()))
            wait_until(lambda: not _alive(facts["old_builds"]), timeout=30,
                       what="the dead actor's builds to exit",
                       describe=lambda: _alive(facts["old_builds"]))
            facts["old_builds_alive"] = _alive(facts["old_builds"])
        except AssertionError as err:
            facts["error"] = str(err)

    thread = threading.Thread(target=kill_when_training, daemon=True)
    thread.start()
    result = trainer.train(tiny_config(port, mode="sync", max_steps=4800), run_dir,
                           resume=False, console=False)
    thread.join(60)

    assert not thread.is_alive(), facts
    assert "error" not in facts, facts
    assert not result.interrupted and result.agent_steps >= 4800
    [backend] = made
    assert backend.restarts == 1 and backend.actor_restarts() == [1, 0]
    first, second = backend.incarnations()[0]
    assert first == facts["pid"] != second
    # the dead actor's build was killed; the replacement's build listens on the same port
    assert facts["old_ports"] == [port] == facts["new_ports"]
    assert facts["old_builds_alive"] == []
    assert set(facts["new_builds"]).isdisjoint(facts["old_builds"])
    rows = read_progress(run_dir / "3DBall" / "progress.csv")
    assert len(rows) == result.policy_version >= facts["updates"] + 2
    assert all(r["policy_lag"] == 0 for r in rows)
    assert_gone([facts["pid"], *facts["old_builds"], *facts["new_builds"]])
    assert live_descendants() == []
