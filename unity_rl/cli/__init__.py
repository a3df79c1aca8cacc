"""The ``unity-rl`` command, in mlagents-learn's habits.

    unity-rl train [CONFIG.yaml] --env PATH [--run-id ID] [--resume | --force] ...
    unity-rl evaluate --run-id ID [--episodes N]      (or --checkpoint PATH)
    unity-rl export --run-id ID [--output PATH]
    unity-rl record-demo --run-id ID --output Demos/Expert.demo [--episodes N]
    unity-rl random --env PATH [--num-envs N] [--steps N]

Thin on purpose: parse the flags, load the YAML and apply the flags over it (flags win; a flag
not given leaves the YAML's value), prepare the run folder, call into the package. The work
lives in trainer, evaluate and export; here:

- ``main`` (this module): parse, run the command's handler, turn what stops it into an exit code;
- ``parser``: every command's flags (``build_parser``), apart from the handlers;
- ``train_command`` (with ``run_folder``: mlagents-learn's rules for an existing run folder),
  ``policy_commands`` (evaluate, export, record-demo) and ``random_command``: the handlers;
- ``bundled``: the default config and stand-in build; ``console``: log lines on the terminal.

Errors a user can fix (a bad config key, a wrong --env path, a taken port, an existing run
folder, no checkpoint to resume) print one line ``unity-rl: error: ...`` on stderr and exit 1,
without a traceback. Ctrl-C and SIGTERM stop the same way: the trainer writes a final checkpoint
and closes every build; the command then exits 130 (Ctrl-C) or 143 (SIGTERM).
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from unity_rl.cli.parser import build_parser
from unity_rl.errors import UserError
from unity_rl.interrupts import exit_status, sigterm_raises


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one ``unity-rl`` command; returns its exit status (0, 1 for a user's mistake,
    130/143 when stopped by Ctrl-C/SIGTERM)."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_raises():
            return int(args.handler(args) or 0)
    except KeyboardInterrupt as stop:
        print("unity-rl: interrupted.", file=sys.stderr, flush=True)
        return exit_status(stop)
    except UserError as err:
        print(f"unity-rl: error: {err}", file=sys.stderr, flush=True)
        return 1
