"""``trainer_type: sac`` — Soft Actor-Critic as mlagents-learn 1.1.0 runs it (every key with its
meaning), on the off-policy seam: sync or async actors, local or Ray, the replay shared by the
actors in async local runs; with ``network_settings.memory`` an LSTM in every network, memories
carried per agent by the actors and minibatches of whole sequences from the replay
(docs/sac.md, "Memory").

Files: ``config.py`` (SACConfig, YAML keys, quirk fixes; torch-free), ``nets.py`` (π, V, Q as
ML-Agents builds them), ``learner.py`` (SACLearner: ML-Agents' update), ``acting.py`` (the
actors' policy), ``host.py`` (``SACAlgorithm``), ``export.py`` (saved policy -> module for
evaluate and ONNX).
"""
from unity_rl.algorithms.sac.config import QUIRK_FIXES, SAC_KEYS, SACConfig, default_segment_steps
from unity_rl.algorithms.spec import TrainerTypeSpec

SPEC = TrainerTypeSpec.declare(
    __name__, SACConfig, yaml_keys=SAC_KEYS, algorithm=".host:SACAlgorithm",
    default_segment_steps=default_segment_steps, behavioral_cloning=True,
    from_elsewhere=("max_steps",),  # no gamma field: each reward signal has its discount
    quirk_fixes=QUIRK_FIXES)
