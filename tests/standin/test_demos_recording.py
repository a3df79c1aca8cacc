"""Stand-in heuristics recorded as Unity demonstrations (``unity_rl.standin.record``) and the
demos shipped in ``unity_builds/Demos/`` (Unity's file names, read by ``load_demo`` with the
stand-in's spec)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from unity_rl.demos import load_demo
from unity_rl.standin.record import behavior_spec, record_heuristic_demo
from unity_rl.standin.scenes import SCENES

DEMOS = Path(__file__).resolve().parents[2] / "unity_builds" / "Demos"
SHIPPED = {  # file -> (stand-in scene, the least mean recorded return of an expert)
    "ExpertPushBlock.demo": ("PushBlock", 4.5),  # +5 at the goal, -0.0002 per step
    "ExpertHallway.demo": ("Hallway", 0.9),      # memoryless policies average 0.45 at best
    "ExpertCrawler.demo": ("Crawler", 2000.0),   # one episode of 1000 decisions, no fall
    "ExpertPyramid.demo": ("Pyramids", 1.8),     # +2 at the gold brick, -0.0002 per step
}


def _spec(scene: str):
    model = SCENES[scene][0].factory(1, np.random.default_rng(0), _params(), None)
    return behavior_spec(model)


def _params():
    from unity_rl.standin.side_channels import EnvironmentParameters
    return EnvironmentParameters()


@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_shipped_demo_loads_with_the_stand_in_spec_and_is_expert(file):
    scene, least = SHIPPED[file]
    demo = load_demo(str(DEMOS / file), _spec(scene))  # a spec mismatch raises
    assert demo.behavior_name == scene
    ended = [r for r in demo.records]
    returns, ret = [], 0.0
    for records in ended:
        for reward, done in zip(records.rewards[1:], records.dones[1:]):
            ret += float(reward)
            if done:
                returns.append(ret)
                ret = 0.0
    assert returns and np.mean(returns) >= least
    assert 100 <= sum(len(r) for r in demo.records) <= 5000  # small, as Unity's


def test_recording_pairs_the_heuristic_s_actions_as_unity_s_recorder(tmp_path):
    path = tmp_path / "Hallway.demo"
    done = record_heuristic_demo("Hallway", path, 4, seed=3)
    assert len(done.returns) == 4 and min(done.returns) > 0.9
    aligned = load_demo(str(path), _spec("Hallway"), pairing="aligned")
    shifted = load_demo(str(path), _spec("Hallway"))
    # the oracle walks forward (1) then turns (3 or 4) and walks into the goal; Unity's
    # recorder stores each action at the next record: the default pairing lags one step
    for a, m in zip(aligned.episodes, shifted.episodes):
        np.testing.assert_array_equal(m.discrete_actions[1:len(a) + 1], a.discrete_actions)
        assert m.discrete_actions[0, 0] == 0  # zeros at an episode's first record
        assert set(a.discrete_actions[:, 0]) <= {1, 3, 4}
    assert sum(float(e.rewards.sum()) for e in shifted.episodes) == pytest.approx(
        sum(done.returns), abs=1e-4)


def test_a_scene_without_heuristic_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no heuristic"):
        record_heuristic_demo("3DBall", tmp_path / "x.demo", 1)
