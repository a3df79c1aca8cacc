"""A scripted stand-in for ``BuildSet``: unit tests of the adapter's bookkeeping, no processes.

Each build answers from a script: a list of messages, each message a list of
``(agent_id, kind, reward, interrupted)`` where kind is "decision" or "terminal".  Observations
encode (agent_id, message index) so tests can tell which message a slot's observation came from.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)

from unity_rl.envs.build_set import BuildOutput

BEHAVIOR = "Fake?team=0"
SPEC = BehaviorSpec(
    [ObservationSpec((2,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "VectorSensor")],
    ActionSpec(1, ()),
)


def obs_of(agent_id: int, message: int) -> np.ndarray:
    return np.array([agent_id, message], np.float32)


def make_output(build: int, message: int, rows, restarted=None) -> BuildOutput:
    dec = [r for r in rows if r[1] == "decision"]
    term = [r for r in rows if r[1] == "terminal"]

    def obs(rs):
        return [np.array([obs_of(r[0], message) for r in rs], np.float32).reshape(-1, 2)]

    decision_steps = DecisionSteps(
        obs(dec), np.array([r[2] for r in dec], np.float32),
        np.array([r[0] for r in dec], np.int32), None, np.zeros(len(dec), np.int32),
        np.zeros(len(dec), np.float32))
    terminal_steps = TerminalSteps(
        obs(term), np.array([r[2] for r in term], np.float32),
        np.array([r[3] for r in term], bool), np.array([r[0] for r in term], np.int32),
        np.zeros(len(term), np.int32), np.zeros(len(term), np.float32))
    return BuildOutput(build, {BEHAVIOR: (decision_steps, terminal_steps)}, restarted)


class ScriptedBuilds:
    """``BuildSet`` API over scripted answers; records the actions it was sent."""

    def __init__(self, first: list[list[int]], scripts: list[list[list[tuple]]],
                 restarts: dict[tuple[int, int], str] | None = None):
        self.num_builds = len(first)
        self.seed = 0
        self.settings = SimpleNamespace(env_path="fake")
        self.behavior_specs = {BEHAVIOR: SPEC}
        self.png_observations = {BEHAVIOR: (False,)}
        self._first = first
        self._scripts = [list(s) for s in scripts]
        self._restarts = restarts or {}
        self._count = [0] * self.num_builds
        self.sent: list[tuple[int, dict]] = []
        self.closed = False

    def reset(self):
        return [make_output(b, 0, [(i, "decision", 0.0, False) for i in ids])
                for b, ids in enumerate(self._first)]

    def send_step(self, b, actions):
        self.sent.append((b, actions))

    def receive(self, builds):
        for b in builds:
            self._count[b] += 1
            rows = self._scripts[b].pop(0)
            yield make_output(b, self._count[b], rows, self._restarts.get((b, self._count[b])))

    def close(self):
        self.closed = True
