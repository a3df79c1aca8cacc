"""Control messages beside weights: both backends deliver a ``Control`` to every actor, the
builds see the new environment parameters, and a re-created actor starts with the latest
control state.

Over fake streams (fast, local backend): every actor applies each change once, between
collections; a SIGKILLed actor's replacement starts with every change so far, merged. On the
3DBall stand-in, local and Ray: each build's own log says it received the parameter (the
stand-in logs what the environment-parameters side channel brings), and so does the build of
a re-created actor.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.runtime.fakes import BEHAVIOR, FakeStream
from tests.runtime.helpers import BALL, assert_gone, live_descendants, tiny_config
from tests.runtime.test_wirings import host_for, spec, weights_of
from unity_rl.training import wiring
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.algorithm import HostContext
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.messages import BehaviorWeights, Control, PolicyWeights

pytestmark = pytest.mark.timeout(240)


def changes(path: Path) -> list[dict]:
    """The changes a fake stream logged: [{"pid": ..., "set": {...}}, ...]."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def pump_until(backend, condition, timeout: float = 90.0, what: str = "condition") -> None:
    """Receives (and drops) rollouts until ``condition()`` holds: the supervisor runs only
    inside the backend's calls."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        backend.receive(timeout=0.2)


def test_control_changes_merge_name_by_name():
    state = Control(env_parameters={"gravity": 1.0, "mass": 2.0})
    assert state.updated(Control(env_parameters={"mass": 3.0})) == \
        Control(env_parameters={"gravity": 1.0, "mass": 3.0})
    assert state.updated(Control()) is state   # a change that sets nothing changes nothing


def test_actor_applies_its_start_control_before_the_first_reset(tmp_path):
    log = tmp_path / "params"
    actor = Actor(dataclasses.replace(
        spec(0, sync=True), control=Control(env_parameters={"scale": 2.0}),
        stream_factory=functools.partial(FakeStream, param_log=str(log))))
    try:
        actor.start()
        assert [c["set"] for c in changes(log)] == [{"scale": 2.0}]
        actor.apply_control(Control(env_parameters={"mass": 0.5}))
        assert actor.stream.parameters == {"scale": 2.0, "mass": 0.5}
    finally:
        actor.close()


def test_local_control_reaches_every_actor_and_a_replacement_starts_with_all_of_it(tmp_path):
    logs = [tmp_path / "params0", tmp_path / "params1"]
    specs = [spec(k, sync=False, segment_steps=32, param_log=str(logs[k])) for k in range(2)]
    with LocalProcessBackend(specs, max_restarts=2) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        backend.control(Control(env_parameters={"gravity": 0.5}))   # before any weights
        backend.broadcast(weights_of(host, 1))
        backend.control(Control(env_parameters={"mass": 2.0}))
        pump_until(backend, lambda: all(len(changes(log)) == 2 for log in logs),
                   what="both changes at both actors")
        for k, log in enumerate(logs):
            assert [c["set"] for c in changes(log)] == [{"gravity": 0.5}, {"mass": 2.0}]
            assert {c["pid"] for c in changes(log)} == {backend.actor_pids()[k]}
        old = backend.actor_pids()[1]
        os.kill(old, signal.SIGKILL)
        pump_until(backend, lambda: len(backend.incarnations()[1]) == 2, what="the replacement")
        new = backend.actor_pids()[1]
        first = [c for c in changes(logs[1]) if c["pid"] == new][0]
        assert first["set"] == {"gravity": 0.5, "mass": 2.0}   # the latest state, at start
        assert backend.restarts == 1 and len(changes(logs[0])) == 2  # actor 0: nothing again
    assert_gone([old, new])
    assert live_descendants() == []


# ----------------------------------------------------------------------------------------------
# the 3DBall stand-in: the builds see the parameters
# ----------------------------------------------------------------------------------------------

def ball_run(tmp_path: Path, port: int):
    """Specs of two actors with one 3DBall build each (async), and a publication for them."""
    cfg = tiny_config(port, mode="async", num_envs=2, num_actors=2)
    algorithms, default = wiring.make_algorithms(cfg)
    specs = wiring.actor_specs(cfg, algorithms, default, tmp_path / "logs", seed=3)
    [algorithm] = algorithms.values()

    def weights(info) -> PolicyWeights:
        [(name, behavior)] = info.behaviors.items()
        host = algorithm.make_host(behavior, HostContext("cpu", 0, 2, "async", 100))
        return PolicyWeights(1, {name: BehaviorWeights(0, host.weights())})

    return specs, weights


def build_log(tmp_path: Path, build: int) -> str:
    path = tmp_path / "logs" / f"Player-{build}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def saw(tmp_path: Path, build: int, line: str, pid: int | None = None) -> bool:
    """True when build ``build``'s log (of the build with ``pid``, if given) has ``line``."""
    text = build_log(tmp_path, build)
    if pid is not None and f"pid {pid}" not in text:
        return False
    return f"environment parameter: {line}" in text


def check_builds_see_control(backend, tmp_path: Path, weights, kill) -> None:
    """Both builds get a change; actor 0 is killed (``kill(backend)``); its replacement's
    build (a new process, on the same port, logging to the same file) gets the state too."""
    infos = backend.start()
    assert not saw(tmp_path, 0, "gravity = 3.5")
    backend.broadcast(weights(infos[0]))
    backend.control(Control(env_parameters={"gravity": 3.5}))
    pump_until(backend, lambda: saw(tmp_path, 0, "gravity = 3.5")
               and saw(tmp_path, 1, "gravity = 3.5"), what="the parameter in both builds' logs")
    old_builds = backend.build_pids()[0]
    kill(backend)
    pump_until(backend, lambda: len(backend.incarnations()[0]) == 2, what="the replacement")
    [new_build] = backend.build_pids()[0]
    assert new_build not in old_builds
    pump_until(backend, lambda: saw(tmp_path, 0, "gravity = 3.5", pid=new_build), timeout=30,
               what="the parameter in the replacement's build log")
    assert backend.restarts == 1


def test_a_stream_sends_parameters_now_and_to_builds_it_restarts_later(tmp_path,
                                                                       free_base_port):
    """The path under the actor: ``AgentStream.set_environment_parameters`` reaches the build
    with the next step, and a build the stream restarts alone is launched with the values."""
    import numpy as np
    import psutil

    from unity_rl.envs.agent_stream import AgentStream
    from unity_rl.envs.launcher import RestartQuota

    with AgentStream(str(BALL), base_port=free_base_port(1), timeout_wait=30,
                     log_dir=str(tmp_path / "logs"), env_parameters={"mass": 1.5},
                     restart_quota=RestartQuota(2, -1, 60.0)) as stream:
        [name] = stream.behavior_names
        zeros = {name: np.zeros((len(stream.reset_all()[name].decisions.keys), 2), np.float32)}
        assert saw(tmp_path, 0, "mass = 1.5") and not saw(tmp_path, 0, "scale = 0.75")
        stream.set_environment_parameters({"scale": 0.75})
        stream.step_all(zeros)
        assert saw(tmp_path, 0, "scale = 0.75")
        psutil.Process(stream.builds.pids()[0]).kill()
        results = stream.step_all(zeros)
        assert results[name].restarted
        [pid] = stream.builds.pids()
        assert saw(tmp_path, 0, "scale = 0.75", pid=pid) and saw(tmp_path, 0, "mass = 1.5")


@pytest.mark.slow
def test_local_builds_see_control_and_so_does_a_replacement(tmp_path, free_base_port):
    specs, weights = ball_run(tmp_path, free_base_port(2))

    def kill(backend) -> None:
        os.kill(backend.actor_pids()[0], signal.SIGKILL)

    with wiring.make_backend("local", specs, max_restarts=1) as backend:
        check_builds_see_control(backend, tmp_path, weights, kill)
        pids = backend.pids()
    assert_gone(pids)
    assert live_descendants() == []


@pytest.mark.ray
@pytest.mark.slow
def test_ray_builds_see_control_and_so_does_a_replacement(ray_cluster, tmp_path,
                                                          free_base_port):
    ray = pytest.importorskip("ray")
    specs, weights = ball_run(tmp_path, free_base_port(2))

    def kill(backend) -> None:
        ray.kill(backend.actor_handles()[0], no_restart=True)

    backend = wiring.make_backend("ray", specs, address=ray_cluster.address, max_restarts=1)
    try:
        check_builds_see_control(backend, tmp_path, weights, kill)
        pids = backend.pids()
    finally:
        backend.stop()
    assert_gone(pids)
