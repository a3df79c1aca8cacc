"""Protobuf wire format for the stand-in player's hot path, written by hand.

Written when protobuf was the pure-Python 3.20.3 runtime, where building a ``UnityMessageProto``
with a dozen ``AgentInfoProto`` field by field cost about a millisecond per message, more than
the whole simulated scene; under protobuf 7 (upb) field-by-field building is still slower than
these precomputed bytes. The messages a player sends every step have a fixed layout, so this module
writes their bytes directly (constant prefixes are computed once per observation spec:
``ObsEncoder``; ``encode_agent_infos``, ``encode_output_message``), and
``unity_rl.standin.wire_input`` reads the few fields the player needs from the trainer's reply;
both use the protobuf primitives of ``unity_rl.standin.proto_bytes``. The handshake and the
brain parameters, sent once, still use the generated classes. ``tests/standin/test_wire.py``
checks both directions against the generated classes.

Field numbers (mlagents-envs 1.1.0, communication API 1.5.0; the input side:
``wire_input``)::

    UnityMessageProto     1 header (HeaderProto: 1 status, 2 message)  2 unity_output
                          3 unity_input
    UnityOutputProto      1 rl_output  2 rl_initialization_output
    UnityRLOutputProto    2 agentInfos (map<string, ListAgentInfoProto>)  3 side_channel
    ListAgentInfoProto    1 value (repeated AgentInfoProto)
    AgentInfoProto        7 reward (float)  8 done  9 max_step_reached  10 id  11 action_mask
                          (packed bool)  13 observations  14 group_id  15 group_reward
    ObservationProto      1 shape  2 compression_type (1 = PNG)  3 compressed_data  4 float_data
                          (FloatData: 1 data)  5 compressed_channel_mapping
                          6 dimension_properties  7 observation_type  8 name
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from unity_rl.standin.proto_bytes import I32, LEN, VARINT, len_field, packed_varints, tag, varint

STATUS_OK, STATUS_CLOSE = 200, 400
COMPRESSION_PNG = 1

# A header with status 200: field 1 (HeaderProto) of length 3 holding field 1 = varint 200.
HEADER_OK = len_field(1, tag(1, VARINT) + varint(STATUS_OK))
# What a player sends as the second handshake call (Unity's WrapMessage(null, 200)).
EMPTY_OK_MESSAGE = HEADER_OK


# --------------------------------------------------------------------------------------------
# Encoding: agent infos and the output message
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ObsSpec:
    """One sensor of a behavior, as a Unity build declares it."""

    name: str
    """Sensor name (Unity sorts sensors by name; the spec order is the order of this tuple)."""
    shape: tuple[int, ...]
    """Shape sent on the wire: (n,) for vectors, (channels, height, width) for cameras."""
    png: bool = False
    """True for a camera: the observation travels as PNG bytes (compression_type PNG)."""
    dimension_properties: tuple[int, ...] = ()
    """DimensionProperty values (1 NONE, 2 TRANSLATIONAL_EQUIVARIANCE), one per dimension."""
    observation_type: int = 0
    """ObservationType: 0 DEFAULT, 1 GOAL_SIGNAL (field 7; not written when 0, as protobuf)."""
    channel_mapping: tuple[int, ...] = ()
    """compressed_channel_mapping (field 5) of a PNG observation: output channel of each decoded
    PNG channel, as a StackingSensor sends it for a stacked camera; empty: not sent."""


class ObsEncoder:
    """Writes the ``observations`` field (13) of AgentInfoProto for one ObsSpec, per agent."""

    def __init__(self, spec: ObsSpec):
        self.spec = spec
        shape_field = packed_varints(1, spec.shape)
        self._suffix = (
            packed_varints(5, spec.channel_mapping)
            + packed_varints(6, spec.dimension_properties)
            + (tag(7, VARINT) + varint(spec.observation_type) if spec.observation_type else b"")
            + len_field(8, spec.name.encode())
        )
        if spec.png:
            self._head = shape_field + tag(2, VARINT) + varint(COMPRESSION_PNG)
            self._n_floats = 0
        else:
            n = int(np.prod(spec.shape))
            self._n_floats = n
            float_data = tag(1, LEN) + varint(4 * n)  # FloatData.data, packed, then the floats
            float_data_len = len(float_data) + 4 * n
            body_head = shape_field + tag(4, LEN) + varint(float_data_len) + float_data
            body_len = len(body_head) + 4 * n + len(self._suffix)
            # Everything up to the floats, including the AgentInfoProto field-13 tag and length.
            self._head = tag(13, LEN) + varint(body_len) + body_head

    def encode(self, values) -> list[bytes]:
        """Per agent, the bytes of one ``observations`` field.

        ``values``: float array [k, *shape] for vector specs; a list of k PNG byte strings for
        camera specs.
        """
        if self.spec.png:
            out = []
            for png in values:
                body = self._head + len_field(3, png) + self._suffix
                out.append(tag(13, LEN) + varint(len(body)) + body)
            return out
        raw = np.ascontiguousarray(values, dtype="<f4").tobytes()
        step = 4 * self._n_floats
        head, suffix = self._head, self._suffix
        return [head + raw[i : i + step] + suffix for i in range(0, len(raw), step)]


class AgentInfoBatch(NamedTuple):
    """Agent infos of one behavior that go into one message, in the order they are sent."""

    ids: np.ndarray
    """[k] int: Unity agent ids."""
    rewards: np.ndarray
    """[k] float32: reward since the agent's previous decision."""
    done: bool
    """True for terminal infos (the whole batch), False for decision requests."""
    max_step_reached: np.ndarray | None
    """[k] bool for terminal batches: True where the episode was cut by MaxStep."""
    obs: list
    """One entry per ObsSpec: float array [k, *shape], or a list of k PNG byte strings."""
    action_mask: np.ndarray | None
    """[k, sum(branches)] bool, True = action unavailable; None when not sent."""
    group_ids: np.ndarray | None = None
    """[k] int: SimpleMultiAgentGroup id per agent (0 = none, not sent); None: no groups."""
    group_rewards: np.ndarray | None = None
    """[k] float32: group reward since the agent's previous decision (0 is not sent)."""


_REWARD_TAG = tag(7, I32)
_DONE = tag(8, VARINT) + b"\x01"
_MAX_STEP = tag(9, VARINT) + b"\x01"
_ID_TAG = tag(10, VARINT)
_GROUP_ID_TAG = tag(14, VARINT)
_GROUP_REWARD_TAG = tag(15, I32)
_LIST_VALUE_TAG = tag(1, LEN)


def encode_agent_infos(batch: AgentInfoBatch, encoders: Sequence[ObsEncoder]) -> bytes:
    """The repeated ``value`` fields of a ListAgentInfoProto for ``batch`` (may be empty)."""
    k = len(batch.ids)
    if k == 0:
        return b""
    rewards = np.ascontiguousarray(batch.rewards, dtype="<f4").tobytes()
    obs_parts = [enc.encode(values) for enc, values in zip(encoders, batch.obs)]
    if batch.action_mask is not None:
        masks = np.ascontiguousarray(batch.action_mask, dtype=np.uint8)
        mask_head = tag(11, LEN) + varint(masks.shape[1])
        mask_rows = masks.tobytes()
        mask_len = masks.shape[1]
    else:
        mask_head, mask_rows, mask_len = b"", b"", 0
    ids = batch.ids.tolist()
    groups = _group_fields(batch, k)
    obs_len = [len(part[0]) if part else 0 for part in obs_parts]
    same_obs_len = all(not enc.spec.png for enc in encoders)
    pieces: list[bytes] = []
    append = pieces.append
    for i in range(k):
        if batch.done:
            flags = _DONE + _MAX_STEP if batch.max_step_reached[i] else _DONE
        else:
            flags = b""
        id_bytes = varint(ids[i])
        size = 5 + len(flags) + 1 + len(id_bytes) + (len(mask_head) + mask_len if mask_len else 0)
        size += len(groups[i])
        size += sum(obs_len) if same_obs_len else sum(len(part[i]) for part in obs_parts)
        append(_LIST_VALUE_TAG)
        append(varint(size))
        append(_REWARD_TAG)
        append(rewards[4 * i : 4 * i + 4])
        append(flags)
        append(_ID_TAG)
        append(id_bytes)
        append(groups[i])
        if mask_len:
            append(mask_head)
            append(mask_rows[i * mask_len : (i + 1) * mask_len])
        for part in obs_parts:
            append(part[i])
    return b"".join(pieces)


def _group_fields(batch: AgentInfoBatch, k: int) -> list[bytes]:
    """Per agent, the encoded ``group_id`` (14) and ``group_reward`` (15) fields; proto3 leaves
    a zero out, as Unity's serializer does."""
    out = [b""] * k
    if batch.group_ids is not None:
        for i, gid in enumerate(batch.group_ids.tolist()):
            if gid:
                out[i] = _GROUP_ID_TAG + varint(int(gid))
    if batch.group_rewards is not None:
        rewards = np.ascontiguousarray(batch.group_rewards, dtype="<f4")
        raw = rewards.tobytes()
        for i in np.flatnonzero(rewards).tolist():
            out[i] += _GROUP_REWARD_TAG + raw[4 * i: 4 * i + 4]
    return out


def encode_output_message(
    agent_infos: Sequence[tuple[bytes, bytes]],
    brain_parameters: Sequence[bytes] = (),
    side_channel: bytes = b"",
) -> bytes:
    """A complete UnityMessageProto (status 200) carrying an rl_output.

    ``agent_infos``: (behavior name as bytes, encoded ListAgentInfoProto body) per behavior, in
    map order; an empty body sends an empty list, as Unity does for subscribed behaviors without
    agents in this step. ``brain_parameters``: serialized BrainParametersProto messages to
    announce in ``rl_initialization_output`` (behaviors whose first agents are in this message).
    """
    rl_output = b"".join(
        len_field(2, len_field(1, name) + len_field(2, body)) for name, body in agent_infos
    )
    if side_channel:
        rl_output += len_field(3, side_channel)
    unity_output = len_field(1, rl_output)
    if brain_parameters:
        unity_output += len_field(2, b"".join(len_field(5, bp) for bp in brain_parameters))
    return HEADER_OK + len_field(2, unity_output)
