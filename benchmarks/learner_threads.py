"""One PPO update at 1 and at N torch threads, and on N cores with its halves side by side, for
the network sizes of Unity's example configs.

The evidence behind ``unity_rl.torch_threads: null`` (``training/wiring.py``,
``WIDE_NETWORK_UNITS``): a sync learner takes several threads only when its networks are wide
enough to gain from them. For each size below, random Worm-like trajectories (continuous
actions, a normalised vector observation) go through ``PPOLearner.prepare`` and ``optimise``
``--repeats`` times at each thread count, each size and count in a fresh process (within one
process, earlier learners and thread switches skewed later timings by up to 4x); the table gives
the median update seconds and the speed-up of N threads over 1, and of N cores with the update's
halves side by side (``algorithms/update_halves.py``: the actor's and the critic's, N // 2
threads each) over 1: the evidence for running PPO's halves side by side when it gets N cores.
Run it on an otherwise idle machine: contended threads measure
the contention, not the network::

    .venv/bin/python benchmarks/learner_threads.py [--threads 2] [--repeats 3]
        [--out benchmarks/results/learner_threads.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from unity_rl.algorithms.update_halves import set_learner_cores  # noqa: E402
from unity_rl.algorithms.network_config import NetworkConfig  # noqa: E402
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner  # noqa: E402
from unity_rl.experience import StepExtras, Trajectory  # noqa: E402

# name: (observation size, continuous actions, hidden_units, num_layers, batch_size, buffer_size)
SIZES = {
    "3DBall (Unity's config)": (8, 2, 128, 2, 64, 12000),
    "3DBall (configs/ppo/3dball.yaml)": (8, 2, 128, 2, 128, 2048),
    "PushBlock-sized": (210, 7, 256, 2, 128, 2048),
    "Crawler/Walker-sized at 256": (64, 9, 256, 2, 512, 10240),
    "Pyramids-sized": (172, 5, 512, 2, 128, 2048),
    "Worm (Unity's config)": (64, 9, 512, 3, 2024, 20240),
}
LENGTH = 256


def time_update(size: tuple, threads: int, repeats: int, split: bool = False) -> list[float]:
    """Update seconds (the epochs of minibatches) of ``repeats`` updates on one buffer, on
    ``threads`` cores: in one piece on that many threads, or with ``split`` its halves side by side."""
    obs_n, act_n, hidden, layers, batch, buffer = size
    set_learner_cores(threads, split=split)
    rng = np.random.default_rng(0)
    learner = PPOLearner([(obs_n,)], SimpleNamespace(continuous_size=act_n, discrete_branches=()),
                         PPOConfig(learning_rate=3e-4, lr_schedule="linear", buffer_size=buffer,
                                   minibatch_size=batch, num_epochs=3, gae_lambda=0.95,
                                   clip_coef=0.2, ent_coef=5e-3, max_steps=5_000_000),
                         NetworkConfig(normalize=True, hidden_units=hidden, num_layers=layers),
                         seed=0)
    n = buffer // LENGTH * LENGTH
    obs = rng.normal(size=(n, obs_n)).astype(np.float32)
    trajectories = [Trajectory(obs=obs[k * LENGTH:(k + 1) * LENGTH],
                               actions=rng.normal(size=(LENGTH, act_n)).astype(np.float32),
                               logprobs=np.full((LENGTH, act_n), -1.0, np.float32),
                               values=np.zeros(LENGTH, np.float32),
                               rewards=rng.random(LENGTH).astype(np.float32),
                               last_obs=obs[k * LENGTH], terminated=False, action_masks=None,
                               extras=StepExtras())
                    for k in range(n // LENGTH)]
    return update_seconds(learner, trajectories, repeats)


def update_seconds(learner: PPOLearner, trajectories: list, repeats: int) -> list[float]:
    """Seconds of ``learner.optimise`` (the epochs of minibatches) on ``trajectories``,
    ``repeats`` times after one warm-up update that is not counted (it warms the allocator)."""
    seconds = []
    for _ in range(repeats + 1):
        batch_data = learner.prepare(trajectories)
        t0 = time.perf_counter()
        learner.optimise(batch_data)
        seconds.append(time.perf_counter() - t0)
    return seconds[1:]


def median_in_fresh_process(name: str, threads: int, repeats: int, split: bool = False) -> float:
    """``time_update`` of size ``name`` in a new interpreter: its median update seconds."""
    out = subprocess.run([sys.executable, __file__, "--one", name, str(threads), str(repeats),
                          str(int(split))], check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="the N compared with 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/learner_threads.json")
    parser.add_argument("--one", nargs=4, metavar=("SIZE", "THREADS", "REPEATS", "SPLIT"),
                        help=argparse.SUPPRESS)  # a child: print one median and exit
    args = parser.parse_args()
    if args.one:
        name, threads, repeats, split = args.one
        print(statistics.median(time_update(SIZES[name], int(threads), int(repeats),
                                            bool(int(split)))))
        return
    rows = []
    print(f"one PPO update (3 epochs), median of {args.repeats}; load {os.getloadavg()[0]:.2f}")
    print(f"{'size':<34}{'units':>6}{'batch':>7}{'1 thread s':>12}{f'{args.threads} threads s':>13}"
          f"{'speed-up':>10}{f'{args.threads} halves s':>14}{'speed-up':>10}")
    for name, size in SIZES.items():
        one = median_in_fresh_process(name, 1, args.repeats)
        many = median_in_fresh_process(name, args.threads, args.repeats)
        halves = median_in_fresh_process(name, args.threads, args.repeats, split=True)
        rows.append({"size": name, "obs": size[0], "actions": size[1], "hidden_units": size[2],
                     "num_layers": size[3], "batch_size": size[4], "buffer_size": size[5],
                     "one_thread_s": one, "n_threads_s": many, "speed_up": one / many,
                     "n_cores_halves_s": halves, "halves_speed_up": one / halves})
        print(f"{name:<34}{size[2]:>6}{size[4]:>7}{one:>12.3f}{many:>13.3f}{one / many:>9.2f}x"
              f"{halves:>14.3f}{one / halves:>9.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "threads": args.threads, "repeats": args.repeats, "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg(), "torch": torch.__version__,
        "machine": platform.machine(), "results": rows}, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
