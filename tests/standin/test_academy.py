"""Unity's message timing and agent lifecycle, driven in-process with a scripted scene."""
from __future__ import annotations

import numpy as np
import pytest

from unity_rl.standin.academy import Academy, StepMessage
from unity_rl.standin.options import OptionError, PlayerOptions
from unity_rl.standin.scenes.base import BehaviorDef, BehaviorSpecDef
from unity_rl.standin.wire import ObsSpec
from unity_rl.standin.wire_input import ActionBatch

NAME = "Scripted?team=0"


class ScriptedModel:
    """Agents that end their episode after ``end_after[i]`` actions (0: never).

    Observation: [agent index, actions taken in this episode, episode number, last action].
    Each action adds reward 1 (AddReward), so a decision's reward counts the actions since the
    previous decision.
    """

    spec = BehaviorSpecDef(obs=(ObsSpec("VectorSensor_size4", (4,), dimension_properties=(1,)),),
                           continuous=1)
    set_reward = False
    instances: list["ScriptedModel"] = []

    def __init__(self, n, rng, params, opts=None):
        self.n = n
        self.ep_step = np.zeros(n)
        self.episode = np.zeros(n)
        self.last_action = np.zeros(n)
        self.end_after = np.zeros(n)
        self.actions_seen: list[tuple[np.ndarray, np.ndarray]] = []
        ScriptedModel.instances.append(self)

    def reset(self, idx):
        self.ep_step[idx] = 0
        self.episode[idx] += 1

    def act(self, idx, continuous, discrete):
        self.ep_step[idx] += 1
        self.last_action[idx] = continuous[:, 0]
        self.actions_seen.append((np.array(idx), continuous[:, 0].copy()))
        ended = (self.end_after[idx] > 0) & (self.ep_step[idx] == self.end_after[idx])
        return np.ones(len(idx)), ended

    def physics_step(self):
        pass

    def observe(self, idx):
        idx = np.asarray(idx)
        return [np.stack([idx, self.ep_step[idx], self.episode[idx], self.last_action[idx]],
                         axis=1).astype(np.float32)]

    def action_mask(self, idx):
        return None


def make(n=3, period=5, max_step=0, **opts) -> tuple[Academy, ScriptedModel]:
    ScriptedModel.instances.clear()
    academy = Academy((BehaviorDef(NAME, ScriptedModel, n, period, max_step),),
                      PlayerOptions(**opts))
    return academy, ScriptedModel.instances[-1]


def next_message(academy: Academy) -> StepMessage:
    for _ in range(10_000):
        message = academy.begin_step()
        if message is not None:
            return message
        academy.end_step()
    raise AssertionError("no message")


def answer(academy: Academy, value: float | None = None) -> None:
    """Replies STEP with action ``value`` for every deciding agent (None: no actions)."""
    if value is not None:
        n = len(academy.groups[0].deciding)
        academy.apply_actions({NAME: ActionBatch(np.full((n, 1), value, np.float32),
                                                 np.zeros((n, 0), np.int32))})
    else:
        academy.apply_actions({})
    academy.end_step()


def split(message: StepMessage):
    batches = message.batches[NAME]
    terminal = [b for b in batches if b.done]
    decision = [b for b in batches if not b.done]
    return terminal, (decision[0] if decision else None)


def test_messages_only_at_decision_steps_with_reward_since_last_decision():
    academy, _ = make(period=5)
    steps = []
    for _ in range(4):
        m = next_message(academy)
        _, decision = split(m)
        steps.append(m.academy_step)
        assert decision.ids.tolist() == [0, 1, 2]
        assert decision.rewards.tolist() == ([0.0] * 3 if m.academy_step == 0 else [5.0] * 3)
        answer(academy, 0.0)
    assert steps == [0, 5, 10, 15]


def test_actions_repeat_between_decisions_and_zero_after_episode_end():
    academy, model = make(n=1, period=5)
    model.end_after[:] = 7
    next_message(academy)
    answer(academy, 0.5)  # step 0 acts with 0.5, then steps 1..4 repeat it
    next_message(academy)
    answer(academy, -0.25)  # steps 5, 6: -0.25; the episode ends in step 6's action
    m = next_message(academy)  # step 7: terminal only
    assert m.academy_step == 7
    seen = [float(a[0]) for _, a in model.actions_seen]
    assert seen == [0.5] * 5 + [-0.25] * 2
    answer(academy)
    next_message(academy)  # step 10: first decision of the new episode
    seen = [float(a[0]) for _, a in model.actions_seen]
    assert seen[7:] == [0.0] * 3  # steps 7, 8, 9: stored actions were cleared by the reset


def test_terminal_info_sent_next_step_then_agent_already_reset():
    academy, model = make(period=5)
    model.end_after[0] = 3  # ends during step 2's action
    next_message(academy)
    answer(academy, 0.0)
    m = next_message(academy)
    terminal, decision = split(m)
    assert m.academy_step == 3 and decision is None  # a message with only terminal infos
    (t,) = terminal
    assert t.ids.tolist() == [0] and t.max_step_reached.tolist() == [False]
    assert t.rewards.tolist() == [3.0]  # actions at steps 0, 1, 2
    assert t.obs[0][0, 1:3].tolist() == [3.0, 1.0]  # final obs: 3 actions, first episode
    assert len(academy.groups[0].deciding) == 0
    answer(academy)  # the trainer sends no action for a terminal
    m = next_message(academy)
    terminal, decision = split(m)
    assert m.academy_step == 5 and not terminal
    row = decision.obs[0][0]
    assert row[1:3].tolist() == [2.0, 2.0]  # new episode already 2 actions old (steps 3, 4)
    assert decision.rewards.tolist() == [2.0, 5.0, 5.0]


def test_agent_terminal_and_decision_in_the_same_message():
    academy, model = make(period=5)
    model.end_after[1] = 5  # ends during step 4's action -> terminal sent at step 5
    next_message(academy)
    answer(academy, 0.0)
    m = next_message(academy)
    terminal, decision = split(m)
    assert m.academy_step == 5
    assert [b.done for b in m.batches[NAME]] == [True, False]  # terminal infos first
    assert terminal[0].ids.tolist() == [1]
    assert decision.ids.tolist() == [0, 1, 2]
    assert decision.obs[0][1, 1:3].tolist() == [0.0, 2.0]  # agent 1: new episode, no action yet
    assert decision.rewards.tolist() == [5.0, 0.0, 5.0]


def test_max_step_truncation_flags_and_timing():
    academy, _ = make(period=5, max_step=10)
    for expected_step in (0, 5):
        assert next_message(academy).academy_step == expected_step
        answer(academy, 0.0)
    m = next_message(academy)
    terminal, decision = split(m)
    assert m.academy_step == 10
    assert terminal[0].ids.tolist() == [0, 1, 2]
    assert terminal[0].max_step_reached.tolist() == [True] * 3
    assert terminal[0].obs[0][:, 1].tolist() == [10.0] * 3
    assert decision.ids.tolist() == [0, 1, 2]
    assert decision.obs[0][:, 1:3].tolist() == [[0.0, 2.0]] * 3


def test_second_end_before_next_decision_sends_no_terminal():
    academy, model = make(n=1, period=5)
    model.end_after[0] = 1  # every action ends the episode
    next_message(academy)
    answer(academy, 0.0)  # ends at step 0
    m = next_message(academy)
    assert m.academy_step == 1 and len(split(m)[0]) == 1
    answer(academy)  # ends again at step 1: Unity's NotifyAgentDone returns early
    m = next_message(academy)
    assert m.academy_step == 5  # no terminal-only messages at steps 2, 3, 4
    terminal, decision = split(m)
    assert not terminal and decision.ids.tolist() == [0]
    assert model.episode[0] == 6.0  # but every end did reset the agent


def test_reset_restarts_everyone_without_terminal_infos():
    academy, model = make(period=5)
    model.end_after[2] = 2
    next_message(academy)
    answer(academy, 0.0)  # agent 2 ends at step 1; its terminal is pending
    academy.reset()
    m = next_message(academy)
    terminal, decision = split(m)
    assert m.academy_step == 0 and not terminal
    assert decision.ids.tolist() == [0, 1, 2]
    assert decision.rewards.tolist() == [0.0, 0.0, 0.0]


def test_late_agents_get_later_ids_and_first_decision_at_next_multiple():
    academy, model = make(n=4, period=5, late_agents=(2, 7))
    seen = []
    for _ in range(4):
        m = next_message(academy)
        _, decision = split(m)
        seen.append((m.academy_step, decision.ids.tolist()))
        answer(academy, 0.0)
    assert seen == [(0, [0, 1]), (5, [0, 1]), (10, [0, 1, 2, 3]), (15, [0, 1, 2, 3])]


def test_late_agents_ids_after_all_initial_agents_of_all_behaviors():
    defs = (BehaviorDef("A?team=0", ScriptedModel, 2, 5, 0),
            BehaviorDef("B?team=0", ScriptedModel, 2, 5, 0))
    academy = Academy(defs, PlayerOptions(late_agents=(1, 3)))
    assert academy.by_name["A?team=0"].ids.tolist() == [0, 2]
    assert academy.by_name["B?team=0"].ids.tolist() == [1, 3]


def test_per_agent_decision_periods():
    academy, _ = make(n=4, decision_periods=(5, 3))
    seen = []
    for _ in range(8):
        m = next_message(academy)
        _, decision = split(m)
        seen.append((m.academy_step, decision.ids.tolist()))
        answer(academy, 0.0)
    assert seen == [(0, [0, 1, 2, 3]), (3, [1, 3]), (5, [0, 2]), (6, [1, 3]), (9, [1, 3]),
                    (10, [0, 2]), (12, [1, 3]), (15, [0, 1, 2, 3])]


def test_missing_actions_mean_zeros():
    academy, model = make(n=2, period=1)
    next_message(academy)
    academy.apply_actions({NAME: ActionBatch(np.array([[0.75]], np.float32),
                                             np.zeros((1, 0), np.int32))})
    academy.end_step()
    assert model.last_action.tolist() == [0.75, 0.0]


def test_option_conflicts_are_reported():
    with pytest.raises(OptionError):
        make(n=2, late_agents=(2, 5))  # nobody left at the start
    with pytest.raises(OptionError):
        Academy((BehaviorDef(NAME, ScriptedModel, 2, 5, 0),), PlayerOptions(agents=(1, 2, 3)))


def test_num_areas_multiplies_agents():
    academy, _ = make(n=3, period=5)
    assert academy.groups[0].n == 3
    ScriptedModel.instances.clear()
    academy = Academy((BehaviorDef(NAME, ScriptedModel, 3, 5, 0),), num_areas=2)
    assert academy.groups[0].n == 6
