"""unity_rl: Unity ML-Agents builds as fast gymnasium vector environments, and the trainers.

Public API: ``UnityVecEnv`` (gymnasium VectorEnv, one slot per agent), ``AgentStream``
(per-agent experience over several builds), ``AgentKey``, ``LaunchSettings`` (how builds start:
the ``settings=`` of both). They are imported lazily so that light sub-packages (the stand-in
builds) start fast.
"""
import importlib
import os

from unity_rl.envs import protocol as _protocol

# mlagents-envs' protobuf message modules, built for the installed protobuf (upb): must precede
# any import of mlagents_envs.communicator_objects (see unity_rl/envs/protocol.py).
_protocol.install()

# gRPC prints "Got goaway" noise whenever a build closes unless told otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__version__ = "0.1.0"

_PUBLIC = {
    "AgentKey": "unity_rl.envs.types",
    "AgentStream": "unity_rl.envs.agent_stream",
    "LaunchSettings": "unity_rl.envs.settings",
    "StepResult": "unity_rl.envs.agent_stream",
    "UnityVecEnv": "unity_rl.envs.vec_env",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'unity_rl' has no attribute {name!r}")
