"""Self-play bookkeeping, step for step as ML-Agents 1.1.0's ``ghost/controller.py`` and
``ghost/trainer.py`` (``../shared/mlagents_learn/TRAINERS.md`` §4), without torch or processes.

- ``team_of(name)``: ``"Brain?team=N"`` -> ("Brain", N), parsed as ``BehaviorIdentifiers``
  (``urlparse``/``parse_qs``; no ``team``: 0).
- ``GhostController`` (one per run): the learning team, the queue of the other team ids, the
  team change (a full reset follows, ``should_reset``) and the ELO change of one game.
- ``GhostTrainer`` (one per self-play behavior, "brain"): the teams it plays, its snapshots
  (a circular list of ``window``), their ELOs (``policy_elos``: window + 1 slots, the last is the
  learning policy), the opponent now played (``current_opponent``: a snapshot index, or -1 for
  the latest weights), the ghost step counter and the save / swap / team-change schedules.
  Weights are opaque here (whatever the learner host's ``weights()`` gives; snapshots are deep
  copies).

What the GhostTrainer's ``advance`` does, in ML-Agents' order (``advance(step, weights)`` here,
called once per training round by ``training.selfplay``):
1. trajectories of the learning team go to the wrapped trainer and each finished game updates
   the ELO (``process_trajectory``); the others are dropped and their steps counted
   (``ghost_step``) — done by the caller as data arrives;
2. ``step - last_team_change > team_change``: the controller changes the learning team;
3. the learning policy's latest weights become ``current_policy_snapshot``;
4. ``step - last_save > save_steps``: a snapshot of them (with the current ELO) is saved;
5. the learning team changed, or ``ghost_step - last_swap > swap_steps``: every team of this
   brain that is not learning gets an opponent: with probability 1 - ratio a uniformly drawn
   snapshot, else the latest weights (``current_opponent = -1``).

ELO (``GhostController.compute_elo_rating_changes``), for a learning-team trajectory that ends
its episode with its whole group (``done_reached and all_group_dones_reached and not
interrupted``): result = 1 / 0 / 0.5 as reward + group reward of its last step is > 0 / < 0 / 0;
E = 10^(R/400) / (10^(R/400) + 10^(R_opp/400)) with R_opp the ELO of the opponent now played;
change = result - E, **no K-factor** (ML-Agents' docs show K = 16; the code has none); the
learning ELO += change, the opponent's stored ELO -= change. Quirk kept: against the latest
weights (-1) both changes hit the learning policy's slot and cancel. Every game's agent counts
(two learning agents per SoccerTwos team: two updates per game).
"""
from __future__ import annotations

import copy
from collections import deque
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np

LATEST = -1
"""``current_opponent`` when the opponent plays the learning policy's latest weights."""


def team_of(name: str) -> tuple[str, int]:
    """(brain name, team id) of a full behavior name, as ML-Agents' ``BehaviorIdentifiers``."""
    parsed = urlparse(name)
    ids = parse_qs(parsed.query)
    return parsed.path, int(ids["team"][0]) if "team" in ids else 0


def game_result(final_reward: float) -> float:
    """ML-Agents' assumption: the last step's reward (+ group reward) says who won."""
    if final_reward > 0:
        return 1.0
    if final_reward < 0:
        return 0.0
    return 0.5


def elo_change(rating: float, opponent_rating: float, result: float) -> float:
    """``compute_elo_rating_changes``'s arithmetic: result - expected score (K = 1)."""
    r1 = pow(10, rating / 400)
    r2 = pow(10, opponent_rating / 400)
    return result - r1 / (r1 + r2)


class GhostController:
    """The run's learning team and team queue (ML-Agents' ``GhostController``, maxlen 10)."""

    def __init__(self, maxlen: int = 10):
        self.queue: deque[int] = deque(maxlen=maxlen)
        self.learning_team = -1
        self.trainers: dict[int, "GhostTrainer"] = {}
        self.changed_training_team = False

    def subscribe_team_id(self, team_id: int, trainer: "GhostTrainer") -> None:
        if team_id not in self.trainers:
            self.trainers[team_id] = trainer
            if self.learning_team < 0:
                self.learning_team = team_id
            else:
                self.queue.append(team_id)

    def change_training_team(self, step: int) -> None:
        """The learning team goes to the end of the queue; the next in line learns."""
        self.queue.append(self.learning_team)
        self.learning_team = self.queue.popleft()
        self.changed_training_team = True

    def should_reset(self) -> bool:
        """True once after a team change: the trainer then resets every build."""
        changed, self.changed_training_team = self.changed_training_team, False
        return changed

    def compute_elo_rating_changes(self, rating: float, result: float) -> float:
        """The learning policy's ELO change for one game; the opponent's ELO moves opposite."""
        opponent_rating = 0.0
        for team_id, trainer in self.trainers.items():
            if team_id != self.learning_team:
                opponent_rating = trainer.get_opponent_elo()
        change = elo_change(rating, opponent_rating, result)
        for team_id, trainer in self.trainers.items():
            if team_id != self.learning_team:
                trainer.change_opponent_elo(change)
        return change

    def state_dict(self) -> dict:
        return {"queue": list(self.queue), "learning_team": self.learning_team}

    def load_state_dict(self, state: dict) -> None:
        self.queue = deque(state["queue"], maxlen=self.queue.maxlen)
        self.learning_team = int(state["learning_team"])


class GhostTrainer:
    """One self-play brain's snapshots, ELOs and schedules (see the module doc)."""

    def __init__(self, brain: str, settings: Any, controller: GhostController,
                 rng: np.random.Generator):
        self.brain = brain
        self.controller = controller
        self.rng = rng
        self.window = settings.window
        self.ratio = settings.play_against_latest_model_ratio
        self.save_steps = settings.save_steps
        self.swap_steps = settings.swap_steps
        self.team_change = settings.team_change
        self.teams: list[int] = []
        self.ghost_step = 0
        self.policy_snapshots: list[Any] = []
        self.current_policy_snapshot: Any = None
        self.snapshot_counter = 0
        self.learning_team: int | None = None
        self.last_save = self.last_swap = self.last_team_change = 0
        self.policy_elos = [float(settings.initial_elo)] * (self.window + 1)
        self.current_opponent = 0
        self.opponents: dict[int, Any] = {}
        """Team (not learning) -> the weights it plays now."""

    # -- setup (ML-Agents' create_policy) --------------------------------------------------------
    def add_team(self, team_id: int, weights: Any) -> None:
        """A team of this brain appeared; the first one saves the first snapshot."""
        self.controller.subscribe_team_id(team_id, self)
        if not self.teams:
            self.current_policy_snapshot = copy.deepcopy(weights)
            self._save_snapshot()
            self.learning_team = self.controller.learning_team
        self.teams.append(team_id)
        if team_id != self.learning_team:
            self.opponents[team_id] = self.policy_snapshots[0]  # its ghost: the same weights

    # -- ELO ------------------------------------------------------------------------------------
    @property
    def current_elo(self) -> float:
        return self.policy_elos[-1]

    def get_opponent_elo(self) -> float:
        return self.policy_elos[self.current_opponent]

    def change_opponent_elo(self, change: float) -> None:
        self.policy_elos[self.current_opponent] -= change

    def process_trajectory(self, done_reached: bool, all_group_dones_reached: bool,
                           interrupted: bool, final_reward: float) -> float | None:
        """ELO update for one learning-team trajectory; returns the new ELO when it was a game's
        end (ML-Agents' ``_process_trajectory``), else None."""
        if not (done_reached and all_group_dones_reached and not interrupted):
            return None
        change = self.controller.compute_elo_rating_changes(self.current_elo,
                                                            game_result(final_reward))
        self.policy_elos[-1] += change
        return self.current_elo

    # -- schedules ------------------------------------------------------------------------------
    def advance(self, step: int, weights: Any) -> dict[int, Any]:
        """Steps 2-5 of the module doc after a round; ``step``: the wrapped learner's steps
        (learning-team agent-steps), ``weights``: its latest. Returns the teams that got a new
        opponent this time -> the weights they play (empty: no swap)."""
        if step - self.last_team_change > self.team_change:
            self.controller.change_training_team(step)
            self.last_team_change = step
        next_learning_team = self.controller.learning_team
        self.current_policy_snapshot = weights  # copied where it is kept (save, swap)
        if step - self.last_save > self.save_steps:
            self._save_snapshot()
            self.last_save = step
        if (self.learning_team != next_learning_team
                or self.ghost_step - self.last_swap > self.swap_steps):
            self.learning_team = next_learning_team
            swapped = self._swap_snapshots()
            self.last_swap = self.ghost_step
            return swapped
        return {}

    def _save_snapshot(self) -> None:
        snapshot = copy.deepcopy(self.current_policy_snapshot)
        if self.snapshot_counter < len(self.policy_snapshots):
            self.policy_snapshots[self.snapshot_counter] = snapshot
        else:
            self.policy_snapshots.append(snapshot)
        self.policy_elos[self.snapshot_counter] = self.current_elo
        self.snapshot_counter = (self.snapshot_counter + 1) % self.window

    def _swap_snapshots(self) -> dict[int, Any]:
        swapped = {}
        for team_id in self.teams:
            if team_id == self.learning_team:
                continue
            if self.rng.uniform() < (1 - self.ratio):
                x = int(self.rng.integers(len(self.policy_snapshots)))
                snapshot = self.policy_snapshots[x]
            else:
                x, snapshot = LATEST, copy.deepcopy(self.current_policy_snapshot)
            self.current_opponent = x
            self.opponents[team_id] = snapshot
            swapped[team_id] = snapshot
        return swapped

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"teams": list(self.teams), "ghost_step": self.ghost_step,
                "policy_snapshots": self.policy_snapshots,
                "current_policy_snapshot": self.current_policy_snapshot,
                "snapshot_counter": self.snapshot_counter, "learning_team": self.learning_team,
                "last_save": self.last_save, "last_swap": self.last_swap,
                "last_team_change": self.last_team_change, "policy_elos": list(self.policy_elos),
                "current_opponent": self.current_opponent, "opponents": self.opponents,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        for name in ("ghost_step", "snapshot_counter", "last_save", "last_swap",
                     "last_team_change", "current_opponent"):
            setattr(self, name, int(state[name]))
        self.teams = [int(t) for t in state["teams"]]
        self.learning_team = state["learning_team"]
        self.policy_snapshots = list(state["policy_snapshots"])
        self.current_policy_snapshot = state["current_policy_snapshot"]
        self.policy_elos = [float(e) for e in state["policy_elos"]]
        self.opponents = {int(k): v for k, v in state["opponents"].items()}
        self.rng.bit_generator.state = state["rng"]
