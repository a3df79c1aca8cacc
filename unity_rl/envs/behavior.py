"""From a build's ``BehaviorSpec`` to gymnasium spaces and arrays, and behavior selection.

Conventions (documented in docs/adapter.md):
- one observation -> its ``Box``; several -> a ``Dict`` keyed by the sensor names
  (``obs_<i>`` where names are missing or repeat);
- visual observations (rank 3, channels-first as mlagents-envs 1.x delivers them) become uint8
  ``Box(0, 255, (C, H, W))``; vector observations stay float32;
- continuous actions -> ``Box(-1, 1)``; one discrete branch -> ``Discrete``; several ->
  ``MultiDiscrete``; both -> ``Dict(continuous=..., discrete=...)``;
- action masks are bool ``[n, sum(branches)]`` with True where the action is *allowed*
  (mlagents-envs reports the opposite; we flip it once here).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from gymnasium import spaces
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps


class BehaviorNotFoundError(ValueError):
    """The requested behavior is not in the build, or a choice is needed and none was made."""


def short_name(behavior: str) -> str:
    """'3DBall?team=0' -> '3DBall'."""
    return behavior.split("?", 1)[0]


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


def is_visual(shape: tuple[int, ...]) -> bool:
    return len(shape) == 3


def observation_keys(spec: BehaviorSpec) -> list[str]:
    names = [o.name or f"obs_{i}" for i, o in enumerate(spec.observation_specs)]
    if len(set(names)) != len(names):
        names = [f"obs_{i}" for i in range(len(names))]
    return names


def single_observation_space(spec: BehaviorSpec) -> spaces.Space:
    boxes = []
    for obs_spec in spec.observation_specs:
        shape = tuple(obs_spec.shape)
        if is_visual(shape):
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


def convert_obs(obs: list[np.ndarray]) -> list[np.ndarray]:
    """mlagents-envs arrays -> ours: visual float [0,1] becomes uint8, vectors stay float32."""
    return [np.rint(o * 255.0).astype(np.uint8) if o.ndim == 4 else o for o in obs]


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
        return ActionTuple(
            continuous=np.clip(np.asarray(actions["continuous"], np.float32), -1.0, 1.0),
            discrete=np.asarray(actions["discrete"], np.int32).reshape(
                -1, len(action_spec.discrete_branches)),
        )
    actions = np.asarray(actions)
    if action_spec.continuous_size:
        return ActionTuple(continuous=np.clip(actions.astype(np.float32, copy=False), -1.0, 1.0)
                           .reshape(-1, action_spec.continuous_size))
    return ActionTuple(discrete=actions.astype(np.int32, copy=False)
                       .reshape(-1, len(action_spec.discrete_branches)))
