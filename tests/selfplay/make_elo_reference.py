"""Writes elo_reference.json from ML-Agents 1.1.0's own GhostController (run once, with the
python of an environment where mlagents 1.1.0 is installed):

    <mlagents-venv>/bin/python tests/selfplay/make_elo_reference.py

Games of a learning team against opponents of a second "trainer": each row is the ratings
before the game, the result, and ML-Agents' change, learning ELO and opponent ELO after it.
"""
import json
from pathlib import Path

import numpy as np
import mlagents.trainers.trainer  # noqa: F401 (imports ghost.trainer first: no import circle)
from mlagents.trainers.ghost.controller import GhostController


class Stub:
    """What the controller asks of the opponent's GhostTrainer."""

    def __init__(self, elos, current):
        self.policy_elos, self.current_opponent = elos, current

    def get_opponent_elo(self):
        return self.policy_elos[self.current_opponent]

    def change_opponent_elo(self, change):
        self.policy_elos[self.current_opponent] -= change


rng = np.random.default_rng(0)
controller = GhostController()
learner = Stub([1200.0] * 4, -1)
opponent = Stub([1200.0, 1300.0, 1100.0, 1250.0], 0)
controller.subscribe_team_id(0, learner)
controller.subscribe_team_id(1, opponent)
rows = []
for game in range(60):
    opponent.current_opponent = int(rng.integers(-1, 3))
    rating, opp = learner.policy_elos[-1], opponent.get_opponent_elo()
    result = float(rng.choice([0.0, 0.5, 1.0]))
    change = controller.compute_elo_rating_changes(rating, result)
    learner.policy_elos[-1] += change
    rows.append({"rating": rating, "opponent_index": opponent.current_opponent,
                 "opponent_rating": opp, "result": result, "change": change,
                 "learning_elo": learner.policy_elos[-1],
                 "opponent_elos": list(opponent.policy_elos)})
Path(__file__).with_name("elo_reference.json").write_text(json.dumps(rows, indent=1))
