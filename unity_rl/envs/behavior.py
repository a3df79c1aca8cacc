"""From a build's ``BehaviorSpec`` to gymnasium spaces and arrays, and behavior selection.

Conventions (documented in docs/adapter.md):
- one observation -> its ``Box``; several -> a ``Dict`` keyed by the sensor names
  (``obs_<i>`` where names are missing or repeat);
- observations the build sent PNG-compressed (cameras; channels-first as mlagents-envs 1.x
  decodes them) become uint8 ``Box(0, 255, (C, H, W))`` holding round(x * 255); every other
  observation, uncompressed 3-D float grids included, stays float32 exactly as sent, in
  ``Box(-inf, inf)``. Which ones were PNG is learned from the messages by the communicator
  (``BuildSet.png_observations``);
- continuous actions -> ``Box(-1, 1)``; one discrete branch -> ``Discrete``; several ->
  ``MultiDiscrete``; both -> ``Dict(continuous=..., discrete=...)``;
- hybrid actions are either ``{"continuous": [n, C], "discrete": [n, B]}`` or one float array
  ``[n, C + B]`` (C continuous values, then B branch indices as floats);
- behaviors: ``select_behaviors`` resolves short/full names or ``ALL_BEHAVIORS``;
  ``OtherBehaviors`` enforces what happens to agents of behaviors that were not selected
  (``"error"``: a clear error when they request decisions; ``"zeros"``: zero actions, logged
  once);
- action masks are bool ``[n, sum(branches)]`` with True where the action is *allowed*
  (mlagents-envs reports the opposite; we flip it once here).
"""
from __future__ import annotations

import logging
from typing import Literal, Mapping, Sequence

import numpy as np
from gymnasium import spaces
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps

from unity_rl.envs.types import short_name  # noqa: F401  (re-exported)
from unity_rl.errors import UserError


logger = logging.getLogger(__name__)

ALL_BEHAVIORS = "*"
"""``behaviors=ALL_BEHAVIORS`` selects every behavior the builds report at reset."""

OtherBehaviorsMode = Literal["error", "zeros"]


class BehaviorNotFoundError(UserError, ValueError):
    """The requested behavior is not in the build, or a choice is needed and none was made."""


class UnselectedBehaviorError(UserError, RuntimeError):
    """Agents of a behavior that was not selected request decisions (``other_behaviors="error"``)."""


def select_behavior(specs: Mapping[str, BehaviorSpec], wanted: str | None, env_path: str) -> str:
    """The full behavior name to use; ``wanted`` may omit the '?team=..' suffix."""
    names = sorted(specs)
    if not names:
        raise BehaviorNotFoundError(
            f"The build '{env_path}' reported no behavior after reset: no agent requested a "
            f"decision. Check that its agents have Behavior Type 'Default'."
        )
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise BehaviorNotFoundError(
            f"The build '{env_path}' has several behaviors {names}: pass behavior_name= "
            f"(or --behavior) with one of them."
        )
    matches = [n for n in names if wanted in (n, short_name(n))]
    if len(matches) != 1:
        raise BehaviorNotFoundError(
            f"Behavior '{wanted}' is not in the build '{env_path}'; its behaviors are {names}."
        )
    return matches[0]


def select_behaviors(specs: Mapping[str, BehaviorSpec], wanted: str | Sequence[str],
                     env_path: str) -> list[str]:
    """Full names, sorted, for ``wanted`` (short or full names, or ``ALL_BEHAVIORS``)."""
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    if not wanted:
        raise BehaviorNotFoundError("behaviors= is empty: name at least one behavior, or "
                                    f"pass behaviors=ALL_BEHAVIORS ('{ALL_BEHAVIORS}').")
    if ALL_BEHAVIORS in wanted:
        if not specs:
            select_behavior(specs, None, env_path)  # raises the "no behavior" error
        return sorted(specs)
    return sorted({select_behavior(specs, name, env_path) for name in wanted})


class OtherBehaviors:
    """What to do with agents of behaviors that are not selected; see the module docstring."""

    def __init__(self, mode: OtherBehaviorsMode, selected: Sequence[str], hint: str):
        if mode not in ("error", "zeros"):
            raise ValueError(f"other_behaviors must be 'error' or 'zeros', got {mode!r}")
        self.mode, self.selected, self.hint = mode, list(selected), hint
        self._logged: set[str] = set()

    def check(self, build: int, steps: Mapping[str, tuple[DecisionSteps, object]]) -> None:
        """Raises (mode "error") or logs once (mode "zeros") for unselected deciding agents."""
        for name, (decisions, _) in steps.items():
            if name in self.selected or len(decisions) == 0:
                continue
            if self.mode == "error":
                raise UnselectedBehaviorError(
                    f"Behavior '{name}' of build {build} requests decisions for "
                    f"{len(decisions)} agent(s), but it is not selected (selected: "
                    f"{self.selected}); its agents would get no actions. {self.hint}, or pass "
                    f"other_behaviors='zeros' to send them zero actions.")
            if name not in self._logged:
                self._logged.add(name)
                logger.info("behavior '%s' is not selected: its agents get zero actions "
                            "(other_behaviors='zeros')", name)


def is_visual(shape: tuple[int, ...]) -> bool:
    return len(shape) == 3


def observation_keys(spec: BehaviorSpec) -> list[str]:
    names = [o.name or f"obs_{i}" for i, o in enumerate(spec.observation_specs)]
    if len(set(names)) != len(names):
        names = [f"obs_{i}" for i in range(len(names))]
    return names


def single_observation_space(spec: BehaviorSpec,
                             png: Sequence[bool] | None = None) -> spaces.Space:
    """``png[i]``: observation i is PNG-compressed (uint8 Box); None means none is."""
    png = tuple(png) if png is not None else (False,) * len(spec.observation_specs)
    boxes = []
    for obs_spec, compressed in zip(spec.observation_specs, png):
        shape = tuple(obs_spec.shape)
        if compressed:
            boxes.append(spaces.Box(0, 255, shape, np.uint8))
        else:
            boxes.append(spaces.Box(-np.inf, np.inf, shape, np.float32))
    if len(boxes) == 1:
        return boxes[0]
    return spaces.Dict(dict(zip(observation_keys(spec), boxes)))


def single_action_space(action_spec: ActionSpec) -> spaces.Space:
    continuous = (spaces.Box(-1.0, 1.0, (action_spec.continuous_size,), np.float32)
                  if action_spec.continuous_size else None)
    discrete = None
    branches = tuple(action_spec.discrete_branches)
    if len(branches) == 1:
        discrete = spaces.Discrete(branches[0])
    elif branches:
        discrete = spaces.MultiDiscrete(np.array(branches, dtype=np.int64))
    if continuous is not None and discrete is not None:
        return spaces.Dict({"continuous": continuous, "discrete": discrete})
    return continuous if continuous is not None else discrete


def obs_dtype(png: bool) -> type:
    return np.uint8 if png else np.float32


def convert_obs(obs: list[np.ndarray], png: Sequence[bool]) -> list[np.ndarray]:
    """mlagents-envs arrays -> ours: PNG ones (decoded to [0, 1]) become uint8 round(x*255);
    the others are returned unchanged (float32 as sent)."""
    return [np.rint(o * 255.0).astype(np.uint8) if compressed else o
            for o, compressed in zip(obs, png)]


def allowed_mask(steps: DecisionSteps, action_spec: ActionSpec) -> np.ndarray | None:
    """[n, sum(branches)] bool, True where allowed; None for continuous-only behaviors."""
    if not action_spec.discrete_branches:
        return None
    n = len(steps)
    if steps.action_mask is None:
        return np.ones((n, sum(action_spec.discrete_branches)), dtype=bool)
    return ~np.concatenate(steps.action_mask, axis=1)


def to_action_tuple(actions, action_spec: ActionSpec) -> ActionTuple:
    """Our action array(s) for n agents -> mlagents' ActionTuple (continuous clipped to ±1)."""
    if isinstance(actions, ActionTuple):
        return actions
    if isinstance(actions, Mapping):
        c, b = action_spec.continuous_size, len(action_spec.discrete_branches)
        continuous = np.asarray(actions.get("continuous", np.zeros((0, c))), np.float32)
        discrete = np.asarray(actions.get("discrete", np.zeros((0, b))), np.int32)
        n = max(len(continuous), len(discrete))  # a missing or empty part: zero columns
        return ActionTuple(
            continuous=np.clip(continuous, -1.0, 1.0).reshape(n, c),
            discrete=discrete.reshape(n, b),
        )
    actions = np.asarray(actions)
    if action_spec.continuous_size and action_spec.discrete_branches:
        return _hybrid_from_array(actions, action_spec)
    if action_spec.continuous_size:
        return ActionTuple(continuous=np.clip(actions.astype(np.float32, copy=False), -1.0, 1.0)
                           .reshape(-1, action_spec.continuous_size))
    return ActionTuple(discrete=actions.astype(np.int32, copy=False)
                       .reshape(-1, len(action_spec.discrete_branches)))


def _hybrid_from_array(actions: np.ndarray, action_spec: ActionSpec) -> ActionTuple:
    """[n, C + B] floats: C continuous values, then B branch indices."""
    c, b = action_spec.continuous_size, len(action_spec.discrete_branches)
    rows = actions.reshape(0, c + b) if actions.size == 0 else actions
    if rows.ndim != 2 or rows.shape[1] != c + b:
        raise ValueError(
            f"hybrid actions must be {{'continuous': [n, {c}], 'discrete': [n, {b}]}} or one "
            f"float array [n, {c + b}] ({c} continuous values, then {b} branch indices); "
            f"got shape {actions.shape}")
    return ActionTuple(
        continuous=np.clip(rows[:, :c].astype(np.float32), -1.0, 1.0),
        discrete=np.rint(rows[:, c:]).astype(np.int32),
    )
