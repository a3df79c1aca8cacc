"""GridWorld (its tinted variant), FoodCollector and FloatGrid: through the real UnityEnvironment,
and their models. GridWorld as Unity's scene: tests/standin/test_zoo_scenes.py."""
from __future__ import annotations

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from tests.standin.test_builds import random_step
from unity_rl.standin.scenes.float_grid import GOAL, float_grid
from unity_rl.standin.scenes.food_collector import FoodCollectorModel
from unity_rl.standin.scenes.gridworld import (
    _AGENT,
    _COLOURS,
    DOWN,
    LEFT,
    RIGHT,
    UP,
    TintedGridWorldModel,
)
from unity_rl.standin.side_channels import EnvironmentParameters

GW, FC, FG = "GridWorld?team=0", "FoodCollector?team=0", "FloatGrid?team=0"
TINTED = "--standin-gridworld-tinted"


@pytest.mark.slow
def test_gridworld_build_spec_png_masks_and_decision_period(open_env):
    env = open_env("GridWorld", args=[TINTED])
    env.reset()
    spec = env.behavior_specs[GW]
    assert [o.shape for o in spec.observation_specs] == [(3, 40, 40)]
    assert spec.action_spec.discrete_branches == (5,) and spec.action_spec.continuous_size == 0
    decision, _ = env.get_steps(GW)
    assert len(decision) == 9
    image = decision.obs[0]
    assert image.dtype == np.float32 and 0 <= image.min() and image.max() <= 1
    masks = decision.action_mask[0]
    assert masks.shape == (9, 5) and not masks[:, 0].any() and masks.any()
    rng = np.random.default_rng(0)
    ends = []
    for _ in range(60):
        random_step(env, rng)
        decision, terminal = env.get_steps(GW)
        assert len(decision) in (0, 9)  # every agent decides at the same multiples of 5
        ends += terminal.reward.tolist()
        if len(decision):
            r = decision.reward  # 0: the first decision of a new episode
            assert (np.isclose(r, -0.01) | (r == 0)).all()
    assert ends and np.isclose(np.abs(ends), 1.0).all(), "goals end episodes with +-1"


def _world(target, agent, green, red, grid=5):
    model = TintedGridWorldModel(1, np.random.default_rng(0), EnvironmentParameters(), None)
    model.reset(np.array([0]))
    model.grid[0] = grid
    model.target[0], model.agent[0] = target, agent
    model.goals[0] = [green, red]
    return model


def test_gridworld_rewards_target_and_walls():
    idx = np.array([0])
    model = _world(0, (2, 2), (2, 3), (1, 2))  # target green, right of the agent
    reward, ended = model.act(idx, None, np.array([[RIGHT]]))
    assert reward.tolist() == [1.0] and ended.tolist() == [True]
    model = _world(1, (2, 2), (2, 3), (1, 2))  # target red: green is now the wrong goal
    reward, ended = model.act(idx, None, np.array([[RIGHT]]))
    assert reward.tolist() == [-1.0] and ended.tolist() == [True]
    model = _world(0, (0, 0), (4, 4), (3, 3))
    assert model.action_mask(idx)[0].tolist() == [False, True, False, True, False]
    reward, ended = model.act(idx, None, np.array([[DOWN]]))
    assert np.isclose(reward[0], -0.01) and not ended[0] and model.agent[0].tolist() == [1, 0]
    assert model.act(idx, None, np.array([[UP]]))[0].tolist() == [-0.01]
    assert model.act(idx, None, np.array([[LEFT]]))[0].tolist() == [-0.01]


def test_gridworld_target_is_shown_only_by_the_floor_colour():
    green = _world(0, (0, 0), (4, 4), (3, 3)).render(np.array([0]))[0]
    red = _world(1, (0, 0), (4, 4), (3, 3)).render(np.array([0]))[0]
    differs = (green != red).any(axis=2)
    assert differs[0].all() and differs[20, 20], "the whole floor takes the target's tint"
    for image in (green, red):  # goals and agent are drawn the same whatever the target
        for row, col, colour in ((4, 4, _COLOURS[0]), (3, 3, _COLOURS[1]), (0, 0, _AGENT)):
            centre = image[8 * row + 4, 8 * col + 4]
            assert centre.tolist() == colour.tolist()
    assert green[0, 0, 1] > green[0, 0, 0] and red[0, 0, 0] > red[0, 0, 1]


def _grid_params(size=None):
    """EnvironmentParameters as the trainer's environment-parameters channel sets them."""
    from mlagents_envs.side_channel.environment_parameters_channel import (
        EnvironmentParametersChannel,
    )

    from tests.standin.test_side_channels import _stream
    from unity_rl.standin.side_channels import SideChannelReceiver

    receiver = SideChannelReceiver(lambda line: None)
    if size is not None:
        channel = EnvironmentParametersChannel()
        channel.set_float_parameter("gridSize", float(size))
        receiver.process(_stream(channel))
    return receiver.parameters


def _returns(policy, size=None, episodes=600):
    model = TintedGridWorldModel(9, np.random.default_rng(1), _grid_params(size), None)
    idx = np.arange(9)
    model.reset(idx)
    ret, steps, returns = np.zeros(9), np.zeros(9, int), []
    rng = np.random.default_rng(2)
    while len(returns) < episodes:
        actions = np.array([[policy(model, i, rng)] for i in idx])
        reward, ended = model.act(idx, None, actions)
        ret += reward
        steps += 1
        done = ended | (steps == 100)
        returns += ret[done].tolist()
        ret[done], steps[done] = 0.0, 0
        model.reset(idx[done])
    return float(np.mean(returns))


def _random_masked(model, i, rng):
    return rng.choice(np.flatnonzero(~model.action_mask(np.array([i]))[0]))


def _oracle(model, i, rng):
    from unity_rl.standin.scenes.gridworld import oracle_action

    return oracle_action(model, i)


@pytest.mark.slow
def test_gridworld_oracle_and_random_returns():
    """3x3 by default: the true state solves it (about +0.99), a random masked policy is at
    chance (about -0.03); Unity's 5x5 (gridSize 5): +0.95 against about -0.25."""
    assert _returns(_oracle) > 0.95
    assert -0.1 < _returns(_random_masked) < 0.05
    assert _returns(_oracle, size=5) > 0.85
    assert -0.35 < _returns(_random_masked, size=5) < -0.15


def test_gridworld_grid_size_parameter_and_default():
    default = TintedGridWorldModel(9, np.random.default_rng(0), _grid_params(), None)
    default.reset(np.arange(9))
    assert default.grid.tolist() == [3] * 9
    assert default.agent.max() <= 2 and default.goals.max() <= 2
    model = TintedGridWorldModel(9, np.random.default_rng(0), _grid_params(5), None)
    model.reset(np.arange(9))
    assert model.grid.tolist() == [5] * 9
    model.agent[0] = (2, 2)  # inside a 5x5 grid: no wall around
    assert not model.action_mask(np.array([0]))[0].any()
    # The image keeps its 40x40 size; a 3x3 grid is drawn with 13-pixel cells.
    image = _world(0, (2, 2), (0, 0), (1, 1), grid=3).render(np.array([0]))[0]
    assert image.shape == (40, 40, 3)
    assert image[13 * 2 + 6, 13 * 2 + 6].tolist() == _AGENT.tolist()
    assert image[6, 6].tolist() == _COLOURS[0].tolist()
    assert image[13 + 6, 13 + 6].tolist() == _COLOURS[1].tolist()


@pytest.mark.slow
def test_gridworld_blind_option_sends_black_png_images(open_env):
    env = open_env("GridWorld", args=[TINTED, "--standin-blind"])
    env.reset()
    assert [o.shape for o in env.behavior_specs[GW].observation_specs] == [(3, 40, 40)]
    rng = np.random.default_rng(0)
    for _ in range(12):
        decision, _ = env.get_steps(GW)
        if len(decision):
            assert (decision.obs[0] == 0).all()
            assert decision.action_mask[0].any()  # the masks still tell where the walls are
        random_step(env, rng)


def test_food_collector_hybrid_spec_and_rewards(open_env):
    env = open_env("FoodCollector")
    env.reset()
    spec = env.behavior_specs[FC]
    assert spec.action_spec.continuous_size == 3 and spec.action_spec.discrete_branches == (2,)
    assert [o.shape for o in spec.observation_specs] == [(8,)]
    decision, _ = env.get_steps(FC)
    n = len(decision)
    signal = decision.obs[0][:, 7].astype(np.int32)
    for _ in range(5):  # one decision period with the laser right for every agent
        d, _ = env.get_steps(FC)
        if len(d):
            env.set_actions(FC, ActionTuple(np.zeros((n, 3), np.float32), signal[:, None]))
        env.step()
    decision, _ = env.get_steps(FC)
    assert np.allclose(decision.reward, 0.05, atol=1e-6)


def test_food_collector_moving_to_food_eats_it():
    model = FoodCollectorModel(1, np.random.default_rng(0), EnvironmentParameters(), None)
    idx = np.array([0])
    model.reset(idx)
    model.pos[0], model.heading[0], model.food[0] = (0, 0), 0.0, (0, 3)  # food 3 ahead (+z)
    for step in range(1, 40):
        reward, _ = model.act(idx, np.array([[1.0, 0.0, 0.0]]), model.signal[idx, None])
        if reward[0] > 0.5:
            break
    assert 19 <= step <= 21 and np.isclose(reward[0], 1.01)  # 2 units at 0.1 per step
    obs = model.observe(idx)[0][0]
    assert obs.dtype == np.float32 and obs.shape == (8,)


@pytest.mark.slow
def test_float_grid_is_sent_uncompressed_and_exact(open_env):
    env = open_env("FloatGrid")
    env.reset()
    spec = env.behavior_specs[FG]
    assert [o.shape for o in spec.observation_specs] == [(2, 6, 6), (2,)]
    decision, _ = env.get_steps(FG)
    grids, cells = decision.obs
    assert grids.min() == -20.0 and grids.max() == 12.0
    for grid, (x, y) in zip(grids, cells.astype(int)):
        np.testing.assert_array_equal(grid, float_grid(x, y))
    assert float_grid(GOAL[1], GOAL[0])[0].min() == float_grid(0, 0)[0][GOAL]
