"""Self-play on the SoccerTwos stand-in: does the ELO rise, and does the trained policy beat a
scripted opponent more often than the initial one?

One run of Unity's ``poca/SoccerTwos.yaml`` with its self-play section, scaled down to what two
CPU cores train in minutes (``--steps``; network and buffers below; ``team_change`` etc. scaled
by the same factor as ``max_steps``). Then the initial policy (the checkpoint's snapshot 0) and
the final one each play team 0 against ``--standin-scripted-team 1`` for ``--games`` goals or
timeouts, deterministically (ONNX-equivalent torch module). Prints a table and writes JSON
(``benchmarks/results/selfplay_soccer.json``) as it goes.

    .venv/bin/python benchmarks/selfplay_soccer.py [--steps 60000] [--games 40] [--seed 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIG = REPO / "tests" / "fixtures" / "mlagents_configs" / "poca" / "SoccerTwos.yaml"
BUILD = REPO / "unity_builds" / "SoccerTwos.x86_64"
RESULTS = REPO / "benchmarks" / "results"


def config(steps: int, seed: int, port: int, agents: int, vs_scripted: bool = False,
           skill: float = 1.0):
    from unity_rl.config import FrozenMap, apply_overrides, load_config

    cfg = apply_overrides(load_config(CONFIG), env=str(BUILD), base_port=port, num_envs=1,
                          num_actors=1, mode="sync", seed=seed, no_graphics=True,
                          env_args=("--standin-agents", str(agents), *(
                              ("--standin-scripted-team", "1", "--standin-scripted-skill", str(skill))
                              if vs_scripted else ())))
    [(name, b)] = cfg.behaviors.items()
    scale = steps / b.max_steps * 50  # Unity's 50M steps -> ours, schedules alike (x50)
    sp = dataclasses.replace(b.self_play, save_steps=max(1, int(b.self_play.save_steps * scale)),
                             team_change=max(1, int(b.self_play.team_change * scale)),
                             swap_steps=max(1, int(b.self_play.swap_steps * scale)))
    if vs_scripted:  # team 0 learns throughout against the build's scripted team 1
        sp = dataclasses.replace(sp, team_change=10**9)
    hp = dataclasses.replace(b.hyperparameters, buffer_size=2048, minibatch_size=512)
    net = dataclasses.replace(b.network_settings, hidden_units=128)
    b = dataclasses.replace(b, hyperparameters=hp, network_settings=net, max_steps=steps,
                            summary_freq=max(1000, steps // 20), time_horizon=64, self_play=sp,
                            checkpoint_interval=steps)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: b}))


def elo_series(run_dir: Path) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "SoccerTwos"))
    events.Reload()
    return [(int(e.step), float(e.value)) for e in events.Scalars("Self-play/ELO")]


def play(module, games: int, port: int, seed: int, skill: float = 1.0) -> dict:
    """Team 0 plays ``module`` against the scripted team 1 (following its script with
    probability ``skill`` at each step) until ``games`` games ended."""
    import torch
    from mlagents_envs.base_env import ActionTuple
    from mlagents_envs.environment import UnityEnvironment

    env = UnityEnvironment(str(BUILD), base_port=port, no_graphics=True, seed=seed,
                           additional_args=["--standin-scripted-team", "1",
                                            "--standin-scripted-skill", str(skill)])
    wins = losses = draws = 0
    try:
        env.reset()
        while wins + losses + draws < games:
            for name in env.behavior_specs:
                decision, terminal = env.get_steps(name)
                if name.endswith("team=0"):
                    for g in np.asarray(terminal.group_reward)[::2]:  # two agents per team
                        wins, losses = wins + (g > 0), losses + (g < 0)
                    draws += int(np.sum(np.asarray(terminal.interrupted))) // 2
                if not len(decision):
                    continue
                if name.endswith("team=0"):
                    obs = np.concatenate([o.reshape(len(decision), -1) for o in decision.obs], 1)
                    with torch.no_grad():
                        out = module(torch.from_numpy(obs.astype(np.float32)))
                    act = np.asarray(out if not isinstance(out, tuple) else out[0])
                else:
                    act = np.zeros((len(decision), 3), np.int32)  # ignored: scripted
                env.set_actions(name, ActionTuple(discrete=act.astype(np.int32)))
            env.step()
    finally:
        env.close()
    wins, losses, draws = int(wins), int(losses), int(draws)
    return {"games": wins + losses + draws, "wins": wins, "losses": losses, "draws": draws,
            "win_rate": (wins + 0.5 * draws) / max(1, wins + losses + draws)}


def initial_module(run_dir: Path, final_pt: Path):
    """The policy of snapshot 0 (the initial weights) in the final policy's network."""
    import torch

    from unity_rl.checkpoint import CheckpointManager
    from unity_rl.export import load_policy

    state = CheckpointManager(run_dir).load()
    snapshot = state["behaviors"]["SoccerTwos"]["learner"]["ghost"]["policy_snapshots"][0]
    payload = torch.load(final_pt, weights_only=False)
    payload["weights"] = {**payload["weights"], **snapshot}
    tmp = run_dir / "initial_policy.pt"
    torch.save(payload, tmp)
    return load_policy(tmp).module


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60000)
    ap.add_argument("--games", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--agents", type=int, default=32)
    ap.add_argument("--base-port", type=int, default=18700)
    ap.add_argument("--run-dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "selfplay_soccer_run",
                    help="where the run's folder goes (default: under the system temp folder)")
    ap.add_argument("--out", type=Path, default=RESULTS / "selfplay_soccer.json")
    ap.add_argument("--train-vs-scripted", action="store_true",
                    help="a learnability check: team 0 trains against the scripted team 1 "
                         "(no team change) instead of against its snapshots")
    ap.add_argument("--scripted-skill", type=float, default=1.0,
                    help="the scripted team follows its script with this probability at each "
                         "academy step, else acts at random (--standin-scripted-skill)")
    ap.add_argument("--reuse", action="store_true",
                    help="skip training: play the policies of the run already in --run-dir")
    args = ap.parse_args(argv)
    from unity_rl.export import load_policy
    from unity_rl.training.trainer import train

    report = {"command": " ".join(["benchmarks/selfplay_soccer.py", *sys.argv[1:]]),
              "config": "poca/SoccerTwos.yaml (scaled: see the script)"}
    t0 = time.time()
    if not args.reuse:
        train(config(args.steps, args.seed, args.base_port, args.agents,
                     args.train_vs_scripted, args.scripted_skill), args.run_dir,
              resume=False, console=False)
        report["train_seconds"] = round(time.time() - t0, 1)
    elos = elo_series(args.run_dir)
    report["elo"] = elos
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    final_pt = args.run_dir / "SoccerTwos.pt"
    report["scripted_skill"] = args.scripted_skill
    report["initial_vs_scripted"] = play(initial_module(args.run_dir, final_pt), args.games,
                                         args.base_port + 20, args.seed, args.scripted_skill)
    args.out.write_text(json.dumps(report, indent=1))
    report["trained_vs_scripted"] = play(load_policy(final_pt).module, args.games,
                                         args.base_port + 40, args.seed, args.scripted_skill)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"ELO: {elos[0][1]:.1f} at {elos[0][0]} -> {elos[-1][1]:.1f} at {elos[-1][0]} "
          f"agent-steps ({report.get('train_seconds', 'reused run')} s)")
    print("policy    games  wins  losses  draws  win rate (draw = 1/2)")
    for key in ("initial_vs_scripted", "trained_vs_scripted"):
        r = report[key]
        print(f"{key.split('_')[0]:8s}  {r['games']:5d}  {r['wins']:4d}  {r['losses']:6d}  "
              f"{r['draws']:5d}  {r['win_rate']:.3f}")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
