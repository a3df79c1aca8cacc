"""Writes ``ppo_<signal>.npz``: one PPO update of mlagents-learn 1.1.0 with a learned reward
signal beside the extrinsic one (``reward_signals: {extrinsic, curiosity}`` or ``{extrinsic,
rnd}``), as ML-Agents' own ``PPOTrainer`` performs it.

Run with the Python of an mlagents-learn venv, from the repository root (as
``make_reference.py``, whose trajectory sampling and feeding it reuses)::

    DIR/venv/bin/python tests/algos/mlagents_reference/make_ppo_signal_reference.py

Curiosity's reward is 0 until its first update, so the curiosity case first updates the
provider once on a random batch (saved: the test repeats it) so that the trajectories'
curiosity rewards are not all 0. Then ``_process_trajectory`` evaluates each trajectory's
rewards per stream (one value head each, curiosity and RND with ``ignore_done``) and
``_update_policy`` runs the PPO epochs, updating the signal after each minibatch's PPO step.
It saves the policy's and the signal's weights before and after.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_reference as base  # noqa: E402
import make_reward_signal_reference as signals  # noqa: E402
from reference_common import signal_settings, vector_spec  # noqa: E402
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers  # noqa: E402
from mlagents.trainers.buffer import RewardSignalUtil  # noqa: E402
from mlagents.trainers.ppo.optimizer_torch import PPOSettings  # noqa: E402
from mlagents.trainers.ppo.trainer import PPOTrainer  # noqa: E402
from mlagents.trainers.settings import (NetworkSettings, RewardSignalSettings,  # noqa: E402
                                        RewardSignalType, TrainerSettings)

HERE = Path(__file__).resolve().parent
CASES = {
    "curiosity": dict(obs=[(8,)], continuous=0, branches=(3,), hidden=16, layers=2, gamma=0.9,
                      lambd=0.95, beta=5e-3, epochs=3, signal="curiosity", signal_gamma=0.8,
                      strength=0.5, signal_hidden=12, signal_layers=2, signal_lr=1e-3),
    "rnd": dict(obs=[(6,)], continuous=2, branches=(), hidden=16, layers=2, gamma=0.99,
                lambd=0.95, beta=5e-3, epochs=3, signal="rnd", signal_gamma=0.9, strength=0.3,
                signal_hidden=8, signal_layers=3, signal_lr=1e-3),
}


def trainer(case: dict) -> PPOTrainer:
    spec = vector_spec(case)
    n = base._buffer_rows(case)
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=n, buffer_size=n - 1,
                                    learning_rate=base.LEARNING_RATE, beta=case["beta"],
                                    epsilon=base.EPSILON, lambd=case["lambd"],
                                    num_epoch=case["epochs"]),
        network_settings=NetworkSettings(normalize=False, hidden_units=case["hidden"],
                                         num_layers=case["layers"]),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=case["gamma"]),
                        **signal_settings(case)},
        max_steps=base.MAX_STEPS)
    t = PPOTrainer("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    t.add_policy(behavior_id, t.create_policy(behavior_id, spec))
    return t


def policy_weights(t: PPOTrainer, case: dict) -> dict[str, np.ndarray]:
    out = base._our_names(t, case)
    critic = t.optimizer.critic.state_dict()
    for key in ("weight", "bias"):
        out[f"value_heads.{case['signal']}.{key}"] = critic[
            f"value_heads.value_heads.{case['signal']}.{key}"].numpy().copy()
    return out


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    torch.manual_seed(seed)
    t = trainer(case)
    provider = t.optimizer.reward_signals[case["signal"]]
    rng = np.random.default_rng(seed)
    out = {f"before/{k}": v for k, v in policy_weights(t, case).items()}
    out.update({f"signal_before/{k}": v for k, v in signals.weights(provider).items()})
    if case["signal"] == "curiosity":  # one update first: its rewards are 0 before one
        pre_case = dict(case, padded=0)
        buffer, pre = signals.batch(pre_case, rng)
        provider.update(buffer)
        out.update({f"pre/{k}": v for k, v in pre.items()})
    data = base._sample(t, case, rng)
    base._feed(t, case, data)
    out["data/signal_rewards"] = np.asarray(  # what _process_trajectory stored per step
        t.update_buffer[RewardSignalUtil.rewards_key(case["signal"])].get_batch(), np.float32)
    assert t._is_ready_update(), "the buffer must trigger exactly one update"
    t._update_policy()
    out.update({f"after/{k}": v for k, v in policy_weights(t, case).items()})
    out.update({f"signal_after/{k}": v for k, v in signals.weights(provider).items()})
    out.update({f"data/{k}": v for k, v in data.items()})
    out.update({f"case/{k}": np.asarray(v) for k, v in case.items() if k != "obs"})
    out.update({f"case/obs_shape{i}": np.asarray(s) for i, s in enumerate(case["obs"])})
    out.update({"case/learning_rate": np.asarray(base.LEARNING_RATE),
                "case/epsilon": np.asarray(base.EPSILON),
                "case/max_steps": np.asarray(base.MAX_STEPS),
                "case/length": np.asarray(base.LENGTH),
                "case/num_trajectories": np.asarray(base.NUM_TRAJECTORIES)})
    path = HERE / f"ppo_{name}.npz"
    np.savez_compressed(path, **out)
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
