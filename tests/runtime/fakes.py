"""An in-process stand-in for ``AgentStream`` (same API, no builds) for fast runtime tests.

A "balance" toy: each agent's observation drifts; an episode ends when |obs[0]| > 1 (reward
-1, terminated) or after ``max_step`` decisions (interrupted); every other decision pays 0.1.
Optionally raises after ``crash_after`` steps (to test actor failures), fails to start
(``start_error``), sleeps in every step (``step_delay``) or appends a line per step to the file
``step_log`` (to see from outside whether an actor, in whatever process, is stepping). It takes
environment parameters as ``AgentStream`` does and appends each change, with the pid of the
process it lives in, to ``param_log`` (one JSON object a line).

``FakeBandit`` is a discrete behavior (reward 1 for the action the observation points at), and
``FakeMultiStream`` puts several fakes side by side as one multi-behavior stream.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
)

from unity_rl.envs.agent_stream import StepResult
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch

BEHAVIOR = "Fake?team=0"
BANDIT = "Bandit?team=0"


class _SingleBehavior:
    """The multi-behavior API of ``AgentStream`` for a fake with one behavior."""

    @property
    def behavior_names(self) -> list[str]:
        return [self.behavior_name]

    @property
    def specs(self) -> dict:
        return {self.behavior_name: self.spec}

    def reset_all(self) -> dict:
        return {self.behavior_name: self.reset()}

    def step_all(self, actions) -> dict:
        return {self.behavior_name: self.step(actions[self.behavior_name])}


class FakeStream(_SingleBehavior):
    def __init__(self, num_agents: int = 4, obs_dim: int = 3, act_dim: int = 2,
                 max_step: int = 30, crash_after: int | None = None, seed: int = 0,
                 step_delay: float = 0.0, build: int = 0, start_error: str | None = None,
                 behavior: str = BEHAVIOR, step_log: str | None = None,
                 param_log: str | None = None):
        if start_error is not None:
            raise RuntimeError(start_error)
        self.spec = BehaviorSpec(
            [ObservationSpec((obs_dim,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "v")],
            ActionSpec.create_continuous(act_dim))
        self.behavior_name = behavior
        self.keys = [AgentKey(build, behavior, i) for i in range(num_agents)]
        self.rng = np.random.default_rng(seed)
        self.obs = self.rng.uniform(-0.5, 0.5, (num_agents, obs_dim)).astype(np.float32)
        self.t = np.zeros(num_agents, int)
        self.max_step = max_step
        self.crash_after = crash_after
        self.step_delay = step_delay
        self.step_log = step_log
        self.param_log = param_log
        self.parameters: dict[str, float] = {}
        self.steps = 0
        self.closed = False

    def set_environment_parameters(self, parameters) -> None:
        self.parameters.update(parameters)
        if self.param_log is not None:
            with open(self.param_log, "a") as log:
                log.write(json.dumps({"pid": os.getpid(), "set": dict(parameters)}) + "\n")

    def _empty_terminals(self) -> TerminalBatch:
        return TerminalBatch([], [np.zeros((0, self.obs.shape[1]), np.float32)],
                             np.zeros(0, np.float32), np.zeros(0, bool))

    def reset(self) -> StepResult:
        dec = DecisionBatch(list(self.keys), [self.obs.copy()],
                            np.zeros(len(self.keys), np.float32), None)
        return StepResult(dec, self._empty_terminals(), {})

    def step(self, actions) -> StepResult:
        self.steps += 1
        if self.crash_after is not None and self.steps > self.crash_after:
            raise RuntimeError(f"fake build crashed at step {self.steps}")
        if self.step_delay:
            time.sleep(self.step_delay)
        if self.step_log is not None:
            with open(self.step_log, "a") as log:
                log.write(f"{self.steps}\n")
        actions = np.clip(np.asarray(actions, np.float32), -1, 1)
        n = len(self.keys)
        self.obs[:, 0] += 0.1 * (self.rng.normal(size=n) - actions[:, 0]) + 0.05 * self.obs[:, 0]
        self.t += 1
        fell = np.abs(self.obs[:, 0]) > 1.0
        timeout = (self.t >= self.max_step) & ~fell
        ended = fell | timeout
        term_idx = np.flatnonzero(ended)
        terminals = TerminalBatch(
            [self.keys[i] for i in term_idx], [self.obs[term_idx].copy()],
            np.where(fell[term_idx], -1.0, 0.1).astype(np.float32), timeout[term_idx].copy())
        reward = np.full(n, 0.1, np.float32)
        if len(term_idx):
            self.obs[term_idx] = self.rng.uniform(-0.5, 0.5, (len(term_idx), self.obs.shape[1]))
            self.t[term_idx] = 0
            reward[term_idx] = 0.0
        dec = DecisionBatch(list(self.keys), [self.obs.copy()], reward, None)
        return StepResult(dec, terminals, {})

    def close(self) -> None:
        self.closed = True


class FakeBandit(_SingleBehavior):
    """Discrete: one branch of ``arms``; the observation is a one-hot arm, reward 1 for it
    (else 0); every decision ends the episode (terminated). A learner should reach ~1."""

    def __init__(self, num_agents: int = 2, arms: int = 3, seed: int = 0, build: int = 0,
                 behavior: str = BANDIT):
        self.spec = BehaviorSpec(
            [ObservationSpec((arms,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "v")],
            ActionSpec.create_discrete((arms,)))
        self.behavior_name = behavior
        self.arms = arms
        self.keys = [AgentKey(build, behavior, i) for i in range(num_agents)]
        self.rng = np.random.default_rng(seed)
        self.target = self.rng.integers(arms, size=num_agents)
        self.closed = False

    def _obs(self) -> np.ndarray:
        return np.eye(self.arms, dtype=np.float32)[self.target]

    def reset(self) -> StepResult:
        n = len(self.keys)
        dec = DecisionBatch(list(self.keys), [self._obs()], np.zeros(n, np.float32),
                            np.ones((n, self.arms), bool))
        empty = TerminalBatch([], [np.zeros((0, self.arms), np.float32)], np.zeros(0, np.float32),
                              np.zeros(0, bool))
        return StepResult(dec, empty, {})

    def step(self, actions) -> StepResult:
        actions = np.asarray(actions).reshape(len(self.keys), -1)[:, 0]
        reward = (actions == self.target).astype(np.float32)
        terminals = TerminalBatch(list(self.keys), [self._obs()], reward,
                                  np.zeros(len(self.keys), bool))
        self.target = self.rng.integers(self.arms, size=len(self.keys))
        n = len(self.keys)
        dec = DecisionBatch(list(self.keys), [self._obs()], np.zeros(n, np.float32),
                            np.ones((n, self.arms), bool))
        return StepResult(dec, terminals, {})

    def close(self) -> None:
        self.closed = True


class FakeMultiStream:
    """Several single-behavior fakes as one multi-behavior stream (``AgentStream``'s API)."""

    def __init__(self, *parts):
        self.parts = {p.behavior_name: p for p in parts}
        self.closed = False

    @property
    def behavior_names(self) -> list[str]:
        return sorted(self.parts)

    @property
    def specs(self) -> dict:
        return {name: p.spec for name, p in self.parts.items()}

    def reset_all(self) -> dict:
        return {name: p.reset() for name, p in self.parts.items()}

    def step_all(self, actions) -> dict:
        return {name: p.step(actions[name]) for name, p in self.parts.items()}

    def close(self) -> None:
        for p in self.parts.values():
            p.close()
        self.closed = True


def two_behaviors(seed: int = 0, build: int = 0) -> FakeMultiStream:
    """A continuous ``FakeStream`` and a discrete ``FakeBandit`` side by side (picklable)."""
    return FakeMultiStream(FakeStream(seed=seed, build=build), FakeBandit(seed=seed, build=build))
