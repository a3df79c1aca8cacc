"""Throughput of the stand-in Unity builds (unity_builds/*.x86_64).

Two clients drive a stand-in player for a fixed wall-clock time:

* ``raw``: a minimal gRPC server that answers every message at once with a canned reply (zero
  actions) — the player's own speed, what a fast trainer would see;
* ``mlagents``: the real ``mlagents_envs.environment.UnityEnvironment`` in a plain loop
  (``step()`` with empty actions, or random ones with ``--random``) — end to end, including
  mlagents-envs' message handling on the trainer side (with this venv's protobuf: upb).

Academy steps, messages and the player's CPU time after the handshake come from its log (last line);
"steps/cpu-s" is academy steps per second of player CPU, i.e. the rate one core could sustain.

    .venv/bin/python benchmarks/standin_throughput.py [--seconds 5] [--random]
        [--cases 3DBall,3DBall-p1,Basic,VisualBall,TwoBehaviors] [--out PATH]

Prints a table and writes JSON (default benchmarks/results/standin_throughput.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from unity_rl.envs.ports import find_free_port_block  # noqa: E402

CASES = {
    # name: (build, extra args, behavior names for the raw client's canned actions)
    "3DBall": ("3DBall", [], {"3DBall?team=0": (12, 2, 0)}),
    "3DBall-p1": ("3DBall", ["--standin-decision-period", "1"], {"3DBall?team=0": (12, 2, 0)}),
    "Basic": ("Basic", [], {"Basic?team=0": (1, 0, 1)}),
    "VisualBall": ("VisualBall", [], {"VisualBall?team=0": (4, 2, 0)}),
    "TwoBehaviors": (
        "TwoBehaviors",
        [],
        {"3DBall?team=0": (4, 2, 0), "Basic?team=0": (2, 0, 1)},
    ),
}

_STATS = re.compile(r"academy steps (\d+), messages (\d+), resets (\d+), cpu ([0-9.]+) s")


def _player_stats(log_path: Path) -> dict:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if log_path.exists():
            match = None
            for line in log_path.read_text().splitlines():
                match = _STATS.search(line) or match
            if match:
                steps, messages, resets, cpu = match.groups()
                return {
                    "academy_steps": int(steps),
                    "messages": int(messages),
                    "player_cpu_s": float(cpu),
                }
        time.sleep(0.05)
    raise RuntimeError(f"no final statistics line in {log_path}")


def _canned_replies(behaviors: dict) -> tuple[bytes, bytes, bytes, bytes]:
    from mlagents_envs.communicator_objects.agent_action_pb2 import AgentActionProto
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    hello = UnityMessageProto()
    hello.header.status = 200
    init = hello.unity_input.rl_initialization_input
    init.seed = 0
    init.communication_version = "1.5.0"
    init.package_version = "1.1.0"
    init.capabilities.baseRLCapabilities = True
    init.num_areas = 1
    reset = UnityMessageProto()
    reset.header.status = 200
    reset.unity_input.rl_input.command = 1
    step = UnityMessageProto()
    step.header.status = 200
    step.unity_input.rl_input.command = 0
    for name, (n, cont, branches) in behaviors.items():
        for _ in range(n):
            action = AgentActionProto()
            action.continuous_actions.extend([0.0] * cont)
            action.discrete_actions.extend([0] * branches)
            action.vector_actions_deprecated.extend([0.0] * (cont + branches))
            step.unity_input.rl_input.agent_actions[name].value.append(action)
    close = UnityMessageProto()
    close.header.status = 400
    return (
        hello.SerializeToString(),
        reset.SerializeToString(),
        step.SerializeToString(),
        close.SerializeToString(),
    )


def _count_decisions(request: bytes) -> int:
    """Agent infos that request a decision (not done) in a UnityMessageProto."""
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    infos = UnityMessageProto.FromString(request).unity_output.rl_output.agentInfos
    return sum(1 for lst in infos.values() for info in lst.value if not info.done)


def run_raw(build: str, args: list[str], behaviors: dict, seconds: float,
            count_decisions: bool = False) -> dict:
    """A do-nothing trainer: answers each message at once with zero actions.

    ``count_decisions``: also count the agent infos that request decisions (agent-steps, what
    ``env_throughput.py`` reports), parsing each message with protobuf (upb: microseconds)."""
    hello, reset, step, close = _canned_replies(behaviors)
    state = {"calls": 0, "stop": False, "t0": None, "decisions": 0}
    done = threading.Event()

    def exchange(request: bytes, context) -> bytes:
        state["calls"] += 1
        if count_decisions and state["calls"] > 2 and not done.is_set():
            state["decisions"] += _count_decisions(request)
        if state["calls"] == 1:
            return hello
        if state["calls"] == 2:
            state["t0"] = time.perf_counter()
            return reset
        if time.perf_counter() - state["t0"] >= seconds:
            state["t1"] = time.perf_counter()
            done.set()
            return close
        return step

    port = find_free_port_block(1, start=30000 + os.getpid() % 20000)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "communicator_objects.UnityToExternalProto",
                {"Exchange": grpc.unary_unary_rpc_method_handler(exchange)},
            ),
        )
    )
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "player.log"
        proc = subprocess.Popen(
            [str(REPO / "unity_builds" / f"{build}.x86_64"), "-nographics", "-batchmode",
             "--mlagents-port", str(port), "-logFile", str(log), *args],
            start_new_session=True,
        )
        try:
            if not done.wait(seconds + 30):
                raise RuntimeError("raw benchmark did not finish")
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            server.stop(0)
        stats = _player_stats(log)
    stats["wall_s"] = state["t1"] - state["t0"]
    if count_decisions:
        stats["agent_steps"] = state["decisions"]
    return stats


def run_mlagents(build: str, args: list[str], seconds: float, random_actions: bool) -> dict:
    from mlagents_envs.environment import UnityEnvironment

    port = find_free_port_block(1, start=30000 + (os.getpid() * 7) % 20000)
    with tempfile.TemporaryDirectory() as tmp:
        env = UnityEnvironment(
            file_name=str(REPO / "unity_builds" / build),
            base_port=port,
            no_graphics=True,
            timeout_wait=30,
            additional_args=args,
            log_folder=tmp,
        )
        try:
            env.reset()
            names = list(env.behavior_specs)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                if random_actions:
                    for name in names:
                        decision, _ = env.get_steps(name)
                        env.set_actions(
                            name, env.behavior_specs[name].action_spec.random_action(len(decision))
                        )
                env.step()
            wall = time.perf_counter() - t0
        finally:
            env.close()
        stats = _player_stats(Path(tmp) / "Player-0.log")
    stats["wall_s"] = wall
    return stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="wall time per run")
    parser.add_argument("--random", action="store_true", help="random actions (mlagents client)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--clients", default="raw,mlagents", help="raw, mlagents or both")
    parser.add_argument(
        "--out", default=str(REPO / "benchmarks" / "results" / "standin_throughput.json")
    )
    opts = parser.parse_args(argv)
    rows = []
    for case in opts.cases.split(","):
        build, args, behaviors = CASES[case]
        for client in opts.clients.split(","):
            if client == "raw":
                stats = run_raw(build, args, behaviors, opts.seconds)
            else:
                stats = run_mlagents(build, args, opts.seconds, opts.random)
            wall = stats["wall_s"]
            row = {
                "case": case,
                "client": client,
                **stats,
                "academy_steps_per_s": stats["academy_steps"] / wall,
                "messages_per_s": stats["messages"] / wall,
                "academy_steps_per_player_cpu_s": stats["academy_steps"]
                / max(stats["player_cpu_s"], 1e-9),
            }
            rows.append(row)
            print(
                f"{case:<13} {client:<9} {row['academy_steps_per_s']:>10.0f} steps/s "
                f"{row['messages_per_s']:>9.0f} msg/s "
                f"{row['academy_steps_per_player_cpu_s']:>10.0f} steps/cpu-s",
                flush=True,
            )
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "standin_throughput",
        "seconds_per_run": opts.seconds,
        "random_actions": opts.random,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=2))
    print(f"\n{'case':<13} {'client':<9} {'steps/s':>10} {'msg/s':>9} {'steps/cpu-s':>12}")
    for r in rows:
        print(
            f"{r['case']:<13} {r['client']:<9} {r['academy_steps_per_s']:>10.0f} "
            f"{r['messages_per_s']:>9.0f} {r['academy_steps_per_player_cpu_s']:>12.0f}"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
