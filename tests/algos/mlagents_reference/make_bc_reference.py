"""Writes ``bc_<case>.npz`` (+ ``bc_<case>.demo``): two behavioral-cloning updates as
mlagents-learn 1.1.0's own ``BCModule`` performs them.

Run with the Python of an mlagents-learn venv, from the repository root::

    bash ../shared/mlagents_learn/install.sh DIR      # any folder outside the repository
    DIR/venv/bin/python tests/algos/mlagents_reference/make_bc_reference.py

For each case (PPO discrete with two branches, continuous with a normaliser, hybrid, hybrid with
memory; SAC hybrid with a normaliser, SAC hybrid with memory) it writes a demonstration of random
episodes with this
project's ``write_demo`` (``unity_rl.demos`` is torch-free, so it imports in that venv), builds
ML-Agents' trainer with ``behavioral_cloning`` on that file (its ``BCModule``, created by
``TorchOptimizer``), optionally folds random observations into the actor's normaliser, then runs
``bc_module.update()`` twice, at policy steps 200 and 600 of a 1000-step anneal, saving the
weights before and after each. To replay it exactly, it records:

- each ``AgentBuffer.shuffle``'s permutation (``np.random.shuffle`` wrapped), which the test
  feeds to ``BehavioralCloning`` in place of its own generator;
- torch's seed before each update (``torch.manual_seed(100 + k)``): the Gaussian noise of the
  reparameterised samples comes from it, drawn in the same order by the test's generator;
- discrete samples, which BC's loss never reads, are taken as argmax here
  (``CategoricalDistInstance.sample`` patched) so that they draw nothing from torch's stream.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # this repository, for unity_rl.demos
sys.path.insert(0, str(HERE))
from unity_rl.demos import RecordedEpisode, write_demo  # noqa: E402

from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers  # noqa: E402
from mlagents.trainers.ppo.trainer import PPOTrainer  # noqa: E402
from mlagents.trainers.sac.trainer import SACTrainer  # noqa: E402
from mlagents.trainers.ppo.optimizer_torch import PPOSettings  # noqa: E402
from mlagents.trainers.sac.optimizer_torch import SACSettings  # noqa: E402
from mlagents.trainers.settings import (BehavioralCloningSettings, NetworkSettings,  # noqa: E402
                                        RewardSignalSettings, RewardSignalType, TrainerSettings)
from mlagents.trainers.torch_entities import distributions  # noqa: E402

import make_reference  # noqa: E402
import make_sac_reference  # noqa: E402
from reference_common import vector_spec  # noqa: E402

CASES = {
    "ppo_discrete": dict(trainer="ppo", obs=[(6,)], continuous=0, branches=(3, 2), hidden=16,
                         layers=2, normalize=False, lengths=(7, 5, 9, 4)),
    "ppo_continuous": dict(trainer="ppo", obs=[(5,), (3,)], continuous=2, branches=(),
                           hidden=16, layers=2, normalize=True, lengths=(8, 6, 10),
                           samples_per_update=12),
    "ppo_hybrid": dict(trainer="ppo", obs=[(6,)], continuous=2, branches=(3,), hidden=16,
                       layers=1, normalize=False, lengths=(6, 9, 5, 7)),
    "ppo_memory": dict(trainer="ppo", obs=[(6,)], continuous=1, branches=(3,), hidden=16,
                       layers=2, normalize=False, lengths=(7, 10, 5), sequence_length=4,
                       memory_size=16),
    "sac_hybrid": dict(trainer="sac", obs=[(6,)], continuous=2, branches=(3,), hidden=16,
                       layers=2, normalize=True, lengths=(6, 8, 7)),
    "sac_memory": dict(trainer="sac", obs=[(6,)], continuous=2, branches=(3,), hidden=16,
                       layers=2, normalize=False, lengths=(7, 10, 5), sequence_length=4,
                       memory_size=10),
}
LEARNING_RATE, BATCH, EPOCHS, STRENGTH, ANNEAL = 3e-3, 8, 2, 0.5, 1000
STEPS = (200, 600)
"""Policy steps of the two BC updates (within the anneal: the rate decays between them)."""


def _write_demo(case: dict, path: Path, rng: np.random.Generator) -> None:
    episodes = []
    for steps in case["lengths"]:
        episodes.append(RecordedEpisode(
            observations=[rng.normal(size=(steps + 1, *s)).astype(np.float32) for s in case["obs"]],
            continuous_actions=(rng.uniform(-1, 1, (steps, case["continuous"])).astype(np.float32)
                                if case["continuous"] else None),
            discrete_actions=(np.stack([rng.integers(0, b, steps) for b in case["branches"]], 1)
                              if case["branches"] else None),
            rewards=rng.normal(size=steps).astype(np.float32), done=True))
    write_demo(str(path), vector_spec(case), episodes, name="bc")


def _trainer(case: dict, demo: Path):
    memory = (NetworkSettings.MemorySettings(sequence_length=case["sequence_length"],
                                             memory_size=case["memory_size"])
              if "memory_size" in case else None)
    network = NetworkSettings(normalize=case["normalize"], hidden_units=case["hidden"],
                              num_layers=case["layers"], memory=memory)
    bc = BehavioralCloningSettings(demo_path=str(demo), steps=ANNEAL, strength=STRENGTH,
                                   samples_per_update=case.get("samples_per_update", 0),
                                   num_epoch=EPOCHS)
    if case["trainer"] == "ppo":
        hp = PPOSettings(batch_size=BATCH, buffer_size=4 * BATCH, learning_rate=LEARNING_RATE)
        cls = PPOTrainer
    else:
        hp = SACSettings(batch_size=BATCH, buffer_size=4 * BATCH, learning_rate=LEARNING_RATE)
        cls = SACTrainer
    settings = TrainerSettings(trainer_type=case["trainer"], hyperparameters=hp,
                               network_settings=network, behavioral_cloning=bc,
                               reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings()},
                               max_steps=10_000)
    trainer = cls("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, vector_spec(case)))
    return trainer


def _weights(trainer, case: dict) -> dict[str, np.ndarray]:
    """The actor's parameters under this project's names (the PPO / SAC reference mappings)."""
    if case["trainer"] == "ppo":
        names = make_reference._our_names(trainer, {**case, "shared_critic": False})
        return {k: v for k, v in names.items() if k.startswith(("actor", "actor_encoder/"))
                and not k.startswith("critic")}
    names = make_sac_reference._our_names(trainer, case)
    return {k: v for k, v in names.items() if k.startswith("policy.")}


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    demo = HERE / f"bc_{name}.demo"
    _write_demo(case, demo, rng)
    trainer = _trainer(case, demo)
    out = {"weights0": _weights(trainer, case)}
    if case["normalize"]:
        from mlagents.trainers.buffer import AgentBuffer
        from mlagents.trainers.trajectory import ObsUtil
        buffer = AgentBuffer()
        norm_obs = [rng.normal(1.0, 2.0, size=(30, *s)).astype(np.float32) for s in case["obs"]]
        for i, o in enumerate(norm_obs):
            for row in o:
                buffer[ObsUtil.get_name_at(i)].append(row)
        trainer.policy.actor.update_normalization(buffer)
        out["norm_obs"] = {str(i): o for i, o in enumerate(norm_obs)}
    shuffles = []
    original = np.random.shuffle

    def recording_shuffle(array):
        original(array)
        shuffles.append(np.array(array, copy=True))

    np.random.shuffle = recording_shuffle
    distributions.CategoricalDistInstance.sample = (
        lambda self: torch.argmax(self.probs, dim=1, keepdim=True))
    losses = []
    bc = trainer.optimizer.bc_module
    for k, step in enumerate(STEPS):
        trainer.policy.set_step(step)
        torch.manual_seed(100 + k)
        losses.append(float(bc.update()["Losses/Pretraining Loss"]))
        out[f"weights{k + 1}"] = _weights(trainer, case)
    np.random.shuffle = original
    path = HERE / f"bc_{name}.npz"
    flat = {f"{group}/{k}": v for group, d in out.items() for k, v in d.items()}
    np.savez_compressed(
        path, **flat, **{f"shuffle/{i}": s for i, s in enumerate(shuffles)},
        losses=np.asarray(losses), steps=np.asarray(STEPS),
        **{f"case/{k}": np.asarray(v) for k, v in case.items() if k not in ("obs", "lengths")},
        **{f"case/obs_shape{i}": np.asarray(s) for i, s in enumerate(case["obs"])},
        **{"case/learning_rate": np.asarray(LEARNING_RATE), "case/batch_size": np.asarray(BATCH),
           "case/num_epoch": np.asarray(EPOCHS), "case/strength": np.asarray(STRENGTH),
           "case/anneal": np.asarray(ANNEAL)})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
