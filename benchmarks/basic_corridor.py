"""PPO on a Basic-like corridor, in-process, collected the way mlagents-learn collects.

The dynamics copy ``unity_rl/standin/scenes/basic.py``: 20 cells, start 10, small goal at cell 7
(+0.1, ends), large goal at 17 (+1, ends), −0.01 per step, one-hot observation, one branch of 3
actions (stay, left, right), an episode interrupted after 100 decisions (bootstrap, not a real
end).  Collection as ML-Agents' ``agent_processor`` + ``OnPolicyTrainer``: a trajectory is cut
only at ``time_horizon`` decisions or at an episode end; the update runs once the buffer holds
*more than* ``buffer_size`` steps (``_is_ready_update``); an agent's open trajectory waits for the
next buffer.  The learner computes GAE per trajectory with a bootstrap from the next observation
at a cut.  Hyperparameters default to Unity's own ``config/ppo/Basic.yaml``.

Reported, like mlagents-learn's console line: every ``summary_freq`` agent-steps, the mean return
of the episodes that ended in that window.

    .venv/bin/python benchmarks/basic_corridor.py [--steps 15000] [--seed 0] [--agents 1]
"""
from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from unity_rl.algorithms.network_config import NetworkConfig  # noqa: E402
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, PPOPolicy  # noqa: E402
from unity_rl.algorithms.reward_signals.config import RewardSignalConfig  # noqa: E402
from unity_rl.experience import Trajectory  # noqa: E402

CELLS, START, SMALL, LARGE, MAX_STEPS = 20, 10, 7, 17, 100
BASIC_HYPERPARAMETERS = dict(minibatch_size=32, buffer_size=256, learning_rate=3e-4, ent_coef=5e-3,
                             clip_coef=0.2, gae_lambda=0.95, num_epochs=3, max_steps=500_000)
BASIC_REWARD_SIGNALS = (RewardSignalConfig("extrinsic", gamma=0.9, strength=1.0),)
BASIC_NETWORK = dict(hidden_units=20, num_layers=1, normalize=False)
TIME_HORIZON = 3
ACTION_SPEC = SimpleNamespace(continuous_size=0, discrete_branches=(3,))


class Corridor:
    """n independent corridors; ``step`` returns (rewards, terminated, interrupted)."""

    def __init__(self, n: int):
        self.pos = np.full(n, START)
        self.t = np.zeros(n, dtype=np.int64)
        self.eye = np.eye(CELLS, dtype=np.float32)

    def obs(self) -> np.ndarray:
        return self.eye[self.pos]

    def step(self, actions: np.ndarray):
        move = np.where(actions == 1, -1, np.where(actions == 2, 1, 0))
        self.pos = np.clip(self.pos + move, 0, CELLS - 1)
        self.t += 1
        small, large = self.pos == SMALL, self.pos == LARGE
        rewards = -0.01 + 0.1 * small + 1.0 * large
        terminated = small | large
        interrupted = ~terminated & (self.t >= MAX_STEPS)
        return rewards.astype(np.float32), terminated, interrupted

    def reset(self, idx: np.ndarray) -> None:
        self.pos[idx] = START
        self.t[idx] = 0


def train(steps: int = 15_000, seed: int = 0, n_agents: int = 1, summary_freq: int = 2000,
          ppo_overrides: dict | None = None, network_overrides: dict | None = None,
          stop_at: float | None = None) -> list[tuple[int, float]]:
    """Trains from scratch; returns [(agent-steps, mean return of the window's episodes)]."""
    cfg = PPOConfig(**{**BASIC_HYPERPARAMETERS, **(ppo_overrides or {})})
    net = NetworkConfig(**{**BASIC_NETWORK, **(network_overrides or {})})
    learner = PPOLearner((CELLS,), ACTION_SPEC, cfg, net, seed=seed,
                         reward_signals=BASIC_REWARD_SIGNALS)
    policy = PPOPolicy((CELLS,), ACTION_SPEC, net, seed=seed + 1)
    policy.load_weights(learner.weights())
    takes_steps = "collected_steps" in inspect.signature(learner.update).parameters

    env = Corridor(n_agents)
    open_ = [dict(obs=[], actions=[], logprobs=[], values=[], rewards=[]) for _ in range(n_agents)]
    buffer: list[Trajectory] = []
    buffered = collected = 0
    returns = np.zeros(n_agents)
    window: list[float] = []
    summaries: list[tuple[int, float]] = []
    obs = env.obs()
    while collected < steps:
        actions, logprobs, values = policy.act(obs)
        rewards, terminated, interrupted = env.step(actions[:, 0])
        next_obs = env.obs()
        returns += rewards
        for i in range(n_agents):
            tr = open_[i]
            for key, val in (("obs", obs[i]), ("actions", actions[i]), ("logprobs", logprobs[i]),
                             ("values", values[i]), ("rewards", rewards[i])):
                tr[key].append(val)
            done = bool(terminated[i] or interrupted[i])
            if done or len(tr["rewards"]) >= TIME_HORIZON:
                buffer.append(Trajectory(
                    obs=np.stack(tr["obs"]), actions=np.stack(tr["actions"]),
                    logprobs=np.asarray(tr["logprobs"], np.float32),
                    values=np.asarray(tr["values"], np.float32),
                    rewards=np.asarray(tr["rewards"], np.float32),
                    last_obs=next_obs[i].copy(), terminated=bool(terminated[i])))
                buffered += len(tr["rewards"])
                open_[i] = dict(obs=[], actions=[], logprobs=[], values=[], rewards=[])
            if done:
                window.append(float(returns[i]))
                returns[i] = 0.0
        done_idx = np.flatnonzero(terminated | interrupted)
        env.reset(done_idx)
        obs = env.obs()
        prev = collected
        collected += n_agents
        if buffered > cfg.buffer_size:
            if takes_steps:
                learner.update(buffer, collected_steps=collected)
            else:
                learner.update(buffer)
            policy.load_weights(learner.weights())
            buffer, buffered = [], 0
        if collected // summary_freq > prev // summary_freq:
            mean = float(np.mean(window)) if window else float("nan")
            summaries.append((collected, mean))
            window = []
            if stop_at is not None and mean >= stop_at:
                break
    return summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="seeds seed..seed+N-1")
    parser.add_argument("--agents", type=int, default=1)
    args = parser.parse_args()
    for seed in range(args.seed, args.seed + args.seeds):
        start = time.perf_counter()
        summaries = train(args.steps, seed, args.agents)
        line = " ".join(f"{s}:{m:.2f}" for s, m in summaries)
        print(f"seed {seed} ({time.perf_counter() - start:.1f} s): {line}", flush=True)


if __name__ == "__main__":
    main()
