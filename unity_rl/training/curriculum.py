"""Curricula: each environment parameter's lesson, and when it moves on (torch-free).

mlagents-learn 1.1.0 does this in ``EnvironmentParameterManager`` (``update_lessons``,
``_set_sampler_seeds``, ``get_minimum_reward_buffer_size``),
``CompletionCriteriaSettings.need_increment`` and ``TrainerController.reset_env_if_ready``;
``Curricula`` does the same, step for step:

- every ``environment_parameters`` entry is a list of lessons: a curriculum's, or a single
  lesson without completion criteria for a plain value (mlagents-learn's own representation);
- sampler seeds: a lesson value whose ``seed`` is -1 gets ``run_seed + offset``, ``offset``
  counting such lessons over all parameters in the config's order (constants count too), so
  every build receives the same seed (mlagents-learn's, not the build's);
- each behavior named by a criterion keeps a *reward buffer*: the returns of its latest episodes,
  at most ``max(1, max min_lesson_length)`` over the criteria that name it;
- one *check* (``check``) looks at every parameter whose lesson has criteria and a successor;
  ``need_increment`` says whether it moves on, so a parameter takes at most one lesson step per
  check; after any step every reward buffer is cleared; the check reports whether a finished
  lesson has ``require_reset``. Reward measures update the parameter's smoothed value
  (0.25 * previous + 0.75 * mean, starting at 0.0) at every check that reaches them.

How often: mlagents-learn checks once per environment step, that is many times over the same
data between two arrivals of episodes. The trainer hands the episodes of a round over
(``record_episodes``) and calls ``update``, which repeats the check until it changes nothing
(at most ``MAX_CHECKS`` times): the smoothed reward then settles on the buffer's mean as it does
in mlagents-learn within a few environment steps, and a lesson whose successor's threshold is
already passed (possible with ``min_lesson_length: 0``) steps on as it would at the next
environment steps.

``state_dict``/``load_state_dict`` carry the lesson numbers (mlagents-learn's
``training_status.json``), the smoothed values and the reward buffers, so a resumed run checks
exactly as an uninterrupted one would (mlagents-learn restores the lesson numbers only).
"""
from __future__ import annotations

import dataclasses
import logging
from collections import deque
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from unity_rl.config.environment_parameters import (CompletionCriteria, Curriculum,
                                                    EnvironmentParameter, Lesson)

logger = logging.getLogger(__name__)

MAX_CHECKS = 100
"""Most checks ``update`` repeats on one round's data (the smoothed value has settled long before)."""


def need_increment(criteria: CompletionCriteria, progress: float, reward_buffer: Sequence[float],
                   smoothing: float) -> tuple[bool, float]:
    """(move on now?, new smoothed value): mlagents-learn's ``need_increment``.

    ``progress``: the behavior's agent-steps / max_steps; ``reward_buffer``: its latest episode
    returns; ``smoothing``: the parameter's smoothed value so far.
    """
    if len(reward_buffer) < criteria.min_lesson_length:
        return False, smoothing
    if criteria.measure == "progress":
        return progress > criteria.threshold, smoothing
    if len(reward_buffer) < 1:
        return False, smoothing
    measure = float(np.mean(reward_buffer))
    if np.isnan(measure):
        return False, smoothing
    if criteria.signal_smoothing:
        measure = 0.25 * smoothing + 0.75 * measure
        smoothing = measure
    return measure > criteria.threshold, smoothing


class CheckResult(NamedTuple):
    """What a check (or an ``update``) changed."""

    changed: tuple[str, ...]
    """Parameters that moved to their next lesson (in config order)."""
    must_reset: bool
    """A finished lesson has ``require_reset``: every build is to be reset."""


def _as_lessons(name: str, parameter: EnvironmentParameter | Curriculum) -> tuple[Lesson, ...]:
    if isinstance(parameter, Curriculum):
        return parameter.lessons
    return (Lesson(name=name, value=parameter),)


class Curricula:
    """The lessons of a run's ``environment_parameters`` (see the module doc)."""

    def __init__(self, parameters: Mapping[str, EnvironmentParameter | Curriculum], run_seed: int):
        self.lessons: dict[str, tuple[Lesson, ...]] = {}
        """Parameter -> its lessons, sampler seeds resolved."""
        offset = 0
        for name, parameter in parameters.items():
            lessons = []
            for lesson in _as_lessons(name, parameter):
                if lesson.value.seed == -1:
                    lesson = dataclasses.replace(
                        lesson, value=dataclasses.replace(lesson.value, seed=run_seed + offset))
                    offset += 1
                lessons.append(lesson)
            self.lessons[name] = tuple(lessons)
        self.lesson: dict[str, int] = {name: 0 for name in self.lessons}
        """Parameter -> its current lesson number."""
        self.smoothed: dict[str, float] = {name: 0.0 for name in self.lessons}
        """Parameter -> its smoothed reward measure."""
        sizes: dict[str, int] = {}
        for lessons in self.lessons.values():
            for lesson in lessons[:-1]:
                c = lesson.completion_criteria
                sizes[c.behavior] = max(sizes.get(c.behavior, 1), c.min_lesson_length)
        self.reward_buffers: dict[str, deque[float]] = {
            behavior: deque(maxlen=size) for behavior, size in sizes.items()}
        """Behavior named by a criterion -> returns of its latest episodes."""

    # -- what the run sends and reports ---------------------------------------------------------
    @property
    def behaviors(self) -> set[str]:
        """Behaviors the completion criteria name."""
        return set(self.reward_buffers)

    def values(self) -> dict[str, EnvironmentParameter]:
        """Parameter -> its current lesson's value (a constant or a sampler with its seed)."""
        return {name: lessons[self.lesson[name]].value for name, lessons in self.lessons.items()}

    def lesson_numbers(self) -> dict[str, int]:
        return dict(self.lesson)

    def describe(self, name: str) -> str:
        lesson = self.lessons[name][self.lesson[name]]
        return f"parameter '{name}' is in lesson '{lesson.name}' and has value {_text(lesson.value)}"

    # -- checks ---------------------------------------------------------------------------------
    def record_episodes(self, behavior: str, returns: Sequence[float]) -> None:
        """Adds a behavior's finished episodes (environment returns) to its reward buffer."""
        buffer = self.reward_buffers.get(behavior)
        if buffer is not None:
            buffer.extend(float(r) for r in returns)

    def check(self, progress: Mapping[str, float]) -> CheckResult:
        """One check (mlagents-learn's ``reset_env_if_ready``): ``progress`` maps each trained
        behavior to agent-steps / max_steps; a behavior absent from it is not checked."""
        changed, must_reset = [], False
        for name, lessons in self.lessons.items():
            number = self.lesson[name]
            criteria = lessons[number].completion_criteria
            if criteria is None or number + 1 >= len(lessons) or criteria.behavior not in progress:
                continue
            increment, self.smoothed[name] = need_increment(
                criteria, float(progress[criteria.behavior]),
                list(self.reward_buffers[criteria.behavior]), self.smoothed[name])
            if increment:
                self.lesson[name] = number + 1
                changed.append(name)
                must_reset |= criteria.require_reset
                logger.info("curriculum: %s", self.describe(name))
        if changed:
            for buffer in self.reward_buffers.values():
                buffer.clear()
        return CheckResult(tuple(changed), must_reset)

    def update(self, progress: Mapping[str, float],
               on_change: Callable[[CheckResult], None] | None = None) -> CheckResult:
        """Repeats ``check`` on the same data until it changes nothing (see the module doc).
        ``on_change`` is called after every check that moved a lesson, with ``values()`` already
        that lesson's: mlagents-learn sends the parameters after each such check, so a build sees
        every lesson in turn even when two pass on the same data."""
        changed: list[str] = []
        must_reset = False
        for _ in range(MAX_CHECKS):
            before = dict(self.smoothed)
            result = self.check(progress)
            if result.changed and on_change is not None:
                on_change(result)
            changed += [n for n in result.changed if n not in changed]
            must_reset |= result.must_reset
            if not result.changed and self.smoothed == before:
                break
        return CheckResult(tuple(n for n in self.lessons if n in changed), must_reset)

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"lessons": dict(self.lesson), "smoothed": dict(self.smoothed),
                "reward_buffers": {b: list(d) for b, d in self.reward_buffers.items()}}

    def load_state_dict(self, state: Mapping) -> None:
        """Restores ``state_dict()``'s output; parameters it lacks start at lesson 0."""
        for name, number in state.get("lessons", {}).items():
            if name not in self.lessons:
                logger.warning("the checkpoint has a lesson for environment parameter '%s', "
                               "which the config no longer has: ignored", name)
                continue
            if not 0 <= int(number) < len(self.lessons[name]):
                raise ValueError(f"the checkpoint has environment parameter '{name}' in lesson "
                                 f"{number}, but its curriculum has {len(self.lessons[name])} "
                                 f"lesson(s): resume with the config the run was started with")
            self.lesson[name] = int(number)
        for name, value in state.get("smoothed", {}).items():
            if name in self.smoothed:
                self.smoothed[name] = float(value)
        for behavior, returns in state.get("reward_buffers", {}).items():
            if behavior in self.reward_buffers:
                self.reward_buffers[behavior].clear()
                self.reward_buffers[behavior].extend(float(r) for r in returns)


def _text(value: EnvironmentParameter) -> str:
    if value.sampler_type == "constant":
        return f"{value.value:g}"
    if value.sampler_type == "uniform":
        return f"uniform({value.min_value:g}, {value.max_value:g}, seed {value.seed})"
    if value.sampler_type == "gaussian":
        return f"gaussian({value.mean:g}, {value.st_dev:g}, seed {value.seed})"
    return f"multirangeuniform({[list(i) for i in value.intervals]}, seed {value.seed})"
