"""Self-play bookkeeping (``training/ghost.py``) and its wiring (``training/selfplay.py``):
ELO against ML-Agents' own GhostController, save / swap / team-change schedules, window
sampling, the learning team's data, the control sent to actors, and checkpoints."""
from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from unity_rl.config.behavior_config import SelfPlayConfig
from unity_rl.experience import Segment, StepExtras, Trajectory
from unity_rl.runtime.messages import SNAPSHOT_VERSION, Control, LanePolicy, BehaviorWeights
from unity_rl.training.ghost import LATEST, GhostController, GhostTrainer, elo_change, team_of
from unity_rl.training.selfplay import SelfPlay

REFERENCE = json.loads(Path(__file__).with_name("elo_reference.json").read_text())


def ghost(controller=None, seed=0, **settings) -> GhostTrainer:
    return GhostTrainer("B", SelfPlayConfig(**settings), controller or GhostController(),
                        np.random.default_rng(seed))


def test_team_ids_are_parsed_as_mlagents():
    assert team_of("SoccerTwos?team=1") == ("SoccerTwos", 1)
    assert team_of("3DBall") == ("3DBall", 0)
    assert team_of("Goalie?team=3&x=1") == ("Goalie", 3)


def test_elo_matches_mlagents_ghost_controller():
    """Replays games recorded from ML-Agents 1.1.0's GhostController (make_elo_reference.py)."""
    controller = GhostController()
    learner, opponent = ghost(controller, window=3), ghost(controller, window=3)
    controller.subscribe_team_id(0, learner)
    controller.subscribe_team_id(1, opponent)
    opponent.policy_elos = [1200.0, 1300.0, 1100.0, 1250.0]
    for row in REFERENCE:
        opponent.current_opponent = row["opponent_index"]
        assert learner.current_elo == pytest.approx(row["rating"], abs=1e-9)
        result = {1.0: 1.0, 0.0: -1.0, 0.5: 0.0}[row["result"]]  # a final reward with that result
        learner.process_trajectory(True, True, False, result)
        assert learner.current_elo == pytest.approx(row["learning_elo"], abs=1e-9)
        assert opponent.policy_elos == pytest.approx(row["opponent_elos"], abs=1e-9)


def test_elo_formula_has_no_k_factor():
    assert elo_change(1200.0, 1200.0, 1.0) == pytest.approx(0.5)  # ML-Agents' docs: K=16 -> 8
    assert elo_change(1600.0, 1200.0, 1.0) == pytest.approx(1 - 10 / 11)


def test_elo_against_the_latest_weights_cancels_in_a_symmetric_game():
    controller = GhostController()
    g = ghost(controller)
    g.add_team(0, {"w": 0})
    g.add_team(1, {"w": 0})
    g.current_opponent = LATEST
    g.process_trajectory(True, True, False, 1.0)
    assert g.current_elo == 1200.0  # +0.5 and -0.5 both on policy_elos[-1]


@pytest.mark.parametrize("args", [(True, False, False, 1.0), (True, True, True, 1.0),
                                  (False, True, False, 1.0)])
def test_no_elo_without_a_finished_game(args):
    controller = GhostController()
    g = ghost(controller)
    g.add_team(0, {})
    g.add_team(1, {})
    assert g.process_trajectory(*args) is None and g.current_elo == 1200.0


def test_swaps_follow_ghost_steps_and_saves_follow_learner_steps():
    g = ghost(save_steps=100, swap_steps=50, team_change=10**9, window=3,
              play_against_latest_model_ratio=0.0)
    g.add_team(0, {"v": 0})
    g.add_team(1, {"v": 0})
    assert len(g.policy_snapshots) == 1  # saved when the first team appeared
    g.ghost_step = 50
    assert g.advance(0, {"v": 1}) == {}  # not > swap_steps
    g.ghost_step = 51
    swapped = g.advance(0, {"v": 1})
    assert list(swapped) == [1] and g.last_swap == 51
    assert g.advance(100, {"v": 2}) == {} and len(g.policy_snapshots) == 1  # not > save_steps
    g.advance(101, {"v": 3})
    assert len(g.policy_snapshots) == 2 and g.policy_snapshots[1] == {"v": 3}
    assert g.last_save == 101


def test_window_is_circular_and_stores_the_elo():
    g = ghost(save_steps=1, window=3, team_change=10**9)
    g.add_team(0, {"v": 0})
    for step in range(2, 12, 2):
        g.policy_elos[-1] = 1200.0 + step
        g.advance(step, {"v": step})
    assert len(g.policy_snapshots) == 3
    assert [s["v"] for s in g.policy_snapshots] == [6, 8, 10]  # 0, 2, 4 overwritten in turn
    assert g.policy_elos[:3] == [1206.0, 1208.0, 1210.0]


@pytest.mark.parametrize("ratio, expect_latest", [(0.0, 0.0), (1.0, 1.0), (0.5, 0.5)])
def test_opponents_are_drawn_from_the_window(ratio, expect_latest):
    g = ghost(seed=3, save_steps=1, swap_steps=1, window=4, team_change=10**9,
              play_against_latest_model_ratio=ratio)
    g.add_team(0, {"v": -1})
    g.add_team(1, {"v": -1})
    for step in range(2, 10, 2):
        g.advance(step, {"v": step})
    draws = []
    for k in range(4000):
        g.ghost_step += 2
        g.advance(8, {"v": 8})
        draws.append(g.current_opponent)
    draws = np.array(draws)
    assert np.mean(draws == LATEST) == pytest.approx(expect_latest, abs=0.03)
    if ratio < 1.0:
        counts = np.bincount(draws[draws >= 0], minlength=4)
        assert len(counts) == 4 and counts.min() > 0.8 * counts.max()  # uniform over the window


def test_team_change_rotates_resets_once_and_swaps():
    controller = GhostController()
    g = ghost(controller, save_steps=10, team_change=30, swap_steps=10**9)
    g.add_team(0, {"v": 0})
    g.add_team(1, {"v": 0})
    assert controller.learning_team == 0 and g.learning_team == 0
    assert g.advance(30, {"v": 1}) == {} and not controller.should_reset()
    swapped = g.advance(31, {"v": 2})
    assert controller.learning_team == 1 and g.learning_team == 1
    assert list(swapped) == [0] and g.last_team_change == 31
    assert controller.should_reset() and not controller.should_reset()


def test_asymmetric_brains_share_the_controller():
    controller = GhostController()
    striker, goalie = ghost(controller, team_change=5), ghost(controller, team_change=5)
    striker.add_team(0, {"s": 0})
    goalie.add_team(1, {"g": 0})
    assert striker.learning_team == goalie.learning_team == 0
    striker.current_opponent = 0
    goalie.current_opponent = 0
    striker.process_trajectory(True, True, False, 1.0)  # a striker win moves the goalie's ELO
    assert striker.current_elo == pytest.approx(1200.5)
    assert goalie.policy_elos[0] == pytest.approx(1199.5)
    assert list(striker.advance(6, {"s": 1})) == [0]  # the striker is now the ghost
    assert controller.learning_team == 1
    assert goalie.advance(0, {"g": 0}) == {}  # its own team now learns: nothing to swap
    assert goalie.learning_team == 1


def test_checkpoint_round_trip_continues_identically():
    a = ghost(seed=5, save_steps=3, swap_steps=2, window=3, team_change=20)
    a.add_team(0, {"v": 0})
    a.add_team(1, {"v": 0})
    for step in range(1, 15):
        a.ghost_step += 3
        a.process_trajectory(True, True, False, (-1) ** step)
        a.advance(step, {"v": step})
    b = ghost(seed=99, save_steps=3, swap_steps=2, window=3, team_change=20)
    b.add_team(0, {"v": 0})
    b.add_team(1, {"v": 0})
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    for step in range(15, 40):
        for g in (a, b):
            g.ghost_step += 3
            g.advance(step, {"v": step})
        assert (a.current_opponent, a.opponents, a.policy_elos) == \
            (b.current_opponent, b.opponents, b.policy_elos)


# -- the wiring -------------------------------------------------------------------------------

class FakeHost:
    def __init__(self):
        self.version, self.accepted, self.w = 0, [], {"w": np.zeros(2)}

    def accept(self, segment):
        self.accepted.append(segment)
        return 0

    def ready(self):
        return True

    def weights(self):
        return self.w

    def state_dict(self):
        return {"version": self.version}

    def load_state_dict(self, state):
        self.version = state["version"]


def segment(version=0, reward=0.0, group_reward=1.0, steps=3, terminated=True):
    t = Trajectory(obs=np.zeros((steps, 1)), actions=np.zeros((steps, 1)),
                   logprobs=np.zeros((steps, 1)), values=np.zeros(steps),
                   rewards=np.full(steps, reward, np.float32), last_obs=np.zeros(1),
                   terminated=terminated,
                   extras=StepExtras(group_rewards=np.r_[np.zeros(steps - 1), group_reward]))
    return Segment([t], version, 0, steps, [reward * steps], [steps])


def selfplay(**settings):
    host = FakeHost()
    sp = SelfPlay.build({"Soccer": (host, SelfPlayConfig(**settings),
                                    {0: "Soccer?team=0", 1: "Soccer?team=1"})}, seed=1)
    return sp, host


def test_only_the_learning_team_trains_and_counts():
    sp, host = selfplay()
    views = sp.views()
    brain = sp.brains["Soccer"]
    assert views["Soccer?team=0"].accept(segment()) == 0
    assert views["Soccer?team=1"].accept(segment(steps=5)) is None
    assert views["Soccer?team=0"].accept(segment(SNAPSHOT_VERSION)) is None  # a snapshot played it
    assert len(host.accepted) == 1 and brain.steps == 3 and brain.ghost.ghost_step == 5
    assert views["Soccer?team=0"].ready() and not views["Soccer?team=1"].ready()
    assert brain.ghost.current_elo == 1200.5  # won against snapshot 0 (current_opponent 0 at start)
    part = brain.take_round(None)
    assert part.collected_steps == 3 and part.episode_returns == [0.0]


def test_group_reward_decides_the_game():
    sp, _ = selfplay()
    ghost_ = sp.brains["Soccer"].ghost
    ghost_.current_opponent = 0
    sp.views()["Soccer?team=0"].accept(segment(reward=0.0, group_reward=-1.0))
    assert ghost_.current_elo == pytest.approx(1199.5)


def test_control_carries_swaps_and_the_team_change_reset():
    sp, host = selfplay(save_steps=2, swap_steps=2, team_change=4,
                        play_against_latest_model_ratio=0.0)
    start = sp.lanes()
    assert start["Soccer?team=0"].fixed is False and start["Soccer?team=1"].fixed is True
    assert sp.advance() is None
    sp.views()["Soccer?team=1"].accept(segment(steps=3))  # ghost steps > swap_steps
    control = sp.advance()
    assert set(control.lanes) == {"Soccer?team=1"} and control.lanes["Soccer?team=1"].fixed
    assert control.lanes["Soccer?team=1"].weights.version == SNAPSHOT_VERSION
    assert not control.reset_episodes
    sp.views()["Soccer?team=0"].accept(segment(steps=5))  # learner steps > team_change
    control = sp.advance()
    assert control.reset_episodes
    assert control.lanes["Soccer?team=1"].fixed is False  # team 1 learns: follows the learner
    assert control.lanes["Soccer?team=0"].fixed is True


def test_control_state_keeps_the_latest_lane_of_each_behavior():
    w = BehaviorWeights(1, {})
    state = Control(env_parameters={"a": 1.0}).updated(Control(lanes={"X": LanePolicy(w, True)}))
    state = state.updated(Control(lanes={"Y": LanePolicy(w, False)}, reset_episodes=True))
    assert state.env_parameters == {"a": 1.0} and set(state.lanes) == {"X", "Y"}
    assert not state.reset_episodes


def test_brain_checkpoint_restores_ghost_and_controller():
    sp, host = selfplay(save_steps=1, swap_steps=1, team_change=3)
    for _ in range(3):
        sp.views()["Soccer?team=0"].accept(segment(steps=2))
        sp.views()["Soccer?team=1"].accept(segment(steps=2))
        sp.advance()
    state = pickle.loads(pickle.dumps((sp.brains["Soccer"].state_dict(), sp.state_dict())))
    again, _ = selfplay(save_steps=1, swap_steps=1, team_change=3)
    again.brains["Soccer"].load_state_dict(state[0])
    again.load_state_dict(state[1])
    a, b = sp.brains["Soccer"], again.brains["Soccer"]
    assert b.steps == a.steps and again.controller.learning_team == sp.controller.learning_team
    assert b.ghost.policy_elos == a.ghost.policy_elos
    assert len(b.ghost.policy_snapshots) == len(a.ghost.policy_snapshots)
    assert {k: v.fixed for k, v in again.lanes().items()} == \
        {k: v.fixed for k, v in sp.lanes().items()}


def test_a_finished_learning_brain_hands_over_to_the_other_one():
    striker_host, goalie_host = FakeHost(), FakeHost()
    settings = SelfPlayConfig(team_change=10**6)
    sp = SelfPlay.build({"Striker": (striker_host, settings, {0: "Striker?team=0"}),
                         "Goalie": (goalie_host, settings, {1: "Goalie?team=1"})}, seed=0)
    assert sp.controller.learning_team == 0
    assert sp.advance() is None
    sp.finished.add("Striker")
    control = sp.advance()
    assert sp.controller.learning_team == 1 and control.reset_episodes
    assert control.lanes["Goalie?team=1"].fixed is False
    assert control.lanes["Striker?team=0"].fixed is True
    sp.finished.add("Goalie")
    assert sp.advance() is None and sp.controller.learning_team == 1  # nobody left to train
