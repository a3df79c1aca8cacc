"""Unity's ``ppo/Hallway.yaml`` and ``sac/Hallway.yaml`` (``network_settings.memory``: sequences
of 64, memory 128) run on the Hallway stand-in in sync and async, local and Ray, with only
``max_steps`` (and for SAC ``batch_size`` and ``time_horizon``) cut: the memories travel with the agents in every
wiring, the learners train on sequences, the ONNX carries ML-Agents' recurrent contract. SAC's
async local run writes its padded sequences, memories included, into the shared replay from the
actors (Ape-X)."""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.training.trainer import train

pytestmark = pytest.mark.slow

CONFIGS = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs"
HALLWAY = REPO_ROOT / "unity_builds" / "Hallway.x86_64"
MAX_STEPS = {"ppo": 2200, "sac": 1500}


def hallway(algo: str, base_port: int, mode: str, backend: str, ray_address: str | None = None):
    cfg = load_config(CONFIGS / algo / "Hallway.yaml")
    options = dict(env=str(HALLWAY), num_envs=2, num_actors=2, base_port=base_port, mode=mode,
                   seed=2, no_graphics=True, timeout_wait=30)
    if backend == "ray":
        options.update(backend="ray", ray_address=ray_address)
    cfg = apply_overrides(cfg, **options)
    [(name, b)] = list(cfg.behaviors.items())
    assert b.network_settings.memory is not None           # Unity's config, memory and all
    hp = b.hyperparameters
    horizon = b.time_horizon
    if algo == "sac":  # 4 sequences a minibatch, the replay saved to look at
        hp = dataclasses.replace(hp, batch_size=256, save_replay_buffer=True)
        # A sequence's critic memory is the carry of a trajectory cut before its episode ended;
        # random Hallway episodes are mostly under 64 steps, so at 64 a run had as few as 2 such
        # sequences of ~100 (CI saw none). At 16, about half of them start from a carry.
        horizon = 16
    b = dataclasses.replace(b, hyperparameters=hp, max_steps=MAX_STEPS[algo], summary_freq=1000,
                            checkpoint_interval=100_000, time_horizon=horizon)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: b}))


def check_run(run_dir, result, cfg, algo: str, mode: str, backend: str) -> None:
    assert not result.interrupted and result.agent_steps >= MAX_STEPS[algo]
    state = checkpoint_entry(run_dir, "Hallway")["learner"]
    memory = cfg.behaviors["Hallway"].network_settings.memory
    if algo == "sac":
        assert state["updates"] > 0
        replay = state["replay"]
        L = memory.sequence_length
        assert replay["sequence_length"] == L and replay["size"] % L == 0
        mask = replay["loss_mask"].reshape(-1, L)
        assert mask[:, 0].all() and 0 < mask.mean() < 1          # sequences start real, end padded
        memories = replay["memories"].reshape(-1, L, memory.memory_size)
        assert np.abs(memories[mask > 0]).max() > 0               # rollout memories were stored
        assert np.abs(replay["critic_memories"][replay["loss_mask"] > 0]).max() > 0
        if mode == "async" and backend == "local":                # the actors wrote them (Ape-X)
            assert replay["size"] >= 4 * L
    else:
        assert state["version"] > 0                               # PPO updated
    model = onnx.load(str(run_dir / "Hallway.onnx"))
    assert [i.name for i in model.graph.input][-1] == "recurrent_in"
    assert [o.name for o in model.graph.output][-1] == "recurrent_out"
    assert live_descendants() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algo", ["ppo", "sac"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hallway_memory_configs_run_locally(algo, mode, tmp_path, free_base_port):
    cfg = hallway(algo, free_base_port(2), mode, "local")
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    check_run(tmp_path / "run", result, cfg, algo, mode, "local")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("algo", ["ppo", "sac"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hallway_memory_configs_run_on_ray(algo, mode, ray_cluster, tmp_path, free_base_port):
    cfg = hallway(algo, free_base_port(2), mode, "ray", ray_cluster.address)
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    check_run(tmp_path / "run", result, cfg, algo, mode, "ray")
