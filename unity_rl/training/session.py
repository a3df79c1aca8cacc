"""One training session's state and loop: ``TrainingSession`` (built piecewise by ``train``,
so that clean-up knows what exists).

- ``setup``: once the actors report the builds' behaviors, a learner host per behavior (or one
  per self-play brain) through its trainer type's ``Algorithm``, its ``BehaviorRun`` (metrics,
  step budget), restored from the checkpoint (``--resume``) or started from another run's
  learners (``--initialize-from``);
- ``loop``: ``runner.next_update()`` round after round until every behavior reached its
  ``max_steps`` (or every mean return ``target_return``): records each round (its steps and
  episodes as they arrive, before the update on them: ``runner.on_arrival``), moves the
  curricula' lessons (a change goes to every actor's builds), checkpoints when due;
- ``save_checkpoint``, ``save_final``, ``close``, ``result``: the run's outputs.

The contract of the whole run is ``unity_rl.training.trainer``'s.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import ConfigError, RunConfig
from unity_rl.envs.types import short_name
from unity_rl.runtime.algorithm import Algorithm, HostContext
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.messages import ActorInfo, BehaviorInfo, Control
from unity_rl.runtime.runners import Round
from unity_rl.runtime.process_state import load_rng_state, rng_state
from unity_rl.training.behavior_run import BehaviorRun, output_names
from unity_rl.training.curriculum import Curricula
from unity_rl.training.ghost import team_of
from unity_rl.training.results import BehaviorResult, TrainResult
from unity_rl.training.resume import CHECKPOINT_FORMAT
from unity_rl.training.selfplay import SelfPlay, make_selfplay_runner, self_play_brains

logger = logging.getLogger(__name__)


def _same_behaviors(infos: list[ActorInfo]) -> dict[str, BehaviorInfo]:
    """The behaviors every actor reports (all actors must see the same builds)."""
    first = infos[0]
    for info in infos[1:]:
        if info.layout() != first.layout():
            raise RuntimeError(f"actor {info.actor_id} sees behaviors {info.layout()}, actor 0 "
                               f"sees {first.layout()}: all builds must be the same")
    return dict(first.behaviors)


def learner_seed(run_seed: int, index: int) -> int:
    """The seed of the learner of behavior ``index`` (sorted names) in a run seeded ``run_seed``.

    The first draws with the run seed itself, as mlagents-learn's first trainer builds its
    networks right after ``torch.manual_seed(seed)``: a one-behavior run starts from the network
    ``mlagents-learn --seed s`` starts from (``tests/algos/test_mlagents_init.py``). The others
    get seeds of their own (mlagents-learn's later trainers draw after the first one's acting,
    which no seed can pair)."""
    if index == 0:
        return int(run_seed)
    return int(np.random.SeedSequence([run_seed, index]).generate_state(1)[0])


class TrainingSession:
    """State of one training session (built piecewise so that clean-up knows what exists)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, checkpoints: CheckpointManager,
                 state: dict | None, seed: int, algorithms: dict[str, Algorithm],
                 default: Algorithm | None, initial: dict | None = None,
                 curricula: Curricula | None = None):
        self.cfg, self.run_dir = cfg, run_dir
        self.checkpoints = checkpoints
        self.resume_state = state
        self.initial = initial
        """A checkpoint whose learners start this run (initialize_from / inference)."""
        self.inference = cfg.checkpoint_settings.inference
        self.seed = seed
        self.algorithms, self.default = algorithms, default
        self.behaviors: dict[str, BehaviorRun] = {}
        self.curricula = curricula if curricula is not None else Curricula({}, seed)
        """Each environment parameter's lesson (a plain value: one lesson)."""
        self.selfplay: SelfPlay | None = None
        """The self-play brains (``training.selfplay``), or None."""
        self.ready = False
        """True once every behavior has its host and metrics (the run can be saved)."""
        self.last_checkpoint: Path | None = None
        self.saved_at: tuple[int, ...] | None = None

    @property
    def agent_steps(self) -> int:
        return sum(b.agent_steps for b in self.behaviors.values())

    def _algorithm_for(self, name: str) -> Algorithm:
        for section in (name, short_name(name)):
            if section in self.algorithms:
                return self.algorithms[section]
        if self.default is None:  # the actors refuse such a behavior first
            raise ConfigError(self.cfg.source or "<config>", "behaviors", name,
                              "no settings for this behavior")
        return self.default

    # -- setup ----------------------------------------------------------------------------------
    def setup(self, infos: list[ActorInfo], console: bool) -> None:
        reported = _same_behaviors(infos)
        rl, device = self.cfg.unity_rl, self.cfg.torch_settings.device
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        state = self.resume_state
        entries = state["behaviors"] if state is not None else {}
        initial = self.initial["behaviors"] if self.initial is not None else {}
        names = sorted(reported)
        brains = self_play_brains(names, self._algorithm_for, reported)
        teams = {name for brain in brains.values() for name in brain[2].values()}
        plain = [name for name in names if name not in teams]
        outs = {**output_names(plain), **{brain: brain for brain in brains}}
        hosts, settings = {}, {}
        for i, name in enumerate(names):
            if name in teams and name not in {b[0] for b in brains.values()}:
                continue  # a brain's other team: the brain's one host is made for its first
            algorithm = self._algorithm_for(name)
            seed = learner_seed(self.seed, i)
            ctx = HostContext(device, seed, self.cfg.num_actors, rl.mode, rl.max_policy_lag,
                              rl.max_update_backlog)
            key = team_of(name)[0] if name in teams else name
            hosts[key] = (algorithm.make_host(reported[name], ctx), reported[name])
            settings[key] = algorithm.behavior_cfg
        if brains:
            self.selfplay = SelfPlay.build(
                {brain: (hosts[brain][0], settings[brain].self_play, names_)
                 for brain, (_, _, names_) in brains.items()}, self.seed)
            for brain, host in self.selfplay.brains.items():
                hosts[brain] = (host, hosts[brain][1])
        for name in [*plain, *sorted(brains)]:
            host, info = hosts[name]
            metrics_dir = self.run_dir / "inference" if self.inference else self.run_dir
            run = BehaviorRun(name, outs[name], settings[name], info, host, metrics_dir)
            self.behaviors[name] = run
            entry = entries.get(name)
            if entry is not None:
                run.restore(entry)
            elif name in initial:
                host.load_state_dict(initial[name]["learner"])
                host.restart_counters()  # weights kept; steps and schedules start afresh
            elif state is not None or self.initial is not None:
                logger.warning("the checkpoint has no entry for behavior %s: it starts afresh",
                               name)
            run.open_metrics(console, float(entry["wall_seconds"]) if entry else 0.0)
            if entry is not None:
                run.restore_metrics(entry)
        self._check_curriculum_behaviors()
        if self.selfplay is not None and state is not None and "self_play" in state:
            self.selfplay.load_state_dict(state["self_play"])
        if state is not None:
            load_rng_state(state["rng"])
        self.saved_at = self._steps() if state is not None else None
        self.ready = True
        logger.info("training %s", ", ".join(
            f"{b.out_name} ({b.settings.trainer_type}, {b.info.num_agents} agents at reset)"
            for b in self.behaviors.values()))

    def _check_curriculum_behaviors(self) -> None:
        """Every behavior a completion criterion names is trained in this run."""
        trained = {short_name(name) for name in self.behaviors}
        missing = sorted(self.curricula.behaviors - trained)
        if missing:
            raise ConfigError(self.cfg.source or "<config>", "environment_parameters", None,
                              f"a curriculum's completion_criteria name behavior(s) {missing}, "
                              f"which this run does not train (trained: {sorted(trained)})")

    def largest_learner_parameters(self) -> int:
        """The most parameters one behavior's update optimises (0 before ``setup``)."""
        return max((b.host.parameter_count() for b in self.behaviors.values()), default=0)

    def updates_split(self) -> bool:
        """Whether every behavior's update splits into halves that may run side by side
        (``LearnerHost.splits_update``; False before ``setup``)."""
        return bool(self.behaviors) and all(b.host.splits_update()
                                            for b in self.behaviors.values())

    # -- loop -----------------------------------------------------------------------------------
    def runner_hosts(self) -> dict:
        """Full behavior name -> what the runner drives: the behavior's host, or its self-play
        team's view."""
        hosts = {n: b.host for n, b in self.behaviors.items()
                 if self.selfplay is None or n not in self.selfplay.brains}
        if self.selfplay is not None:
            hosts.update(self.selfplay.views())
        return hosts

    def loop(self, runner, target_return: float | None,
             on_round: Callable[[Round], None] | None = None) -> None:
        """Runs rounds until every behavior is done (or ``target_return``); ``on_round`` sees
        each round first (the trainer's ``ThreadTrial``)."""
        arrived: set[str] = set()
        if self.selfplay is None:  # (self-play brains are merged from their teams' rounds)
            runner.on_arrival = lambda parts: self._arrive(parts, arrived)
        runner = make_selfplay_runner(runner, self.selfplay)
        runner.start()
        for name, behavior in self.behaviors.items():
            if behavior.done or self.inference:
                runner.finish(name)
        while not all(b.done for b in self.behaviors.values()):
            arrived.clear()
            round_ = runner.next_update()
            if on_round is not None:
                on_round(round_)
            checkpoint_due = False
            for behavior in self.behaviors.values():  # the lessons the round was collected in
                for parameter, number in self.curricula.lesson_numbers().items():
                    behavior.metrics.set_stat(f"Environment/Lesson Number/{parameter}", number)
            if self.selfplay is not None:
                for brain, elo in self.selfplay.elos().items():
                    self.behaviors[brain].metrics.set_stat("Self-play/ELO", elo)
            for name, part in round_.behaviors.items():
                behavior = self.behaviors[name]
                if behavior.done and name not in arrived:
                    continue
                checkpoint_due |= behavior.record(part, log_always=self.inference,
                                                  arrived=name in arrived)
                if behavior.done:
                    runner.finish(name)
                    logger.info("%s reached max_steps (%d agent-steps): it stops training",
                                behavior.out_name, behavior.agent_steps)
            if not self.inference:
                self._update_lessons(round_, runner.backend)
            if checkpoint_due and not self.inference:
                self.save_checkpoint()
            if target_return is not None and self._reached(target_return):
                logger.info("every behavior's mean return >= %.2f after %d agent-steps: stopping",
                            target_return, self.agent_steps)
                break

    def _arrive(self, parts: dict, arrived: set[str]) -> None:
        """The runner's ``on_arrival`` (once or more per round: sync actors' partial rollouts):
        counts what arrived for each behavior still training."""
        for name, part in parts.items():
            behavior = self.behaviors.get(name)
            if behavior is not None and (not behavior.done or name in arrived):
                behavior.arrive(part)  # (a round that began counting counts to its end)
                arrived.add(name)

    def _update_lessons(self, round_, backend: ActorBackend) -> None:
        """Checks the lessons with the round's episodes (mlagents-learn's
        ``reset_env_if_ready``); a change goes to every actor's builds."""
        for name, part in round_.behaviors.items():
            self.curricula.record_episodes(short_name(name), part.episode_returns)
        progress = {short_name(b.name): b.agent_steps / b.settings.max_steps
                    for b in self.behaviors.values()}
        self.curricula.update(progress, on_change=lambda result: backend.control(Control(
            env_parameters=self.curricula.values(), reset_episodes=result.must_reset)))

    def _reached(self, target_return: float) -> bool:
        return all(b.metrics.episodes >= 100 and b.metrics.mean_return >= target_return
                   for b in self.behaviors.values())

    def _steps(self) -> tuple[int, ...]:
        return tuple(b.agent_steps for b in self.behaviors.values())

    # -- outputs --------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        state = {
            "format": CHECKPOINT_FORMAT,
            "behaviors": {name: b.checkpoint_entry() for name, b in self.behaviors.items()},
            "agent_steps": self.agent_steps,
            "seed": self.seed,
            "rng": rng_state(),
            "curriculum": self.curricula.state_dict(),
        }
        if self.selfplay is not None:
            state["self_play"] = self.selfplay.state_dict()
        self.last_checkpoint = self.checkpoints.save(state, self.agent_steps)
        self.saved_at = self._steps()
        return self.last_checkpoint

    def save_final(self) -> dict[str, tuple[Path | None, Path]]:
        if self.inference:
            return {}
        if self.saved_at != self._steps():
            self.save_checkpoint()
        return {name: b.save_policy() for name, b in self.behaviors.items()}

    def close(self) -> float:
        """Closes the metrics writers; returns the run's wall seconds."""
        wall = max((b.metrics.elapsed() for b in self.behaviors.values()
                    if b.metrics is not None), default=0.0)
        for behavior in self.behaviors.values():
            behavior.close()
        return wall

    def result(self, wall_seconds: float, policies: dict,
               interrupted: KeyboardInterrupt | None) -> TrainResult:
        per = {}
        for name, b in self.behaviors.items():
            onnx_path, torch_path = policies.get(name, (None, None))
            per[b.out_name] = BehaviorResult(
                agent_steps=b.agent_steps, mean_return=b.metrics.mean_return,
                episodes=b.metrics.episodes, policy_version=int(b.host.version),
                policy_path=onnx_path, torch_policy_path=torch_path)
        first = per[min(per)]
        return TrainResult(
            agent_steps=self.agent_steps, wall_seconds=wall_seconds,
            mean_return=first.mean_return, episodes=first.episodes,
            policy_version=first.policy_version, policy_path=first.policy_path,
            torch_policy_path=first.torch_policy_path, checkpoint_path=self.last_checkpoint,
            interrupted=interrupted, behaviors=per)
