"""Reading the trainer's reply on the stand-in player's hot path, by hand:
``decode_input_message`` -> ``UnityInput`` (status, command, side-channel bytes, and one
``ActionBatch`` of actions per behavior). Actions are read packed or not, and a trainer older
than API 1.3 (only the deprecated flat vector) is understood. ``tests/standin/test_wire.py``
checks it against the generated protobuf classes; malformed bytes raise ``ValueError``.

Field numbers (mlagents-envs 1.1.0, communication API 1.5.0)::

    UnityMessageProto     1 header (HeaderProto: 1 status, 2 message)  3 unity_input
    UnityInputProto       1 rl_input  2 rl_initialization_input
    UnityRLInputProto     1 agent_actions (map<string, ListAgentActionProto>)  4 command
                          5 side_channel
    ListAgentActionProto  1 value (repeated AgentActionProto)
    AgentActionProto      1 vector_actions_deprecated  4 value  6 continuous_actions
                          7 discrete_actions
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from unity_rl.standin.proto_bytes import I32, LEN, VARINT, iter_fields, read_varint, signed32, skip_field

COMMAND_STEP, COMMAND_RESET, COMMAND_QUIT = 0, 1, 2


class ActionBatch(NamedTuple):
    """The actions of one behavior in a reply, one row per AgentActionProto, in order."""

    continuous: np.ndarray
    """[k, c] float32 (rows shorter than the widest are zero-padded)."""
    discrete: np.ndarray
    """[k, d] int32 (same padding)."""

    def __len__(self) -> int:
        return self.continuous.shape[0]


@dataclass
class UnityInput:
    """What a player needs from the trainer's reply (a UnityMessageProto)."""

    status: int = 0
    command: int = COMMAND_STEP
    side_channel: bytes = b""
    actions: dict[str, ActionBatch] = field(default_factory=dict)


def _rows(chunks: list, dtype, k: int) -> np.ndarray:
    widths = {len(c) for c in chunks}
    if dtype == np.float32:
        if len(widths) == 1:
            return np.frombuffer(b"".join(chunks), dtype="<f4").reshape(k, -1).astype(np.float32)
        out = np.zeros((k, max(widths) // 4), dtype=np.float32)
        for i, c in enumerate(chunks):
            out[i, : len(c) // 4] = np.frombuffer(c, dtype="<f4")
        return out
    if len(widths) == 1:
        return np.asarray(chunks, dtype=np.int32).reshape(k, -1)
    out = np.zeros((k, max(widths)), dtype=np.int32)
    for i, c in enumerate(chunks):
        out[i, : len(c)] = c
    return out


def _decode_action_list(buf: bytes, pos: int, end: int) -> ActionBatch:
    """The repeated AgentActionProto (field 1) of a ListAgentActionProto, packed or not."""
    continuous: list[bytes] = []
    discrete: list[list[int]] = []
    while pos < end:
        key, pos = read_varint(buf, pos)
        wire_type = key & 7
        if wire_type != LEN or key >> 3 != 1:
            pos = skip_field(buf, pos, wire_type)
            continue
        length, pos = read_varint(buf, pos)
        stop = pos + length
        if stop > end:
            raise ValueError("truncated field")
        cont = dep = b""
        disc: list[int] = []
        while pos < stop:
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = read_varint(buf, pos - 1)
            number, wire_type = key >> 3, key & 7
            if wire_type == LEN:
                length = buf[pos]
                pos += 1
                if length >= 0x80:
                    length, pos = read_varint(buf, pos - 1)
                if number == 6:
                    cont = buf[pos : pos + length]
                elif number == 1:
                    dep = buf[pos : pos + length]
                elif number == 7:
                    a = pos
                    while a < pos + length:
                        v, a = read_varint(buf, a)
                        disc.append(signed32(v))
                pos += length
            elif wire_type == I32 and number in (1, 6):
                if number == 6:
                    cont += buf[pos : pos + 4]
                else:
                    dep += buf[pos : pos + 4]
                pos += 4
            elif wire_type == VARINT and number == 7:
                v, pos = read_varint(buf, pos)
                disc.append(signed32(v))
            else:
                pos = skip_field(buf, pos, wire_type)
        if pos != stop:
            raise ValueError("field overruns its message")
        if not cont and not disc and dep:
            cont = dep  # a trainer older than API 1.3 sends only the deprecated flat vector
        continuous.append(cont)
        discrete.append(disc)
    k = len(continuous)
    return ActionBatch(_rows(continuous, np.float32, k), _rows(discrete, np.int32, k))


def _decode_rl_input(buf: bytes, start: int, end: int, out: UnityInput) -> None:
    for number, wire_type, value in iter_fields(buf, start, end):
        if number == 1 and wire_type == LEN:  # map entry: 1 key, 2 ListAgentActionProto
            name = ""
            actions = ActionBatch(np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int32))
            for n2, w2, v2 in iter_fields(buf, *value):
                if n2 == 1 and w2 == LEN:
                    name = buf[v2[0] : v2[1]].decode()
                elif n2 == 2 and w2 == LEN:
                    actions = _decode_action_list(buf, *v2)
            out.actions[name] = actions
        elif number == 4 and wire_type == VARINT:
            out.command = value
        elif number == 5 and wire_type == LEN:
            out.side_channel = buf[value[0] : value[1]]


def decode_input_message(buf: bytes) -> UnityInput:
    """Reads status, command, side-channel bytes and actions from a UnityMessageProto."""
    out = UnityInput()
    for number, wire_type, value in iter_fields(buf, 0, len(buf)):
        if number == 1 and wire_type == LEN:
            for n2, w2, v2 in iter_fields(buf, *value):
                if n2 == 1 and w2 == VARINT:
                    out.status = signed32(v2)
        elif number == 3 and wire_type == LEN:
            for n2, w2, v2 in iter_fields(buf, *value):
                if n2 == 1 and w2 == LEN:
                    _decode_rl_input(buf, v2[0], v2[1], out)
    return out
