"""Self-play in a run: the learner side of ML-Agents' GhostTrainer (``ghost.py`` holds its
bookkeeping), wired around the ordinary learner hosts and runners.

Contract (``docs/self-play.md``):
- the behaviors of a config section with ``self_play`` are grouped by brain name (the name
  before ``?team=``): the teams of one brain share **one** learner host (``SelfPlayHost``, the
  brain's ``BehaviorRun``: one step count, one TensorBoard folder, one ``<Brain>.onnx``);
- the runner sees one ``TeamView`` per full behavior name. The learning team's view hands its
  segments to the host (each finished game updates the ELO) and trains it; another team's view
  drops its segments and counts their steps as ghost steps. A learning-team segment collected
  with an opponent snapshot (``messages.SNAPSHOT_VERSION``: the actor had not yet heard of the
  team change) is dropped uncounted;
- after every training round, before the round's publication (``_Wiring.before_publish``; in
  async rounds without training, right after the round), every brain's ``GhostTrainer.advance``
  runs; what changed goes to every actor as **one** ``Control``: ``lanes`` (an opponent
  snapshot, fixed, for each team that got a new opponent; the learner's weights, following the
  publications, for the team that starts learning) and, after a team change, ``reset_episodes``
  (ML-Agents' full reset). Sync actors apply it before their next collection (it precedes the
  publication they wait for); async actors between two collections;
- the ELO (``Self-play/ELO``), the snapshots, the opponents, the schedules, the RNG and the
  learning team are in the brain's checkpoint entry and the run's ``self_play`` entry:
  ``--resume`` continues with them (the actors get the restored opponents before acting).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

import numpy as np

from unity_rl.errors import UserError
from unity_rl.experience import Segment
from unity_rl.runtime.messages import SNAPSHOT_VERSION, BehaviorWeights, Control, LanePolicy
from unity_rl.runtime.runners import BehaviorRound, Round
from unity_rl.training.ghost import GhostController, GhostTrainer, team_of

logger = logging.getLogger(__name__)


def self_play_brains(names: list[str], algorithm_for: Any, reported: Mapping[str, Any]
                     ) -> dict[str, tuple[str, Any, dict[int, str]]]:
    """Brain -> (its first team's full name, its algorithm, {team: full name}) for the
    behaviors whose section has ``self_play``; their teams must look alike to one learner."""
    brains: dict[str, tuple[str, Any, dict[int, str]]] = {}
    for name in sorted(names, key=lambda n: (team_of(n)[1], n)):
        algorithm = algorithm_for(name)
        if getattr(algorithm.behavior_cfg, "self_play", None) is None:
            continue
        brain, team = team_of(name)
        first, _, teams = brains.setdefault(brain, (name, algorithm, {}))
        if team in teams:
            raise UserError(f"behaviors {teams[team]!r} and {name!r} are both team {team} of "
                            f"{brain!r}: self-play needs one behavior per team")
        mine, theirs = reported[name], reported[first]
        if (mine.obs_shapes, tuple(mine.action_spec)) != (theirs.obs_shapes,
                                                          tuple(theirs.action_spec)):
            raise UserError(f"self-play: {name!r} and {first!r} share one learner but their "
                            f"observations or actions differ ({mine.obs_shapes} vs "
                            f"{theirs.obs_shapes}): give them separate behavior names")
        teams[team] = name
    return brains


class SelfPlayHost:
    """One brain's learner host plus its ``GhostTrainer``; a ``LearnerHost`` for the trainer
    (checkpoints, policies), fed by its teams' ``TeamView``s."""

    def __init__(self, brain: str, host: Any, ghost: GhostTrainer, names: Mapping[int, str]):
        self.brain = brain
        self.host = host
        self.ghost = ghost
        self.names = dict(names)
        """Team id -> full behavior name."""
        self._steps = 0
        """Learning-team agent-steps handed to the host (the wrapped trainer's ``get_step``)."""
        self._round = self._empty_round()

    @staticmethod
    def _empty_round() -> dict:
        return {"steps": 0, "returns": [], "lengths": []}

    # -- data -----------------------------------------------------------------------------------
    def accept_team(self, team: int, segment: Segment) -> int | None:
        """A segment of ``team``: trained on when it is the learning team's (see module doc)."""
        if team != self.ghost.learning_team:
            self.ghost.ghost_step += segment.agent_steps
            return None
        if segment.policy_version == SNAPSHOT_VERSION:
            return None  # played by a snapshot before the team change reached the actor
        for trajectory in segment.trajectories:
            group_rewards = trajectory.extras.group_rewards
            final = float(trajectory.rewards[-1]) + (
                float(group_rewards[-1]) if group_rewards is not None else 0.0)
            self.ghost.process_trajectory(trajectory.terminated or trajectory.interrupted,
                                          not trajectory.group_continues,
                                          trajectory.interrupted, final)
        self._steps += segment.agent_steps
        self._round["steps"] += segment.agent_steps
        self._round["returns"] += list(segment.episode_returns)
        self._round["lengths"] += list(segment.episode_lengths)
        return self.host.accept(segment)

    def take_round(self, metrics: dict | None) -> BehaviorRound:
        """The brain's part of a round: what its learning team contributed."""
        part, self._round = self._round, self._empty_round()
        return BehaviorRound(part["steps"], part["returns"], part["lengths"], metrics)

    # -- LearnerHost ----------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.host.version

    def accept(self, segment: Segment) -> int | None:
        return self.accept_team(self.ghost.learning_team, segment)

    def ready(self) -> bool:
        return self.host.ready()

    def holds_collection(self) -> bool:
        return self.host.holds_collection()

    def train(self, sync: bool) -> dict[str, float]:
        return self.host.train(sync)

    def weights(self) -> dict:
        return self.host.weights()

    def policy_weights(self) -> dict:
        return self.host.policy_weights()

    def export_module(self):
        return self.host.export_module()

    def parameter_count(self) -> int:
        return self.host.parameter_count()

    def splits_update(self) -> bool:
        return self.host.splits_update()

    def state_dict(self) -> dict:
        return {"host": self.host.state_dict(), "ghost": self.ghost.state_dict(),
                "steps": self._steps}

    def load_state_dict(self, state: dict) -> None:
        self.host.load_state_dict(state["host"])
        self.ghost.load_state_dict(state["ghost"])
        self._steps = int(state["steps"])

    def restart_counters(self) -> None:
        self.host.restart_counters()

    def close(self) -> None:
        close = getattr(self.host, "close", None)
        if close is not None:
            close()

    @property
    def steps(self) -> int:
        return self._steps


class TeamView:
    """What the runner drives for one team's full behavior name (a ``LearnerHost``)."""

    def __init__(self, brain: SelfPlayHost, team: int):
        self.brain, self.team = brain, team

    @property
    def version(self) -> int:
        return self.brain.version

    def accept(self, segment: Segment) -> int | None:
        return self.brain.accept_team(self.team, segment)

    def ready(self) -> bool:
        return self.team == self.brain.ghost.learning_team and self.brain.ready()

    def train(self, sync: bool) -> dict[str, float]:
        return self.brain.train(sync)

    def holds_collection(self) -> bool:
        return self.team == self.brain.ghost.learning_team and self.brain.holds_collection()

    def weights(self) -> dict:
        return self.brain.weights()  # a lane with a fixed snapshot passes them by


class SelfPlay:
    """Every self-play brain of a run and their one ``GhostController``."""

    def __init__(self, controller: GhostController, brains: dict[str, SelfPlayHost]):
        self.controller = controller
        self.brains = brains
        self.finished: set[str] = set()
        """Brains that reached their max_steps."""

    @classmethod
    def build(cls, brains: Mapping[str, tuple[Any, Any, Mapping[int, str]]],
              seed: int) -> "SelfPlay":
        """``brains``: brain -> (learner host, SelfPlayConfig, {team: full name}). Teams subscribe
        in team-id order, so the lowest team id learns first."""
        controller = GhostController()
        hosts: dict[str, SelfPlayHost] = {}
        order = sorted((team, brain) for brain, (_, _, names) in brains.items()
                       for team in names)
        for i, brain in enumerate(sorted(brains)):
            host, settings, names = brains[brain]
            rng = np.random.default_rng(np.random.SeedSequence([seed, 7919, i]))
            hosts[brain] = SelfPlayHost(brain, host, GhostTrainer(brain, settings, controller, rng),
                                        names)
        for team, brain in order:
            hosts[brain].ghost.add_team(team, hosts[brain].weights())
        return cls(controller, hosts)

    def views(self) -> dict[str, TeamView]:
        """Full behavior name -> its team's view (what the runner drives)."""
        return {name: TeamView(brain, team) for brain in self.brains.values()
                for team, name in brain.names.items()}

    def lanes(self) -> dict[str, LanePolicy]:
        """Every team's lane policy now (the start-up control, and after ``--resume``)."""
        out = {}
        for brain in self.brains.values():
            for team, name in brain.names.items():
                out[name] = self._lane(brain, team)
        return out

    def _lane(self, brain: SelfPlayHost, team: int) -> LanePolicy:
        if team == brain.ghost.learning_team:
            return LanePolicy(BehaviorWeights(int(brain.version), brain.weights()), fixed=False)
        return LanePolicy(BehaviorWeights(SNAPSHOT_VERSION, brain.ghost.opponents[team]),
                          fixed=True)

    def advance(self) -> Control | None:
        """Every brain's ``GhostTrainer.advance``; the lanes that change and the reset after a
        team change, as one control (None: nothing changed)."""
        before = self.controller.learning_team
        self._hand_over_when_done()
        lanes: dict[str, LanePolicy] = {}
        for brain in self.brains.values():
            swapped = brain.ghost.advance(brain.steps, brain.weights())
            for team in swapped:
                lanes[brain.names[team]] = self._lane(brain, team)
        reset = self.controller.should_reset()
        if reset:
            logger.info("self-play: team %d learns now (was %d); every build is reset",
                        self.controller.learning_team, before)
            for brain in self.brains.values():  # the team that starts learning follows the learner
                for team, name in brain.names.items():
                    if team == brain.ghost.learning_team:
                        lanes[name] = self._lane(brain, team)
        if not lanes and not reset:
            return None
        return Control(lanes=lanes, reset_episodes=reset)

    def _hand_over_when_done(self) -> None:
        """A learning team whose brain reached max_steps hands over to the next team whose brain
        still trains (asymmetric games; mlagents-learn would wait forever: the other brain's
        steps move only while it learns). Not in mlagents-learn; said in docs/self-play.md."""
        learning = [b for b in self.brains.values() if self.controller.learning_team in b.names]
        waiting = [b for b in self.brains.values() if b.brain not in self.finished]
        if learning and waiting and all(b.brain in self.finished for b in learning):
            for b in learning:
                b.ghost.last_team_change = b.steps
            self.controller.change_training_team(learning[0].steps)

    def elos(self) -> dict[str, float]:
        """Brain -> the learning policy's ELO (``Self-play/ELO``)."""
        return {name: brain.ghost.current_elo for name, brain in self.brains.items()}

    def state_dict(self) -> dict:
        return {"controller": self.controller.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.controller.load_state_dict(state["controller"])


class SelfPlayRunner:
    """A runner (sync or async) whose self-play teams are merged back into their brains.

    ``next_update()`` returns the inner round with each brain's teams replaced by the brain's
    part (``SelfPlayHost.take_round``); ``finish(brain)`` finishes its teams."""

    def __init__(self, runner: Any, selfplay: SelfPlay):
        self.runner = runner
        self.selfplay = selfplay
        self._team_brain = {name: brain for brain, host in selfplay.brains.items()
                            for name in host.names.values()}
        self._advanced = False
        runner.before_publish = self._before_publish

    @property
    def backend(self):
        return self.runner.backend

    def _before_publish(self) -> None:
        self._advanced = True
        control = self.selfplay.advance()
        if control is not None:
            self.runner.backend.control(control)

    def start(self) -> None:
        self.runner.backend.control(Control(lanes=self.selfplay.lanes()))
        self.runner.start()  # its publication runs advance() once (nothing due at step 0)

    def finish(self, name: str) -> None:
        host = self.selfplay.brains.get(name)
        if host is not None:
            self.selfplay.finished.add(name)
        for team_name in (host.names.values() if host is not None else (name,)):
            self.runner.finish(team_name)

    def next_update(self) -> Round:
        self._advanced = False
        inner = self.runner.next_update()
        if not self._advanced:  # async round without training: the schedules still move
            self._before_publish()
        parts = {n: p for n, p in inner.behaviors.items() if n not in self._team_brain}
        for brain, host in self.selfplay.brains.items():
            metrics = None
            for team, name in host.names.items():
                part = inner.behaviors.get(name)
                if part is not None and part.metrics is not None:
                    metrics = part.metrics
            parts[brain] = host.take_round(metrics)
        return inner._replace(behaviors=parts)


def make_selfplay_runner(runner: Any, selfplay: SelfPlay | None) -> Any:
    """``runner`` itself without self-play brains; else wrapped (``SelfPlayRunner``)."""
    return runner if selfplay is None else SelfPlayRunner(runner, selfplay)

