"""A build that sends a GOAL_SIGNAL (the GridWorld stand-in by default: camera + one-hot goal):
the learner and the actors' copies are goal-conditioned (``goal_conditioning_type: hyper``, the
default) and the exported model keeps ML-Agents' inputs (obs_0, obs_1, action_masks)."""
from __future__ import annotations

import dataclasses

import onnxruntime as ort
import pytest
import torch

from tests.runtime.helpers import REPO_ROOT, live_descendants
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_gridworld_goal_signal_trains_a_hyper_network_and_exports(tmp_path, free_base_port):
    cfg = apply_overrides(load_config(REPO_ROOT / "configs" / "ppo" / "gridworld.yaml"),
                          env=str(REPO_ROOT / "unity_builds" / "GridWorld.x86_64"),
                          base_port=free_base_port(1), num_envs=1, num_actors=1, mode="sync",
                          seed=1, no_graphics=True, env_args=(), timeout_wait=60)
    [(name, behavior)] = list(cfg.behaviors.items())
    network = dataclasses.replace(behavior.network_settings, hidden_units=16)
    behavior = dataclasses.replace(behavior, max_steps=600, summary_freq=300,
                                   network_settings=network)
    result = train(dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior})),
                   tmp_path / "run", resume=False, console=False)  # about 25 s on 2 cores

    assert result.agent_steps >= 600
    saved = torch.load(result.torch_policy_path, weights_only=False)
    assert saved["obs_shapes"] == ((3, 64, 84), (2,))
    assert tuple(saved["weights"]["goal_indices"]) == (1,)
    assert any(".hypernet." in k for k in saved["weights"]["model"])
    session = ort.InferenceSession(str(result.policy_path))
    assert [i.name for i in session.get_inputs()] == ["obs_0", "obs_1", "action_masks"]
    assert live_descendants() == []
