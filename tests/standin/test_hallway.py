"""Hallway: Unity's interface through the real UnityEnvironment, and in-process the property the
scene exists for: the cue is seen only early, so only a policy with memory beats chance."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from unity_rl.standin.academy import Academy
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.hallway import (
    BACK,
    CORRIDOR,
    FORWARD,
    HOLD_DECISIONS,
    NOTHING,
    TURN_LEFT,
    TURN_RIGHT,
    O,
    X,
)
from unity_rl.standin.wire_input import ActionBatch

NAME = "Hallway?team=0"
RAY = 7  # floats per ray: one-hot of the 5 tags, "no hit", hit fraction
PENALTY = 1.0 / 3000
BEST_RETURN = 1.0 - (HOLD_DECISIONS + CORRIDOR + 1) * 6 * PENALTY
"""Held 3 decisions, CORRIDOR forward, a turn, then the goal's SetReward(1) replaces the last
decision's penalties."""
ROUTE = HOLD_DECISIONS + CORRIDOR + 2
"""Decisions of the shortest episode."""


def newest(rays: np.ndarray) -> np.ndarray:
    """[rays, 7] of the newest of the 3 stacked ray observations."""
    return rays[-5 * RAY:].reshape(5, RAY)


def cue_in(rays: np.ndarray) -> int | None:
    tags = newest(rays)[:, 2:4].sum(0)
    return O if tags[0] else X if tags[1] else None


@dataclass
class Episode:
    """One agent's first episode: its observations and rewards at each decision, its end."""

    obs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    final_reward: float | None = None
    interrupted: bool = False

    @property
    def ret(self) -> float:
        return sum(self.rewards) + (self.final_reward or 0.0)


Policy = Callable[[int, list], int]
"""(agent index, that agent's observations so far in its episode) -> action."""


def play(policy: Policy, cues: list[int], max_step: int | None = None) -> list[Episode]:
    """Runs the real Academy in-process, one agent per cue, until every agent's first episode
    has ended; the cue of each first episode is set before its first observation."""
    n = len(cues)
    academy = Academy(SCENES["Hallway"], PlayerOptions(agents=(n,), max_step=max_step), seed=3)
    group = academy.groups[0]
    academy.reset()
    group.model.cue[:] = cues
    episodes = [Episode() for _ in range(n)]
    finished = np.zeros(n, bool)
    while not finished.all():
        message = academy.begin_step()
        if message is None:
            academy.end_step()
            continue
        for batch in message.batches[NAME]:
            for row, agent in enumerate(batch.ids.tolist()):
                if finished[agent]:
                    continue
                ep = episodes[agent]
                if batch.done:
                    ep.final_reward = float(batch.rewards[row])
                    ep.interrupted = bool(batch.max_step_reached[row])
                    finished[agent] = True
                else:
                    if ep.obs:
                        ep.rewards.append(float(batch.rewards[row]))
                    ep.obs.append((batch.obs[0][row].copy(), batch.obs[1][row].copy()))
        deciding = group.deciding.tolist()
        if deciding:
            actions = [NOTHING if finished[a] else policy(a, episodes[a].obs) for a in deciding]
            academy.apply_actions({NAME: ActionBatch(np.zeros((len(deciding), 0), np.float32),
                                                     np.array(actions, np.int32)[:, None])})
        academy.end_step()
    return episodes


def remembering(turn_to: Callable[[int], int] = lambda cue: cue) -> Policy:
    """A policy with memory: the cue read in the first observation, then forward to the fork,
    a turn to the remembered goal (``turn_to(cue)``: O left, X right) and forward."""
    def policy(agent: int, history: list) -> int:
        n = len(history)
        if n <= HOLD_DECISIONS + CORRIDOR:
            return FORWARD
        if n == HOLD_DECISIONS + CORRIDOR + 1:
            return TURN_LEFT if turn_to(cue_in(history[0][0])) == O else TURN_RIGHT
        return FORWARD
    return policy


def memoryless(choose: Callable[[np.ndarray, np.ndarray], int]) -> Policy:
    """A policy that sees only the current observation (both sensors, stacks included)."""
    return lambda agent, history: choose(*history[-1])


# -- interface, through the real UnityEnvironment --------------------------------------------

def test_defaults_are_unitys():
    (hallway,) = SCENES["Hallway"]
    assert (hallway.name, hallway.agents, hallway.decision_period, hallway.max_step) == (
        NAME, 17, 6, 3000)


def test_spec_decisions_and_rewards_through_unity_environment(open_env, tmp_path):
    """Names, shapes, branch, a decision every 6 academy steps, StepCount/MaxStep stacked, and
    a remembering policy's episodes on the real client: +1 at the ROUTE-th decision."""
    env = open_env("Hallway")
    env.reset()
    assert list(env.behavior_specs) == [NAME]
    spec = env.behavior_specs[NAME]
    assert [(o.name, o.shape) for o in spec.observation_specs] == [
        ("StackingSensor_size3_RayPerceptionSensor", (105,)),
        ("StackingSensor_size3_VectorSensor_size1", (3,))]
    assert spec.action_spec.continuous_size == 0 and spec.action_spec.discrete_branches == (5,)
    history: dict[int, list] = {}
    for call in range(1, ROUTE + 1):
        decision, terminal = env.get_steps(NAME)
        assert len(decision) == 17 and not len(terminal)
        for agent, rays, vec in zip(decision.agent_id.tolist(), *decision.obs):
            history.setdefault(agent, []).append((rays, vec))
        assert np.allclose(decision.obs[1][:, -1], 6 * (call - 1) / 3000)  # newest last
        policy = remembering()
        actions = [policy(a, history[a]) for a in decision.agent_id.tolist()]
        env.set_actions(NAME, ActionTuple(discrete=np.array(actions, np.int32)[:, None]))
        env.step()
    decision, terminal = env.get_steps(NAME)
    assert len(terminal) == 17 and not terminal.interrupted.any()
    assert np.allclose(terminal.reward, 1.0)  # SetReward(1): the goal replaces the penalties
    env.close()
    last = (tmp_path / "Player-0.log").read_text().strip().splitlines()[-1]
    # decisions at academy steps 0, 6, ..., 6 (ROUTE - 1); the goal at the last one's first
    # action, its terminal-only message at the next step
    assert f"academy steps {6 * (ROUTE - 1) + 2}," in last


def test_max_step_interrupts_through_unity_environment(open_env):
    """MaxStep 24 (4 decisions): held for 3, one move cannot reach a goal: all interrupted at
    the 4th step(), each having paid 24 x 1/MaxStep."""
    env = open_env("Hallway", args=["--standin-max-step", "24"])
    env.reset()
    rng = np.random.default_rng(0)
    total = np.zeros(17)
    for call in range(1, 5):
        decision, terminal = env.get_steps(NAME)
        total[decision.agent_id] += decision.reward
        assert not len(terminal)
        env.set_actions(NAME, ActionTuple(discrete=rng.integers(0, 5, (17, 1)).astype(np.int32)))
        env.step()
    decision, terminal = env.get_steps(NAME)
    assert len(terminal) == 17 and terminal.interrupted.all()
    total[terminal.agent_id] += terminal.reward
    assert np.allclose(total, -1.0, atol=1e-5)
    assert len(decision) == 17 and np.allclose(decision.obs[1], 0.0)  # new episodes


# -- the cue ----------------------------------------------------------------------------------

def test_cue_is_seen_only_in_the_first_observation():
    """Pairs of an O and an X episode under the same actions: the cue is in the newest rays of
    the first observation only, in older stack slots of the next two, and from the 4th
    observation on both sensors are the same in both episodes."""
    pairs = 12
    rng = np.random.default_rng(0)
    plans = rng.integers(0, 5, (pairs, 60))
    episodes = play(lambda a, h: int(plans[a % pairs, len(h) - 1]), [O] * pairs + [X] * pairs,
                    max_step=60 * 6)
    for p in range(pairs):
        ep_o, ep_x = episodes[p], episodes[p + pairs]
        assert cue_in(ep_o.obs[0][0]) == O and cue_in(ep_x.obs[0][0]) == X
        assert len(ep_o.obs) == len(ep_x.obs) > HOLD_DECISIONS
        for n, ((rays_o, vec_o), (rays_x, vec_x)) in enumerate(zip(ep_o.obs, ep_x.obs)):
            assert np.array_equal(vec_o, vec_x)
            if n > 0:
                assert cue_in(rays_o) is None and cue_in(rays_x) is None
                assert np.array_equal(newest(rays_o), newest(rays_x))
            if n < HOLD_DECISIONS:
                assert not np.array_equal(rays_o, rays_x), "the stack still holds the cue"
            else:
                assert np.array_equal(rays_o, rays_x), f"observation {n + 1} shows the cue"
        assert ep_o.interrupted == ep_x.interrupted


# -- rewards, MaxStep, independence of the agents -----------------------------------------------

def test_rewards_correct_wrong_and_step_penalty():
    right = play(remembering(), [O, X])
    wrong = play(remembering(turn_to=lambda cue: 1 - cue), [O, X])
    for ep in right + wrong:
        assert len(ep.obs) == ROUTE and not ep.interrupted
        assert all(r == pytest.approx(-6 * PENALTY) for r in ep.rewards)
    assert [ep.final_reward for ep in right] == [1.0, 1.0]
    assert [ep.final_reward for ep in wrong] == [pytest.approx(-0.1)] * 2
    assert right[0].ret == pytest.approx(BEST_RETURN)
    assert wrong[0].ret == pytest.approx(-0.1 - (1.0 - BEST_RETURN))


def test_max_step_interrupts_and_walls_stop():
    """An agent that only walks back into the wall behind the start is interrupted at MaxStep
    with -1/MaxStep per academy step in all."""
    (ep,) = play(memoryless(lambda rays, vec: BACK), [X], max_step=120)
    assert ep.interrupted and len(ep.obs) == 20
    assert ep.ret == pytest.approx(-1.0)


def test_one_agents_episode_never_resets_the_others():
    """Agent 0 reaches its goal at the ROUTE-th decision; agent 1 stands still: its StepCount keeps
    growing and it has no terminal, until MaxStep."""
    stand = memoryless(lambda rays, vec: NOTHING)
    go = remembering()
    academy = Academy(SCENES["Hallway"], PlayerOptions(agents=(2,), max_step=120), seed=0)
    group = academy.groups[0]
    seen: dict[int, list[tuple[int, bool, float]]] = {0: [], 1: []}
    history: dict[int, list] = {0: [], 1: []}
    for _ in range(121):
        message = academy.begin_step()
        if message is not None:
            for batch in message.batches[NAME]:
                for row, agent in enumerate(batch.ids.tolist()):
                    seen[agent].append((message.academy_step, batch.done,
                                        float(batch.obs[1][row, -1])))
                    if not batch.done:
                        history[agent].append((batch.obs[0][row], batch.obs[1][row]))
            deciding = group.deciding.tolist()
            if deciding:
                acts = [(go if a == 0 else stand)(a, history[a]) for a in deciding]
                academy.apply_actions({NAME: ActionBatch(np.zeros((len(deciding), 0), np.float32),
                                                         np.array(acts, np.int32)[:, None])})
        academy.end_step()
    ends_0 = [step for step, done, _ in seen[0] if done]
    ends_1 = [step for step, done, _ in seen[1] if done]
    assert ends_0[0] == 6 * (ROUTE - 1) + 1 and ends_1 == [120]  # agent 0: its last decision's
    # first step
    steps_1 = [frac * 120 for step, done, frac in seen[1] if not done]
    assert steps_1 == pytest.approx([6 * n for n in range(20)] + [0.0])  # reset only at 120


# -- memory -----------------------------------------------------------------------------------

def test_a_policy_that_remembers_the_cue_scores_about_one():
    rng = np.random.default_rng(1)
    episodes = play(remembering(), rng.integers(0, 2, 200).tolist())
    returns = [ep.ret for ep in episodes]
    assert np.mean(returns) == pytest.approx(BEST_RETURN) and min(returns) > 0.98


def _hashed(seed: int) -> Callable[[np.ndarray, np.ndarray], int]:
    """A random deterministic memoryless policy: the action is a hash of the observation."""
    def choose(rays, vec):
        digest = hashlib.blake2b(rays.tobytes() + vec.tobytes(), key=bytes([seed])).digest()
        return digest[0] % 5
    return choose


def _to_a_goal(turn: int, peek: bool) -> Callable[[np.ndarray, np.ndarray], int]:
    """The best memoryless policies reach a goal fast: forward; at the fork (both side rays on a
    goal) ``turn``. ``peek``: while the stack shows the cue, turn towards its goal (trying to
    store the cue in the heading; the agent is held then)."""
    def choose(rays, vec):
        stacked = rays.reshape(3, 5, RAY)
        if peek and stacked[:, :, 2].any():
            return TURN_LEFT
        if peek and stacked[:, :, 3].any():
            return TURN_RIGHT
        now = newest(rays)
        if now[3, 0] + now[4, 1] == 2 or now[3, 1] + now[4, 0] == 2:  # rays at 20 and 160 deg
            return turn
        return FORWARD
    return choose


def test_no_memoryless_policy_beats_chance():
    """Why a memoryless policy cannot beat chance: its actions at the first 3 decisions do
    nothing (the agent is held), and from the 4th observation on the observations do not
    depend on the cue (previous test), so by induction an O and an X episode under the same
    deterministic memoryless policy see the same observations, take the same actions and end
    at the same goal: +1 in one and -0.1 in the other, at best 0.45 per episode on average, less
    the step penalties; a stochastic policy is a mixture of deterministic ones. Checked for
    random (hashed) memoryless policies and the best ones (straight to a goal), with and without
    trying to carry the cue in the heading."""
    policies = [memoryless(_hashed(s)) for s in range(16)]
    policies += [memoryless(_to_a_goal(turn, peek)) for turn in (TURN_LEFT, TURN_RIGHT)
                 for peek in (False, True)]
    k = len(policies)
    episodes = play(lambda a, h: policies[a % k](a, h), [O] * k + [X] * k)
    best = []
    for p in range(k):
        ep_o, ep_x = episodes[p], episodes[p + k]
        assert ep_o.interrupted == ep_x.interrupted
        if not ep_o.interrupted:
            assert sorted([ep_o.final_reward, ep_x.final_reward]) == [pytest.approx(-0.1), 1.0]
        assert (ep_o.ret + ep_x.ret) / 2 < 0.45
        best.append((ep_o.ret + ep_x.ret) / 2)
    assert max(best) == pytest.approx((BEST_RETURN - 0.1 - (1 - BEST_RETURN)) / 2)
    assert sum(not episodes[p].interrupted for p in range(16)) >= 2, "hashed ones reach goals"
