"""``trainer_type: ddpg`` — Deep Deterministic Policy Gradient (continuous actions), with
optional prioritised replay and an Ape-X style shared replay in async runs.

Files: ``config.py`` (DDPGConfig, a ``ReplayConfig``; torch-free), ``learner.py`` (DDPGLearner,
an ``OffPolicyLearner``; DDPGPolicy), ``nets.py``, ``acting.py`` (the actors' policy: exploration
noise over ``OffPolicyActingPolicy``), ``host.py`` (``DDPGAlgorithm``: the learner and acting
policy plugged into ``unity_rl.algorithms.offpolicy``, which holds replay, replay ratio, PER,
Ape-X placement and replay checkpoints), ``export.py`` (saved policy -> module for evaluate and
ONNX).
"""
import dataclasses

from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.algorithms.spec import TrainerTypeSpec

SEGMENT_STEPS = 256
"""Agent-steps per actor segment unless ``unity_rl.segment_steps`` says otherwise."""

SPEC = TrainerTypeSpec.declare(
    __name__, DDPGConfig,
    yaml_keys={f.name: f.name for f in dataclasses.fields(DDPGConfig) if f.name != "gamma"},
    algorithm=".host:DDPGAlgorithm",
    default_segment_steps=lambda hp, num_actors, time_horizon=0: SEGMENT_STEPS,
    self_play=False)  # not an mlagents-learn trainer type: no GhostTrainer semantics to follow
