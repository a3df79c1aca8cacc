"""Writes ``init.npz``: the initial networks mlagents-learn 1.1.0 draws for a seed (run once, in an
mlagents-learn venv; ``tests/algos/test_mlagents_init.py`` reads the file).

mlagents-learn calls ``torch.manual_seed(seed)`` when its ``TrainerController`` starts; nothing
draws from torch's RNG before the trainer of the first behavior builds its policy (the actor)
and then its optimizer (the critic). So ``manual_seed(seed)`` followed by ``make_reference``'s
``_trainer(case)`` gives the very weights ``mlagents-learn --seed <seed>`` starts from (checked
against the initial weights of a real ``mlagents-learn --seed 6`` PushBlock run, which
``benchmarks/pushblock_seed_drift_mlagents.py`` saves).

    .mlagents_learn/venv/bin/python tests/algos/mlagents_reference/make_init_reference.py

Keys: ``<case>/seed<s>/<name>`` with ``make_reference._our_names``'s names, and
``<case>/case/<field>`` as in the other reference files.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from make_reference import CASES, _our_names, _trainer

HERE = Path(__file__).resolve().parent
INIT_CASES = ("discrete", "continuous", "hybrid", "goal", "shared_critic", "memory")
SEEDS = (0, 6)


def main() -> None:
    out: dict[str, np.ndarray] = {}
    cases = {name: CASES[name] for name in INIT_CASES}
    for name, case in cases.items():
        for field, value in case.items():
            if field == "obs":
                for i, shape in enumerate(value):
                    out[f"{name}/case/obs_shape{i}"] = np.asarray(shape)
            else:
                out[f"{name}/case/{field}"] = np.asarray(value)
        for seed in SEEDS:
            torch.manual_seed(seed)
            trainer, _ = _trainer(case)
            for key, value in _our_names(trainer, case).items():
                out[f"{name}/seed{seed}/{key}"] = value
    np.savez_compressed(HERE / "init.npz", **out)
    print(f"wrote {HERE / 'init.npz'}: {len(cases)} cases x {len(SEEDS)} seeds")


if __name__ == "__main__":
    main()
