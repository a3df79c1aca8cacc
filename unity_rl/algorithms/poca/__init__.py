"""``trainer_type: poca`` — MA-POCA (Cohen et al. 2021, arXiv:2111.05992) as mlagents-learn
1.1.0 runs it (``../shared/mlagents_learn/TRAINERS.md`` §3; docs/multi-agent.md).

Files: ``config.py`` (POCAConfig, YAML keys; torch-free), ``model.py`` (the centralised critic:
ML-Agents' ``MultiAgentNetworkBody`` and value heads), ``learner.py`` (POCALearner: values,
baselines, λ-returns, the update), ``host.py`` (``POCAAlgorithm``: PPO's rollout-buffer host,
actors that collect groups). The actor, its acting copy and the exported policy are PPO's
(``ActorCritic`` without a critic of its own), as ML-Agents exports POCA: the actor only.
``behavioral_cloning`` is PPO's (``ppo/imitation.py``) on that actor, once after each update.
"""
from unity_rl.algorithms.poca.config import (POCA_KEYS, POCAConfig, default_segment_steps,
                                             fill_defaults)
from unity_rl.algorithms.spec import TrainerTypeSpec

SPEC = TrainerTypeSpec.declare(
    __name__, POCAConfig, yaml_keys=POCA_KEYS, algorithm=".host:POCAAlgorithm",
    policy_loader="unity_rl.algorithms.ppo.export:load_policy_module",  # the actor: PPO's
    default_segment_steps=default_segment_steps, fill_defaults=fill_defaults,
    behavioral_cloning=True)  # ML-Agents' TorchOptimizer gives POCA a BCModule too
