"""The hand-written protobuf bytes agree with the generated classes of mlagents-envs 1.1.0."""
from __future__ import annotations

import numpy as np
import pytest
from mlagents_envs.communicator_objects.agent_action_pb2 import AgentActionProto
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto

from unity_rl.standin.academy import Academy
from unity_rl.standin.agent_groups import brain_parameters_bytes
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.proto_bytes import len_field, read_varint, tag, varint
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.visual_ball import VisualBallModel
from unity_rl.standin.wire import (
    EMPTY_OK_MESSAGE,
    AgentInfoBatch,
    ObsEncoder,
    ObsSpec,
    encode_agent_infos,
    encode_output_message,
)
from unity_rl.standin.wire_input import decode_input_message


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31 - 1, -1, -(2**31)])
def test_varint_roundtrip(value):
    decoded, pos = read_varint(varint(value), 0)
    assert pos == len(varint(value))
    assert decoded == value & ((1 << 64) - 1)


def test_empty_ok_message_is_status_200():
    msg = UnityMessageProto.FromString(EMPTY_OK_MESSAGE)
    assert msg.header.status == 200
    assert not msg.HasField("unity_output")


def _parse(raw: bytes):
    msg = UnityMessageProto.FromString(raw)
    assert msg.header.status == 200
    return msg.unity_output


def test_decision_and_terminal_infos_parse_with_protobuf():
    spec = ObsSpec("VectorSensor_size3", (3,), dimension_properties=(1,))
    enc = [ObsEncoder(spec)]
    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    decisions = AgentInfoBatch(np.array([4, 300]), np.array([0.5, -1.25], np.float32), False,
                               None, [obs], None)
    terminals = AgentInfoBatch(np.array([7, 8]), np.array([-1.0, 0.1], np.float32), True,
                               np.array([False, True]), [obs + 10], None)
    body = encode_agent_infos(terminals, enc) + encode_agent_infos(decisions, enc)
    out = _parse(encode_output_message([(b"B?team=0", body), (b"Empty?team=0", b"")]))
    infos = out.rl_output.agentInfos["B?team=0"].value
    assert [i.id for i in infos] == [7, 8, 4, 300]
    assert [i.done for i in infos] == [True, True, False, False]
    assert [i.max_step_reached for i in infos] == [False, True, False, False]
    assert np.allclose([i.reward for i in infos], [-1.0, 0.1, 0.5, -1.25])
    for info, row in zip(infos, np.concatenate([obs + 10, obs])):
        (o,) = info.observations
        assert list(o.shape) == [3]
        assert list(o.float_data.data) == row.tolist()
        assert o.name == "VectorSensor_size3"
        assert list(o.dimension_properties) == [1]
        assert o.compression_type == 0
    # A subscribed behavior without agents this step travels as an empty list, as in Unity.
    assert "Empty?team=0" in out.rl_output.agentInfos
    assert len(out.rl_output.agentInfos["Empty?team=0"].value) == 0
    assert not out.HasField("rl_initialization_output")


def test_action_masks_parse_and_reach_decision_steps():
    enc = [ObsEncoder(ObsSpec("OneHotSensor", (2,), dimension_properties=(1,)))]
    batch = AgentInfoBatch(np.array([0, 1]), np.zeros(2, np.float32), False, None,
                           [np.eye(2, dtype=np.float32)],
                           np.array([[False, True, False], [False, False, True]]))
    out = _parse(encode_output_message([(b"Basic?team=0", encode_agent_infos(batch, enc))]))
    infos = out.rl_output.agentInfos["Basic?team=0"].value
    assert [list(i.action_mask) for i in infos] == [[False, True, False], [False, False, True]]


def test_brain_parameters_and_spec_as_mlagents_reads_them():
    academy = Academy(SCENES["TwoBehaviors"], PlayerOptions())
    message = academy.begin_step()
    out = _parse(academy.encode(message))
    names = [bp.brain_name for bp in out.rl_initialization_output.brain_parameters]
    assert names == ["3DBall?team=0", "Basic?team=0"]
    specs = {}
    for bp in out.rl_initialization_output.brain_parameters:
        assert bp.is_training
        first = out.rl_output.agentInfos[bp.brain_name].value[0]
        specs[bp.brain_name] = behavior_spec_from_proto(bp, first)
    assert specs["3DBall?team=0"].action_spec.continuous_size == 2
    assert specs["3DBall?team=0"].action_spec.discrete_branches == ()
    assert specs["3DBall?team=0"].observation_specs[0].shape == (8,)
    assert specs["Basic?team=0"].action_spec.discrete_branches == (3,)
    assert specs["Basic?team=0"].action_spec.continuous_size == 0
    decision, terminal = steps_from_proto(
        out.rl_output.agentInfos["Basic?team=0"].value, specs["Basic?team=0"]
    )
    assert list(decision.agent_id) == [4, 5]  # ids are global over behaviors
    assert len(terminal) == 0
    assert decision.action_mask[0].shape == (2, 3)
    # Brain parameters go out once, with the first agents of each behavior.
    academy.apply_actions({})
    academy.end_step()
    again = _parse(academy.encode(academy.begin_step()))
    assert not again.HasField("rl_initialization_output")


def test_png_observation_decodes_to_channels_first_image():
    academy = Academy(SCENES["VisualBall"], PlayerOptions(agents=(2,)))
    out = _parse(academy.encode(academy.begin_step()))
    bp = out.rl_initialization_output.brain_parameters[0]
    infos = out.rl_output.agentInfos[bp.brain_name].value
    spec = behavior_spec_from_proto(bp, infos[0])
    assert [o.shape for o in spec.observation_specs] == [(3, 84, 84), (2,)]
    assert infos[0].observations[0].compression_type == 1
    assert infos[0].observations[0].compressed_data[:8] == b"\x89PNG\r\n\x1a\n"
    decision, _ = steps_from_proto(infos, spec)
    image = decision.obs[0]
    assert image.shape == (2, 3, 84, 84)
    model = academy.groups[0].model
    assert isinstance(model, VisualBallModel)
    expected = model.render(np.arange(2)).transpose(0, 3, 1, 2) / 255.0
    assert np.allclose(image, expected, atol=1e-6)  # PNG is lossless


def _input(actions: dict, command=0, side_channel=b"", status=200) -> bytes:
    msg = UnityMessageProto()
    msg.header.status = status
    rl_in = msg.unity_input.rl_input
    rl_in.command = command
    rl_in.side_channel = side_channel
    for name, rows in actions.items():
        for cont, disc in rows:
            a = AgentActionProto()
            a.continuous_actions.extend(cont)
            a.discrete_actions.extend(disc)
            a.vector_actions_deprecated.extend(list(cont) + list(disc))
            rl_in.agent_actions[name].value.append(a)
    return msg.SerializeToString()


def test_decode_input_with_actions_command_and_side_channel():
    raw = _input(
        {
            "A?team=0": [([0.5, -1.0], []), ([0.25, 2.0], [])],
            "B?team=0": [([], [2, 0]), ([], [1, 7])],
        },
        command=0,
        side_channel=b"\x01\x02\x03",
    )
    inp = decode_input_message(raw)
    assert inp.status == 200 and inp.command == 0 and inp.side_channel == b"\x01\x02\x03"
    assert inp.actions["A?team=0"].continuous.tolist() == [[0.5, -1.0], [0.25, 2.0]]
    assert inp.actions["A?team=0"].discrete.shape == (2, 0)
    assert inp.actions["B?team=0"].discrete.tolist() == [[2, 0], [1, 7]]


def test_decode_reset_close_and_unpacked_fields():
    assert decode_input_message(_input({}, command=1)).command == 1
    assert decode_input_message(_input({}, status=400)).status == 400
    # Unpacked repeated fields (legal protobuf, written by some encoders) decode the same.
    action = (tag(6, 5) + np.float32(0.75).tobytes() + tag(6, 5) + np.float32(-0.5).tobytes()
              + tag(7, 0) + varint(2))
    entry = len_field(1, b"X") + len_field(2, len_field(1, action))
    raw = len_field(1, tag(1, 0) + varint(200)) + len_field(3, len_field(1, len_field(1, entry)))
    inp = decode_input_message(raw)
    assert inp.actions["X"].continuous.tolist() == [[0.75, -0.5]]
    assert inp.actions["X"].discrete.tolist() == [[2]]


def test_brain_parameters_bytes_fill_deprecated_fields():
    from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto

    academy = Academy(SCENES["Basic"])
    bp = BrainParametersProto.FromString(brain_parameters_bytes("Basic?team=0",
                                                                academy.groups[0].model))
    assert bp.action_spec.num_discrete_actions == 1
    assert list(bp.action_spec.discrete_branch_sizes) == [3]
    assert list(bp.vector_action_size_deprecated) == [3]


def test_observation_type_and_channel_mapping_bytes_match_the_generated_classes():
    from mlagents_envs.communicator_objects.observation_pb2 import ObservationProto

    goal = ObsSpec("VectorSensor", (2,), dimension_properties=(1,), observation_type=1)
    camera = ObsSpec("StackingSensor_size2_CameraSensor", (6, 4, 4), png=True,
                     dimension_properties=(1, 2, 2), channel_mapping=tuple(range(6)))
    fake_png = b"\x89PNG\r\n\x1a\nAB" * 2
    for spec, values in ((goal, np.array([[0.0, 1.0]], np.float32)), (camera, [fake_png])):
        [raw] = ObsEncoder(spec).encode(values)
        expected = ObservationProto(shape=spec.shape, name=spec.name,
                                    dimension_properties=spec.dimension_properties,
                                    observation_type=spec.observation_type,
                                    compressed_channel_mapping=spec.channel_mapping)
        if spec.png:
            expected.compression_type, expected.compressed_data = 1, fake_png
        else:
            expected.float_data.data.extend(values[0].tolist())
        # field 13 of AgentInfoProto: tag, length, then exactly the generated serialization
        assert raw == len_field(13, expected.SerializeToString())


def test_group_id_and_group_reward_parse_with_protobuf():
    """Fields 14/15 as Unity's serializer writes them: zeros left out, the rest exact."""
    spec = ObsSpec("VectorSensor_size1", (1,), dimension_properties=(1,))
    obs = np.zeros((3, 1), np.float32)
    batch = AgentInfoBatch(np.array([1, 2, 3]), np.zeros(3, np.float32), True,
                           np.array([False, True, False]), [obs], None,
                           group_ids=np.array([5, 0, 300]),
                           group_rewards=np.array([1.0, 0.0, -0.25], np.float32))
    body = encode_agent_infos(batch, [ObsEncoder(spec)])
    infos = _parse(encode_output_message([(b"G?team=0", body)])).rl_output.agentInfos[
        "G?team=0"].value
    assert [i.group_id for i in infos] == [5, 0, 300]
    assert [i.group_reward for i in infos] == [1.0, 0.0, -0.25]
    assert [i.id for i in infos] == [1, 2, 3]
    assert [i.max_step_reached for i in infos] == [False, True, False]
