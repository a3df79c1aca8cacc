"""What several ``make_*_reference.py`` generators share (run, as they are, with the Python of an
mlagents-learn venv; nothing here imports this project):

- ``vector_spec(case)``: ML-Agents' ``BehaviorSpec`` of the case's vector observations
  (``obs``: shapes, named ``obs<i>``) and actions (``continuous``, ``branches``);
- ``signal_settings(case)``: the case's learned reward signal beside the extrinsic one, as
  ML-Agents' ``reward_signals`` settings (``signal``: "curiosity" or "rnd"; {} without one);
- ``actor_output(actor, case)``: the actor's output layer under this project's names
  (``actor.<2·layers>``: continuous means then branch rows; ``actor_logstd``).
"""
from __future__ import annotations

import numpy as np
import torch
from mlagents.trainers.settings import (CuriositySettings, NetworkSettings, RewardSignalType,
                                        RNDSettings)
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec,
                                    ObservationType)


def vector_spec(case: dict) -> BehaviorSpec:
    return BehaviorSpec([ObservationSpec(tuple(s), (DimensionProperty.NONE,),
                                         ObservationType.DEFAULT, f"obs{i}")
                         for i, s in enumerate(case["obs"])],
                        ActionSpec(case["continuous"], tuple(case["branches"])))


def signal_settings(case: dict) -> dict:
    """{type: settings} of the case's learned reward signal ({} without one)."""
    if "signal" not in case:
        return {}
    network = NetworkSettings(hidden_units=case["signal_hidden"], num_layers=case["signal_layers"])
    kind, settings = {"curiosity": (RewardSignalType.CURIOSITY, CuriositySettings),
                      "rnd": (RewardSignalType.RND, RNDSettings)}[case["signal"]]
    return {kind: settings(gamma=case["signal_gamma"], strength=case["strength"],
                           network_settings=network, learning_rate=case["signal_lr"])}


def actor_output(actor: dict, case: dict) -> dict[str, np.ndarray]:
    """The output rows of ML-Agents' actor state dict as one layer ``actor.<2·layers>``
    (continuous means, then each branch's logits) and ``actor_logstd``."""
    out = {}
    head = 2 * case["layers"]
    rows_w, rows_b = [], []
    if case["continuous"]:
        rows_w.append(actor["action_model._continuous_distribution.mu.weight"])
        rows_b.append(actor["action_model._continuous_distribution.mu.bias"])
        out["actor_logstd"] = actor["action_model._continuous_distribution.log_sigma"].numpy()[0]
    for b in range(len(case["branches"])):
        rows_w.append(actor[f"action_model._discrete_distribution.branches.{b}.weight"])
        rows_b.append(actor[f"action_model._discrete_distribution.branches.{b}.bias"])
    out[f"actor.{head}.weight"] = torch.cat(rows_w).numpy()
    out[f"actor.{head}.bias"] = torch.cat(rows_b).numpy()
    return out
