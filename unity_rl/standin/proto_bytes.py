"""Protobuf's wire encoding, the few pieces the stand-in player writes and reads by hand
(``unity_rl.standin.wire`` writes messages with them, ``unity_rl.standin.wire_input`` reads).

Writing: ``varint`` (negative values as 10-byte two's complement) and ``len_field``
(submessages, bytes, strings, packed scalars) are ``unity_rl.envs.protocol``'s (the product's
step codec writes the same encoding), re-exported here; ``tag``, ``packed_varints``. Reading:
``read_varint``, ``iter_fields`` over a message's fields, ``skip_field`` and ``signed32``.
Malformed input (a varint or field running past its message) raises ``ValueError``.
"""
from __future__ import annotations

from typing import Iterator, Sequence

# The product's encoders, the same bytes (the stand-in may import the product, never the reverse).
from unity_rl.envs.protocol import len_field, varint  # noqa: F401 (re-exported to wire.py)

# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def tag(field_number: int, wire_type: int) -> bytes:
    """The key of a field: its number and wire type, as a varint."""
    return varint((field_number << 3) | wire_type)


def packed_varints(field_number: int, values: Sequence[int]) -> bytes:
    """A packed repeated varint field (nothing for no values, as protobuf)."""
    if len(values) == 0:
        return b""
    return len_field(field_number, b"".join(varint(int(v)) for v in values))


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos]``."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("malformed varint")


def iter_fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, object]]:
    """Yields (field_number, wire_type, value) over buf[start:end].

    The value is an int for varints, a (start, end) pair for length-delimited fields, and the
    raw bytes for fixed32/fixed64 fields.
    """
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos)
            yield number, wire_type, value
        elif wire_type == LEN:
            length, pos = read_varint(buf, pos)
            if pos + length > end:
                raise ValueError("truncated field")
            yield number, wire_type, (pos, pos + length)
            pos += length
        elif wire_type == I32:
            yield number, wire_type, buf[pos : pos + 4]
            pos += 4
        elif wire_type == I64:
            yield number, wire_type, buf[pos : pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
    if pos != end:
        raise ValueError("field overruns its message")


def signed32(value: int) -> int:
    """An int32 field's value read as a varint, with its sign."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def skip_field(buf: bytes, pos: int, wire_type: int) -> int:
    """The position after the value (of ``wire_type``) at ``buf[pos]``."""
    if wire_type == VARINT:
        return read_varint(buf, pos)[1]
    if wire_type == LEN:
        length, pos = read_varint(buf, pos)
        return pos + length
    if wire_type == I32:
        return pos + 4
    if wire_type == I64:
        return pos + 8
    raise ValueError(f"unsupported wire type {wire_type}")
