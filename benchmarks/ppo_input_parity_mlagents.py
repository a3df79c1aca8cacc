"""The mlagents-learn 1.1.0 half of ``ppo_input_parity.py``: one fixed run, recorded.

Run with the Python of an mlagents-learn venv (the two projects do not install side by side)::

    .mlagents_learn/venv/bin/python benchmarks/ppo_input_parity_mlagents.py OUT.npz [--preset small]

A small numpy environment shaped like 3DBall (12 agents, 8 vector floats with 3DBall's scales and
a non-zero mean, 2 continuous actions, +0.1 a step, -1 and end when the ball leaves the platform,
an interrupted end at ``max_step`` decisions) is driven the way mlagents-learn's
``TrainerController`` drives a build: every step the step result goes through ML-Agents' own
``AgentProcessor`` (trajectory cuts at ``time_horizon`` or an episode end), the trainer's
``advance()`` (``PPOTrainer._process_trajectory``: normaliser update, value estimates, GAE; then
``_update_policy`` once ``_is_ready_update``) and the next actions come from ``TorchPolicy`` with
whatever normaliser and weights it has at that moment.

Written to OUT.npz: the raw step stream (decision and terminal rows, the actions and log-probs
taken, the acting normaliser at each step), every trajectory as it reached the trainer, and per
update the update buffer as ``_update_policy`` received it (observations, value estimates as
computed at arrival, the value-clipping anchor the update reads, returns, advantages before
normalisation), the normalisers of actor and critic, and the weights
before and after (under ``ActorCritic``'s names, as ``tests/algos/mlagents_reference``).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.agent_processor import AgentManagerQueue, AgentProcessor
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers
from mlagents.trainers.buffer import BufferKey, ObservationKeyPrefix, RewardSignalUtil
from mlagents.trainers.ppo.optimizer_torch import PPOSettings
from mlagents.trainers.ppo.trainer import PPOTrainer
from mlagents.trainers.settings import (NetworkSettings, RewardSignalSettings, RewardSignalType,
                                        TrainerSettings)
from mlagents.trainers.stats import StatsReporter
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DecisionSteps, DimensionProperty,
                                    ObservationSpec, ObservationType, TerminalSteps)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "algos" / "mlagents_reference"))
from make_reference import _our_names  # noqa: E402  (ML-Agents' weights under our names)

PRESETS = {
    # Unity's 3DBall.yaml numbers, a shorter run
    "3dball": dict(agents=12, max_step=1000, time_horizon=1000, buffer_size=12000, batch_size=64,
                   num_epoch=3, lambd=0.99, gamma=0.99, beta=1e-3, hidden=128, layers=2,
                   env_steps=3000, learning_rate=3e-4, max_steps=500_000),
    # the same paths (cuts, interruptions, carried trajectories) in seconds
    "small": dict(agents=12, max_step=100, time_horizon=64, buffer_size=2000, batch_size=64,
                  num_epoch=3, lambd=0.99, gamma=0.99, beta=1e-3, hidden=128, layers=2,
                  env_steps=700, learning_rate=3e-4, max_steps=500_000),
}
OBS_MEAN = np.array([0.0, 0.0, 0.0, 4.0, 0.0, 0.0, -1.0, 0.0])
OBS_SCALE = np.array([0.1, 0.1, 1.0, 0.3, 1.0, 1.5, 1.0, 1.5])


class ToyBall:
    """3DBall's interface with numpy dynamics (not 3DBall's physics: only its shape and scales)."""

    def __init__(self, agents: int, max_step: int, rng: np.random.Generator):
        self.n, self.max_step, self.rng = agents, max_step, rng
        self.state = np.zeros((agents, 8))
        self.steps = np.zeros(agents, int)
        self.fresh = np.ones(agents, bool)
        self.ended: list[tuple[int, np.ndarray, float, bool]] = []
        for i in range(agents):
            self._reset(i)

    def _reset(self, i: int) -> None:
        self.state[i] = OBS_MEAN + OBS_SCALE * self.rng.normal(size=8) * 0.5
        self.steps[i] = 0
        self.fresh[i] = True

    def get_steps(self):
        dec_ids = np.arange(self.n, dtype=np.int32)
        rewards = np.where(self.fresh, 0.0, 0.1).astype(np.float32)
        self.fresh[:] = False
        decisions = DecisionSteps([self.state.astype(np.float32)], rewards, dec_ids, None,
                                  np.zeros(self.n, np.int32), np.zeros(self.n, np.float32))
        if self.ended:
            ids, obs, rew, intr = zip(*self.ended)
            terminals = TerminalSteps([np.stack(obs).astype(np.float32)],
                                      np.array(rew, np.float32), np.array(intr, bool),
                                      np.array(ids, np.int32), np.zeros(len(ids), np.int32),
                                      np.zeros(len(ids), np.float32))
        else:
            terminals = TerminalSteps([np.zeros((0, 8), np.float32)], np.zeros(0, np.float32),
                                      np.zeros(0, bool), np.zeros(0, np.int32),
                                      np.zeros(0, np.int32), np.zeros(0, np.float32))
        self.ended = []
        return decisions, terminals

    def step(self, actions: np.ndarray) -> None:
        s = self.state
        s[:, 0:2] = np.clip(s[:, 0:2] + 0.05 * actions, -0.4, 0.4)
        s[:, 5] += 0.5 * s[:, 0] + 0.05 * self.rng.normal(size=self.n)
        s[:, 7] += 0.5 * s[:, 1] + 0.05 * self.rng.normal(size=self.n)
        s[:, 6] = -1.0 + 0.5 * self.rng.normal(size=self.n)
        s[:, 2] += 0.05 * s[:, 5]
        s[:, 4] += 0.05 * s[:, 7]
        s[:, 3] = 4.0 + 0.3 * self.rng.normal(size=self.n)
        self.steps += 1
        for i in range(self.n):
            fell = abs(s[i, 2]) > 3 or abs(s[i, 4]) > 3
            if fell or self.steps[i] >= self.max_step:
                self.ended.append((i, s[i].copy(), -1.0 if fell else 0.1, not fell))
                self._reset(i)


def _normalizer(module) -> dict[str, np.ndarray]:
    norm = module.network_body.observation_encoder.processors[0].normalizer
    return {"mean": norm.running_mean.numpy().copy(), "m2": norm.running_variance.numpy().copy(),
            "steps": np.asarray(float(norm.normalization_steps))}


def run(preset: str, seed: int) -> dict[str, np.ndarray]:
    p = PRESETS[preset]
    torch.manual_seed(seed)
    spec = BehaviorSpec([ObservationSpec((8,), (DimensionProperty.NONE,), ObservationType.DEFAULT,
                                         "obs0")], ActionSpec(2, ()))
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=p["batch_size"], buffer_size=p["buffer_size"],
                                    learning_rate=p["learning_rate"], beta=p["beta"], epsilon=0.2,
                                    lambd=p["lambd"], num_epoch=p["num_epoch"]),
        network_settings=NetworkSettings(normalize=True, hidden_units=p["hidden"],
                                         num_layers=p["layers"]),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=p["gamma"])},
        max_steps=p["max_steps"], time_horizon=p["time_horizon"])
    trainer = PPOTrainer("B", 100, settings, True, False, seed, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    policy = trainer.create_policy(behavior_id, spec)
    trainer.add_policy(behavior_id, policy)
    processor = AgentProcessor(policy, "B", StatsReporter("B"), max_trajectory_length=p["time_horizon"])
    queue: AgentManagerQueue = AgentManagerQueue("B")
    processor.publish_trajectory_queue(queue)
    trainer.subscribe_trajectory_queue(queue)
    case = {"layers": p["layers"], "continuous": 2, "branches": ()}

    out: dict[str, np.ndarray] = {f"preset/{k}": np.asarray(v) for k, v in p.items()}
    out["before0"] = None  # placeholder keeps the key order readable
    stream: list[dict] = []
    trajectories: list[dict] = []
    updates: list[dict] = []
    t_now = [0]

    process = trainer._process_trajectory

    def recording_process(trajectory):
        steps = trajectory.steps
        trajectories.append({"t": t_now[0], "agent": int(trajectory.agent_id.split("-")[-1]),
                             "length": len(steps), "done": bool(steps[-1].done),
                             "interrupted": bool(steps[-1].interrupted),
                             "next_obs": np.asarray(trajectory.next_obs[0], np.float32)})
        process(trajectory)
    trainer._process_trajectory = recording_process

    # ML-Agents 1.1.0 stores its value estimates under the *returns* key
    # (RewardSignalUtil.value_estimates_key; Unity-Technologies/ml-agents#6281), so the buffer
    # no longer holds them at update time: catch them as they are computed.
    estimate = trainer.optimizer.get_trajectory_value_estimates
    arrived_values: list[np.ndarray] = []

    def recording_estimate(batch, next_obs, done, *args):
        values, value_next, memories = estimate(batch, next_obs, done, *args)
        arrived_values.append(np.asarray(values["extrinsic"], np.float32))
        return values, value_next, memories
    trainer.optimizer.get_trajectory_value_estimates = recording_estimate

    update = trainer._update_policy

    def recording_update():
        buf = trainer.update_buffer
        name = "extrinsic"
        updates.append({
            "t": t_now[0],
            "obs": np.asarray(buf[(ObservationKeyPrefix.OBSERVATION, 0)].get_batch(), np.float32),
            "actions": np.asarray(buf[BufferKey.CONTINUOUS_ACTION].get_batch(), np.float32),
            "logprobs": np.asarray(buf[BufferKey.CONTINUOUS_LOG_PROBS].get_batch(), np.float32),
            "rewards": np.asarray(buf[BufferKey.ENVIRONMENT_REWARDS].get_batch(), np.float32),
            "values": np.concatenate(arrived_values),
            "value_anchor": np.asarray(buf[RewardSignalUtil.value_estimates_key(name)].get_batch(), np.float32),
            "returns": np.asarray(buf[RewardSignalUtil.returns_key(name)].get_batch(), np.float32),
            "advantages": np.asarray(buf[BufferKey.ADVANTAGES].get_batch(), np.float32),
            "done": np.asarray(buf[BufferKey.DONE].get_batch(), bool),
            **{f"actor_norm/{k}": v for k, v in _normalizer(trainer.policy.actor).items()},
            **{f"critic_norm/{k}": v for k, v in _normalizer(trainer.optimizer.critic).items()},
            **{f"before/{k}": v for k, v in _our_names(trainer, case).items()},
        })
        arrived_values.clear()
        result = update()
        updates[-1].update({f"after/{k}": v for k, v in _our_names(trainer, case).items()})
        return result
    trainer._update_policy = recording_update

    env = ToyBall(p["agents"], p["max_step"], np.random.default_rng(seed))
    from mlagents.trainers.action_info import ActionInfo
    action_info = ActionInfo.empty()
    for t in range(p["env_steps"]):
        t_now[0] = t
        decisions, terminals = env.get_steps()
        processor.add_experiences(decisions, terminals, 0, action_info)
        trainer.advance()
        acting_norm = _normalizer(policy.actor)
        action_info = policy.get_action(decisions, 0)
        run_out = action_info.outputs
        stream.append({"dec_ids": decisions.agent_id.copy(), "dec_obs": decisions.obs[0].copy(),
                       "dec_reward": decisions.reward.copy(),
                       "term_ids": terminals.agent_id.copy(), "term_obs": terminals.obs[0].copy(),
                       "term_reward": terminals.reward.copy(),
                       "term_interrupted": terminals.interrupted.copy(),
                       "actions": np.asarray(run_out["action"].continuous, np.float32),
                       "logprobs": np.asarray(run_out["log_probs"].continuous, np.float32),
                       **{f"norm/{k}": v for k, v in acting_norm.items()}})
        env.step(np.asarray(action_info.env_action.continuous, np.float64))

    del out["before0"]
    out["num_steps"] = np.asarray(len(stream))
    for k in stream[0]:
        out[f"stream/{k}"] = np.concatenate([np.atleast_1d(s[k])[None] if s[k].ndim == 0 or k.startswith("norm/")
                                             else s[k] for s in stream])
    out["stream/dec_count"] = np.array([len(s["dec_ids"]) for s in stream])
    out["stream/term_count"] = np.array([len(s["term_ids"]) for s in stream])
    for k in trajectories[0]:
        out[f"traj/{k}"] = np.stack([np.asarray(tr[k]) for tr in trajectories])
    out["num_updates"] = np.asarray(len(updates))
    for u, rec in enumerate(updates):
        for k, v in rec.items():
            out[f"update{u}/{k}"] = np.asarray(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = run(args.preset, args.seed)
    np.savez_compressed(args.out, **data)
    print(f"wrote {args.out}: {int(data['num_steps'])} env steps, "
          f"{len(data['traj/t'])} trajectories, {int(data['num_updates'])} updates")


if __name__ == "__main__":
    main()
