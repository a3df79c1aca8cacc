"""Crawler, Walker, Worm, PushBlock, WallJump, Match3: Unity's interfaces through the real
UnityEnvironment (behavior names, sensors, action specs, masks, decision period, MaxStep), and a
few checks of their dynamics in-process."""
from __future__ import annotations

import numpy as np
import pytest

from tests.standin.test_builds import random_step
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.blocks import PushBlockModel, WallJumpModel
from unity_rl.standin.scenes.locomotion import (
    CrawlerModel,
    WalkerModel,
    WormModel,
    balance_controller,
)
from unity_rl.standin.scenes.match3 import (
    C1,
    C2,
    N_MOVES,
    R1,
    R2,
    Match3Model,
    Match3SmartModel,
    matches,
)
from unity_rl.standin.side_channels import EnvironmentParameters

# build -> {behavior: ([(sensor name, shape)], continuous, branches)}, agents, DP, MaxStep
# (EXAMPLES.md; Match3's "MaxStep" is its EpisodeInterrupted after 500 moves).
EXPECTED = {
    "Crawler": ({"Crawler?team=0": ([("PhysicsBodySensor:Body", (126,)),
                                     ("VectorSensor_size32", (32,))], 20, ())}, 10, 5, 5000),
    "Walker": ({"Walker?team=0": ([("VectorSensor_size243", (243,))], 39, ())}, 10, 5, 5000),
    "Worm": ({"Worm?team=0": ([("VectorSensor_size64", (64,))], 9, ())}, 10, 5, 5000),
    "PushBlock": ({"PushBlock?team=0": (
        [("StackingSensor_size3_OffsetRayPerceptionSensor", (105,)),
         ("StackingSensor_size3_RayPerceptionSensor", (105,))], 0, (7,))}, 32, 5, 5000),
    "WallJump": ({name: ([("StackingSensor_size6_OffsetRayPerceptionSensor", (210,)),
                          ("StackingSensor_size6_RayPerceptionSensor", (210,)),
                          ("StackingSensor_size6_VectorSensor_size4", (24,))], 0, (3, 3, 3, 2))
                  for name in ("SmallWallJump?team=0", "BigWallJump?team=0")}, 24, 5, 2000),
    "Match3": ({**{f"Match3{b}?team=0": ([("Match3 Sensor (cells)", (432,)),
                                          ("Match3 Sensor (special)", (216,))], 0, (127,))
                   for b in ("VectorObs", "SmartHeuristic", "SimpleHeuristic")},
                "Match3VisualObs?team=0": ([("Match3 Sensor (cells)", (6, 9, 8)),
                                            ("Match3 Sensor (special)", (3, 9, 8))], 0, (127,))},
               12, 1, 500),
}


@pytest.mark.parametrize("build", list(EXPECTED))
def test_scene_defaults_are_unitys(build):
    behaviors, agents, period, max_step = EXPECTED[build]
    defs = SCENES[build]
    assert {d.name for d in defs} == set(behaviors)
    assert {d.decision_period for d in defs} == {period}
    assert {d.max_step for d in defs} == {max_step}
    pooled = len({d.pool for d in defs}) == 1 and defs[0].pool
    assert (defs[0].agents if pooled else sum(d.agents for d in defs)) == agents


@pytest.mark.parametrize("build", list(EXPECTED))
def test_build_spec_decision_period_and_max_step(open_env, build, tmp_path):
    """Specs as Unity's; with MaxStep cut to 4 decision periods, the agents that did not end
    earlier are interrupted at the 4th step() (a decision every DP academy steps)."""
    behaviors, agents, period, _ = EXPECTED[build]
    env = open_env(build, args=["--standin-max-step", str(4 * period)])
    env.reset()
    assert set(env.behavior_specs) == set(behaviors) or build == "WallJump"
    seen_ids = set()
    for name, spec in env.behavior_specs.items():
        sensors, continuous, branches = behaviors[name]
        assert [(o.name, o.shape) for o in spec.observation_specs] == sensors
        assert spec.action_spec.continuous_size == continuous
        assert spec.action_spec.discrete_branches == branches
        decision, _ = env.get_steps(name)
        seen_ids |= set(decision.agent_id.tolist())
        for obs, (_, shape) in zip(decision.obs, sensors):
            assert obs.shape == (len(decision),) + shape and obs.dtype == np.float32
    assert len(seen_ids) == agents
    rng = np.random.default_rng(0)
    interrupted_at = {}
    for call in range(1, 7):
        random_step(env, rng)
        for name in env.behavior_specs:
            _, terminal = env.get_steps(name)
            for agent, cut in zip(terminal.agent_id.tolist(), terminal.interrupted.tolist()):
                if cut:
                    interrupted_at.setdefault(agent, call)
    assert interrupted_at, "MaxStep interrupts episodes"
    if build in ("Worm", "PushBlock", "Match3"):  # no early episode end with random actions
        assert set(interrupted_at.values()) == {4} and len(interrupted_at) == agents
        env.close()
        last = (tmp_path / "Player-0.log").read_text().strip().splitlines()[-1]
        steps = int(last.split("academy steps ")[1].split(",")[0])
        messages = int(last.split("messages ")[1].split(",")[0])
        assert steps == period * (messages - 1) + 1  # messages at academy steps 0, P, 2P, ...


def test_walljump_agents_switch_behavior_with_stable_ids(open_env):
    env = open_env("WallJump", args=["--standin-max-step", "10"])
    env.reset()
    rng = np.random.default_rng(1)
    homes: dict[int, set] = {}
    for _ in range(12):
        now = {}
        for name in env.behavior_specs:
            decision, terminal = env.get_steps(name)
            for agent in decision.agent_id.tolist():
                assert agent not in now, "an agent decides in one behavior at a time"
                now[agent] = name
                homes.setdefault(agent, set()).add(name)
        random_step(env, rng)
    assert sorted(homes) == list(range(24))
    assert sum(len(h) == 2 for h in homes.values()) >= 5, "agents move between behaviors"
    assert set(env.behavior_specs) == {"SmallWallJump?team=0", "BigWallJump?team=0"}


def test_match3_masks_and_sensors(open_env):
    env = open_env("Match3")
    env.reset()
    vec, _ = env.get_steps("Match3VectorObs?team=0")
    vis, _ = env.get_steps("Match3VisualObs?team=0")
    for steps in (vec, vis):
        mask = steps.action_mask[0]
        assert mask.shape == (4, N_MOVES) and mask.dtype == bool
        assert (~mask).sum(1).min() >= 1 and mask.sum(1).min() > 60  # few valid swaps
    cells = vec.obs[0].reshape(4, 9, 8, 6)
    assert set(np.unique(cells)) <= {0.0, 1.0} and set(np.unique(cells.sum(3))) <= {0.0, 1.0}
    assert (cells.sum(3)[:, :6, :6] == 1).all(), "boards are at least 6 x 6"
    image = vis.obs[0]  # PNG one-hot planes, decoded to [0, 1]
    assert set(np.unique(image)) <= {0.0, 1.0} and (image.sum(1)[:, :6, :6] == 1).all()
    special = vis.obs[1]
    assert (special.sum(1) == image.sum(1)).all()


# -- dynamics, in-process ---------------------------------------------------------------------

def _run(model, policy, steps, period=5):
    idx = np.arange(len(model.pos))
    model.reset(idx)
    total, falls = 0.0, 0
    action = None
    for t in range(steps):
        if t % period == 0:
            action = policy(model, idx)
        reward, ended, _ = model.act(idx, action, None)
        total += reward.sum()
        falls += int(ended.sum())
        if ended.any():
            model.reset(idx[ended])
    return total / len(idx), falls


@pytest.mark.parametrize("cls", [CrawlerModel, WalkerModel, WormModel])
def test_locomotion_is_solvable_and_random_is_poor(cls):
    def rand(model, idx, rng=np.random.default_rng(0)):
        return rng.uniform(-1, 1, (len(idx), cls.spec.continuous))

    def model():
        return cls(4, np.random.default_rng(3), EnvironmentParameters(), None)

    good, good_falls = _run(model(), balance_controller, 600)
    bad, bad_falls = _run(model(), rand, 600)
    assert good_falls == 0 and good > 3 * max(bad, 1.0)
    if cls.BALANCE:
        assert bad_falls > 4, "random actions topple the body"


def test_pushblock_pushing_the_block_into_the_goal_scores_five():
    model = PushBlockModel(1, np.random.default_rng(0), EnvironmentParameters(), None)
    idx = np.array([0])
    model.reset(idx)
    model.block[0], model.pos[0], model.heading[0] = (0.0, 0.0), (0.0, -2.5), 0.0
    forward = np.array([[1]])
    for step in range(100):
        reward, ended = model.act(idx, None, forward)
        if ended[0]:
            break
    assert ended[0] and np.isclose(reward[0], 5.0 - 1 / 5000)
    rays = model.observe(idx)[1].reshape(3, 7, 5)[-1]  # newest frame, 7 rays x (3 tags + 2)
    assert rays[0, 0] == 1 and rays[0, 4] < 0.2, "the forward ray sees the block up close"


def test_walljump_big_wall_needs_the_block():
    def climb(wall, on_block):
        model = WallJumpModel(1, np.random.default_rng(0), EnvironmentParameters(), None)
        idx = np.array([0])
        model.reset(idx)
        model.wall[0], model.heading[0] = wall, 0.0
        model.block[0] = (0.0, -1.5) if on_block else (4.0, -6.0)
        model.pos[0], model.y[0] = ((0.0, -1.5), model.BLOCK_HEIGHT) if on_block else \
            ((0.0, -1.2), 0.0)
        for step in range(120):  # jump, then walk forward over the wall
            model.act(idx, None, np.array([[1, 0, 0, 1 if step == 0 else 0]]))
        return model.pos[0, 1] > 0.5

    assert climb(4.0, on_block=False), "a small wall is jumped from the floor"
    assert not climb(8.0, on_block=False), "a big wall is not"
    assert climb(8.0, on_block=True), "from the block it is"


def test_match3_moves_clear_lines_and_the_greedy_heuristic_beats_random():
    model = Match3Model(1, np.random.default_rng(0), EnvironmentParameters(), None)
    idx = np.array([0])
    model.reset(idx)
    valid = np.flatnonzero(model.valid[0])
    reward, _ = model.act(idx, None, np.array([[valid[0]]]))
    assert reward[0] >= 0.03 and not matches(model.cells[0]).any()
    cells = model.cells[0]
    inside = (cells[R1, C1] >= 0) & (cells[R2, C2] >= 0)
    invalid = np.flatnonzero(~model.valid[0] & inside)[0]
    assert model.act(idx, None, np.array([[invalid]]))[0][0] == 0  # masked: clears nothing
    smart = Match3SmartModel(1, np.random.default_rng(0), EnvironmentParameters(), None)
    smart.reset(idx)
    rand = Match3Model(1, np.random.default_rng(0), EnvironmentParameters(), None)
    rand.reset(idx)
    rng = np.random.default_rng(1)
    s = r = 0.0
    for _ in range(60):
        s += smart.act(idx, None, np.array([[0]]))[0][0]  # the action sent is ignored
        r += rand.act(idx, None, np.array([[rng.choice(np.flatnonzero(rand.valid[0]))]]))[0][0]
    assert s > r


# -- academy features the zoo needs: behavior pools (SetModel) and per-agent SetReward --------

def _drive(academy, steps, rng):
    """Random actions in-process; yields, per message, its terminal batches then its decision
    batches as (group name, batch) (an agent that switched behavior is in both)."""
    from unity_rl.standin.wire_input import ActionBatch

    for _ in range(steps):
        message = academy.begin_step()
        if message is not None:
            actions = {}
            batches = [(g.name, b) for g in academy.groups
                       for b in message.batches.get(g.name, [])]
            yield from sorted(batches, key=lambda item: not item[1].done)
            for g in academy.groups:
                d = len(g.deciding)
                disc = np.stack([rng.integers(0, b, d) for b in g.spec.branches], 1) \
                    if g.spec.branches else np.zeros((d, 0))
                actions[g.name] = ActionBatch(
                    rng.uniform(-1, 1, (d, g.spec.continuous)).astype(np.float32),
                    disc.astype(np.int32))
            academy.apply_actions(actions)
        academy.end_step()


def test_pool_terminal_goes_to_the_old_behavior_and_the_episode_to_the_new():
    from unity_rl.standin.academy import Academy
    from unity_rl.standin.options import PlayerOptions

    academy = Academy(SCENES["WallJump"], PlayerOptions(agents=(6,), max_step=10), seed=2)
    home: dict[int, str] = {}
    moved = 0
    for name, batch in _drive(academy, 200, np.random.default_rng(0)):
        for agent in batch.ids.tolist():
            if batch.done:
                assert home[agent] == name, "the terminal goes where the episode was played"
            else:
                moved += agent in home and home[agent] != name
                home[agent] = name
    assert sorted(home) == list(range(6)) and moved >= 3
    model = academy.groups[0].model
    assert academy.groups[1].model is model
    big = academy.groups[1].active
    assert (big == model.big).all() and not (big & academy.groups[0].active).any()


def test_a_fall_replaces_the_pending_reward_with_minus_one():
    from unity_rl.standin.academy import Academy
    from unity_rl.standin.options import PlayerOptions

    academy = Academy(SCENES["Walker"], PlayerOptions(agents=(4,)), seed=0)
    falls = [batch.rewards for name, batch in _drive(academy, 400, np.random.default_rng(0))
             if batch.done]
    assert falls and all((r == -1.0).all() for r in falls)
