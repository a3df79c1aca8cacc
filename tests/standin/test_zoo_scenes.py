"""Stand-ins shaped like Unity's example scenes (docs/zoo.md): 3DBallHard, Visual3DBall, GridWorld,
GridFoodCollector, VisualFoodCollector, driven through the real mlagents_envs client.

Each checks what EXAMPLES.md gives for the scene as Python sees it: behavior names, observation
names, shapes and types in sensor order, the action spec, the decision period, MaxStep (its
default from the player's log line, the interruption with a shortened --standin-max-step)."""
from __future__ import annotations

import numpy as np
from mlagents_envs.base_env import ActionTuple, ObservationType

from tests.standin.test_builds import random_step
from unity_rl.standin.scenes.ball3d_hard import Ball3DHardModel
from unity_rl.standin.scenes.food_areas import FROZEN, GridFoodCollectorModel
from unity_rl.standin.scenes.gridworld import (
    EX,
    PLUS,
    RIGHT,
    GridWorldModel,
    goal_oracle_action,
)
from unity_rl.standin.side_channels import EnvironmentParameters


def _spec(env, name):
    spec = env.behavior_specs[name]
    return ([(o.name, o.shape, o.observation_type) for o in spec.observation_specs],
            spec.action_spec)


def _log_line(tmp_path) -> str:
    return next(line for line in (tmp_path / "Player-0.log").read_text().splitlines()
                if "behaviors:" in line)


def _run(env, name, steps, rng, policy=None):
    """Random (or ``policy``) steps; returns [(message index, decisions, terminals)]. A build
    sends a message only at academy steps where an agent decides or ends."""
    seen = []
    for k in range(steps):
        decision, terminal = env.get_steps(name)
        seen.append((k, decision, terminal))
        if policy is None:
            random_step(env, rng, name)
        else:
            env.set_actions(name, policy(decision))
            env.step()
    return seen


def _cuts(seen) -> list[int]:
    """Indices of the messages with terminal steps, all of them MaxStep interruptions."""
    assert all(t.interrupted.all() for _, _, t in seen if len(t))
    return [k for k, _, t in seen if len(t)]


# -- 3DBallHard ---------------------------------------------------------------------------------

HARD = "3DBallHard?team=0"


def test_3dballhard_spec_stacks_and_max_step(open_env, tmp_path):
    env = open_env("3DBallHard", args=["--standin-max-step", "30"])
    env.reset()
    assert list(env.behavior_specs) == [HARD]
    obs, actions = _spec(env, HARD)
    prefix = "StackingSensor_size9_ObservableAttribute:Ball3DHardAgent."
    assert obs == [(prefix + "PositionDelta", (27,), ObservationType.DEFAULT),
                   (prefix + "Rotation", (18,), ObservationType.DEFAULT)]
    assert actions.continuous_size == 2 and actions.discrete_branches == ()
    assert "3DBallHard?team=0 x12 (period 5, max step 30)" in _log_line(tmp_path)
    first, _ = env.get_steps(HARD)
    position, rotation = first.obs
    assert len(first) == 12
    # a new episode's stack: 8 empty (zero) observations, then the first one, oldest first
    assert (position[:, :24] == 0).all() and (rotation[:, :16] == 0).all()
    assert (position[:, 25] == 4.0).all()  # the ball is dropped from height 4
    seen = _run(env, HARD, 8, np.random.default_rng(0))
    assert all(len(d) == 12 for _, d, _ in seen)  # every agent decides in every message
    # a message every 5 academy steps: MaxStep 30 cuts everyone in message 6 (the ball, dropped
    # from height 4, cannot fall off that soon)
    assert _cuts(seen) == [6]
    second = seen[1][1]
    assert np.allclose(second.obs[0][:, 21:24], position[:, 24:27])  # shifted by one
    assert (second.obs[0][:, :21] == 0).all()


def test_3dballhard_reads_mass_and_scale_only_at_initialize():
    params = EnvironmentParameters()
    model = Ball3DHardModel(2, np.random.default_rng(0), params, None)
    params._values["scale"] = 2.0
    model.reset(np.arange(2))  # the first reset after the trainer's first RESET: Initialize
    assert model.radius.tolist() == [1.0, 1.0]
    params._values["scale"] = 3.0
    model.reset(np.arange(2))
    assert model.radius.tolist() == [1.0, 1.0]


# -- Visual3DBall -------------------------------------------------------------------------------

VIS = "Visual3DBall?team=0"


def test_visual3dball_stacked_camera(open_env, tmp_path):
    env = open_env("Visual3DBall", args=["--standin-max-step", "15"])
    env.reset()
    assert list(env.behavior_specs) == [VIS]
    obs, actions = _spec(env, VIS)
    assert obs == [("StackingSensor_size4_CameraSensor", (12, 84, 84), ObservationType.DEFAULT)]
    assert actions.continuous_size == 2 and actions.discrete_branches == ()
    assert "Visual3DBall?team=0 x8 (period 5, max step 15)" in _log_line(tmp_path)
    first, _ = env.get_steps(VIS)
    assert first.obs[0].shape == (8, 12, 84, 84)
    assert (first.obs[0][:, :9] == 0).all() and first.obs[0][:, 9:].max() > 0.5
    seen = _run(env, VIS, 5, np.random.default_rng(0))
    assert all(len(d) == 8 for _, d, _ in seen) and _cuts(seen) == [3]  # period 5, MaxStep 15
    # the newest frame of one decision is the second newest of the next
    np.testing.assert_array_equal(seen[1][1].obs[0][:, 6:9], seen[0][1].obs[0][:, 9:12])


# -- GridWorld ----------------------------------------------------------------------------------

GW = "GridWorld?team=0"


def test_gridworld_matches_unity_goal_signal_every_step_max_step_100(open_env, tmp_path):
    env = open_env("GridWorld")
    env.reset()
    obs, actions = _spec(env, GW)
    assert obs == [("CameraSensor", (3, 64, 84), ObservationType.DEFAULT),
                   ("VectorSensor", (2,), ObservationType.GOAL_SIGNAL)]
    assert actions.continuous_size == 0 and actions.discrete_branches == (5,)
    assert "GridWorld?team=0 x9 (period 1, max step 100)" in _log_line(tmp_path)
    decision, _ = env.get_steps(GW)
    image, goal = decision.obs
    assert image.shape == (9, 3, 64, 84) and goal.shape == (9, 2)
    assert (goal.sum(axis=1) == 1).all() and set(np.unique(goal)) <= {0.0, 1.0}
    assert decision.action_mask[0].shape == (9, 5) and decision.action_mask[0].any()
    # no-op forever: a decision at every academy step, every episode cut at MaxStep 100
    noop = lambda d: ActionTuple(discrete=np.zeros((len(d), 1), np.int32))  # noqa: E731
    seen = _run(env, GW, 101, None, noop)
    assert all(len(d) == 9 for _, d, _ in seen)
    assert _cuts(seen) == [100]  # message = academy step (period 1); all 9 cut together


def test_gridworld_model_rewards_goal_signal_and_oracle():
    params = EnvironmentParameters()
    model = GridWorldModel(9, np.random.default_rng(0), params, None)
    idx = np.arange(9)
    model.reset(idx)
    assert model.grid.tolist() == [5] * 9
    assert ((model.board == PLUS).sum(axis=(1, 2)) == 1).all()
    assert ((model.board == EX).sum(axis=(1, 2)) == 1).all()
    # the target is only in the goal signal: the image does not depend on it
    before = model.render(idx)
    model.target[:] = EX + PLUS - model.target
    np.testing.assert_array_equal(model.render(idx), before)
    assert model.goal_signal(idx).tolist()[0] == [float(model.target[0] == PLUS),
                                                  float(model.target[0] == EX)]
    one = np.array([0])
    model.board[0] = 0
    model.agent[0] = (2, 2)
    model.board[0, 2, 3], model.board[0, 0, 0], model.target[0] = PLUS, EX, PLUS
    assert model.act(one, None, np.array([[RIGHT]]))[0].tolist() == [1.0]
    params._values.update(gridSize=4.0, numPlusGoals=2.0, numExGoals=3.0)
    model.reset(idx)
    assert model.grid.tolist() == [4] * 9 and ((model.board == EX).sum(axis=(1, 2)) == 3).all()
    returns, ret = [], np.zeros(9)
    for _ in range(300):  # the scripted oracle solves it
        actions = np.array([[goal_oracle_action(model, i)] for i in idx])
        reward, ended = model.act(idx, None, actions)
        ret += reward
        returns += ret[ended].tolist()
        ret[ended] = 0
        model.reset(idx[ended])
    assert len(returns) > 100 and np.mean(returns) > 0.9


# -- GridFoodCollector and VisualFoodCollector --------------------------------------------------

GFC, VFC = "GridFoodCollector?team=0", "VisualFoodCollector?team=0"


def test_grid_food_collector_one_hot_grid_sensor(open_env, tmp_path):
    env = open_env("GridFoodCollector", args=["--standin-max-step", "10"])
    env.reset()
    assert list(env.behavior_specs) == [GFC]
    obs, actions = _spec(env, GFC)
    assert obs == [("GridSensor-OneHot", (5, 40, 40), ObservationType.DEFAULT)]
    assert actions.continuous_size == 3 and actions.discrete_branches == (2,)
    assert "GridFoodCollector?team=0 x20 (period 5, max step 10)" in _log_line(tmp_path)
    decision, _ = env.get_steps(GFC)
    grid = decision.obs[0]
    assert grid.shape == (20, 5, 40, 40) and set(np.unique(grid)) == {0.0, 1.0}
    assert grid.sum(axis=(2, 3))[:, [0, 2, 3]].min() > 0  # food, walls, bad food in view
    seen = _run(env, GFC, 3, np.random.default_rng(0))
    assert all(len(d) == 20 for _, d, _ in seen)
    assert _cuts(seen) == [2] and len(seen[2][2]) == 20  # period 5, MaxStep 10; no other end


def test_food_collector_model_food_and_laser():
    model = GridFoodCollectorModel(5, np.random.default_rng(0), EnvironmentParameters(), None)
    idx = np.arange(5)
    model.reset(idx)
    model.items[0] = 50.0  # out of the way
    model.items[0, 0] = (0.0, 2.0)  # food 2 ahead of agent 0
    model.items[0, -1] = (0.0, -2.0)  # bad food 2 behind
    model.pos[:] = [(0, 0), (0, 6), (8, 8), (-8, 8), (8, -8)]
    model.heading[:] = 0.0  # facing +z: agent 1 is 6 ahead of agent 0
    stay = np.zeros((5, 3))
    fire = np.zeros((5, 1), np.int64)
    fire[0] = 1
    model.act(idx, stay, fire)
    assert model.frozen[1] == 200 and model.frozen[[0, 2, 3, 4]].sum() == 0
    grid = model.grids(np.array([0]))[0]
    assert grid[FROZEN].sum() == 1
    forward = stay.copy()
    forward[0, 0] = 1.0
    total = 0.0
    for _ in range(10):  # 0.15 per step: the food is within reach after 7 steps
        total += model.act(idx, forward, np.zeros((5, 1), np.int64))[0][0]
    assert total == 1.0
    backward = -forward
    for _ in range(40):
        total += model.act(idx, backward, np.zeros((5, 1), np.int64))[0][0]
    assert total == 0.0  # then the bad food behind: -1


def test_visual_food_collector_camera_and_frozen_flag(open_env, tmp_path):
    env = open_env("VisualFoodCollector", args=["--standin-max-step", "10"])
    env.reset()
    assert list(env.behavior_specs) == [VFC]
    obs, actions = _spec(env, VFC)
    assert obs == [("CameraSensor", (3, 84, 84), ObservationType.DEFAULT),
                   ("VectorSensor_size1", (1,), ObservationType.DEFAULT)]
    assert actions.continuous_size == 3 and actions.discrete_branches == (2,)
    assert "VisualFoodCollector?team=0 x8 (period 5, max step 10)" in _log_line(tmp_path)
    decision, _ = env.get_steps(VFC)
    assert decision.obs[0].shape == (8, 3, 84, 84) and (decision.obs[1] == 0).all()
    seen = _run(env, VFC, 3, np.random.default_rng(0))
    assert all(len(d) == 8 for _, d, _ in seen) and _cuts(seen) == [2]
