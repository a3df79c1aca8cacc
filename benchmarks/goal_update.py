"""One PPO update of Unity's GridWorld config, its hyper layer per distinct goal vs per row.

The evidence behind ``HyperNetwork``'s grouping (``unity_rl/algorithms/conditioning.py``): with
``goal_conditioning_type: hyper`` (ML-Agents' default) the body's last layer has its weights
generated from the goal, and on GridWorld (``ppo/GridWorld.yaml``: a 3x64x84 camera, a one-hot
GOAL_SIGNAL of 2, 128 units, ``num_layers: 1``) the generating layer is 128 -> 130·128, 2.1M
weights per network. The goal takes 2 values, so one generated matrix per distinct goal does the
work of one per row. For each variant, random GridWorld-shaped trajectories (256 steps, goals
drawn at random) go through ``PPOLearner.prepare`` and ``optimise`` ``--repeats`` times, each
variant in a fresh process (see ``learner_threads.py`` on why), one torch thread; the table gives
the median update seconds. "per row" is the plain layer (what ML-Agents computes). With
``--threads N`` (N > 1) the grouped layer is also timed at N threads: the evidence behind
``training.wiring.LARGE_LEARNER_PARAMETERS`` (these networks are 128 units wide but hold 4.8M
parameters). Run it on an otherwise idle machine::

    .venv/bin/python benchmarks/goal_update.py [--repeats 5] [--threads 2]
        [--out benchmarks/results/goal_update.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from unity_rl.algorithms import conditioning  # noqa: E402
from unity_rl.algorithms.network_config import NetworkConfig  # noqa: E402
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner  # noqa: E402
from unity_rl.experience import StepExtras, Trajectory  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from learner_threads import update_seconds  # noqa: E402

CAMERA, GOALS, BRANCH = (3, 64, 84), 2, 5
LENGTH, BUFFER = 32, 256
VARIANTS = ("per distinct goal", "per distinct goal, nn.Linear", "per row")
"""How the hyper layers compute; each is timed at 1 thread (the first also at ``--threads``).
"nn.Linear": grouped, but the generating layer through ``nn.Linear`` rather than
``conditioning.few_rows_linear`` (the evidence for the latter)."""


@contextlib.contextmanager
def hyper_layers(variant: str):
    """Within it, ``HyperNetwork`` layers compute ``variant``: "per row" is the plain layer."""
    if variant == "per row":
        with mock.patch.object(conditioning.HyperNetwork, "_grouping_pays",
                               lambda self, distinct, rows: False):
            yield
    elif variant.endswith("nn.Linear"):
        with mock.patch.object(conditioning, "few_rows_linear", lambda x, layer: layer(x)):
            yield
    else:
        yield


def time_update(variant: str, repeats: int, threads: int = 1) -> list[float]:
    """Update seconds (3 epochs of minibatches of 32 over 256 steps) of ``repeats`` updates."""
    torch.set_num_threads(threads)
    with hyper_layers(variant):
        return _time_update(repeats)


def _time_update(repeats: int) -> list[float]:
    rng = np.random.default_rng(0)
    learner = PPOLearner([CAMERA, (GOALS,)], SimpleNamespace(continuous_size=0,
                                                             discrete_branches=(BRANCH,)),
                         PPOConfig(learning_rate=3e-4, lr_schedule="linear", buffer_size=BUFFER,
                                   minibatch_size=32, num_epochs=3, gae_lambda=0.95,
                                   clip_coef=0.2, ent_coef=5e-3, max_steps=500_000),
                         NetworkConfig(normalize=False, hidden_units=128, num_layers=1,
                                       vis_encode_type="simple"),
                         seed=0, goal_indices=(1,))
    size = int(np.prod(CAMERA))

    def observations(n: int) -> np.ndarray:
        pixels = rng.integers(0, 256, (n, size)).astype(np.float32) / 255.0
        return np.concatenate([pixels, np.eye(GOALS, dtype=np.float32)[rng.integers(0, GOALS, n)]],
                              axis=1)

    trajectories = []
    for _ in range(BUFFER // LENGTH):
        obs = observations(LENGTH + 1)
        trajectories.append(Trajectory(obs=obs[:-1], actions=rng.integers(0, BRANCH, (LENGTH, 1)),
                                       logprobs=np.full((LENGTH, 1), -1.6, np.float32),
                                       values=np.zeros(LENGTH, np.float32),
                                       rewards=rng.normal(0, 0.1, LENGTH).astype(np.float32),
                                       last_obs=obs[-1], terminated=False, action_masks=None,
                                       extras=StepExtras()))
    return update_seconds(learner, trajectories, repeats)


def median_in_fresh_process(variant: str, repeats: int, threads: int = 1) -> float:
    """``time_update`` of ``variant`` in a new interpreter: its median update seconds."""
    out = subprocess.run([sys.executable, __file__, "--one", variant, str(repeats), str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/goal_update.json")
    parser.add_argument("--threads", type=int, default=1,
                        help="also time the grouped layer at this many torch threads")
    parser.add_argument("--one", nargs=3, metavar=("VARIANT", "REPEATS", "THREADS"),
                        help=argparse.SUPPRESS)  # a child: print one median and exit
    args = parser.parse_args()
    if args.one:
        print(statistics.median(time_update(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    print(f"one PPO update of ppo/GridWorld.yaml's networks, median of {args.repeats}; "
          f"load {os.getloadavg()[0]:.2f}")
    seconds = {variant: median_in_fresh_process(variant, args.repeats) for variant in VARIANTS}
    for variant, s in seconds.items():
        print(f"  hyper layer {variant:<30} 1 thread  {s:7.3f} s")
    speed_up = seconds["per row"] / seconds["per distinct goal"]
    print(f"  speed-up of grouping: {speed_up:.2f}x")
    few_rows_speed_up = seconds["per distinct goal, nn.Linear"] / seconds["per distinct goal"]
    print(f"  speed-up of few_rows_linear over nn.Linear: {few_rows_speed_up:.2f}x")
    result = {"repeats": args.repeats, "cpus": os.cpu_count(), "torch": torch.__version__,
              "machine": platform.machine(), "update_s": seconds, "speed_up": speed_up,
              "few_rows_speed_up": few_rows_speed_up}
    if args.threads > 1:
        threaded = median_in_fresh_process(VARIANTS[0], args.repeats, args.threads)
        threads_speed_up = seconds[VARIANTS[0]] / threaded
        print(f"  hyper layer {VARIANTS[0]:<30} {args.threads} threads {threaded:7.3f} s: "
              f"{threads_speed_up:.2f}x over 1 thread")
        result.update(threads=args.threads, threaded_update_s=threaded,
                      threads_speed_up=threads_speed_up)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**result, "loadavg_at_end": os.getloadavg()}, indent=1)
                        + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
