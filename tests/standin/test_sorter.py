"""Sorter stand-in: Unity's interface through the real UnityEnvironment (a buffer sensor
(20, 23) with VARIABLE_SIZE, zero rows as padding; RB 10; stacked vector 8; branches [3, 3, 3];
DP 5; MaxStep 5000), ``num_tiles`` read from the environment-parameters channel, the adapter's
gymnasium and PettingZoo views of the buffer observation, and the rules in-process."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from mlagents_envs.base_env import DimensionProperty, ObservationType
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel

from tests.standin.test_builds import random_step
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.sorter import (AGENT_RADIUS, ARENA_RADIUS, HIGHEST_TILE, MAX_STEP,
                                            TILE_HALF_WIDTH, TILE_RADIUS, SorterModel,
                                            touching)
from unity_rl.standin.side_channels import EnvironmentParameters

NAME = "Sorter?team=0"


def test_scene_defaults_are_unitys():
    (behavior,) = SCENES["Sorter"]
    assert (behavior.name, behavior.agents, behavior.decision_period, behavior.max_step) == (
        NAME, 8, 5, 5000)


def test_spec_padding_and_num_tiles_through_unity_environment(open_env):
    channel = EnvironmentParametersChannel()
    env = open_env("Sorter", side_channels=[channel])
    channel.set_float_parameter("num_tiles", 3)
    env.reset()
    spec = env.behavior_specs[NAME]
    buffer, rb, vector = spec.observation_specs
    assert (buffer.name, buffer.shape, buffer.observation_type) == ("BufferSensor", (20, 23),
                                                                    ObservationType.DEFAULT)
    assert buffer.dimension_property == (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)
    assert [(o.name, o.shape) for o in (rb, vector)] == [
        ("RBSensor", (10,)), ("StackingSensor_size2_VectorSensor_size4", (8,))]
    assert spec.action_spec.discrete_branches == (3, 3, 3)
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(40):
        decision, _ = env.get_steps(NAME)
        rows = decision.obs[0]
        assert rows.dtype == np.float32 and rows.shape[1:] == (20, 23)
        filled = np.abs(rows).sum(2) > 0
        n = filled.sum(1)
        counts += n.tolist()
        # the filled rows come first (ascending tile numbers), the rest are exact zeros
        assert (filled == (np.arange(20)[None, :] < n[:, None])).all()
        numbers = rows[:, :, :HIGHEST_TILE].argmax(2)
        for i, k in enumerate(n):
            assert (rows[i, :k, :HIGHEST_TILE].sum(1) == 1).all()
            assert (np.diff(numbers[i, :k]) > 0).all()
        random_step(env, rng)
    assert 1 <= min(counts) and max(counts) <= 3 and len(set(counts)) > 1


def test_adapter_views_of_the_buffer_sensor(free_base_port):
    from unity_rl.envs.vec_env import UnityVecEnv
    from unity_rl.standin.scenes import SCENES  # noqa: F401 (the scene exists)
    from tests.standin.conftest import BUILDS_DIR

    with UnityVecEnv(str(BUILDS_DIR / "Sorter"), num_builds=1,
                     base_port=free_base_port(1)) as env:
        space = env.observation_space["BufferSensor"]
        assert space.shape == (8, 20, 23) and space.dtype == np.float32
        obs = env.reset()
        obs = obs[0] if isinstance(obs, tuple) else obs
        assert obs["BufferSensor"].shape == (8, 20, 23)
        assert obs["BufferSensor"].dtype == np.float32


def test_pettingzoo_view_of_the_buffer_sensor(free_base_port):
    pytest.importorskip("pettingzoo")
    from unity_rl.envs.pettingzoo_env import UnityParallelEnv
    from tests.standin.conftest import BUILDS_DIR

    with UnityParallelEnv(str(BUILDS_DIR / "Sorter"), num_builds=1,
                          base_port=free_base_port(1)) as env:
        obs, _ = env.reset()
        agent = env.agents[0]
        assert env.observation_space(agent)["BufferSensor"].shape == (20, 23)
        assert obs[agent]["BufferSensor"].shape == (20, 23)


def _model(num_tiles: float, seed: int = 0) -> SorterModel:
    params = EnvironmentParameters()
    params._values["num_tiles"] = float(num_tiles)  # as the channel sets it
    model = SorterModel(1, np.random.default_rng(seed), params)
    model.reset(np.array([0]))
    return model


def _walk_to(model: SorterModel, target: np.ndarray, steps: int = 200):
    """Faces ``target`` and walks forward until a reward above 0 or the episode's end:
    (reward summed, ended)."""
    d = target - model.pos[0]
    model.heading[0] = np.arctan2(d[0], d[1])
    total = 0.0
    for _ in range(steps):
        reward, done = model.act(np.array([0]), np.zeros((1, 0)), np.array([[1, 0, 0]]))
        total += float(reward[0])
        if done[0] or float(reward[0]) > 0:
            return total, bool(done[0])
    return total, False


def test_visiting_in_order_pays_and_ends():
    model = _model(4, seed=3)
    count = int(model.count[0])
    assert model.num_tiles_seen == [4.0] and 1 <= count <= 4
    rewards = []
    for k in range(count):
        model.pos[0] = 0.0  # back to the centre: the other tiles are not on the way
        total, done = _walk_to(model, model.tiles[0, k])
        rewards.append(total)
        assert done == (k == count - 1)
    assert all(r > 0.9 for r in rewards)
    obs = model.observe(np.array([0]))[0][0]
    assert (obs[:count, HIGHEST_TILE + 2] == 1).all()


def test_wrong_tile_ends_with_minus_one():
    for seed in range(20):
        model = _model(20, seed)
        if model.count[0] >= 2:
            break
    total, done = _walk_to(model, model.tiles[0, int(model.count[0]) - 1])
    assert done and total < -0.9
    assert np.linalg.norm(model.tiles[0, 0]) == pytest.approx(TILE_RADIUS)


def test_time_penalty_is_unitys():
    model = _model(2)
    reward, done = model.act(np.array([0]), np.zeros((1, 0)), np.array([[0, 0, 0]]))
    assert reward[0] == pytest.approx(-1 / MAX_STEP) and not done[0]


def test_blind_option_sends_only_padding():
    params = EnvironmentParameters()
    model = SorterModel(2, np.random.default_rng(0), params, SimpleNamespace(blind=True))
    model.reset(np.array([0, 1]))
    buffer = model.observe(np.array([0, 1]))[0]
    assert buffer.shape == (2, 20, 23) and not buffer.any() and model.count.min() >= 1


def test_geometry_is_unitys_scale():
    """Tiles' boxes at radius 20.5 (Unity's Area.prefab): a tile's position relative to the agent
    at the start is about 1 after Unity's / 20, and a disc between two neighbouring boxes on the
    circle touches neither (Unity's boxes leave gaps), while one at a box's centre touches it."""
    model = _model(20, seed=1)
    count = int(model.count[0])
    rel = model.observe(np.array([0]))[0][0, :count, HIGHEST_TILE:HIGHEST_TILE + 2]
    np.testing.assert_allclose(np.linalg.norm(rel, axis=1), TILE_RADIUS / 20, rtol=1e-5)
    step = 2 * np.pi / HIGHEST_TILE
    tiles = TILE_RADIUS * np.stack([np.sin([0, step]), np.cos([0, step])], 1)[None]
    between = TILE_RADIUS * np.array([[np.sin(step / 2), np.cos(step / 2)]])
    assert not touching(tiles, between).any()
    assert touching(tiles, tiles[:, 0]).tolist() == [[True, False]]
    edge = tiles[:, 0] + np.array([[TILE_HALF_WIDTH + AGENT_RADIUS - 0.01, 0.0]])  # along x
    assert touching(tiles, edge)[0, 0]


def test_seeing_the_tiles_is_worth_it():
    """At Unity's first lesson (num_tiles 2) a scripted policy that walks to the tiles in order
    earns about 1.5 an episode; a blind one (out to the rim, then along it) earns at most 0.75
    in expectation: a wrong first tile in half the two-tile episodes."""

    def mean_return(seeing: bool, episodes: int = 60) -> float:
        model = _model(2, seed=5)
        total = 0.0
        for _ in range(episodes):
            model.reset(np.array([0]))
            for _ in range(MAX_STEP):
                p = model.pos[0]
                if seeing:
                    d = model.tiles[0, model.next[0]] - p
                    model.heading[0] = np.arctan2(d[0], d[1])
                elif np.linalg.norm(p) >= ARENA_RADIUS - 1e-6:  # blind: along the rim
                    model.heading[0] = np.arctan2(p[1], -p[0])
                reward, done = model.act(np.array([0]), np.zeros((1, 0)), np.array([[1, 0, 0]]))
                total += float(reward[0])
                if done[0]:
                    break
        return total / episodes

    seeing, blind = mean_return(True), mean_return(False)
    assert seeing > 1.3 and blind < 1.0, (seeing, blind)
