"""VisualBall: 3DBall seen through a camera (in the spirit of Unity's Visual3DBall).

Same physics, actions, rewards and episode rules as ``ball3d``. Observations, in the order a
build sends them (Unity sorts sensors by name):

0. ``CameraSensor``: an 84x84 RGB top-down view rendered with numpy — the platform shaded by
   its slope, the ball (drawn larger the higher it is) and its shadow — sent as a real build
   sends camera observations: PNG bytes in ``compressed_data``, compression type PNG, shape
   [3, 84, 84] (channels first; what mlagents-envs 1.x decodes to), dimension properties
   (NONE, TRANSLATIONAL_EQUIVARIANCE, TRANSLATIONAL_EQUIVARIANCE).
1. ``VectorSensor_size2``: the platform rotation quaternion's z and x components.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from unity_rl.standin.scenes.ball3d import Ball3DModel
from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.wire import ObsSpec

IMAGE_SIZE = 84
VIEW_EXTENT = 3.5
"""Half the side of the square of the world the camera sees, centred on the platform."""

_BACKGROUND = np.array([25.0, 30.0, 60.0], dtype=np.float32)
_PLATE = np.array([0.55, 0.75, 1.0], dtype=np.float32)
_BALL = np.array([240.0, 140.0, 40.0], dtype=np.float32)
_BACKGROUND_U8 = _BACKGROUND.astype(np.uint8)
_PLATE_PALETTE = (np.arange(256, dtype=np.float32)[:, None] * _PLATE).astype(np.uint8)
"""Colour of the platform for each brightness level 0..255."""


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of an [H, W, 3] uint8 image: 8-bit RGB, filter type 0 on every row, zlib
    level 1 (camera sensors need speed). Written directly (signature, IHDR, one IDAT, IEND):
    about 10x faster than Pillow's encoder on 40x40..84x84 images, and any decoder reads it."""
    height, width, channels = image.shape
    if channels != 3:
        raise ValueError(f"encode_png expects [H, W, 3], got {image.shape}")
    rows = np.zeros((height, 1 + 3 * width), np.uint8)  # a 0 byte (no filter) starts each row
    rows[:, 1:] = np.asarray(image, np.uint8).reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (_PNG_SIGNATURE + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + _png_chunk(b"IEND", b""))


class VisualBallModel(Ball3DModel):
    spec = BehaviorSpecDef(
        obs=(
            ObsSpec(
                "CameraSensor",
                (3, IMAGE_SIZE, IMAGE_SIZE),
                png=True,
                dimension_properties=(1, 2, 2),
            ),
            ObsSpec("VectorSensor_size2", (2,), dimension_properties=(1,)),
        ),
        continuous=2,
    )

    def __init__(self, n, rng, params, opts=None):
        super().__init__(n, rng, params, opts)
        centres = (np.arange(IMAGE_SIZE) + 0.5) / IMAGE_SIZE * 2 * VIEW_EXTENT - VIEW_EXTENT
        self._x = centres[None, None, :].astype(np.float32)  # columns: world x, left to right
        self._z = -centres[None, :, None].astype(np.float32)  # rows: world z, top is +z
        half = self.HALF_EXTENT
        self._plate = ((np.abs(self._x) <= half) & (np.abs(self._z) <= half))[0]
        """[84, 84] bool: pixels that show the platform."""

    def render(self, idx: np.ndarray) -> np.ndarray:
        """Camera images [k, 84, 84, 3] uint8 of the given agents."""
        slope = np.tan(self.tilt[idx]).astype(np.float32)
        tz, tx = slope[:, 0, None, None], slope[:, 1, None, None]
        hpos = self.hpos[idx].astype(np.float32)
        bx, bz = hpos[:, 0, None, None], hpos[:, 1, None, None]
        by = self.y[idx].astype(np.float32)[:, None, None]
        r = self.radius[idx].astype(np.float32)[:, None, None]
        # Platform: brightness from the surface height under each pixel, through a palette.
        shade = 150.0 + 70.0 * (tz * self._x - tx * self._z)
        d2 = (self._x - bx) ** 2 + (self._z - bz) ** 2
        shade = np.where((d2 <= r * r) & (by > 0.0), shade * 0.55, shade)  # the ball's shadow
        img = _PLATE_PALETTE[np.clip(shade, 40.0, 255.0).astype(np.uint8)]
        img[:, ~self._plate] = _BACKGROUND_U8
        # Ball: a shaded disc, drawn larger the higher it is above the platform.
        apparent = r * (1.0 + 0.12 * np.clip(by - self.PLATFORM_TOP - r, 0.0, 8.0))
        ball = d2 <= apparent * apparent
        if ball.any():
            edge = np.broadcast_to(apparent, d2.shape)[ball]
            light = 1.0 - 0.45 * np.sqrt(d2[ball]) / np.maximum(edge, 1e-3)
            img[ball] = (light[:, None] * _BALL).astype(np.uint8)
        return img

    def observe(self, idx: np.ndarray) -> list:
        images = [encode_png(image) for image in self.render(idx)]
        vector = super().observe(idx)[0][:, :2]
        return [images, np.ascontiguousarray(vector)]
