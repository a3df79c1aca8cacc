"""Unit tests of spec -> spaces/arrays conversions (no builds)."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
)

from unity_rl.envs.behavior import convert_obs, single_observation_space, to_action_tuple

HYBRID = ActionSpec(3, (2, 4))


def test_hybrid_actions_as_one_float_array():
    rows = np.array([[0.5, -2.0, 0.1, 1.0, 3.0], [0.0, 0.0, 0.0, 0.0, 2.0]], np.float32)
    tup = to_action_tuple(rows, HYBRID)
    np.testing.assert_allclose(tup.continuous, [[0.5, -1.0, 0.1], [0, 0, 0]])
    assert tup.discrete.dtype == np.int32 and tup.discrete.tolist() == [[1, 3], [0, 2]]
    assert to_action_tuple(np.zeros((0, 5)), HYBRID).discrete.shape == (0, 2)
    as_dict = to_action_tuple({"continuous": rows[:, :3], "discrete": rows[:, 3:]}, HYBRID)
    np.testing.assert_array_equal(as_dict.discrete, tup.discrete)
    with pytest.raises(ValueError, match=r"\[n, 5\]"):
        to_action_tuple(np.zeros((2, 3)), HYBRID)


def _obs(shape, name):
    props = (DimensionProperty.NONE,) * len(shape)
    return ObservationSpec(shape, props, ObservationType.DEFAULT, name)


def test_only_png_observations_become_uint8():
    spec = BehaviorSpec([_obs((3, 4, 4), "Cam"), _obs((2, 4, 4), "Grid")], ActionSpec(1, ()))
    space = single_observation_space(spec, (True, False))
    assert space["Cam"] == spaces.Box(0, 255, (3, 4, 4), np.uint8)
    assert space["Grid"] == spaces.Box(-np.inf, np.inf, (2, 4, 4), np.float32)
    grid = np.linspace(-20, 12, 32, dtype=np.float32).reshape(1, 2, 4, 4)
    cam = np.full((1, 3, 4, 4), 0.5, np.float32)
    out_cam, out_grid = convert_obs([cam, grid], (True, False))
    assert out_cam.dtype == np.uint8 and out_cam.max() == 128
    assert out_grid is grid
