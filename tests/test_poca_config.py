"""``trainer_type: poca`` in configs: Unity's POCA configs load unchanged with ML-Agents'
meaning; what mlagents-learn refuses (``shared_critic``) and what is not supported yet
is refused by name; learned reward signals and behavioral cloning load as mlagents-learn takes
them, and ``memory``."""
from __future__ import annotations

from pathlib import Path

import pytest

from unity_rl.algorithms.poca.config import POCAConfig
from unity_rl.config import ConfigError, load_config

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "mlagents_configs" / "poca"


@pytest.mark.parametrize("name,behavior,max_steps", [
    ("PushBlockCollab.yaml", "PushBlockCollab", 15_000_000),
    ("DungeonEscape.yaml", "DungeonEscape", 20_000_000)])
def test_unitys_poca_configs_load_with_mlagents_meaning(name, behavior, max_steps):
    cfg = load_config(CONFIGS / name)
    b = cfg.behaviors[behavior]
    assert b.trainer_type == "poca"
    assert b.hyperparameters == POCAConfig(
        learning_rate=3e-4, lr_schedule="constant", buffer_size=10240, minibatch_size=1024,
        num_epochs=3, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.01,
        clip_coef_schedule="constant", ent_coef_schedule="constant",  # follow the lr schedule
        max_steps=max_steps)
    assert b.time_horizon == 64 and b.network_settings.hidden_units == 256
    assert [s.name for s in b.reward_signals] == ["extrinsic"]


def test_poca_defaults_are_poca_settings():
    """ML-Agents 1.1.0's POCASettings defaults (poca/optimizer_torch.py)."""
    hp = POCAConfig()
    assert (hp.ent_coef, hp.clip_coef, hp.gae_lambda, hp.num_epochs, hp.lr_schedule,
            hp.buffer_size, hp.minibatch_size, hp.learning_rate) == (
        5e-3, 0.2, 0.95, 3, "linear", 10240, 1024, 3e-4)


def _variant(tmp_path, old: str, new: str) -> Path:
    text = (CONFIGS / "DungeonEscape.yaml").read_text()
    assert old in text
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("old,new,names", [
    ("      num_epoch: 3\n", "      num_epoch: 3\n      shared_critic: true\n",
     ("hyperparameters", "shared_critic")),
])
def test_what_is_refused_is_named(tmp_path, old, new, names):
    with pytest.raises(ConfigError) as err:
        load_config(_variant(tmp_path, old, new))
    for name in names:
        assert name in str(err.value)


def test_learned_reward_signals_load_for_poca(tmp_path):
    """mlagents-learn 1.1.0 warns at run time and trains them (docs/multi-agent.md)."""
    path = _variant(tmp_path, "      strength: 1.0\n",
                    "      strength: 1.0\n      rnd: {gamma: 0.9, strength: 0.01}\n")
    signals = load_config(path).behaviors["DungeonEscape"].reward_signals
    assert [(s.name, s.gamma) for s in signals] == [("extrinsic", 0.99), ("rnd", 0.9)]


def test_behavioral_cloning_loads_for_poca(tmp_path):
    """ML-Agents' POCA optimizer builds a BCModule as PPO's does (docs/multi-agent.md)."""
    path = _variant(tmp_path, "    keep_checkpoints: 5\n",
                    "    behavioral_cloning: {demo_path: x.demo, strength: 0.5, steps: 10000}\n"
                    "    keep_checkpoints: 5\n")
    bc = load_config(path).behaviors["DungeonEscape"].behavioral_cloning
    assert (bc.demo_path, bc.strength, bc.steps) == ("x.demo", 0.5, 10000)


def test_poca_takes_memory(tmp_path):
    """The POCA learner has memory (tests/algos/test_poca_mlagents_reference.py); the config
    takes ``network_settings.memory`` for POCA as ML-Agents does."""
    path = _variant(tmp_path, "      vis_encode_type: simple\n",
                    "      vis_encode_type: simple\n"
                    "      memory: {sequence_length: 64, memory_size: 128}\n")
    net = load_config(path).behaviors["DungeonEscape"].network_settings
    assert (net.sequence_length, net.memory_size) == (64, 128)
