"""Scene models: 3DBall is neither trivial nor impossible; Basic and VisualBall behave."""
from __future__ import annotations

import numpy as np
import pytest

from unity_rl.standin.academy import Academy
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.ball3d import Ball3DModel, pd_controller
from unity_rl.standin.scenes.basic import BasicModel
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire_input import ActionBatch

BALL = "3DBall?team=0"


def run_3dball(policy, academy_steps: int, seed: int = 0, opts: PlayerOptions | None = None):
    """Drives 3DBall in-process; returns (falls, truncations, episode lengths of falls)."""
    academy = Academy(SCENES["3DBall"], opts or PlayerOptions(), seed=seed)
    rng = np.random.default_rng(seed)
    falls, truncations = 0, 0
    for _ in range(academy_steps):
        message = academy.begin_step()
        if message is not None:
            decision = None
            for batch in message.batches[BALL]:
                if batch.done:
                    truncations += int(batch.max_step_reached.sum())
                    falls += int((~batch.max_step_reached).sum())
                else:
                    decision = batch
            if decision is not None:
                actions = policy(decision.obs[0], rng)
                academy.apply_actions({BALL: ActionBatch(actions, np.zeros((len(actions), 0),
                                                                           np.int32))})
        academy.end_step()
    return falls, truncations


def random_policy(obs, rng):
    return rng.uniform(-1, 1, (len(obs), 2)).astype(np.float32)


def test_random_actions_drop_the_ball_within_a_few_seconds():
    steps = 500  # 10 simulated seconds, 12 agents
    falls, _ = run_3dball(random_policy, steps)
    mean_episode_s = 12 * steps / max(falls, 1) * 0.02
    assert falls >= 12
    assert mean_episode_s < 4.0


@pytest.mark.slow
def test_pd_controller_balances_for_the_whole_episode():
    falls, truncations = run_3dball(lambda obs, rng: pd_controller(obs), 5001)
    assert falls == 0
    assert truncations == 12  # every agent reaches MaxStep 5000 (interrupted, not failed)


def test_ball_lands_and_rests_at_the_platform_surface():
    model = Ball3DModel(4, np.random.default_rng(0), EnvironmentParameters())
    model.tilt[:] = 0.0
    model.hpos[:] = 0.0
    for _ in range(100):
        model.physics_step()
    assert model.on_plate.all()
    assert np.allclose(model.y, Ball3DModel.PLATFORM_TOP + 0.5)
    assert np.allclose(model.vy, 0.0)
    obs = model.observe(np.arange(4))[0]
    assert obs.shape == (4, 8) and obs.dtype == np.float32


def test_tilt_rolls_the_ball_the_unity_way_and_rotation_is_limited():
    model = Ball3DModel(1, np.random.default_rng(0), EnvironmentParameters())
    model.tilt[:] = 0.0
    model.hpos[:] = 0.0
    model.y[:] = Ball3DModel.PLATFORM_TOP + 0.5
    model.on_plate[:] = True
    idx = np.arange(1)
    for _ in range(5):  # +1 on both actions: raise the +x side, lower the +z side
        model.act(idx, np.ones((1, 2), np.float32), np.zeros((1, 0), np.int32))
    assert np.allclose(model.tilt, np.radians(10.0))
    for _ in range(20):
        model.physics_step()
    assert model.hvel[0, 0] < 0 < model.hvel[0, 1]  # rolls to -x and to +z
    for _ in range(100):
        model.act(idx, np.ones((1, 2), np.float32), np.zeros((1, 0), np.int32))
    q = model.observe(idx)[0][0, :2]
    assert np.all(q > 0.24) and np.all(q < 0.27)  # stops once the component passes 0.25


def test_environment_parameters_are_read_at_episode_start():
    params = EnvironmentParameters()
    model = Ball3DModel(3, np.random.default_rng(0), params)
    assert np.allclose(model.radius, 0.5) and np.allclose(model.gravity, 9.81)
    params._values.update(scale=2.0, gravity=0.0, mass=3.0)
    assert np.allclose(model.radius, 0.5)  # not before the next episode
    model.reset(np.array([1]))
    assert model.radius.tolist() == [0.5, 1.0, 0.5]
    assert model.gravity.tolist() == [9.81, 0.0, 9.81]
    assert model.mass.tolist() == [1.0, 3.0, 1.0]
    for _ in range(200):
        model.physics_step()
    assert model.y[1] == pytest.approx(Ball3DModel.DROP_HEIGHT)  # no gravity: it floats


def test_basic_rewards_goals_and_masks():
    model = BasicModel(3, np.random.default_rng(0), EnvironmentParameters())
    idx = np.arange(3)
    none = np.zeros((3, 0), np.float32)
    assert model.observe(idx)[0].argmax(axis=1).tolist() == [10, 10, 10]
    for _ in range(2):
        model.act(idx, none, np.array([[1], [2], [0]]))
    reward, ended = model.act(idx, none, np.array([[1], [2], [0]]))  # 10 -> 7 and 10 -> 13
    assert model.position.tolist() == [7, 13, 10]
    assert np.allclose(reward, [0.09, -0.01, -0.01]) and ended.tolist() == [True, False, False]
    for _ in range(4):
        reward, ended = model.act(idx, none, np.array([[0], [2], [0]]))
    assert model.position[1] == 17 and np.isclose(reward[1], 0.99) and ended[1]
    edge = BasicModel(2, np.random.default_rng(0), EnvironmentParameters(),
                      PlayerOptions(basic_start=0))
    mask = edge.action_mask(np.arange(2))
    assert mask.tolist() == [[False, True, False]] * 2  # "left" unavailable on cell 0
    edge.act(np.arange(2), np.zeros((2, 0)), np.array([[1], [2]]))
    assert edge.position.tolist() == [0, 1]
    assert edge.action_mask(np.arange(2)).tolist() == [[False, True, False],
                                                       [False, False, False]]


def test_visual_ball_renders_the_scene():
    academy = Academy(SCENES["VisualBall"], seed=1)
    model = academy.groups[0].model
    images = model.render(np.arange(model.n))
    assert images.shape == (4, 84, 84, 3) and images.dtype == np.uint8
    assert images.std() > 10
    before = images[0].copy()
    model.hpos[0] = [2.0, -2.0]
    after = model.render(np.arange(1))[0]
    assert (before != after).any(axis=2).sum() > 20  # the ball moved in the picture
