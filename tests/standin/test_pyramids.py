"""Pyramids: Unity's interface through the real UnityEnvironment, and in-process the property the
scene exists for: the built-in heuristic solves it, a random policy rarely does (sparse)."""
from __future__ import annotations

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from unity_rl.standin.academy import Academy
from unity_rl.standin.options import OptionError, PlayerOptions, parse_args
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes import pyramids as P
from unity_rl.standin.wire_input import ActionBatch

NAME = "Pyramids?team=0"
RAY_NAMES = ["RayPerceptionSensor", "RayPerceptionSensor1", "RayPerceptionSensor2"]


def play(policy, n: int, episodes: int, seed: int = 0, **options) -> dict:
    """Runs the Academy in-process until ``episodes`` episodes ended; per episode: its return,
    its decisions, whether the switch was on and the pyramid knocked over at its end."""
    academy = Academy(SCENES["Pyramids"], PlayerOptions(agents=(n,), **options), seed=seed)
    group = academy.groups[0]
    model = group.model
    academy.reset()
    rng = np.random.default_rng(seed)
    ret, dec = np.zeros(n), np.zeros(n, int)
    switch, knocked = np.zeros(n, bool), np.zeros(n, bool)
    out = {"return": [], "decisions": [], "switch": [], "knocked": [], "gold": []}
    while len(out["return"]) < episodes:
        message = academy.begin_step()
        if message is not None:
            for batch in message.batches[NAME]:
                for row, agent in enumerate(batch.ids.tolist()):
                    ret[agent] += batch.rewards[row]
                    if batch.done:
                        for key, value in (("return", ret[agent]), ("decisions", dec[agent]),
                                           ("switch", switch[agent]), ("knocked", knocked[agent]),
                                           ("gold", batch.rewards[row] == 2.0)):
                            out[key].append(value)
                        ret[agent], dec[agent] = 0.0, 0
                        switch[agent] = knocked[agent] = False
                    else:
                        dec[agent] += 1
            deciding = group.deciding
            if len(deciding):
                actions = np.asarray(policy(model, deciding, rng), np.int32)[:, None]
                academy.apply_actions({NAME: ActionBatch(np.zeros((len(deciding), 0), np.float32),
                                                         actions)})
        switch |= model.switch_on
        knocked |= model.objects[:, P.GOLD, 0] >= 0
        academy.end_step()
    return {k: np.array(v) for k, v in out.items()}


def test_defaults_are_unitys():
    (pyramids,) = SCENES["Pyramids"]
    assert (pyramids.name, pyramids.agents, pyramids.decision_period, pyramids.max_step) == (
        NAME, 16, 5, 5000)
    assert parse_args(["--standin-heuristic"]).heuristic
    assert not parse_args([]).heuristic


def test_spec_and_heuristic_episodes_through_unity_environment(open_env):
    """Unity's sensors and branch on the real client; with ``--standin-heuristic`` the agents
    act by themselves (the sent actions are ignored), turn the switch on (vector obs[0]) and end
    at the gold brick with SetReward(2)."""
    env = open_env("Pyramids", args=["--standin-heuristic"])
    env.reset()
    assert list(env.behavior_specs) == [NAME]
    spec = env.behavior_specs[NAME]
    assert [(o.name, o.shape) for o in spec.observation_specs] == [
        *[(name, (56,)) for name in RAY_NAMES], ("VectorSensor_size4", (4,))]
    assert spec.action_spec.continuous_size == 0 and spec.action_spec.discrete_branches == (5,)
    switched, rewards = set(), []
    for _ in range(120):
        decision, terminal = env.get_steps(NAME)
        assert set(np.unique(decision.obs[3][:, 0])) <= {0.0, 1.0}
        switched |= set(decision.agent_id[decision.obs[3][:, 0] == 1.0].tolist())
        rewards += terminal.reward.tolist()
        for obs in decision.obs[:3]:  # per ray: one-hot of 6 tags (or none), "no hit", fraction
            rays = obs.reshape(len(decision), 7, 8)
            assert (rays[:, :, :7].sum(-1) == 1).all()
            assert ((0 <= rays[:, :, 7]) & (rays[:, :, 7] <= 1)).all()
        # NOTHING everywhere: the heuristic acts anyway
        env.set_actions(NAME, ActionTuple(discrete=np.zeros((len(decision), 1), np.int32)))
        env.step()
    assert len(switched) == 16
    assert len(rewards) >= 16 and np.allclose(rewards, 2.0)


@pytest.mark.parametrize("rule, most_decisions", [("touch", 80), ("run-up", 160)])
def test_heuristic_solves_every_episode_quickly(rule, most_decisions):
    """Under ``run-up`` the heuristic backs off a cell between pushes (3 decisions a push)."""
    result = play(lambda m, idx, rng: P.heuristic_action(m, idx), 16, 48, pyramid_push=rule)
    assert result["gold"].all() and result["switch"].all() and result["knocked"].all()
    assert result["decisions"].max() < most_decisions
    assert result["return"].mean() > 1.9


def test_random_policy_rarely_reaches_the_gold():
    """The reward is sparse: random actions turn the switch on in many episodes, but knock the
    pyramid over (PUSHES touches) in almost none (the extrinsic reward alone rarely shows the
    way; with the 6 pushes of stop 28 random play knocked it over in ~8% of episodes)."""
    result = play(lambda m, idx, rng: rng.integers(0, 5, len(idx)), 16, 48, seed=1)
    assert result["switch"].mean() > 0.3
    assert result["gold"].mean() < 0.03 and result["knocked"].mean() < 0.03
    # episodes without the gold are interrupted at MaxStep having paid -1 in all
    assert np.allclose(result["return"][~result["gold"]], -1.0, atol=1e-4)


def test_switch_raises_a_pyramid_and_pushes_knock_it_over():
    """Stage by stage on one agent: touching the switch turns it on and places the pyramid at
    least MIN_PYRAMID_DISTANCE away; PUSHES touches lower it step by step and knock it over;
    the gold then lies next to where it stood."""
    academy = Academy(SCENES["Pyramids"], PlayerOptions(agents=(1,)), seed=5)
    model = academy.groups[0].model
    academy.reset()
    idx = np.array([0])
    model.cell[0], model.heading[0] = (5, 5), 0
    model.objects[0] = -1
    model.objects[0, P.SWITCH] = (5, 6)
    before = model.observe(idx)
    assert before[3][0, 0] == 0.0
    model.act(idx, None, np.array([[P.FORWARD]]))
    assert model.switch_on[0] and tuple(model.cell[0]) == (5, 5)
    pyramid = model.objects[0, P.PYRAMID].copy()
    assert np.abs(pyramid - model.cell[0]).sum() >= P.MIN_PYRAMID_DISTANCE
    after = model.observe(idx)
    assert after[3][0, 0] == 1.0
    flat = after[0].reshape(7, 8)
    assert flat[0, P.SWITCH_ON] == 1.0  # the forward ray sees the switch, now on
    # stand next to the pyramid, facing it, and push
    model.objects[0, P.SWITCH] = -1
    model.cell[0] = pyramid - (0, 1)
    model.heading[0] = 0
    heights = []
    for push in range(model.pushes_to_knock):
        model.observe(idx)
        reward, done, _ = model.act(idx, None, np.array([[P.FORWARD]]))
        assert not done[0]
        heights.append(model._boxes(idx)[0][0, P.PYRAMID, 4])
    assert model.objects[0, P.PYRAMID, 0] == -1
    gold = model.objects[0, P.GOLD]
    assert np.abs(gold - pyramid).sum() == 1
    assert heights[:-1] == sorted(heights[:-1], reverse=True)


def test_pyramid_pushes_option_sets_the_touches_that_knock_it_over():
    assert parse_args(["--standin-pyramid-pushes", "3"]).pyramid_pushes == 3
    assert parse_args([]).pyramid_pushes is None
    academy = Academy(SCENES["Pyramids"], PlayerOptions(agents=(1,), pyramid_pushes=3), seed=2)
    model = academy.groups[0].model
    academy.reset()
    idx = np.array([0])
    model.objects[0] = -1
    model.cell[0], model.heading[0] = (5, 5), 0
    model.switch_on[0] = True
    model.objects[0, P.PYRAMID] = (5, 6)
    for push in range(3):
        assert model.objects[0, P.PYRAMID, 0] >= 0, f"knocked over after {push} pushes"
        model.observe(idx)
        model.act(idx, None, np.array([[P.FORWARD]]))
    assert model.objects[0, P.PYRAMID, 0] == -1 and model.objects[0, P.GOLD, 0] >= 0


def test_pyramid_push_option_parses_and_names_the_bad_value():
    assert parse_args(["--standin-pyramid-push", "touch"]).pyramid_push == "touch"
    assert parse_args([]).pyramid_push is None
    try:
        parse_args(["--standin-pyramid-push", "shove"])
    except OptionError as e:
        assert "--standin-pyramid-push" in str(e) and "shove" in str(e)
    else:
        raise AssertionError("a bad rule was accepted")


def _agent_facing_the_pyramid(rule: str, pushes: int = 3, start=(5, 4), **options):
    """One agent at ``start`` facing +z, the switch on, the pyramid at (5, 6)."""
    academy = Academy(SCENES["Pyramids"], PlayerOptions(agents=(1,), pyramid_pushes=pushes,
                                                        pyramid_push=rule, **options), seed=2)
    model = academy.groups[0].model
    academy.reset()
    model.objects[0] = -1
    model.cell[0], model.heading[0] = start, 0
    model.switch_on[0] = True
    model.objects[0, P.PYRAMID] = (5, 6)
    return model


def _decide(model, action: int) -> None:
    model.observe(np.array([0]))
    model.act(np.array([0]), None, np.array([[action]]))


def test_run_up_rule_counts_a_touch_only_right_after_a_step():
    """Under ``run-up`` pressing on against the pyramid pushes it once, however long; backing
    off a cell and stepping in again pushes it each time; under ``touch`` every touch pushes."""
    model = _agent_facing_the_pyramid("run-up")
    for _ in range(6):                       # a step in, then 5 touches pressing on
        _decide(model, P.FORWARD)
    assert model.pushes[0] == 1 and tuple(model.cell[0]) == (5, 5)
    for expected in (2, 3):                  # back, in: the touch after the step pushes
        _decide(model, P.BACK)
        _decide(model, P.FORWARD)
        assert model.pushes[0] == expected - 1
        _decide(model, P.FORWARD)
        assert model.pushes[0] == expected
    assert model.objects[0, P.PYRAMID, 0] == -1 and model.objects[0, P.GOLD, 0] >= 0
    model = _agent_facing_the_pyramid("touch")
    for _ in range(4):
        _decide(model, P.FORWARD)
    assert model.objects[0, P.PYRAMID, 0] == -1


def test_pressing_on_policies_knock_the_pyramid_over_only_under_the_touch_rule():
    """What the run-up rule changes: a policy that drifted to walking forward (no reward yet, as
    extrinsic-only PPO) bumps into the switch and the pyramid and, pressing on, knocks it over
    in several percent of episodes under ``touch`` (the default); under ``run-up`` never. (PPO
    with the extrinsic reward alone still found the gold under ``run-up``: docs/reward_signals.md.)"""
    def forward_heavy(model, idx, rng):
        return rng.choice(5, len(idx), p=[0.0, 0.8, 0.0, 0.15, 0.05])
    touch = play(forward_heavy, 16, 32, seed=3, pyramid_push="touch")
    run_up = play(forward_heavy, 16, 32, seed=3, pyramid_push="run-up")
    assert touch["switch"].mean() > 0.5 and run_up["switch"].mean() > 0.5
    assert touch["knocked"].mean() > 0.05
    assert run_up["knocked"].sum() == 0 and run_up["gold"].sum() == 0



def test_a_pyramid_left_alone_stands_whole_again_after_recover_decisions():
    """``--standin-pyramid-recover K``: pushes count only in a burst; K decisions without one
    and the pyramid is whole again (its full height in the rays)."""
    assert parse_args(["--standin-pyramid-recover", "4"]).pyramid_recover == 4
    model = _agent_facing_the_pyramid("touch", start=(5, 5), pyramid_recover=2)
    whole = model._boxes(np.array([0]))[0][0, P.PYRAMID, 4]
    for action in (P.FORWARD, P.FORWARD, P.NOTHING, P.NOTHING):   # 2 pushes, 2 waits: kept
        _decide(model, action)
    assert model.pushes[0] == 2
    _decide(model, P.NOTHING)                                      # the third wait: whole
    assert model.pushes[0] == 0
    assert model._boxes(np.array([0]))[0][0, P.PYRAMID, 4] == whole
    for _ in range(3):                                             # a burst knocks it over
        _decide(model, P.FORWARD)
    assert model.objects[0, P.PYRAMID, 0] == -1


def test_rooms_split_the_area_with_one_door_per_wall_stretch_and_spread_the_stages():
    """``--standin-pyramid-rooms``: inner walls along column and row DIVIDER, a door in each of
    their four stretches; the agent starts in one room, the switch lies in another, the
    pyramid rises in a room other than the agent's; walls stop the agent and block the rays."""
    assert parse_args(["--standin-pyramid-rooms"]).pyramid_rooms is True
    assert parse_args([]).pyramid_rooms is None
    academy = Academy(SCENES["Pyramids"], PlayerOptions(agents=(16,), pyramid_rooms=True), seed=4)
    model = academy.groups[0].model
    academy.reset()
    for i in range(16):
        wall = {tuple(c) for c in model.partition[i]}
        assert len(wall) == P.N_PARTITION
        line = {(P.DIVIDER, j) for j in range(P.SIZE)} | {(j, P.DIVIDER) for j in range(P.SIZE)}
        assert wall < line and len(line - wall) == 4                 # four doors
        agent, switch = model.cell[i], model.objects[i, P.SWITCH]
        assert tuple(agent) not in wall and tuple(switch) not in wall
        rooms = P._room(np.stack([agent, switch]))
        assert rooms[1] >= 0 and rooms[0] != rooms[1]
    # stand west of a wall cell facing it: forward does not move, the forward ray sees a wall
    i = 0
    wall_cell = next(c for c in model.partition[i] if c[1] == P.DIVIDER and 1 <= c[0] < P.SIZE - 1
                     and c[0] != P.DIVIDER)
    model.objects[i] = -1
    model.cell[i], model.heading[i] = wall_cell - (0, 1), 0
    idx = np.array([i])
    rays = model.observe(idx)[0].reshape(7, 8)
    assert rays[0, P.WALL] == 1.0 and rays[0, -1] < 0.05             # right in front
    model.act(idx, None, np.array([[P.FORWARD]]))
    assert tuple(model.cell[i]) == tuple(wall_cell - (0, 1))
    # pressing the switch raises the pyramid in another room
    model.objects[i, P.SWITCH] = (2, 2)
    model.cell[i], model.heading[i] = (2, 1), 0
    model.observe(idx)
    model.act(idx, None, np.array([[P.FORWARD]]))
    assert model.switch_on[i]
    pyramid = model.objects[i, P.PYRAMID]
    assert P._room(pyramid[None])[0] not in (-1, P._room(np.array([[2, 1]]))[0])


def test_heuristic_solves_every_episode_with_rooms():
    result = play(lambda m, idx, rng: P.heuristic_action(m, idx), 16, 32, pyramid_rooms=True)
    assert result["gold"].all() and result["decisions"].max() < 120
