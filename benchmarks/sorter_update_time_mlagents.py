"""The mlagents-learn 1.1.0 half of ``sorter_update_time.py``: one PPO update of Unity's Sorter
config by ML-Agents' own ``PPOTrainer`` / ``TorchPPOOptimizer``, timed.

Run with the Python of an mlagents-learn venv (the two projects do not install side by side)::

    VENV/bin/python benchmarks/sorter_update_time_mlagents.py DATA.npz OUT.json [--threads 1]

DATA.npz is written by ``sorter_update_time.py`` (Sorter-shaped observations: a (20, 23) buffer
sensor with the first k rows filled, the 10-float RB sensor and the 8-float stacked vector;
3 branches of 3; the config's sizes). Every trajectory goes through the trainer's
``_process_trajectory`` (value estimates, GAE; not timed), then ``_update_policy`` (the epochs of
minibatches, ``TorchPPOOptimizer.update`` each) is timed. Writes seconds to OUT.json.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers
from mlagents.trainers.ppo.optimizer_torch import PPOSettings
from mlagents.trainers.ppo.trainer import PPOTrainer
from mlagents.trainers.settings import (NetworkSettings, RewardSignalSettings, RewardSignalType,
                                        ScheduleType, TrainerSettings)
from mlagents.trainers.torch_entities.action_log_probs import LogProbsTuple
from mlagents.trainers.trajectory import AgentExperience, Trajectory
from mlagents_envs.base_env import (ActionSpec, ActionTuple, BehaviorSpec, DimensionProperty,
                                    ObservationSpec, ObservationType)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with np.load(args.data) as npz:
        d = {k: npz[k] for k in npz.files}
    shapes = [tuple(int(x) for x in d[f"shape{i}"]) for i in range(3)]
    props = {1: (DimensionProperty.NONE,),
             2: (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)}
    spec = BehaviorSpec([ObservationSpec(s, props[len(s)], ObservationType.DEFAULT, f"obs{i}")
                         for i, s in enumerate(shapes)], ActionSpec(0, (3, 3, 3)))
    n, length = int(d["buffer_size"]), int(d["length"])
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=int(d["batch_size"]), buffer_size=n - 1,
                                    learning_rate=3e-4, beta=5e-3, epsilon=0.2, lambd=0.95,
                                    num_epoch=int(d["num_epoch"]),
                                    learning_rate_schedule=ScheduleType.CONSTANT),
        network_settings=NetworkSettings(normalize=False, hidden_units=int(d["hidden"]),
                                         num_layers=int(d["layers"])),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=0.99)},
        max_steps=5_000_000)
    torch.manual_seed(0)
    trainer = PPOTrainer("Sorter", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("Sorter")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, spec))
    t0 = time.perf_counter()
    for k in range(n // length):
        steps = []
        for t in range(length):
            i = k * length + t
            steps.append(AgentExperience(
                obs=[d[f"obs{j}"][i] for j in range(3)], reward=float(d["rewards"][i]),
                done=bool(t == length - 1 and d["terminated"][k]),
                action=ActionTuple(continuous=np.zeros(0, np.float32),
                                   discrete=d["discrete"][i].astype(np.int32)),
                action_probs=LogProbsTuple(continuous=np.zeros(0, np.float32),
                                           discrete=d["logprobs"][i]),
                action_mask=[np.zeros(3, bool)] * 3, prev_action=np.zeros(3, np.int32),
                interrupted=False, memory=None, group_status=[], group_reward=0.0))
        trainer._process_trajectory(Trajectory(
            steps=steps, next_obs=[d[f"last_obs{j}"][k] for j in range(3)], next_group_obs=[],
            agent_id=f"agent-{k}", behavior_id="Sorter"))
    prepare = time.perf_counter() - t0
    assert trainer._is_ready_update()
    t0 = time.perf_counter()
    trainer._update_policy()
    update = time.perf_counter() - t0
    minibatches = int(d["num_epoch"]) * (n // int(d["batch_size"]))
    result = {"side": "mlagents-learn 1.1.0", "threads": torch.get_num_threads(),
              "prepare_s": prepare, "update_s": update, "minibatches": minibatches,
              "per_minibatch_s": update / minibatches}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
