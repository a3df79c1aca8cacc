"""Visual3DBall: 3DBall observed only through a camera stacked 4 times (Unity's Visual3DBall).

Unity's prefab ``3DBall/Prefabs/Visual3DBall.prefab``: no vector observations (``useVecObs``
0), one CameraSensorComponent 84x84 RGB, 4 observation stacks, PNG. Python receives one
observation, ``StackingSensor_size4_CameraSensor``, shape (12, 84, 84): the last 4 frames,
oldest first, 3 channels each. On the wire it is what a StackingSensor sends: the 4 frames'
PNG bytes concatenated, compression PNG, ``compressed_channel_mapping`` 0..11; the stack is
cleared (all-black frames) at each episode reset.

The frame is ``VisualBall``'s cheap numpy drawing (top-down: platform shaded by its slope, the
ball drawn larger the higher it is, its shadow), not Unity's perspective view. Physics,
actions, rewards and episode rules are 3DBall's (``ball3d``); 8 agents, DecisionPeriod 5,
MaxStep 5000; ``mass``, ``scale``, ``gravity`` read at each episode start.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.stacking import PngStack, png_channel_mapping, stacked_name
from unity_rl.standin.scenes.visual_ball import IMAGE_SIZE, VisualBallModel, encode_png
from unity_rl.standin.wire import ObsSpec

STACKS = 4


def black_png(height: int = IMAGE_SIZE, width: int = IMAGE_SIZE) -> bytes:
    """An all-black RGB PNG (StackingSensor's empty compressed observation)."""
    return encode_png(np.zeros((height, width, 3), np.uint8))


class Visual3DBallModel(VisualBallModel):
    spec = BehaviorSpecDef(
        obs=(ObsSpec(stacked_name(STACKS, "CameraSensor"), (3 * STACKS, IMAGE_SIZE, IMAGE_SIZE),
                     png=True, dimension_properties=(1, 2, 2),
                     channel_mapping=png_channel_mapping(STACKS)),),
        continuous=2,
    )

    def __init__(self, n, rng, params, opts=None):
        self._frames = PngStack(n, STACKS, black_png())
        super().__init__(n, rng, params, opts)

    def reset(self, idx: np.ndarray) -> None:
        super().reset(idx)
        self._frames.clear(idx)

    def observe(self, idx: np.ndarray) -> list:
        return [self._frames.push(idx, [encode_png(image) for image in self.render(idx)])]
