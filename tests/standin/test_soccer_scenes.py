"""SoccerTwos and StrikersVsGoalie: Unity's interface (names, sensors, actions, one group per
team) through the real UnityEnvironment, and in-process the rules of a goal (group rewards,
EndGroupEpisode for both teams), the existential term and the scripted opponent."""
from __future__ import annotations

import numpy as np
from mlagents_envs.base_env import ActionTuple

from unity_rl.standin.academy import Academy
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.soccer import MAX_ENV_STEPS


def test_soccer_twos_spec_and_groups_through_unity_environment(open_env):
    env = open_env("SoccerTwos")
    env.reset()
    assert sorted(env.behavior_specs) == ["SoccerTwos?team=0", "SoccerTwos?team=1"]
    for team, color in ((0, "Blue"), (1, "Purple")):
        spec = env.behavior_specs[f"SoccerTwos?team={team}"]
        assert [(o.name, o.shape) for o in spec.observation_specs] == [
            (f"StackingSensor_size3_{color}RayPerceptionSensor", (264,)),
            (f"StackingSensor_size3_{color}RayPerceptionSensorReverse", (72,))]
        assert spec.action_spec.discrete_branches == (3, 3, 3)
        decision, _ = env.get_steps(f"SoccerTwos?team={team}")
        assert len(decision) == 16
        groups = np.asarray(decision.group_id)
        ids, counts = np.unique(groups, return_counts=True)
        assert len(ids) == 8 and (counts == 2).all()  # one group per team and field
        assert (ids % 2 == (1 - team)).all()  # 2 x field + team + 1


def test_strikers_vs_goalie_spec_through_unity_environment(open_env):
    env = open_env("StrikersVsGoalie")
    env.reset()
    striker = env.behavior_specs["Striker?team=0"]
    goalie = env.behavior_specs["Goalie?team=1"]
    assert [o.shape for o in striker.observation_specs] == [(231,), (63,)]
    assert [(o.name, o.shape) for o in goalie.observation_specs] == [
        ("StackingSensor_size3_PurpleGoalieRayPerceptionSensor", (738,))]
    assert len(env.get_steps("Striker?team=0")[0]) == 16
    assert len(env.get_steps("Goalie?team=1")[0]) == 8
    for name, n in (("Striker?team=0", 16), ("Goalie?team=1", 8)):
        env.set_actions(name, ActionTuple(discrete=np.zeros((n, 3), np.int32)))
    env.step()
    for name in ("Striker?team=0", "Goalie?team=1"):
        env.set_actions(name, ActionTuple(discrete=np.zeros((len(env.get_steps(name)[0]), 3),
                                                            np.int32)))
    for _ in range(4):
        env.step()
    striker_step, _ = env.get_steps("Striker?team=0")
    goalie_step, _ = env.get_steps("Goalie?team=1")
    assert np.allclose(striker_step.reward, -5 / MAX_ENV_STEPS)  # existential, per academy step
    assert np.allclose(goalie_step.reward, 5 / MAX_ENV_STEPS)


def _academy(scene: str, scripted: int | None = None, skill: float = 1.0) -> Academy:
    return Academy(SCENES[scene], PlayerOptions(scripted_team=scripted, scripted_skill=skill),
                   seed=3)


def _play(academy: Academy, steps: int):
    """Runs zero actions (idle agents, unless scripted); returns the terminal infos sent."""
    terminals = {g.name: [] for g in academy.groups}
    for _ in range(steps):
        message = academy.begin_step()
        if message is not None:
            for name, batches in message.batches.items():
                terminals[name] += [b for b in batches if b.done]
        academy.apply_actions({})
        academy.end_step()
    return terminals


def test_a_goal_rewards_both_groups_and_ends_both_teams():
    academy = _academy("SoccerTwos")
    model = academy.groups[0].model
    _play(academy, 1)
    model.ball[0] = [1.45, 0.0]
    model.ball_vel[0] = [0.2, 0.0]  # into the purple goal: blue (team 0) scores
    terminals = _play(academy, 7)
    blue = [b for b in terminals["SoccerTwos?team=0"] if 0 in b.ids or 1 in b.ids]
    purple = [b for b in terminals["SoccerTwos?team=1"] if 2 in b.ids or 3 in b.ids]
    assert blue and purple and model.goals.tolist() == [1, 0]
    blue_rewards = np.concatenate([b.group_rewards for b in blue])
    purple_rewards = np.concatenate([b.group_rewards for b in purple])
    assert ((blue_rewards > 0.99) & (blue_rewards <= 1.0)).all()  # 1 - steps / 5000
    assert np.allclose(purple_rewards, -1.0)
    assert not any(b.max_step_reached is not None and b.max_step_reached.any()
                   for b in blue + purple)  # EndGroupEpisode, not interrupted


def test_scripted_team_scores_against_idle_agents():
    academy = _academy("SoccerTwos", scripted=1)
    _play(academy, 3000)
    goals = academy.groups[0].model.goals
    assert goals[1] >= 10 and goals[0] <= goals[1] // 3  # a few own goals: it is a script
    idle = _academy("SoccerTwos")
    _play(idle, 3000)
    assert idle.groups[0].model.goals.sum() < goals[1]


def test_a_less_skilled_scripted_team_scores_less():
    goals = {}
    for skill in (1.0, 0.2):
        academy = _academy("SoccerTwos", scripted=1, skill=skill)
        _play(academy, 3000)
        goals[skill] = int(academy.groups[0].model.goals[1])
    assert goals[0.2] < goals[1.0] / 2, goals
