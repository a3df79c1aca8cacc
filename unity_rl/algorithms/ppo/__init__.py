"""``trainer_type: ppo`` — Proximal Policy Optimization as mlagents-learn 1.1.0 runs it.

Files: ``config.py`` (PPOConfig, YAML keys; torch-free), ``learner.py`` (PPOLearner),
``model.py`` / ``losses.py`` (network and loss pieces), ``acting.py`` (PPOPolicy and the actors'
policy factory), ``host.py`` (rollout buffer + learner on the runtime seam), ``export.py`` (saved policy
-> module for evaluate and ONNX).
"""
from unity_rl.algorithms.ppo.config import (PPO_KEYS, OFF_VALUES, PPOConfig, default_segment_steps,
                                            fill_defaults)
from unity_rl.algorithms.spec import TrainerTypeSpec

SPEC = TrainerTypeSpec.declare(
    __name__, PPOConfig, yaml_keys=PPO_KEYS, algorithm=".host:PPOAlgorithm",
    default_segment_steps=default_segment_steps, fill_defaults=fill_defaults,
    off_values=OFF_VALUES, behavioral_cloning=True)
