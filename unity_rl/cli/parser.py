"""The flags of every ``unity-rl`` command, in mlagents-learn's habits (``build_parser``).

Each subcommand's parser names its handler (``args.handler``); the launch flags (--env,
--num-envs, --base-port, ...) are generated from ``LaunchSettings`` and shared by train,
evaluate, record-demo and random. A flag not given parses as None where the config has a value
for it, so that the YAML's value stands (``train_command``).
"""
from __future__ import annotations

import argparse

from unity_rl.cli.bundled import DEFAULT_CONFIG
from unity_rl.cli.policy_commands import cmd_evaluate, cmd_export, cmd_record_demo
from unity_rl.cli.random_command import cmd_random
from unity_rl.cli.train_command import cmd_train
from unity_rl.config.dump import CONFIG_FILE


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, max_help_position=38, width=120)


def _add_policy_source(p: argparse.ArgumentParser, verb: str) -> None:
    """--run-id | --checkpoint (one required) and --results-dir, for evaluate and export."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-id", metavar="ID", help=f"{verb} the latest checkpoint of this run")
    source.add_argument("--checkpoint", metavar="PATH", help=f"{verb} this checkpoint file")
    p.add_argument("--results-dir", metavar="DIR", default="results",
                   help="folder that holds run folders (default results)")


def _add_build_flags(p: argparse.ArgumentParser,
                     env_default: str = "the bundled 3DBall stand-in") -> None:
    """One flag per launch setting (--env, --num-envs, --base-port, --time-scale, ...), shared by
    train, evaluate and random: generated from ``LaunchSettings`` (names, help, defaults)."""
    from unity_rl.envs.settings import add_launch_arguments

    add_launch_arguments(p, env_default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unity-rl", formatter_class=_formatter,
        description="Train, evaluate and export policies for Unity ML-Agents builds.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    train = sub.add_parser(
        "train", formatter_class=_formatter, help="train a policy (as mlagents-learn)",
        description="Train a policy on a Unity build. Flags override the config file; results "
                    "go to RESULTS_DIR/RUN_ID (TensorBoard events, progress.csv, checkpoints, "
                    "the final .onnx).")
    train.add_argument("config", nargs="?", metavar="CONFIG.yaml",
                       help=f"trainer config in ML-Agents' YAML format (default {DEFAULT_CONFIG}; "
                            f"with --resume, the run's own {CONFIG_FILE})")
    _add_build_flags(train)
    train.add_argument("--run-id", metavar="ID", help="name of the run folder under --results-dir (default ppo)")
    group = train.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true", default=None,
                       help="continue the run from its latest checkpoint (model, optimiser, steps, RNG)")
    group.add_argument("--force", action="store_true", default=None,
                       help="delete an existing run folder of the same --run-id and start afresh")
    train.add_argument("--results-dir", metavar="DIR", help="folder that holds run folders (default results)")
    train.add_argument("--max-steps", type=int, metavar="N", help="agent-steps to train for (overrides max_steps)")
    train.add_argument("--initialize-from", metavar="RUN_ID",
                       help="start from the latest checkpoint of that run (under --results-dir), "
                            "with fresh step counts")
    train.add_argument("--inference", action="store_true", default=None,
                       help="run the policies of --resume / --initialize-from without training")
    train.add_argument("--behavior", metavar="NAME",
                       help="train only this behavior (default: every behavior of the build, "
                            "each with its config section); the others' agents get zero actions")
    train.add_argument("--mode", choices=("sync", "async"),
                       help="sync: learner waits for every actor; async: it trains on what arrives, "
                            "actors wait only while a learner owes more than "
                            "unity_rl.max_update_backlog updates (default sync)")
    train.add_argument("--max-update-backlog", type=int, metavar="N",
                       help="async: actors pause while a learner owes more than N updates (SAC, "
                            "DDPG: gradient updates; PPO: full buffers; 0 with PPO: the actors "
                            "collect the next buffer during an update, policy lag 1; default 20)")
    train.add_argument("--lag-correction", choices=("decoupled", "behaviour"),
                       help="async PPO/POCA, rows acted with older weights: decoupled centres "
                            "the clipped ratio on the learner's current policy and weights each "
                            "term by the behaviour's importance weight; behaviour centres it on "
                            "the stored log-probs (default behaviour)")
    train.add_argument("--num-actors", type=int, metavar="K",
                       help="actor processes; the --num-envs builds are split over them (default: "
                            "sync on local processes one per build, up to the cores; else 1)")
    train.add_argument("--backend", choices=("local", "ray"), help="where actors run: local processes or Ray (default local)")
    train.add_argument("--ray-address", metavar="ADDR",
                       help="address of an existing Ray cluster (with --backend ray; default "
                            "$RAY_ADDRESS, else a local Ray is started)")
    train.add_argument("--max-actor-restarts", type=int, metavar="N",
                       help="re-creations of a dead or hung actor allowed per actor, -1 unlimited "
                            "(default: the builds' restart quota)")
    train.add_argument("--num-cpus-per-actor", type=float, metavar="N",
                       help="with --backend ray: CPUs each actor reserves (default 1)")
    train.add_argument("--torch-device", metavar="D", help="learner device: cpu, cuda, cuda:N or mps (default: cuda if available)")
    train.add_argument("--torch-threads", type=int, metavar="N",
                       help="the learner's cores: torch threads, or PPO's update halves side by "
                            "side (default: in sync mode with networks of 256+ units or 2M+ "
                            "parameters the cores up to 4, else 1; give 1 when other jobs share "
                            "the cores)")
    train.add_argument("--debug", action="store_true", default=None, help="verbose logging")
    train.set_defaults(handler=cmd_train)

    evaluate = sub.add_parser(
        "evaluate", formatter_class=_formatter, help="run a trained policy deterministically",
        description="Run a trained policy deterministically on a build and print its mean return. "
                    "The builds start with the run's configuration.yaml (its env_settings and "
                    "engine_settings); the launch flags given override it.")
    _add_policy_source(evaluate, "evaluate")
    evaluate.add_argument("--episodes", type=int, default=10, metavar="N",
                          help="finished episodes to average over (default 10)")
    _add_build_flags(evaluate, env_default="the run's build, else the bundled 3DBall stand-in")
    evaluate.add_argument("--behavior", metavar="NAME",
                          help="behavior to control (needed when the run trained several)")
    evaluate.set_defaults(handler=cmd_evaluate)

    record = sub.add_parser(
        "record-demo", formatter_class=_formatter,
        help="play a trained policy and record a Unity .demo file",
        description="Play a trained policy deterministically on a build and record the first "
                    "agent's episodes as a Unity demonstration (.demo), as Unity's Demonstration "
                    "Recorder does, for behavioral_cloning and GAIL's demo_path. Stand-in scenes "
                    "can also record their built-in heuristic: python -m unity_rl.standin.record.")
    _add_policy_source(record, "play")
    record.add_argument("--output", required=True, metavar="PATH", help=".demo file to write")
    record.add_argument("--episodes", type=int, default=10, metavar="N",
                        help="episodes of the first agent to record (default 10)")
    record.add_argument("--name", metavar="NAME",
                        help="demonstration name in the file (Unity's: at most 16 characters; "
                             "default: the file name)")
    _add_build_flags(record, env_default="the run's build, else the bundled 3DBall stand-in")
    record.add_argument("--behavior", metavar="NAME",
                        help="behavior to play (needed when the run trained several)")
    record.set_defaults(handler=cmd_record_demo)

    export = sub.add_parser(
        "export", formatter_class=_formatter, help="write the ONNX model of a run for Unity",
        description="Export the latest checkpoint of a run as an ONNX model for Unity's inference.")
    _add_policy_source(export, "export")
    export.add_argument("--output", metavar="PATH", help="ONNX file to write (default RUN_DIR/<behavior>.onnx)")
    export.add_argument("--behavior", metavar="NAME",
                        help="behavior to export (default: every behavior of the checkpoint)")
    export.set_defaults(handler=cmd_export)

    rand = sub.add_parser(
        "random", formatter_class=_formatter, help="drive a build with random actions (smoke test)",
        description="Drive a build with random actions through UnityVecEnv and print agent-steps/s "
                    "and episode returns.")
    _add_build_flags(rand)
    rand.add_argument("--steps", type=int, default=5000, metavar="N", help="agent-steps to run (default 5000)")
    rand.add_argument("--behavior", metavar="NAME", help="behavior to drive (default: the only one)")
    rand.set_defaults(handler=cmd_random)
    return parser


def _version() -> str:
    from unity_rl import __version__
    return f"unity-rl {__version__}"
