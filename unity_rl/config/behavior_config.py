"""One ``behaviors.<name>`` section: ``BehaviorConfig`` (ML-Agents' TrainerSettings) with its
``self_play`` part (``SelfPlayConfig``), checked against the trainer type's spec when built
(``unity_rl.algorithms.registry``: its hyperparameters class, memory, behavioral cloning,
self-play). Also the run-wide edits a behavior takes from the ``unity_rl`` section:
``with_quirk_fixes`` (``fix_quirks``) and ``with_demo_pairing`` (``demo_pairing``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.registry import trainer_type, trainer_type_names
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.registry import reward_signal_names
from unity_rl.config.field_checks import check_field, is_int


@dataclass(frozen=True)
class SelfPlayConfig:
    """``behaviors.<name>.self_play`` (ML-Agents 1.1.0's ``SelfPlaySettings``, its code defaults;
    ``docs/self-play.md``)."""

    save_steps: int = 20_000
    """Learning-team agent-steps between two snapshots of the learning policy."""
    team_change: int | None = None
    """Learning-team agent-steps before the learning team changes (None: 5 x save_steps, as
    ML-Agents' code; its comment says "about 4x")."""
    swap_steps: int = 2_000
    """Opponent (ghost) agent-steps between two opponent swaps (ML-Agents' code default; its
    docs say 10000)."""
    window: int = 10
    """Snapshots kept (a circular list); opponents are drawn from it."""
    play_against_latest_model_ratio: float = 0.5
    """Probability that a swap picks the learning policy's latest weights instead of a uniformly
    drawn snapshot (ML-Agents only warns outside [0, 1]; so does unity_rl)."""
    initial_elo: float = 1200.0
    """ELO of the first policy (a resumed run takes the checkpoint's)."""

    def __post_init__(self) -> None:
        if self.team_change is None:
            object.__setattr__(self, "team_change", 5 * self.save_steps)
        for name in ("save_steps", "team_change", "swap_steps", "window"):
            value = getattr(self, name)
            check_field(is_int(value) and value >= 1, "self_play", name, "an int >= 1", value)
        for name in ("play_against_latest_model_ratio", "initial_elo"):
            value = getattr(self, name)
            check_field(isinstance(value, (int, float)) and not isinstance(value, bool)
                        and value == value and abs(value) != float("inf"), "self_play", name,
                        "a finite number", value)
        object.__setattr__(self, "play_against_latest_model_ratio",
                           float(self.play_against_latest_model_ratio))
        object.__setattr__(self, "initial_elo", float(self.initial_elo))


MEMORY_TRAINER_TYPES = ("ppo", "sac", "poca")
"""Trainer types that implement ``network_settings.memory`` (the others refuse it by name)."""


@dataclass(frozen=True)
class BehaviorConfig:
    """One ``behaviors.<name>`` section (ML-Agents' TrainerSettings)."""

    trainer_type: str = "ppo"
    """Learning algorithm: a name in ``unity_rl.algorithms.registry.TRAINER_TYPES``."""
    hyperparameters: Any = None
    """The trainer type's config dataclass (its ``SPEC.hyperparameters``; None: its defaults)."""
    network_settings: NetworkConfig = field(default_factory=NetworkConfig)
    """Network size and observation normalisation."""
    reward_signals: tuple[RewardSignalConfig, ...] = EXTRINSIC_ONLY
    """``reward_signals``: one entry per signal (name, gamma, strength, network_settings), in YAML
    order, which is the order of PPO's value heads (ML-Agents')."""
    max_steps: int = 500_000
    """Agent-steps to train for (all agents of the behavior together)."""
    time_horizon: int = 64
    """Agent-steps after which an agent's trajectory is cut and bootstrapped."""
    summary_freq: int = 50_000
    """Agent-steps between summaries (console line and TensorBoard scalars)."""
    checkpoint_interval: int = 500_000
    """Agent-steps between checkpoints."""
    keep_checkpoints: int = 5
    """Number of most recent checkpoints kept."""
    even_checkpoints: bool = False
    """Space checkpoints evenly: checkpoint_interval = max_steps // keep_checkpoints."""
    threaded: bool = False
    """ML-Agents: update the policy while the environment steps. Accepted either way: unity_rl's
    actors always step the builds in processes of their own (unity_rl.mode says how they wait)."""
    behavioral_cloning: BehavioralCloningConfig | None = None
    """``behavioral_cloning``: clone a demonstration beside RL (None: off; trainer types whose
    spec has ``behavioral_cloning``: PPO, SAC, POCA)."""
    self_play: SelfPlayConfig | None = None
    """``self_play``: train against snapshots of itself (ML-Agents' GhostTrainer); None: off."""

    def __post_init__(self) -> None:
        names = trainer_type_names()
        check_field(self.trainer_type in names, "behavior", "trainer_type",
                    " or ".join(repr(n) for n in names), self.trainer_type)
        expected = trainer_type(self.trainer_type).hyperparameters
        if self.hyperparameters is None:
            object.__setattr__(self, "hyperparameters", expected())
        if not isinstance(self.hyperparameters, expected):
            raise ValueError(f"behavior.hyperparameters must be a {expected.__name__} for "
                             f"trainer_type {self.trainer_type!r}, got {type(self.hyperparameters).__name__}")
        for name in ("max_steps", "time_horizon", "summary_freq", "checkpoint_interval",
                     "keep_checkpoints"):
            value = getattr(self, name)
            check_field(is_int(value) and value >= 1, "behavior", name, "an int >= 1", value)
        names = [getattr(signal, "name", None) for signal in self.reward_signals]
        known = reward_signal_names()
        check_field(isinstance(self.reward_signals, tuple) and names and len(set(names)) == len(names)
                    and all(isinstance(signal, RewardSignalConfig) and signal.name in known
                            for signal in self.reward_signals),
                    "behavior", "reward_signals",
                    f"a non-empty tuple of RewardSignalConfig with distinct names among {known}", names)
        hp = self.hyperparameters
        if self.self_play is not None:
            check_field(isinstance(self.self_play, SelfPlayConfig), "behavior", "self_play",
                        "a SelfPlayConfig", self.self_play)
            check_field(trainer_type(self.trainer_type).self_play, "behavior", "self_play",
                        f"null for trainer_type {self.trainer_type!r} (self-play wraps "
                        f"mlagents-learn's trainer types: "
                        f"{[n for n in trainer_type_names() if trainer_type(n).self_play]})", "a mapping")
        memory = self.network_settings.memory
        if memory is not None:
            if self.trainer_type not in MEMORY_TRAINER_TYPES:
                raise ValueError(f"memory is not supported for trainer_type {self.trainer_type} yet")
            batch_size = getattr(hp, "minibatch_size", getattr(hp, "batch_size", None))
            check_field(batch_size is None or memory.sequence_length <= batch_size, "behavior",
                        "network_settings", f"memory.sequence_length <= batch_size ({batch_size})",
                        memory.sequence_length)
        if self.behavioral_cloning is not None:
            with_bc = [t for t in trainer_type_names() if trainer_type(t).behavioral_cloning]
            check_field(isinstance(self.behavioral_cloning, BehavioralCloningConfig)
                        and self.trainer_type in with_bc, "behavior", "behavioral_cloning",
                        f"null for trainer_type {self.trainer_type!r} (behavioral cloning: "
                        f"{', '.join(with_bc)})", self.behavioral_cloning)
        if self.even_checkpoints:
            object.__setattr__(self, "checkpoint_interval", max(1, self.max_steps // self.keep_checkpoints))
        # max_steps is a behavior-level key in the YAML; the learner's config carries a copy where
        # it has the field (PPO's schedules).
        if hasattr(hp, "max_steps") and hp.max_steps != self.max_steps:
            object.__setattr__(self, "hyperparameters", dataclasses.replace(hp, max_steps=self.max_steps))
        hp = self.hyperparameters
        if hasattr(hp, "gamma"):
            # A one-discount learner (DDPG): its own gamma, the extrinsic reward alone, unscaled.
            check_field(names == ["extrinsic"] and self.reward_signals[0].strength == 1.0, "behavior",
                        "reward_signals", f"extrinsic alone with strength 1.0 for trainer_type "
                        f"{self.trainer_type!r} (it has one discount and no reward scaling)", names)
            if self.reward_signals[0].gamma != hp.gamma:
                object.__setattr__(self, "reward_signals",
                                   (dataclasses.replace(self.reward_signals[0], gamma=hp.gamma),))

    def signal(self, name: str) -> RewardSignalConfig | None:
        """The reward signal called ``name``, or None."""
        return next((s for s in self.reward_signals if s.name == name), None)

    @property
    def reward_strength(self) -> float:
        """reward_signals.extrinsic.strength (1.0 without an extrinsic signal)."""
        extrinsic = self.signal("extrinsic")
        return 1.0 if extrinsic is None else extrinsic.strength

    @property
    def gamma(self) -> float:
        """The extrinsic reward's discount (reward_signals.extrinsic.gamma; else the first signal's)."""
        return (self.signal("extrinsic") or self.reward_signals[0]).gamma


def known_quirk_fixes() -> set[str]:
    """Every ``unity_rl.fix_quirks`` name a registered trainer type knows."""
    return {name for t in trainer_type_names() for name in trainer_type(t).quirk_fixes}


def with_quirk_fixes(behavior: BehaviorConfig, fixes: tuple[str, ...]) -> BehaviorConfig:
    """``behavior`` with its trainer type's fields for the named quirks set to the fix."""
    table = trainer_type(behavior.trainer_type).quirk_fixes
    changes = dict(table[q] for q in fixes if q in table)
    if not changes:
        return behavior
    return dataclasses.replace(behavior, hyperparameters=dataclasses.replace(
        behavior.hyperparameters, **changes))


def with_demo_pairing(behavior: BehaviorConfig, pairing: str) -> BehaviorConfig:
    """``behavior`` with ``unity_rl.demo_pairing`` copied into the reward signals that read a
    demonstration (GAIL; behavioral cloning reads it from the run's config)."""
    signals = tuple(dataclasses.replace(s, demo_pairing=pairing)
                    if hasattr(s, "demo_pairing") else s for s in behavior.reward_signals)
    return dataclasses.replace(behavior, reward_signals=signals)
