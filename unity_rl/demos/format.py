"""The byte layout of Unity's ``.demo`` files, and the errors a bad one raises.

A ``.demo`` file, as Unity's ``DemonstrationWriter`` (C#, ``MetaDataBytes = 32``) writes it and
ML-Agents' ``mlagents/trainers/demo_loader.py`` reads it:

1. at byte 0, a varint length and a ``DemonstrationMetaProto`` {api_version, demonstration_name,
   number_steps, number_episodes, mean_reward}; Unity rewrites it when the recording closes, so
   the length byte and the message must fit in the first 33 bytes (the rest is zero padding);
2. at byte 33, a varint length and a ``BrainParametersProto`` (the behavior name and the action
   spec; the observation shapes are those of the first record's observations);
3. then ``number_steps`` varint-length-delimited ``AgentInfoActionPairProto`` records, one per
   agent step the recorder saw (``load_demo``'s docstring says what they hold). Unity's writer
   leaves a copy of the raw meta bytes after them (it writes the meta at the end of the stream
   before seeking back to 0); readers, ML-Agents' and this one, stop after ``number_steps``.

This module only frames and parses messages; it knows nothing of numpy. Every problem with a
file's bytes raises ``DemoFileError`` naming the file and the byte offset where reading failed.
"""
from __future__ import annotations

from dataclasses import dataclass

from unity_rl.envs.protocol import varint
from unity_rl.errors import UserError

INITIAL_POS = 33
"""Where the brain parameters start: 32 bytes reserved for the meta message, plus one."""
SUPPORTED_API_VERSIONS = frozenset({0, 1})
"""The meta ``api_version``s that ML-Agents 1.1.0 reads (Unity writes 1)."""
API_VERSION = 1


class DemoError(UserError, ValueError):
    """A ``.demo`` file or directory that cannot be used: the message says which and why."""


class DemoFileError(DemoError):
    """A ``.demo`` file whose bytes are not a demonstration (truncated, corrupt, unsupported)."""

    def __init__(self, path: str, offset: int | None, problem: str):
        where = f"{path}" if offset is None else f"{path} at byte {offset}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.offset = offset
        self.problem = problem


class DemoSpecError(DemoError):
    """A demonstration recorded for another behavior spec than the one it is used with."""


@dataclass(frozen=True)
class DemoMeta:
    """The ``DemonstrationMetaProto`` at the head of one file."""

    name: str
    """``demonstration_name``: the recorder's name for it (Unity: at most 16 characters)."""
    number_steps: int
    """How many records the file holds (0 when Unity did not close the recording)."""
    number_episodes: int
    """Unity's count: one per record that ends an episode, plus one when the recording closes."""
    mean_reward: float
    """The sum of all the records' rewards divided by ``number_episodes``, as Unity computes it."""
    api_version: int = API_VERSION
    """The demonstration format version; ML-Agents 1.1.0 accepts 0 and 1."""


@dataclass(frozen=True)
class ParsedFile:
    """One file's messages, parsed but not decoded into arrays."""

    path: str
    meta: DemoMeta
    brain: object
    """The ``BrainParametersProto``."""
    records: list
    """The ``AgentInfoActionPairProto``s, in file order."""
    offsets: list[int]
    """The byte offset of each record's length prefix."""


def _protos():
    import unity_rl  # noqa: F401  (installs the import hook for the message modules)
    from mlagents_envs.communicator_objects.agent_info_action_pair_pb2 import (
        AgentInfoActionPairProto)
    from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto
    from mlagents_envs.communicator_objects.demonstration_meta_pb2 import DemonstrationMetaProto

    return DemonstrationMetaProto, BrainParametersProto, AgentInfoActionPairProto


def delimited(message) -> bytes:
    """A message as ``WriteDelimitedTo`` writes it: varint length, then the bytes."""
    payload = message.SerializeToString()
    return varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int, path: str) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    value, shift, at = 0, 0, pos
    while True:
        if at >= len(data):
            raise DemoFileError(path, pos, "the file ends inside a length prefix (truncated)")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 28:  # a 32-bit length takes at most 5 bytes
            raise DemoFileError(path, pos, "a length prefix longer than 5 bytes (corrupt file)")


def _read_message(data: bytes, pos: int, path: str, cls, what: str) -> tuple[object, int]:
    """(message, position after it) of the length-delimited message at ``pos``."""
    from google.protobuf.message import DecodeError

    size, start = _read_varint(data, pos, path)
    end = start + size
    if end > len(data):
        raise DemoFileError(path, pos, f"the {what} claims {size} bytes but the file has only "
                                       f"{len(data) - start} left (truncated)")
    message = cls()
    try:
        message.ParseFromString(data[start:end])
    except DecodeError as err:
        raise DemoFileError(path, pos, f"the {what} is not a valid message ({err}): corrupt "
                                       "file, or not a Unity .demo file") from None
    return message, end


def parse_file(path: str) -> ParsedFile:
    """Reads one ``.demo`` file's meta, brain parameters and records.

    Reads ``number_steps`` records when the meta gives a count (ML-Agents ignores bytes after
    them) and every record to the end of the file when it is 0. Raises ``DemoFileError`` when the
    file is truncated (a message runs past the end, or fewer records than the meta announces),
    corrupt, or of an unsupported ``api_version``.
    """
    meta_cls, brain_cls, pair_cls = _protos()
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise DemoFileError(path, 0, "the file is empty")
    meta_proto, end = _read_message(data, 0, path, meta_cls, "demonstration meta message")
    if end > INITIAL_POS:
        raise DemoFileError(path, 0, f"the meta message ends at byte {end}, past byte "
                                     f"{INITIAL_POS} where the brain parameters start (corrupt)")
    if meta_proto.api_version not in SUPPORTED_API_VERSIONS:
        raise DemoFileError(path, 0, f"demonstration api_version {meta_proto.api_version} is not "
                                     f"supported (ML-Agents 1.1.0 reads "
                                     f"{sorted(SUPPORTED_API_VERSIONS)})")
    meta = DemoMeta(meta_proto.demonstration_name, meta_proto.number_steps,
                    meta_proto.number_episodes, meta_proto.mean_reward, meta_proto.api_version)
    if len(data) <= INITIAL_POS:
        raise DemoFileError(path, len(data), "the file ends before the brain parameters at byte "
                                             f"{INITIAL_POS} (truncated)")
    brain, pos = _read_message(data, INITIAL_POS, path, brain_cls, "brain parameters message")
    records, offsets = [], []
    while pos < len(data) and (meta.number_steps == 0 or len(records) < meta.number_steps):
        record, end = _read_message(data, pos, path, pair_cls, f"record {len(records)}")
        records.append(record)
        offsets.append(pos)
        pos = end
    if len(records) < meta.number_steps:
        raise DemoFileError(path, pos, f"the file ends after {len(records)} of the "
                                       f"{meta.number_steps} records its meta message announces "
                                       "(truncated)")
    return ParsedFile(path, meta, brain, records, offsets)


def file_bytes(meta: DemoMeta, brain, records) -> bytes:
    """The bytes of a ``.demo`` file: meta at 0, padding to byte 33, brain parameters, records.

    Raises ``DemoError`` when the meta message does not fit before byte 33 (a long name).
    """
    meta_cls, _, _ = _protos()
    head = delimited(meta_cls(api_version=meta.api_version, demonstration_name=meta.name,
                              number_steps=meta.number_steps,
                              number_episodes=meta.number_episodes,
                              mean_reward=meta.mean_reward))
    if len(head) > INITIAL_POS:
        raise DemoError(f"the demonstration name {meta.name!r} makes the meta message "
                        f"{len(head)} bytes, more than the {INITIAL_POS} the format reserves: "
                        "use a shorter name (Unity allows 16 characters)")
    parts = [head, bytes(INITIAL_POS - len(head)), delimited(brain)]
    parts += [delimited(record) for record in records]
    return b"".join(parts)
