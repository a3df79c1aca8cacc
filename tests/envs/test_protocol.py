"""The fast protocol path (unity_rl/envs/protocol.py) against mlagents-envs' own code.

Recorded step messages of every stand-in build (``record_messages.py``; float vectors, PNG and
raw images, several observations, action masks, hybrid specs, terminal and decision of one
agent in one message, behaviors with empty lists) are decoded by mlagents-envs'
``steps_from_proto`` and by ``protocol.steps_from_agent_infos`` from the same bytes, and compared
field by field. Actions are encoded by ``UnityEnvironment._generate_step_input`` and by
``protocol.encode_step_input`` and compared message by message and byte by byte.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from google.protobuf.internal import api_implementation
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec
from mlagents_envs.communicator_objects.unity_input_pb2 import UnityInputProto
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto

from tests.envs.record_messages import CASES, DATA, load
from unity_rl.envs import protocol


def _recorded(case: str):
    """(behavior specs, parsed messages) of one recording."""
    messages = [UnityMessageProto.FromString(m) for m in load(DATA / f"{case}.bin")]
    specs = {}
    for message in messages:
        output = message.unity_output
        for bp in output.rl_initialization_output.brain_parameters:
            first = output.rl_output.agentInfos[bp.brain_name].value[0]
            specs[bp.brain_name] = behavior_spec_from_proto(bp, first)
    return specs, messages


def _assert_same(a, b, where: str) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape,
                                                           b.shape)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def _compare_steps(stock, fast, where: str) -> None:
    for kind, s, f in (("decision", stock[0], fast[0]), ("terminal", stock[1], fast[1])):
        fields = ["obs", "reward", "agent_id", "group_id", "group_reward"]
        fields += ["action_mask"] if kind == "decision" else ["interrupted"]
        for name in fields:
            _assert_same(getattr(s, name), getattr(f, name), f"{where} {kind}.{name}")


def test_the_fast_path_runs_on_upb():
    import google.protobuf

    assert int(google.protobuf.__version__.split(".")[0]) >= 5
    assert api_implementation.Type() == "upb"
    assert protocol._FINDER in sys.meta_path


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_steps_decode_like_mlagents(case):
    specs, messages = _recorded(case)
    assert specs and len(messages) > 3
    for index, message in enumerate(messages):
        for name, infos in message.unity_output.rl_output.agentInfos.items():
            stock = steps_from_proto(infos.value, specs[name])
            fast = protocol.steps_from_agent_infos(infos.value, specs[name])
            _compare_steps(stock, fast, f"{case} message {index} {name}")


def test_recordings_cover_the_cases_that_matter():
    seen = set()
    for case in CASES:
        specs, messages = _recorded(case)
        for name, spec in specs.items():
            if len(spec.observation_specs) > 1:
                seen.add("several observations")
            if spec.action_spec.continuous_size and spec.action_spec.discrete_size:
                seen.add("hybrid")
        for message in messages:
            rl_output = message.unity_output.rl_output
            any_decision = False
            for name, infos in rl_output.agentInfos.items():
                done_ids = {i.id for i in infos.value if i.done}
                live_ids = {i.id for i in infos.value if not i.done}
                any_decision |= bool(live_ids)
                if done_ids & live_ids:
                    seen.add("terminal and decision of one agent")
                if not infos.value:
                    seen.add("empty list")
                for info in infos.value:
                    if len(info.action_mask):
                        seen.add("action masks")
                    for obs in info.observations:
                        if obs.compression_type == 1:
                            seen.add("png")
                        elif len(obs.shape) == 3:
                            seen.add("raw image")
                        else:
                            seen.add("float vector")
            if not any_decision and any(len(v.value) for v in rl_output.agentInfos.values()):
                seen.add("terminal only")
    assert seen == {"several observations", "hybrid", "terminal and decision of one agent",
                    "empty list", "action masks", "png", "raw image", "float vector",
                    "terminal only"}


def test_non_finite_observations_and_rewards_raise_like_mlagents():
    specs, messages = _recorded("3DBall")
    name = next(iter(specs))
    for field, source in (("obs", "observations"), ("reward", "rewards")):
        for bad in (np.nan, np.inf):
            message = UnityMessageProto()
            message.CopyFrom(messages[1])
            info = message.unity_output.rl_output.agentInfos[name].value[0]
            if field == "obs":
                info.observations[0].float_data.data[2] = bad
            else:
                info.reward = bad
            infos = message.unity_output.rl_output.agentInfos[name].value
            with pytest.raises(RuntimeError) as stock:
                steps_from_proto(infos, specs[name])
            with pytest.raises(RuntimeError) as fast:
                protocol.steps_from_agent_infos(infos, specs[name])
            assert str(stock.value) == str(fast.value)
            assert source in str(fast.value)


def test_observations_of_the_wrong_size_raise_like_mlagents():
    specs, messages = _recorded("VisualBall")
    name = next(iter(specs))
    message = UnityMessageProto()
    message.CopyFrom(messages[1])
    vector = next(i for i, s in enumerate(specs[name].observation_specs) if len(s.shape) == 1)
    message.unity_output.rl_output.agentInfos[name].value[0].observations[
        vector].float_data.data.append(1.0)
    infos = message.unity_output.rl_output.agentInfos[name].value
    with pytest.raises(Exception) as stock:
        steps_from_proto(infos, specs[name])
    with pytest.raises(Exception) as fast:
        protocol.steps_from_agent_infos(infos, specs[name])
    assert type(stock.value) is type(fast.value)


def test_missing_or_short_action_masks_mean_all_available_like_mlagents():
    specs, messages = _recorded("GridWorld")
    name = next(iter(specs))
    message = UnityMessageProto()
    message.CopyFrom(messages[1])
    infos = message.unity_output.rl_output.agentInfos[name].value
    del infos[0].action_mask[:]
    if len(infos) > 1:
        del infos[1].action_mask[1:]
    _compare_steps(steps_from_proto(infos, specs[name]),
                   protocol.steps_from_agent_infos(infos, specs[name]), "masks")


# -- actions ----------------------------------------------------------------------------------

def _stock_input(actions: dict, n_agents: dict, side_channel: bytes) -> UnityInputProto:
    env = SimpleNamespace(
        _env_state={name: (range(n), None) for name, n in n_agents.items()},
        _side_channel_manager=SimpleNamespace(
            generate_side_channel_messages=lambda: bytearray(side_channel)),
        _wrap_unity_input=UnityEnvironment._wrap_unity_input,
    )
    return UnityEnvironment._generate_step_input(env, actions)


ACTION_SPECS = {
    "continuous": ActionSpec(2, ()),
    "discrete": ActionSpec(0, (3, 5)),
    "hybrid": ActionSpec(3, (2,)),
    "wide discrete": ActionSpec(0, (300, 2)),
    "nothing": ActionSpec(0, ()),
}


@pytest.mark.parametrize("kind", sorted(ACTION_SPECS))
@pytest.mark.parametrize("n", [0, 1, 12])
def test_actions_encode_like_mlagents(kind, n):
    rng = np.random.default_rng(n)
    spec = ACTION_SPECS[kind]
    action = spec.random_action(n)
    if kind == "wide discrete" and n:
        action.discrete[0, 0] = 299
    if kind == "continuous" and n:
        action.continuous[0] = [np.float32(1e-40), -0.0]  # subnormal and negative zero
    side = rng.bytes(7) if n == 12 else b""
    actions, counts = {"B?team=0": action}, {"B?team=0": n}
    stock = _stock_input(actions, counts, side)
    fast = protocol.encode_step_input(actions, counts, side)
    assert UnityInputProto.FromString(fast) == stock
    assert fast == stock.SerializeToString()


def test_actions_of_several_behaviors_and_extra_rows_encode_like_mlagents():
    specs = {"A": ActionSpec(2, ()), "B": ActionSpec(0, (4,)), "C": ActionSpec(1, (2, 2))}
    actions = {name: spec.random_action(6) for name, spec in specs.items()}
    counts = {"A": 6, "B": 0, "C": 4}  # B has no decision; C has two stale rows
    stock = _stock_input(actions, counts, b"\x01\x02")
    fast = protocol.encode_step_input(actions, counts, b"\x01\x02")
    assert UnityInputProto.FromString(fast) == stock


def test_action_tuples_with_a_missing_part_encode_like_mlagents():
    bare = ActionTuple()
    bare._continuous = np.ones((2, 2), np.float32)  # discrete left None
    for action in (ActionTuple(), bare):
        n = 0 if action.continuous is None else 2
        stock = _stock_input({"B": action}, {"B": n}, b"")
        assert protocol.encode_step_input({"B": action}, {"B": n}, b"") == stock.SerializeToString()


def test_negative_discrete_actions_encode_like_mlagents():
    action = ActionTuple(discrete=np.array([[-1, 2], [3, -7]], np.int32))
    stock = _stock_input({"B": action}, {"B": 2}, b"")
    fast = protocol.encode_step_input({"B": action}, {"B": 2}, b"")
    assert fast == stock.SerializeToString()


# -- the import hook ----------------------------------------------------------------------------

def test_every_message_module_loads_from_its_embedded_descriptor():
    import mlagents_envs.communicator_objects as package

    folder = Path(package.__file__).parent
    names = sorted(p.stem for p in folder.glob("*_pb2.py"))
    assert len(names) >= 20
    for name in names:
        module = importlib.import_module(f"{package.__name__}.{name}")
        assert module.__spec__.loader.__class__.__name__ == "_DescriptorLoader"
        assert module.DESCRIPTOR.name == f"mlagents_envs/communicator_objects/{name[:-4]}.proto"
    from mlagents_envs.communicator_objects import observation_pb2, unity_to_external_pb2_grpc

    assert (observation_pb2.NONE, observation_pb2.PNG) == (0, 1)
    assert observation_pb2.ObservationProto.FloatData.DESCRIPTOR.full_name.endswith("FloatData")
    assert hasattr(unity_to_external_pb2_grpc, "UnityToExternalProtoStub")


def test_mlagents_envs_imports_in_a_fresh_interpreter_after_unity_rl():
    code = ("import unity_rl, mlagents_envs.environment, mlagents_envs.side_channel, "
            "mlagents_envs.communicator_objects.unity_to_external_pb2_grpc as g; "
            "print(g.UnityToExternalProtoStub.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "UnityToExternalProtoStub"


def test_plain_mlagents_envs_imports_in_a_venv_made_by_setup_sh():
    import sysconfig

    if not (Path(sysconfig.get_paths()["purelib"]) / "unity_rl_protobuf.pth").exists():
        pytest.skip("this interpreter's venv was not made by scripts/setup.sh")
    code = ("from mlagents_envs.environment import UnityEnvironment; "
            "from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto; "
            "import sys; print(UnityMessageProto.__module__, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "mlagents_envs.communicator_objects.unity_message_pb2"


def test_behavior_specs_from_recordings_are_complete():
    specs, _ = _recorded("FoodCollector")
    spec = next(iter(specs.values()))
    assert isinstance(spec, BehaviorSpec)
    assert spec.action_spec.continuous_size == 3 and spec.action_spec.discrete_branches == (2,)


# -- against mlagents-envs on its own pins (protobuf 3.20.3, pure Python) ----------------------

_STOCK_DUMP = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from record_messages import CASES, DATA, load
import google.protobuf
assert google.protobuf.__version__.startswith("3."), google.protobuf.__version__
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto
out = {}
for case in CASES:
    specs = {}
    for index, raw in enumerate(load(DATA / f"{case}.bin")):
        output = UnityMessageProto.FromString(raw).unity_output
        for bp in output.rl_initialization_output.brain_parameters:
            specs[bp.brain_name] = behavior_spec_from_proto(
                bp, output.rl_output.agentInfos[bp.brain_name].value[0])
        for name, infos in output.rl_output.agentInfos.items():
            dec, term = steps_from_proto(infos.value, specs[name])
            key = f"{case}|{index}|{name}|"
            for i, o in enumerate(dec.obs):
                out[key + f"dec.obs{i}"] = o
            for i, o in enumerate(term.obs):
                out[key + f"term.obs{i}"] = o
            for field in ("reward", "agent_id", "group_reward"):
                out[key + "dec." + field] = getattr(dec, field)
                out[key + "term." + field] = getattr(term, field)
            out[key + "dec.group_id"] = np.asarray(dec.group_id, np.int64)
            out[key + "term.group_id"] = np.asarray(term.group_id, np.int64)
            out[key + "term.interrupted"] = term.interrupted
            for i, m in enumerate(dec.action_mask or []):
                out[key + f"dec.mask{i}"] = m
np.savez(sys.argv[2], **out)
"""


def _stock_python() -> str | None:
    candidate = os.environ.get("UNITY_RL_STOCK_PYTHON") or str(
        Path(__file__).resolve().parents[2] / ".stock_venv" / "bin" / "python")
    return candidate if Path(candidate).exists() else None


@pytest.mark.skipif(_stock_python() is None,
                    reason="no stock venv (bash benchmarks/stock_venv.sh, or UNITY_RL_STOCK_PYTHON)")
def test_recorded_steps_decode_like_mlagents_on_protobuf_3(tmp_path):
    dump = tmp_path / "stock.npz"
    out = subprocess.run([_stock_python(), "-c", _STOCK_DUMP, str(Path(__file__).parent),
                          str(dump)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    stock = np.load(dump)
    compared = 0
    for case in CASES:
        specs, messages = _recorded(case)
        for index, message in enumerate(messages):
            for name, infos in message.unity_output.rl_output.agentInfos.items():
                dec, term = protocol.steps_from_agent_infos(infos.value, specs[name])
                key = f"{case}|{index}|{name}|"
                fast = {f"dec.obs{i}": o for i, o in enumerate(dec.obs)}
                fast.update({f"term.obs{i}": o for i, o in enumerate(term.obs)})
                for field in ("reward", "agent_id", "group_reward"):
                    fast["dec." + field] = getattr(dec, field)
                    fast["term." + field] = getattr(term, field)
                fast["dec.group_id"] = np.asarray(dec.group_id, np.int64)
                fast["term.group_id"] = np.asarray(term.group_id, np.int64)
                fast["term.interrupted"] = term.interrupted
                fast.update({f"dec.mask{i}": m for i, m in enumerate(dec.action_mask or [])})
                expected = sorted(k[len(key):] for k in stock.files if k.startswith(key))
                assert sorted(fast) == expected, key
                for field, value in fast.items():
                    _assert_same(stock[key + field], value, key + field)
                    compared += 1
    assert compared > 500
