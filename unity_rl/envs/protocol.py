"""mlagents-envs' message classes on modern protobuf, and the fast step codec.

Two jobs, both behind the communicator seam (``envs/communicator.py`` is the only user):

1. **Message classes on protobuf >= 5 (upb).** mlagents-envs 1.1.0 ships ``_pb2`` modules written
   by protoc 3.x: they build descriptors field by field, which protobuf >= 4.21 refuses. Each of
   them embeds its ``.proto`` file as serialized ``FileDescriptorProto`` bytes
   (``serialized_pb=_b('...')``). ``install()`` puts an import hook on ``sys.meta_path`` that
   loads every ``mlagents_envs.communicator_objects.*_pb2`` module from those bytes, the way
   protoc 5+ output does (``AddSerializedFile`` + ``builder``): same module names, classes,
   enum constants and descriptors, now backed by upb's C parser. No generated code is copied
   into this repository; mlagents-envs' own modules (environment, rpc_utils, side channels, the
   gRPC stubs) import them unchanged. ``unity_rl/__init__.py`` calls ``install()``, so any
   ``import unity_rl...`` before mlagents-envs is enough. Under protobuf 3.x the hook stays out.

2. **The step codec** (``agent_infos_to_steps``, ``encode_step_input``): what each step message
   turns into, without mlagents-envs' per-agent Python loops. Observations, rewards, ids, done /
   max-step flags and action masks of one behavior go from the parsed ``ListAgentInfoProto``
   straight into the numpy arrays of ``DecisionSteps`` / ``TerminalSteps``; actions go from an
   ``ActionTuple`` straight to the bytes of a ``UnityMessageProto``. Both agree field by field
   with mlagents-envs' ``steps_from_proto`` / ``_generate_step_input``
   (``tests/envs/test_protocol.py`` checks recorded messages both ways).
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import math
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Sequence

_PACKAGE = "mlagents_envs.communicator_objects"
# protoc 3.x wrote the descriptor either as serialized_pb=_b('...') (a latin-1 str) or, from
# 3.20 on, as AddSerializedFile(b'...') (unity_to_external_pb2.py).
_SERIALIZED_PB = re.compile(
    r"(?:serialized_pb=_b\(|AddSerializedFile\()(?P<literal>b?'(?:[^'\\]|\\.)*')\)", re.S)


# --------------------------------------------------------------------------------------------
# 1. The import hook
# --------------------------------------------------------------------------------------------

def protobuf_major() -> int:
    import google.protobuf

    return int(google.protobuf.__version__.split(".")[0])


def serialized_descriptor(source: str) -> bytes:
    """The ``FileDescriptorProto`` bytes a protoc-3 ``_pb2`` module's text embeds (the first
    such literal: the module's own file)."""
    match = _SERIALIZED_PB.search(source)
    if match is None:
        raise ImportError("no serialized_pb=_b('...') descriptor in the module's source")
    import ast

    value = ast.literal_eval(match.group("literal"))
    return value if isinstance(value, bytes) else value.encode("latin1")  # what _b() does


class _DescriptorLoader:  # an importlib Loader (importlib.abc costs 10 ms at start-up)
    """Builds a protoc-3 ``_pb2`` module from the descriptor bytes in its source file."""

    def __init__(self, origin: str):
        self.origin = origin

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf.internal import builder

        with open(self.origin, encoding="utf-8") as f:
            data = serialized_descriptor(f.read())
        # Dependencies (other communicator_objects files) must be in the pool first.
        for dependency in descriptor_pb2.FileDescriptorProto.FromString(data).dependency:
            if dependency.endswith(".proto"):
                importlib.import_module(dependency[: -len(".proto")].replace("/", ".") + "_pb2")
        namespace = module.__dict__
        namespace["DESCRIPTOR"] = descriptor_pool.Default().AddSerializedFile(data)
        builder.BuildMessageAndEnumDescriptors(namespace["DESCRIPTOR"], namespace)
        builder.BuildTopDescriptorsAndMessages(namespace["DESCRIPTOR"], module.__name__,
                                               namespace)
        if namespace["DESCRIPTOR"].services_by_name:
            builder.BuildServices(namespace["DESCRIPTOR"], module.__name__, namespace)


class _DescriptorFinder:  # an importlib MetaPathFinder
    """Routes ``mlagents_envs.communicator_objects.*_pb2`` imports to ``_DescriptorLoader``."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package != _PACKAGE or not name.endswith("_pb2"):
            return None  # *_pb2_grpc and everything else: the normal import
        if protobuf_major() < 4:
            return None  # protobuf 3.x loads protoc-3 modules itself
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, spec.origin, loader=_DescriptorLoader(spec.origin))


_FINDER = _DescriptorFinder()


def install() -> None:
    """Makes mlagents-envs' message modules load on protobuf >= 4 (idempotent; the finder
    stands aside under protobuf 3.x). Cheap: imports neither protobuf nor numpy.

    Raises ImportError when one of them was already imported the old way, which would leave
    two incompatible sets of classes in the process.
    """
    if _FINDER in sys.meta_path:
        return
    early = [m for m in sys.modules if m.startswith(_PACKAGE + ".") and m.endswith("_pb2")]
    if early:
        raise ImportError(f"{early[0]} was imported before unity_rl.envs.protocol.install()")
    sys.meta_path.insert(0, _FINDER)


# --------------------------------------------------------------------------------------------
# 2. The step codec
# --------------------------------------------------------------------------------------------
# Per step, mlagents-envs' ``steps_from_proto`` walks every agent once per field and per
# observation, with ``np.array`` over protobuf containers, and ``_generate_step_input`` builds one
# ``AgentActionProto`` per agent. Over upb messages both are dominated by crossings of the
# Python/C boundary, so here each agent is visited once for its scalars, float observations of
# a batch are copied out as the bytes of their ``FloatData`` (one C call per agent), and actions
# are written as the bytes of the whole message with numpy.

# numpy is imported on first use: the import hook above runs at every interpreter start in
# a venv made by scripts/setup.sh (unity_rl_protobuf.pth), where numpy would cost ~0.1 s.
np = None
_add_reduce = None
_NONE_COMPRESSION = 0
_isfinite = math.isfinite
_rpc_utils = None


def _load_numpy() -> None:
    global np, _add_reduce
    import numpy

    np, _add_reduce = numpy, numpy.add.reduce


def _stock():
    """mlagents_envs.rpc_utils, for the rare cases handed back to it (PNG, malformed data)."""
    global _rpc_utils
    if _rpc_utils is None:
        from mlagents_envs import rpc_utils

        _rpc_utils = rpc_utils
    return _rpc_utils


_SMALL_VARINTS = [bytes([i]) for i in range(128)]


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint; negative int32/int64 values in the 10-byte two's complement
    form. Also the stand-in player's (``unity_rl.standin.proto_bytes``)."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if value < 0:
        value &= (1 << 64) - 1  # int32/int64: 10-byte two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def len_field(field_number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): submessage, bytes, string or packed scalars."""
    return varint((field_number << 3) | 2) + varint(len(payload)) + payload


def _check_finite(data: np.ndarray, source: str) -> None:
    """mlagents-envs' ``_raise_on_nan_and_inf``: same messages, and the same test, since its
    ``np.mean`` is this sum divided by a positive count (NaN and infinity survive the
    division, a finite sum stays finite)."""
    if data.size == 0:
        return
    total = _add_reduce(data, axis=None)
    if total != total:
        raise RuntimeError(f"The {source} provided had NaN values.")
    if not _isfinite(total):
        raise RuntimeError(f"The {source} provided had Infinite values.")


def _float_rows(observations: list, size: int) -> np.ndarray | None:
    """[k, size] float32 from the ``float_data`` of k ObservationProtos; None if any differs in
    length. Serialized FloatData is tag, length, then the packed little-endian floats."""
    k = len(observations)
    if size == 0:
        return np.zeros((k, 0), np.float32)
    raw = b"".join([obs.float_data.SerializeToString() for obs in observations])
    head = 2 if size < 32 else 1 + len(varint(4 * size))
    if len(raw) != k * (head + 4 * size):
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(k, head + 4 * size)[:, head:]
    return np.ascontiguousarray(rows).view("<f4").astype(np.float32, copy=False)


def _observation_batch(obs_index: int, obs_spec, infos: list) -> np.ndarray:
    """Observation ``obs_index`` of every agent in ``infos``: [k, *shape] float32."""
    shape = obs_spec.shape
    k = len(infos)
    if k == 0:
        return np.zeros((0,) + shape, dtype=np.float32)
    size = math.prod(shape)
    observations = [info.observations[obs_index] for info in infos]
    if len(shape) == 3:
        # Cameras: PNG (decoded by mlagents-envs, per agent) or raw floats of a fixed shape.
        if any(obs.compression_type != _NONE_COMPRESSION for obs in observations) or any(
                tuple(obs.shape) != shape for obs in observations):
            return _stock()._process_maybe_compressed_observation(obs_index, obs_spec, infos)
        rows = _float_rows(observations, size)
        if rows is None:
            return _stock()._process_maybe_compressed_observation(obs_index, obs_spec, infos)
        return rows.reshape((k,) + shape)
    rows = _float_rows(observations, size)
    if rows is None:  # sizes disagree: mlagents-envs' path raises its own error
        return _stock()._process_rank_one_or_two_observation(obs_index, obs_spec, infos)
    rows = rows.reshape((k,) + shape)
    _check_finite(rows, "observations")
    return rows


def steps_from_agent_infos(agent_infos: Sequence, spec):
    """``(DecisionSteps, TerminalSteps)`` of one behavior's ``ListAgentInfoProto.value``:
    the same arrays, dtypes and errors as ``mlagents_envs.rpc_utils.steps_from_proto``."""
    from mlagents_envs.base_env import DecisionSteps, TerminalSteps

    if np is None:
        _load_numpy()
    infos = list(agent_infos)
    scalars = [(info.done, info.reward, info.id, info.group_id, info.group_reward,
                info.max_step_reached) for info in infos]
    if any(row[0] for row in scalars):
        decisions = [info for info, row in zip(infos, scalars) if not row[0]]
        terminals = [info for info, row in zip(infos, scalars) if row[0]]
        dec_rows = [row for row in scalars if not row[0]]
        term_rows = [row for row in scalars if row[0]]
    else:
        decisions, terminals, dec_rows, term_rows = infos, [], scalars, []
    dec_obs, term_obs = [], []
    for obs_index, obs_spec in enumerate(spec.observation_specs):
        dec_obs.append(_observation_batch(obs_index, obs_spec, decisions))
        term_obs.append(_observation_batch(obs_index, obs_spec, terminals))
    dec_cols = _columns(dec_rows)
    term_cols = _columns(term_rows)
    for cols in (dec_cols, term_cols):
        _check_finite(cols[0], "rewards")
    for cols in (dec_cols, term_cols):
        _check_finite(cols[3], "group_rewards")
    action_mask = None
    branches = spec.action_spec.discrete_branches
    if spec.action_spec.discrete_size > 0 and decisions:
        action_mask = _action_masks(decisions, int(np.sum(branches)), branches)
    decision_steps = DecisionSteps(dec_obs, dec_cols[0], dec_cols[1], action_mask, dec_cols[2],
                                   dec_cols[3])
    terminal_steps = TerminalSteps(term_obs, term_cols[0], term_cols[4], term_cols[1],
                                   term_cols[2], term_cols[3])
    return decision_steps, terminal_steps


def _columns(rows: list) -> tuple:
    """rewards float32, ids int32, group ids (list of int, as mlagents-envs), group rewards
    float32, max_step_reached bool."""
    if not rows:
        return (np.zeros(0, np.float32), np.zeros(0, np.int32), [], np.zeros(0, np.float32),
                np.zeros(0, bool))
    _, rewards, ids, group_ids, group_rewards, max_step = zip(*rows)
    return (np.array(rewards, np.float32), np.array(ids, np.int32), list(group_ids),
            np.array(group_rewards, np.float32), np.array(max_step, bool))


def _action_masks(decisions: list, size: int, branches) -> list:
    """Per branch, [k, branch size] bool, True = unavailable; an agent that sent no mask (or one
    of the wrong length) gets all actions available, as in mlagents-envs."""
    masks = [info.action_mask for info in decisions]
    if all(len(m) == size for m in masks):
        matrix = np.array([list(m) for m in masks], dtype=bool).reshape(len(masks), size)
    else:
        matrix = np.zeros((len(masks), size), dtype=bool)
        for row, m in enumerate(masks):
            if len(m) == size:
                matrix[row] = list(m)
    return np.split(matrix, np.cumsum(branches)[:-1], axis=1)


def encode_actions(continuous: np.ndarray, discrete: np.ndarray) -> bytes:
    """The repeated ``value`` fields of a ListAgentActionProto, one AgentActionProto per row:
    ``vector_actions_deprecated`` (1) = continuous then discrete as floats,
    ``continuous_actions`` (6), ``discrete_actions`` (7), each packed and omitted when empty,
    exactly as protobuf serializes mlagents-envs' own messages."""
    if np is None:
        _load_numpy()
    k = continuous.shape[0]
    if k == 0:
        return b""
    cont = np.ascontiguousarray(continuous, dtype="<f4").reshape(k, -1)
    disc = np.ascontiguousarray(discrete, dtype=np.int64).reshape(k, -1)
    nc, nd = cont.shape[1], disc.shape[1]
    if nd and not (0 <= disc.min() and disc.max() < 128):
        return b"".join(len_field(1, _encode_action(c, d)) for c, d in zip(cont, disc))
    parts = []  # (constant bytes or a [k, m] uint8 block), in field order
    if nc + nd:
        deprecated = np.concatenate([cont, disc.astype("<f4")], axis=1) if nd else cont
        parts += [b"\x0a" + varint(4 * (nc + nd)), deprecated.view(np.uint8)]
    if nc:
        parts += [b"\x32" + varint(4 * nc), cont.view(np.uint8)]
    if nd:
        parts += [b"\x3a" + varint(nd), disc.astype(np.uint8)]
    body_len = sum(len(p) if isinstance(p, bytes) else p.shape[1] for p in parts)
    parts.insert(0, b"\x0a" + varint(body_len))
    out = np.empty((k, len(parts[0]) + body_len), np.uint8)
    at = 0
    for part in parts:
        width = len(part) if isinstance(part, bytes) else part.shape[1]
        out[:, at : at + width] = np.frombuffer(part, np.uint8) if isinstance(part, bytes) else part
        at += width
    return out.tobytes()


def _encode_action(cont: np.ndarray, disc: np.ndarray) -> bytes:
    """One AgentActionProto, for discrete values that do not fit one varint byte."""
    out = b""
    deprecated = np.concatenate([cont, disc.astype("<f4")]).astype("<f4").tobytes()
    if deprecated:
        out += len_field(1, deprecated)
    if cont.size:
        out += len_field(6, cont.astype("<f4").tobytes())
    if disc.size:
        out += len_field(7, b"".join(varint(int(v)) for v in disc.astype(np.int32)))
    return out


def encode_step_input(actions: dict, n_agents: dict, side_channel: bytes) -> bytes:
    """The bytes of the UnityInputProto that ``UnityEnvironment._generate_step_input`` builds:
    command STEP, for each behavior with agents its first ``n_agents[name]`` action rows
    (``actions[name]`` is an ActionTuple), and the side-channel bytes."""
    rl_input = b""
    for name, action in actions.items():
        n = n_agents.get(name, 0)
        if n == 0:
            continue
        continuous, discrete = action.continuous, action.discrete
        if continuous is None or discrete is None:  # an ActionTuple given only one part
            if np is None:
                _load_numpy()
            continuous = np.zeros((n, 0), np.float32) if continuous is None else continuous
            discrete = np.zeros((n, 0), np.int32) if discrete is None else discrete
        body = encode_actions(continuous[:n], discrete[:n])
        rl_input += len_field(1, len_field(1, name.encode()) + len_field(2, body))
    if side_channel:
        rl_input += len_field(5, side_channel)
    return len_field(1, rl_input)
