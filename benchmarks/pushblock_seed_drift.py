"""PushBlock's seed lottery: where PPO's policy drifts before its first success, per tool and seed.

Unity's ``ppo/PushBlock.yaml`` on the stand-in gives no reward but the time penalty until a block
is delivered (random play: a few per cent of 1,000-decision episodes). Before that, PPO's updates
follow the advantages of the critic's initial landscape. This script runs each tool for
``--updates`` PPO updates per seed (Unity's config unchanged; 2 builds, 64 agents: 4,096
agent-steps per update) and probes every update buffer (``pushblock_seed_drift_mlagents.probe``):
how often the block is straight ahead of the agent, the successes, the correlation of the
pre-update critic's values with "the block is seen". A run is **stuck** when it has no success in
those updates and the block is ahead fewer than 150 times per 4,096 agent-steps over the last 4
(the policy turns away from the block and hugs the walls; such runs stayed at −1.0 for 300k-700k
agent-steps in ``vs_mlagents_learn_pushblock.json``).

Both tools draw the same initial network for a seed (``tests/algos/test_mlagents_init.py``), so
seed s of one tool is paired with seed s of the other. ``--init-from-mlagents`` loads the initial
weights mlagents-learn's run of the same seed saved (``init_weights.npz``; mlagents-learn runs
first) into unity-rl's learner instead: the same start made explicit (it was the experiment that
showed the network decides, before both tools drew alike).

    .venv/bin/python benchmarks/pushblock_seed_drift.py [--seeds 10] [--seed 1] [--updates 16]
        [--tools mlagents-learn unity-rl] [--init-from-mlagents]
        [--mlagents-venv .mlagents_learn/venv] [--configs-dir ../shared/mlagents_learn/configs]
        [--base-port 21000] [--out FILE]

Writes ``benchmarks/results/pushblock_seed_drift.json`` by default and prints a table.
(Child mode, used by the script itself: ``--child OUT_DIR [--init NPZ] -- <unity-rl train args>``.)
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from pushblock_seed_drift_mlagents import probe  # noqa: E402

STUCK_BLOCK_AHEAD = 150.0
"""Block-ahead rows per 4,096 over the last 4 updates below which a run without success is stuck."""


# -- child: unity-rl train with the probe ------------------------------------------------------

def _child(out: Path, init: Path | None, train_args: list[str]) -> int:
    import torch

    from unity_rl.algorithms.ppo.learner import PPOLearner
    from unity_rl.cli import main as cli_main

    out.mkdir(parents=True, exist_ok=True)
    prepare, construct = PPOLearner.prepare, PPOLearner.__init__
    count = [0]

    def probed_prepare(self, trajectories, episode_length=None):
        batch = prepare(self, trajectories, episode_length)
        rewards = np.concatenate([t.rewards for t in trajectories if len(t.rewards)])
        result = probe(batch.obs.cpu().numpy(), rewards, batch.values[:, 0],
                       batch.logprobs.cpu().numpy().reshape(-1))
        result["trainer_step"] = int(self.agent_steps_collected)
        (out / f"update_{count[0]:04d}.json").write_text(json.dumps(result))
        count[0] += 1
        return batch

    def seeded_construct(self, *args, **kwargs):
        construct(self, *args, **kwargs)
        if init is None:
            return
        layers = self.model.num_layers
        with np.load(init) as rec:  # ActorCritic's names, as ppo_input_parity.py maps them
            state = {}
            for name in rec.files:
                key = name
                if name.startswith(f"critic.{2 * layers}."):
                    key = "value_heads.extrinsic." + name[len(f"critic.{2 * layers}."):]
                elif name.startswith("actor."):
                    key = f"{self.model.head_name}." + name[len("actor."):]
                state[key] = torch.from_numpy(np.array(rec[name]))
        self.model.load_state_dict(state)

    PPOLearner.prepare, PPOLearner.__init__ = probed_prepare, seeded_construct
    return int(cli_main(["train", *train_args]) or 0)


# -- parent: one run per tool and seed ---------------------------------------------------------

def _command(tool: str, args, seed: int, port: int, results: Path, probe_dir: Path,
             init: Path | None) -> list[str]:
    common = [str(Path(args.configs_dir) / "ppo" / "PushBlock.yaml"), "--env", str(args.env),
              "--num-envs", "2", "--base-port", str(port), "--no-graphics",
              "--run-id", f"{tool}_{seed}", "--results-dir", str(results), "--force",
              "--seed", str(seed)]
    if tool == "mlagents-learn":
        return [str(Path(args.mlagents_venv) / "bin" / "python"),
                str(HERE / "pushblock_seed_drift_mlagents.py"), str(probe_dir), "--", *common]
    init_args = ["--init", str(init)] if init is not None else []
    return [sys.executable, str(Path(__file__).resolve()), "--child", str(probe_dir), *init_args,
            "--", *common]


def _one_run(tool: str, args, seed: int, tmp: Path, init: Path | None) -> dict:
    from vs_mlagents_learn import stop_group

    probe_dir = tmp / "probes" / f"{tool}_{seed}"
    port = args.base_port + (0 if tool == "unity-rl" else 100)
    cmd = _command(tool, args, seed, port, tmp / "results", probe_dir, init)
    print(f"{tool} seed {seed}: {shlex.join(cmd)}", flush=True)
    log = tmp / f"{tool}_{seed}.log"
    start = time.time()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        while proc.poll() is None and time.time() - start < args.timeout:
            if len(list(probe_dir.glob("update_*.json"))) >= args.updates:
                break
            time.sleep(0.5)
        stop_group(proc)
    updates = [json.loads(p.read_text()) for p in sorted(probe_dir.glob("update_*.json"))]
    updates = updates[:args.updates]
    run = {"tool": tool, "seed": seed, "initial_weights": "mlagents-learn's" if init else "own",
           "command": portable(cmd, args, tmp), "seconds": round(time.time() - start, 1), "updates": updates}
    if len(updates) < args.updates:
        run["log_tail"] = log.read_text()[-1500:]
        print(f"  only {len(updates)} updates; log tail:\n{run['log_tail']}", flush=True)
    if updates:
        last = [u["block_ahead_per_4096"] for u in updates[-4:]]
        run["successes"] = sum(u["successes"] for u in updates)
        run["block_ahead_first"] = updates[0]["block_ahead_per_4096"]
        run["block_ahead_last4"] = float(np.mean(last))
        run["corr_value_block_seen_first"] = updates[0]["corr_value_block_seen"]
        run["stuck"] = run["successes"] == 0 and run["block_ahead_last4"] < STUCK_BLOCK_AHEAD
        print(f"  corr(V, block seen) at update 0 {run['corr_value_block_seen_first']:+.2f}; "
              f"block ahead {run['block_ahead_first']:.0f} -> {run['block_ahead_last4']:.0f} "
              f"per 4096; successes {run['successes']}; {'STUCK' if run['stuck'] else 'learning'}",
              flush=True)
    return run


def main() -> None:
    if "--child" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--child", type=Path, required=True)
        parser.add_argument("--init", type=Path)
        split = sys.argv.index("--")
        child = parser.parse_args(sys.argv[1:split])
        raise SystemExit(_child(child.child, child.init, sys.argv[split + 1:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1, help="first seed; run i: seed + i")
    parser.add_argument("--updates", type=int, default=16, help="PPO updates per run")
    parser.add_argument("--tools", nargs="+", default=["mlagents-learn", "unity-rl"],
                        choices=("mlagents-learn", "unity-rl"))
    parser.add_argument("--init-from-mlagents", action="store_true",
                        help="unity-rl starts from mlagents-learn's initial weights (same seed)")
    parser.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    parser.add_argument("--configs-dir", type=Path,
                        default=REPO.parent / "shared" / "mlagents_learn" / "configs")
    parser.add_argument("--env", type=Path, default=REPO / "unity_builds" / "PushBlock.x86_64")
    parser.add_argument("--base-port", type=int, default=21000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "pushblock_seed_drift.json")
    args = parser.parse_args()
    if not (args.configs_dir / "ppo" / "PushBlock.yaml").is_file():
        parser.error(f"no ppo/PushBlock.yaml under --configs-dir {args.configs_dir}")
    tools = sorted(args.tools)  # mlagents-learn first: its initial weights may be needed
    runs = []
    with tempfile.TemporaryDirectory(prefix="pushblock_drift_") as tmp_name:
        tmp = Path(tmp_name)
        for i in range(args.seeds):
            seed = args.seed + i
            for tool in tools:
                init = None
                if tool == "unity-rl" and args.init_from_mlagents:
                    init = tmp / "probes" / f"mlagents-learn_{seed}" / "init_weights.npz"
                    if not init.is_file():
                        print(f"  no mlagents-learn initial weights for seed {seed}: skipped")
                        continue
                runs.append(_one_run(tool, args, seed, tmp, init))
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(_report(args, runs), indent=1) + "\n")
    report = _report(args, runs)
    print("\n| tool | initial weights | stuck | seeds stuck |\n|---|---|---:|---|")
    for key, s in report["summary"].items():
        print(f"| {key} | {s['initial_weights']} | {s['stuck']}/{s['runs']} | {s['stuck_seeds']} |")
    print("wrote", args.out)


def portable(cmd: list[str], args, tmp: Path) -> list[str]:
    """``cmd`` without this machine's paths: the temp folder, venv, configs and checkout named."""
    names = [(str(tmp), "TMP"), (str(Path(args.mlagents_venv).resolve()), "MLAGENTS_VENV"),
             (str(Path(args.mlagents_venv)), "MLAGENTS_VENV"),
             (str(Path(args.configs_dir).resolve()), "CONFIGS_DIR"),
             (str(Path(args.configs_dir)), "CONFIGS_DIR"), (str(REPO), "."),
             (sys.executable, "python")]
    out = []
    for part in cmd:
        for path, name in names:
            part = part.replace(path, name)
        out.append(part)
    return out


def _report(args, runs: list[dict]) -> dict:
    summary: dict[str, dict] = {}
    for r in runs:
        if "stuck" not in r:
            continue
        s = summary.setdefault(r["tool"], {"initial_weights": r["initial_weights"], "runs": 0,
                                           "stuck": 0, "stuck_seeds": []})
        s["runs"] += 1
        if r["stuck"]:
            s["stuck"] += 1
            s["stuck_seeds"].append(r["seed"])
    return {"settings": {"seeds": args.seeds, "first_seed": args.seed, "updates": args.updates,
                         "tools": args.tools, "init_from_mlagents": args.init_from_mlagents,
                         "stuck_block_ahead": STUCK_BLOCK_AHEAD, "num_envs": 2,
                         "config": "ppo/PushBlock.yaml (Unity's, unchanged)"},
            "summary": summary, "runs": runs}


if __name__ == "__main__":
    main()
