"""The ``environment_parameters`` section: what a build's environment parameters are set to.

An entry is an ``EnvironmentParameter`` (a constant or a sampler: ``SAMPLER_PARAMETERS`` says
which keys each ``sampler_type`` takes, ML-Agents' names) or a ``Curriculum`` of ``Lesson``s, each
with the value it sets and the ``CompletionCriteria`` that end it (ML-Agents' 1.1.0 schema;
``unity_rl.training.curriculum`` applies them, ``docs/curricula.md``). ``initial_value`` is what a
parameter starts with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from unity_rl.config.field_checks import check_field, is_int


SamplerType = Literal["constant", "uniform", "gaussian", "multirangeuniform"]
SAMPLER_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": ("value", "seed"),
    "uniform": ("min_value", "max_value", "seed"),
    "gaussian": ("mean", "st_dev", "seed"),
    "multirangeuniform": ("intervals", "seed"),
}
"""sampler_type -> the keys its sampler_parameters accept (ML-Agents' names)."""


@dataclass(frozen=True)
class EnvironmentParameter:
    """One ``environment_parameters`` entry or lesson value: a constant or a sampler."""

    sampler_type: SamplerType = "constant"
    """'constant', 'uniform', 'gaussian' or 'multirangeuniform'."""
    value: float = 0.0
    """constant: the value."""
    min_value: float = 0.0
    """uniform: lower bound."""
    max_value: float = 1.0
    """uniform: upper bound."""
    mean: float = 1.0
    """gaussian: mean."""
    st_dev: float = 1.0
    """gaussian: standard deviation."""
    intervals: tuple[tuple[float, float], ...] = ((0.0, 1.0),)
    """multirangeuniform: [min, max] intervals."""
    seed: int = -1
    """Seed of the sampler inside the build (-1: the run's seed)."""

    def __post_init__(self) -> None:
        s = "environment_parameter"
        check_field(self.sampler_type in SAMPLER_PARAMETERS, s, "sampler_type",
               "one of " + ", ".join(SAMPLER_PARAMETERS), self.sampler_type)
        check_field(self.min_value <= self.max_value, s, "min_value", "<= max_value", self.min_value)
        check_field(self.st_dev >= 0, s, "st_dev", ">= 0", self.st_dev)
        check_field(len(self.intervals) >= 1 and all(len(i) == 2 and i[0] <= i[1] for i in self.intervals),
               s, "intervals", "a non-empty list of [min, max] pairs with min <= max", self.intervals)
        check_field(is_int(self.seed), s, "seed", "an int", self.seed)


MEASURES = ("reward", "progress")
"""``completion_criteria.measure`` values (ML-Agents' ``CompletionCriteriaSettings.MeasureType``)."""


@dataclass(frozen=True)
class CompletionCriteria:
    """A lesson's ``completion_criteria`` (ML-Agents' CompletionCriteriaSettings): when the
    parameter moves on to its next lesson (``unity_rl.training.curriculum`` applies it)."""

    behavior: str
    """The trained behavior (config section name) whose progress or returns are measured."""
    measure: Literal["reward", "progress"] = "reward"
    """'progress': agent-steps / max_steps of ``behavior``; 'reward': mean episode return."""
    min_lesson_length: int = 0
    """Episodes of ``behavior`` that must end in this lesson before it can end."""
    signal_smoothing: bool = True
    """measure reward: compare 0.25 * previous smoothed value + 0.75 * mean return."""
    threshold: float = 0.0
    """The lesson ends once the measure exceeds it (progress: in [0, 1])."""
    require_reset: bool = False
    """Reset every build (every agent's episode cut) when this lesson ends."""

    def __post_init__(self) -> None:
        s = "completion_criteria"
        check_field(isinstance(self.behavior, str) and bool(self.behavior), s, "behavior",
                    "a behavior name", self.behavior)
        check_field(self.measure in MEASURES, s, "measure", "'reward' or 'progress'", self.measure)
        check_field(is_int(self.min_lesson_length) and self.min_lesson_length >= 0, s,
                    "min_lesson_length", "an int >= 0", self.min_lesson_length)
        check_field(self.measure != "progress" or 0.0 <= self.threshold <= 1.0, s, "threshold",
                    "in [0, 1] when measure is progress (a fraction of max_steps)", self.threshold)


@dataclass(frozen=True)
class Lesson:
    """One lesson of a curriculum (ML-Agents' Lesson)."""

    name: str
    """The lesson's name (logged when it starts)."""
    value: EnvironmentParameter
    """The parameter's value during the lesson: a constant or a sampler."""
    completion_criteria: CompletionCriteria | None = None
    """When the lesson ends (None: only the last lesson, which never ends)."""


@dataclass(frozen=True)
class Curriculum:
    """An ``environment_parameters`` entry with ``curriculum``: its lessons, in order."""

    lessons: tuple[Lesson, ...]
    """The lessons; every one but the last has completion_criteria (the last one's are ignored)."""

    def __post_init__(self) -> None:
        check_field(len(self.lessons) >= 1, "curriculum", "curriculum", "a non-empty list of lessons",
                    self.lessons)
        for lesson in self.lessons[:-1]:
            check_field(lesson.completion_criteria is not None, "curriculum", "curriculum",
                        f"lessons that each have completion_criteria but the last "
                        f"(lesson {lesson.name!r} has none)", lesson.name)


def initial_value(parameter: "EnvironmentParameter | Curriculum") -> "EnvironmentParameter":
    """The value a parameter starts with: itself, or its curriculum's first lesson's value."""
    return parameter.lessons[0].value if isinstance(parameter, Curriculum) else parameter
