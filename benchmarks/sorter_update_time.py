"""One PPO update of Unity's Sorter config, here and in mlagents-learn 1.1.0, on the same buffer.

Unity's ``ppo/Sorter_curriculum.yaml`` sizes (batch 512, buffer 40960, 3 epochs, 2 x 128, not
normalised) on Sorter's observations: a (20, 23) buffer sensor (encoded with attention, 128 wide,
in actor and critic), the RB sensor (10) and the stacked vector (8); 3 branches of 3. The buffer
rows hold k tiles, k uniform in 1..``--max-tiles`` (the curriculum's ``num_tiles``: 2 in lesson 0,
20 in the last), the other rows zero (padding), as the stand-in sends them.

The same random buffer (trajectories of ``--length`` steps) goes through ``PPOLearner`` here and,
in the mlagents-learn venv, through ML-Agents' ``PPOTrainer._process_trajectory`` and
``_update_policy`` (``sorter_update_time_mlagents.py``); each side times its update (the epochs
of minibatches) on ``--threads`` torch threads::

    .venv/bin/python benchmarks/sorter_update_time.py --mlagents-venv VENV [--max-tiles 2]
        [--buffer-size 40960] [--threads 1] [--out benchmarks/results/sorter_update_time.json]

Without ``--mlagents-venv`` only this side runs. Prints a table and writes a JSON.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from unity_rl.algorithms.network_config import NetworkConfig  # noqa: E402
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner  # noqa: E402
from unity_rl.experience import StepExtras, Trajectory  # noqa: E402

SHAPES = [(20, 23), (10,), (8,)]


def make_data(buffer_size: int, length: int, max_tiles: int, seed: int) -> dict:
    """Sorter-shaped random trajectories: buffer rows [one-hot number, dx, dz, visited]."""
    rng = np.random.default_rng(seed)

    def buffers(n: int) -> np.ndarray:
        x = np.zeros((n, 20, 23), np.float32)
        count = rng.integers(1, max_tiles + 1, n)
        for i, c in enumerate(count):
            x[i, np.arange(c), np.sort(rng.choice(20, c, replace=False))] = 1.0
            x[i, :c, 20:22] = rng.uniform(-0.3, 0.3, (c, 2))
            x[i, :c, 22] = np.arange(c) < rng.integers(0, c + 1)
        return x

    m = buffer_size // length
    d = {"obs0": buffers(buffer_size),
         "obs1": rng.normal(size=(buffer_size, 10)).astype(np.float32),
         "obs2": rng.normal(size=(buffer_size, 8)).astype(np.float32),
         "last_obs0": buffers(m),
         "last_obs1": rng.normal(size=(m, 10)).astype(np.float32),
         "last_obs2": rng.normal(size=(m, 8)).astype(np.float32),
         "discrete": rng.integers(0, 3, (buffer_size, 3)),
         "logprobs": np.full((buffer_size, 3), np.log(1 / 3), np.float32),
         "rewards": (rng.random(buffer_size) < 0.01).astype(np.float32) - 1 / 5000,
         "terminated": rng.random(m) < 0.5}
    d.update({f"shape{i}": np.asarray(s) for i, s in enumerate(SHAPES)})
    return d


def time_ours(d: dict, cfg: dict, threads: int) -> dict:
    torch.set_num_threads(threads)
    n, length = cfg["buffer_size"], cfg["length"]
    learner = PPOLearner(SHAPES, SimpleNamespace(continuous_size=0, discrete_branches=(3, 3, 3)),
                         PPOConfig(learning_rate=3e-4, lr_schedule="constant", buffer_size=n,
                                   minibatch_size=cfg["batch_size"], num_epochs=cfg["num_epoch"],
                                   gae_lambda=0.95, clip_coef=0.2, ent_coef=5e-3,
                                   max_steps=5_000_000),
                         NetworkConfig(normalize=False, hidden_units=cfg["hidden"],
                                       num_layers=cfg["layers"]), seed=0)

    def flat(prefix: str) -> np.ndarray:
        return np.concatenate([d[f"{prefix}{i}"].reshape(len(d[f"{prefix}{i}"]), -1)
                               for i in range(3)], axis=1)

    obs, last_obs = flat("obs"), flat("last_obs")
    trajs = [Trajectory(obs=obs[k * length:(k + 1) * length],
                        actions=d["discrete"][k * length:(k + 1) * length],
                        logprobs=d["logprobs"][k * length:(k + 1) * length],
                        values=np.zeros(length, np.float32),
                        rewards=d["rewards"][k * length:(k + 1) * length],
                        last_obs=last_obs[k], terminated=bool(d["terminated"][k]),
                        action_masks=None, extras=StepExtras())
             for k in range(n // length)]
    t0 = time.perf_counter()
    batch = learner.prepare(trajs)
    prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    learner.optimise(batch)
    update = time.perf_counter() - t0
    minibatches = cfg["num_epoch"] * (n // cfg["batch_size"])
    return {"side": "unity-rl", "threads": torch.get_num_threads(), "prepare_s": prepare,
            "update_s": update, "minibatches": minibatches, "per_minibatch_s": update / minibatches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mlagents-venv", type=Path, default=None)
    parser.add_argument("--buffer-size", type=int, default=40960)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--length", type=int, default=256, help="trajectory length (time_horizon)")
    parser.add_argument("--max-tiles", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/sorter_update_time.json")
    args = parser.parse_args()
    cfg = {"buffer_size": args.buffer_size, "batch_size": args.batch_size, "num_epoch": 3,
           "hidden": 128, "layers": 2, "length": args.length, "max_tiles": args.max_tiles}
    d = make_data(args.buffer_size, args.length, args.max_tiles, args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.mlagents_venv is not None:
            data = Path(tmp) / "data.npz"
            np.savez(data, **d, **{k: np.asarray(v) for k, v in cfg.items()})
            out = Path(tmp) / "mlagents.json"
            subprocess.run([str(args.mlagents_venv / "bin" / "python"),
                            str(REPO / "benchmarks" / "sorter_update_time_mlagents.py"),
                            str(data), str(out), "--threads", str(args.threads)], check=True)
            rows.append(json.loads(out.read_text()))
    rows.insert(0, time_ours(d, cfg, args.threads))
    print(f"Sorter PPO update, buffer {args.buffer_size}, batch {args.batch_size}, 3 epochs, "
          f"tiles 1..{args.max_tiles}, {args.threads} thread(s)")
    print(f"{'side':<22}{'update s':>10}{'per minibatch s':>17}{'prepare s':>11}")
    for r in rows:
        print(f"{r['side']:<22}{r['update_s']:>10.1f}{r['per_minibatch_s']:>17.3f}"
              f"{r['prepare_s']:>11.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": cfg, "threads": args.threads,
                                    "torch": torch.__version__, "machine": platform.machine(),
                                    "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
