"""The mlagents-learn 1.1.0 half of ``pushblock_seed_drift.py``, and the probe both halves share.

Run with the Python of an mlagents-learn venv::

    VENV/bin/python benchmarks/pushblock_seed_drift_mlagents.py OUT_DIR -- <mlagents-learn arguments>

It runs ``mlagents-learn`` with PPO's ``OnPolicyTrainer._update_policy`` wrapped: before each
update the update buffer is probed (``probe``) and ``OUT_DIR/update_<k>.json`` written; before the
first update the initial weights are saved as ``OUT_DIR/init_weights.npz`` under ``ActorCritic``'s
names (``tests/algos/mlagents_reference/make_reference._our_names``), so that unity-rl can start
from them (``pushblock_seed_drift.py --init-from-mlagents``).

``probe`` reads the PushBlock stand-in's observations (``unity_rl/standin/scenes/blocks.py``): two
stacked ray sensors of 3 x 7 rays x 5 floats, the offset sensor (over the walls: it sees only the
block) first; the newest stack is the last 35 floats of each, ray 0 points straight ahead, float 0
of a ray is its "block" tag. Only numpy is imported at module level (unity-rl imports ``probe``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

OFFSET_NEWEST = slice(70, 105)
"""Columns of the offset ray sensor's newest stack in a flat PushBlock observation row."""


def probe(obs: np.ndarray, rewards: np.ndarray, values: np.ndarray, logprobs: np.ndarray) -> dict:
    """What one update buffer says about the policy's drift (rows [N, 210], [N], [N], [N])."""
    rays = np.asarray(obs, np.float32)[:, OFFSET_NEWEST].reshape(len(obs), 7, 5)
    ahead = rays[:, 0, 0] > 0.5                 # the block straight ahead
    seen = rays[:, :, 0].max(axis=1)            # the block in any ray
    values = np.asarray(values, np.float64)
    corr = float(np.corrcoef(values, seen)[0, 1]) if values.std() > 0 and seen.std() > 0 else 0.0
    return {"rows": int(len(obs)), "block_ahead_per_4096": float(ahead.mean() * 4096),
            "block_seen_fraction": float(seen.mean()),
            "successes": int((np.asarray(rewards) > 1.0).sum()),
            "corr_value_block_seen": corr,
            "behaviour_entropy": float(-np.mean(logprobs))}


def _install(out: Path) -> None:
    import torch
    from mlagents.trainers.buffer import BufferKey, ObservationKeyPrefix
    from mlagents.trainers.trainer.on_policy_trainer import OnPolicyTrainer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "algos" / "mlagents_reference"))
    from make_reference import _our_names

    update = OnPolicyTrainer._update_policy
    count = [0]

    def probed_update(self):
        buf = self.update_buffer
        parts = [np.asarray(buf[(ObservationKeyPrefix.OBSERVATION, i)].get_batch(), np.float32)
                 for i in range(2)]
        with torch.no_grad():  # the pre-update critic: the GAE baselines of this buffer
            values, _ = self.optimizer.critic.critic_pass([torch.from_numpy(p) for p in parts])
        if count[0] == 0:
            np.savez(out / "init_weights.npz",
                     **_our_names(self, {"layers": self.trainer_settings.network_settings.num_layers,
                                         "continuous": 0, "branches": (7,)}))
        result = probe(np.concatenate(parts, axis=1),
                       np.asarray(buf[BufferKey.ENVIRONMENT_REWARDS].get_batch()),
                       values["extrinsic"].numpy().reshape(-1),
                       np.asarray(buf[BufferKey.DISCRETE_LOG_PROBS].get_batch()).reshape(-1))
        result["trainer_step"] = int(self.get_step)
        (out / f"update_{count[0]:04d}.json").write_text(json.dumps(result))
        count[0] += 1
        return update(self)

    OnPolicyTrainer._update_policy = probed_update


def main() -> None:
    out, rest = Path(sys.argv[1]), sys.argv[3:]  # OUT_DIR -- args
    out.mkdir(parents=True, exist_ok=True)
    _install(out)
    from mlagents.trainers.learn import main as learn_main
    sys.argv = ["mlagents-learn", *rest]
    learn_main()


if __name__ == "__main__":
    main()
