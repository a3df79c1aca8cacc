"""PushBlockCollab and DungeonEscape: Unity's interface and groups through the real
UnityEnvironment, and in-process the dynamics that make them cooperative."""
from __future__ import annotations

import numpy as np
from mlagents_envs.base_env import ActionTuple

from unity_rl.standin.academy import Academy
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.collab import PushBlockCollabModel
from unity_rl.standin.scenes.dungeon_escape import DungeonEscapeModel
from unity_rl.standin.side_channels import EnvironmentParameters


def test_defaults_are_unitys():
    (push,) = SCENES["PushBlockCollab"]
    (dungeon,) = SCENES["DungeonEscape"]
    assert (push.name, push.agents, push.decision_period, push.max_step) == (
        "PushBlockCollab?team=0", 12, 5, 0)
    assert (dungeon.name, dungeon.agents, dungeon.decision_period, dungeon.max_step) == (
        "DungeonEscape?team=0", 36, 5, 0)


def test_pushblockcollab_spec_and_groups_through_unity_environment(open_env):
    env = open_env("PushBlockCollab")
    env.reset()
    name = "PushBlockCollab?team=0"
    spec = env.behavior_specs[name]
    assert [(o.name, o.shape) for o in spec.observation_specs] == [
        ("GridSensor-OneHot", (6, 20, 20)), ("RBSensor", (10,))]
    assert spec.action_spec.discrete_branches == (7,)
    decision, _ = env.get_steps(name)
    assert sorted(np.asarray(decision.group_id).tolist()) == [1] * 3 + [2] * 3 + [3] * 3 + [4] * 3
    grid = decision.obs[0]
    assert set(np.unique(grid).tolist()) <= {0.0, 1.0}
    assert (grid[:, 1].sum(axis=(1, 2)) == 3).all()  # the three groupmates, self included
    assert (grid[:, 3:].sum(axis=(1, 2, 3)) == 2 * 1 + 2 * 2 + 2 * 3).all()  # all block cells
    env.set_actions(name, ActionTuple(discrete=np.zeros((12, 1), np.int32)))
    env.step()
    decision, terminal = env.get_steps(name)
    assert not len(terminal)
    # the existential group penalty, -0.5/5000 per academy step, as a group reward
    assert np.allclose(decision.group_reward, -0.5 / 5000 * 5)
    assert np.allclose(decision.reward, 0.0)


def test_dungeon_escape_spec_through_unity_environment(open_env):
    env = open_env("DungeonEscape")
    env.reset()
    name = "DungeonEscape?team=0"
    spec = env.behavior_specs[name]
    assert [(o.name, o.shape) for o in spec.observation_specs] == [
        ("RBSensor", (10,)), ("StackingSensor_size3_RayPerceptionSensor", (360,)),
        ("VectorSensor_size1", (1,))]
    decision, _ = env.get_steps(name)
    assert len(decision) == 36
    assert np.bincount(np.asarray(decision.group_id))[1:].tolist() == [3] * 12


def _push(model, a, pushers, action, times):
    """Steps area ``a`` ``times`` decisions: ``pushers`` do ``action``, the others nothing."""
    ended = np.zeros(model.n, bool)
    for _ in range(times):
        members = model.members(a)
        acts = np.where(np.isin(members, pushers), action, 0)
        model.step_area(a, members, acts, ended)
    return ended


def test_a_block_moves_only_with_as_many_pushers_as_its_value():
    model = PushBlockCollabModel(3, np.random.default_rng(0), EnvironmentParameters())
    model.reset(np.arange(3))
    model.alive[0] = False
    model.alive[0, 4] = True  # only a 3-block, at x 2..4, z 3
    model.block[0, 4] = (2, 3)
    model.pos[:] = [(2, 2), (3, 2), (4, 2)]
    _push(model, 0, [0, 1], 1, 1)           # two pushers: it stays
    assert model.block[0, 4].tolist() == [2, 3]
    reward_before = model.group_reward.copy()
    _push(model, 0, [0, 1, 2], 1, 1)        # three: one cell forward, the pushers follow
    assert model.block[0, 4].tolist() == [2, 4] and model.pos[:, 1].tolist() == [3, 3, 3]
    ended = _push(model, 0, [0, 1, 2], 1, 2)  # into the goal row: +3 to the group, the end
    assert not model.alive[0].any() and ended.all()
    gained = model.group_reward - reward_before
    assert np.allclose(gained, 3.0 - 3 * 0.5 / 5000 * 5)


def test_dungeon_sacrifice_drops_the_key_and_the_carrier_unlocks_the_door():
    """Through the Academy: the killer's terminal (not interrupted, no group reward), no more
    decisions from it; the carrier's door: +1 group reward to the two others, the group's end."""
    from unity_rl.standin.wire_input import ActionBatch

    academy = Academy(SCENES["DungeonEscape"], PlayerOptions(agents=(3,)), seed=0)
    academy.reset()
    name = "DungeonEscape?team=0"
    group = academy.groups[0]
    model: DungeonEscapeModel = group.model
    ids = group.ids.tolist()
    model.dragon[0] = (1, 2)
    model.pos[:] = [(0, 2), (2, 4), (3, 4)]
    infos = []

    def step(policy):
        msg = academy.begin_step()
        if msg is not None:
            infos.extend(msg.batches[name])
            if len(group.deciding):
                acts = np.array([policy(i) for i in group.deciding.tolist()], np.int32)
                academy.apply_actions({name: ActionBatch(np.zeros((len(acts), 0), np.float32),
                                                         acts[:, None])})
        academy.end_step()

    step(lambda i: 3 if i == 0 else 0)  # agent 0 walks right into the dragon
    step(lambda i: 0)
    (terminal,) = [b for b in infos if b.done]
    assert terminal.ids.tolist() == [ids[0]] and not terminal.max_step_reached.any()
    assert terminal.group_ids.tolist() == [1] and terminal.group_rewards.tolist() == [0.0]
    assert model.key_down[0] and model.key[0].tolist() == [1, 2] and model.asleep[0]
    model.pos[1:] = [(1, 3), (3, 4)]
    route = iter([2, 1, 3, 1, 1, 1])  # agent 1: onto the key, up, right, up to the door
    infos.clear()
    for _ in range(5 * 8):
        step(lambda i: next(route, 1) if i == 1 else 0)
        if any(b.done for b in infos):
            break
    decided = [b for b in infos if not b.done]
    assert all(ids[0] not in b.ids.tolist() for b in decided)  # the dead one decides no more
    (final,) = [b for b in infos if b.done]
    assert sorted(final.ids.tolist()) == ids[1:] and not final.max_step_reached.any()
    assert np.allclose(final.group_rewards, 1.0)


def test_agents_come_in_whole_groups():
    import pytest

    from unity_rl.standin.options import OptionError

    with pytest.raises(OptionError, match="multiple of 3"):
        Academy(SCENES["DungeonEscape"], PlayerOptions(agents=(4,)), seed=0)
