"""Runs ``train`` on a tiny 3DBall config in its own process (signal tests).

    python tests/runtime/run_train.py RUN_DIR BASE_PORT MODE MAX_STEPS [--resume] [--sac]

``--sac``: Unity's sac/3DBall.yaml scaled down, the replay kept in checkpoints.

Prints one JSON line with the TrainResult at the end.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.runtime.helpers import tiny_config  # noqa: E402
from unity_rl.training.trainer import train  # noqa: E402


def main() -> None:
    run_dir, port, mode, max_steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if "--sac" in sys.argv:
        import dataclasses

        from tests.runtime.test_sac_training import tiny_sac
        cfg = tiny_sac("3DBall", port, mode=mode, num_envs=2, max_steps=max_steps,
                       save_replay_buffer=True, steps_per_update=4.0)
        [(name, b)] = list(cfg.behaviors.items())
        cfg = dataclasses.replace(cfg, behaviors=type(cfg.behaviors)(
            {name: dataclasses.replace(b, checkpoint_interval=2000)}))
    else:
        cfg = tiny_config(port, mode=mode, max_steps=max_steps, checkpoint_interval=2000)
    result = train(cfg, Path(run_dir), resume="--resume" in sys.argv, console=False)
    fields = {k: (str(v) if isinstance(v, Path) else v)
              for k, v in result._asdict().items() if k != "behaviors"}
    fields["interrupted"] = bool(result.interrupted)
    print(json.dumps(fields), flush=True)


if __name__ == "__main__":
    main()
