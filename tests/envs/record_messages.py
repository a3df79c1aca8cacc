"""Records step messages sent by the stand-in builds, for tests/envs/test_protocol.py.

Drives each build from a bare gRPC server (raw bytes in and out, random actions) and keeps a
selection of the ``UnityMessageProto`` bytes it sends: the first (brain parameters), every one
with a terminal info (capped), some where nothing decides (empty lists), and a few plain steps.
Each file in ``tests/envs/data/messages/`` is a sequence of [uint32 little-endian length |
message] records.

    .venv/bin/python tests/envs/record_messages.py
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
REPO = Path(__file__).resolve().parents[2]

# ``load``, ``CASES`` and ``DATA`` import nothing else: test_protocol.py also reads the
# recordings from a venv with mlagents-envs' own pins, where unity_rl is not installed.
DATA = Path(__file__).resolve().parent / "data" / "messages"

# build -> (extra args, messages to play, plain messages to keep, terminal messages to keep)
CASES = {
    "3DBall": ([], 600, 3, 12),
    "3DBall-p1": (["--standin-decision-period", "1", "--standin-max-step", "40"], 200, 2, 10),
    "Basic": ([], 300, 3, 12),
    "VisualBall": (["--standin-max-step", "30"], 40, 2, 3),
    "TwoBehaviors": (["--standin-max-step", "60"], 300, 3, 10),
    "GridWorld": (["--standin-gridworld-tinted"], 150, 2, 4),
    "FoodCollector": (["--standin-max-step", "50"], 200, 3, 8),
    "FloatGrid": (["--standin-max-step", "20"], 100, 3, 8),
}


def record(case: str) -> list[bytes]:
    sys.path.insert(0, str(REPO))
    import grpc
    import numpy as np

    from unity_rl.envs.ports import find_free_port_block
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto  # noqa: I100

    args, n_messages, n_plain, n_terminal = CASES[case]
    build = case.split("-")[0]
    rng = np.random.default_rng(0)
    specs: dict[str, tuple[int, tuple[int, ...]]] = {}
    kept: list[bytes] = []
    counts = {"plain": 0, "terminal": 0, "empty": 0}
    state = {"calls": 0}
    done = threading.Event()

    def reply(request: bytes) -> bytes:
        message = UnityMessageProto.FromString(request)
        out = UnityMessageProto()
        out.header.status = 200
        state["calls"] += 1
        if state["calls"] == 1:
            init = out.unity_input.rl_initialization_input
            init.seed, init.communication_version, init.package_version = 0, "1.5.0", "1.1.0"
            init.capabilities.baseRLCapabilities = True
            init.num_areas = 1
            return out.SerializeToString()
        if state["calls"] == 2:
            out.unity_input.rl_input.command = 1
            return out.SerializeToString()
        unity_output = message.unity_output
        for bp in unity_output.rl_initialization_output.brain_parameters:
            spec = bp.action_spec
            specs[bp.brain_name] = (spec.num_continuous_actions,
                                    tuple(spec.discrete_branch_sizes))
        infos = unity_output.rl_output.agentInfos
        has_terminal = any(i.done for lst in infos.values() for i in lst.value)
        has_agents = any(len(lst.value) for lst in infos.values())
        if unity_output.rl_initialization_output.brain_parameters:
            kind = "first"
        elif has_terminal:
            kind = "terminal"
        elif not has_agents:
            kind = "empty"
        else:
            kind = "plain"
        limit = {"first": 1 << 30, "terminal": n_terminal, "empty": 2, "plain": n_plain}[kind]
        if counts.get(kind, 0) < limit:
            counts[kind] = counts.get(kind, 0) + 1
            kept.append(request)
        rl_input = out.unity_input.rl_input
        rl_input.command = 0
        for name, lst in infos.items():
            n_cont, branches = specs[name]
            for info in lst.value:
                if info.done:
                    continue
                action = rl_input.agent_actions[name].value.add()
                action.continuous_actions.extend(rng.uniform(-1, 1, n_cont).tolist())
                action.discrete_actions.extend(int(rng.integers(b)) for b in branches)
        if state["calls"] >= n_messages + 2:
            out.header.status = 400
            done.set()
        return out.SerializeToString()

    port = find_free_port_block(1, start=40000 + os.getpid() % 10000)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "communicator_objects.UnityToExternalProto",
        {"Exchange": grpc.unary_unary_rpc_method_handler(lambda req, ctx: reply(req))}),))
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [str(REPO / "unity_builds" / f"{build}.x86_64"), "-nographics", "-batchmode",
             "--mlagents-port", str(port), "-logFile", f"{tmp}/log", *args],
            start_new_session=True)
        try:
            if not done.wait(120):
                raise RuntimeError(f"{case}: no end ({Path(tmp, 'log').read_text()[-2000:]})")
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            server.stop(0)
    print(f"{case}: kept {len(kept)} messages {counts}")
    return kept


def save(path: Path, messages: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(struct.pack("<I", len(m)) + m for m in messages))


def load(path: Path) -> list[bytes]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        save(DATA / f"{name}.bin", record(name))
