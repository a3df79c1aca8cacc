"""``trainer_type: ddpg`` — Deep Deterministic Policy Gradient (continuous actions), with
optional prioritised replay and an Ape-X style shared replay in async runs.

Files: ``config.py`` (DDPGConfig; torch-free), ``learner.py`` (DDPGLearner, DDPGPolicy),
``nets.py``, ``acting.py`` (the actors' policy and factory), ``host.py`` (replay + learner on the
runtime seam), ``export.py`` (saved policy -> module for evaluate and ONNX).
"""
import dataclasses

from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.algorithms.spec import TrainerTypeSpec

SEGMENT_STEPS = 256
"""Agent-steps per actor segment unless ``unity_rl.segment_steps`` says otherwise."""

SPEC = TrainerTypeSpec(
    name="ddpg",
    hyperparameters=DDPGConfig,
    yaml_keys={f.name: f.name for f in dataclasses.fields(DDPGConfig) if f.name != "gamma"},
    algorithm="unity_rl.algorithms.ddpg.host:DDPGAlgorithm",
    policy_loader="unity_rl.algorithms.ddpg.export:load_policy_module",
    default_segment_steps=lambda hp, num_actors: SEGMENT_STEPS,
)
