"""Unity's imitation configs, unchanged but for ``demo_path`` pointed at the stand-ins' demos
(``benchmarks/zoo.with_local_demos``): ``imitation/{PushBlock,Crawler,Pyramids,Hallway}.yaml``
and ``sac/Pyramids.yaml`` load, build their trainer type's host on the stand-in's spec (the
shipped demo checked against it) and run one update with GAIL (and BC where the config has it):
its losses reported, its state in the checkpoint."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from unity_rl.algorithms.registry import trainer_type
from unity_rl.config import load_config
from unity_rl.experience import Segment, Trajectory
from unity_rl.runtime.algorithm import HostContext
from unity_rl.runtime.messages import BehaviorInfo
from unity_rl.standin.record import behavior_spec
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.side_channels import EnvironmentParameters

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "mlagents_configs"
sys.path.insert(0, str(REPO / "benchmarks"))
from zoo import local_demos_text  # noqa: E402

CASES = {  # config -> (stand-in scene, behavioral cloning in it)
    "imitation/PushBlock.yaml": ("PushBlock", True),
    "imitation/Pyramids.yaml": ("Pyramids", True),   # extrinsic, curiosity, GAIL and BC
    "imitation/Hallway.yaml": ("Hallway", False),    # GAIL beside extrinsic, LSTM memory
    "imitation/Crawler.yaml": ("Crawler", True),     # GAIL alone and BC; 20240-step buffer
    "sac/Pyramids.yaml": ("Pyramids", False),        # GAIL with use_actions, SAC
}
SLOW = {"imitation/Crawler.yaml"}  # about 40 s on two busy cores (512 x 3 network)


def _info(scene: str) -> BehaviorInfo:
    bdef = SCENES[scene][0]
    spec = behavior_spec(bdef.factory(1, np.random.default_rng(0), EnvironmentParameters(), None))
    return BehaviorInfo(bdef.name, tuple(tuple(o.shape) for o in spec.observation_specs),
                        spec.action_spec, 1)


def _segment(info: BehaviorInfo, steps: int, length: int, rng) -> Segment:
    c, branches = info.action_spec.continuous_size, info.action_spec.discrete_branches
    trajectories = []
    for start in range(0, steps, length):
        n = min(length, steps - start)
        actions = np.concatenate(
            [rng.uniform(-1, 1, (n, c))] + [rng.integers(0, b, (n, 1)) for b in branches], 1)
        trajectories.append(Trajectory(
            obs=rng.normal(size=(n, info.obs_dim)).astype(np.float32),
            actions=actions.astype(np.float32) if c else actions.astype(np.int64),
            logprobs=np.full((n, c + len(branches)), -1.0, np.float32),
            values=np.zeros(n, np.float32), rewards=rng.normal(size=n).astype(np.float32),
            last_obs=rng.normal(size=info.obs_dim).astype(np.float32),
            terminated=bool(rng.random() < 0.5)))
    return Segment(trajectories, 0, 0, steps, [], [])


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(CASES)])
def test_unity_imitation_config_runs_an_update_with_the_shipped_demo(name, tmp_path):
    scene, has_bc = CASES[name]
    text = (CONFIGS / name).read_text()
    assert "Project/Assets/ML-Agents/Examples" in text  # Unity's file, as it is
    local = local_demos_text(text)
    assert local.count("unity_builds/Demos/Expert") == text.count("demo_path")
    assert [a for a in text.splitlines() if "demo_path" not in a] == [
        b for b in local.splitlines() if "demo_path" not in b]  # nothing else changed
    (tmp_path / "config.yaml").write_text(local)
    cfg = load_config(tmp_path / "config.yaml")
    (section, behavior), = cfg.behaviors.items()
    assert (behavior.behavioral_cloning is not None) == has_bc
    algorithm = trainer_type(behavior.trainer_type).make_algorithm(cfg, section, behavior)
    host = algorithm.make_host(_info(scene), HostContext("cpu", 0, 1, "sync", 2))
    rng = np.random.default_rng(0)
    hp = behavior.hyperparameters
    steps = (hp.buffer_size if behavior.trainer_type == "ppo"
             else hp.warmup_steps + 2 * hp.batch_size)
    host.accept(_segment(_info(scene), steps, behavior.time_horizon, rng))
    assert host.ready()
    metrics = host.train(sync=True)
    assert np.isfinite(metrics["Losses/GAIL Loss"])
    if has_bc:
        assert metrics["Losses/Pretraining Loss"] > 0
        assert "behavioral_cloning" in host.state_dict()["auxiliary"]
    try:
        algorithm.close()
    except AttributeError:
        pass


@pytest.mark.slow
def test_unity_imitation_pushblock_trains_and_resumes_through_the_cli(tmp_path, free_base_port):
    """``unity-rl train`` on Unity's imitation/PushBlock.yaml (its demo_path pointed at the
    shipped demo, summary_freq cut): GAIL's and BC's losses reach TensorBoard, and a resumed run
    loads their state from the checkpoint."""
    import os
    import subprocess

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    text = local_demos_text((CONFIGS / "imitation/PushBlock.yaml").read_text())
    config = tmp_path / "PushBlock.yaml"
    config.write_text(text.replace("summary_freq: 60000", "summary_freq: 2048"))
    common = ["--env", str(REPO / "unity_builds" / "PushBlock"), "--num-envs", "1",
              "--base-port", str(free_base_port(1)), "--run-id", "imitation",
              "--results-dir", str(tmp_path / "results"), "--seed", "1"]
    env = dict(os.environ, GRPC_VERBOSITY="ERROR")
    for extra, steps in (([], "2048"), (["--resume"], "4096")):
        # episodes of 50 decisions (MaxStep 250): every agent's ends within the first buffer, so
        # the per-episode signal rewards are logged whether or not a block was delivered
        done = subprocess.run([sys.executable, "-m", "unity_rl", "train", str(config), *common,
                               "--max-steps", steps, *extra,
                               "--env-args", "--standin-max-step", "250"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    events = EventAccumulator(str(tmp_path / "results" / "imitation" / "PushBlock"))
    events.Reload()
    tags = events.Tags()["scalars"]
    for tag in ("Losses/Pretraining Loss", "Losses/GAIL Loss", "Policy/Gail Reward",
                "Policy/GAIL Expert Estimate"):
        assert tag in tags, tags
    assert len(events.Scalars("Losses/Pretraining Loss")) >= 2  # before and after the resume
