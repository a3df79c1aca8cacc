"""Unity's StackingSensor, per agent: the last ``stacks`` observations of a sensor, oldest first.

What Unity does (``com.unity.ml-agents/Runtime/Sensors/StackingSensor.cs``), and so what these
classes do:

* the stacked sensor is named ``StackingSensor_size{stacks}_{inner name}``;
* every observation an agent *sends* (a decision request or a terminal info) pushes the inner
  sensor's current value; nothing is pushed at academy steps without a message for that agent;
* the stack is written oldest first, newest last: a vector of size n becomes stacks * n floats,
  a camera of C channels becomes stacks * C channels;
* at an agent's episode reset the stack is cleared: zeros for vectors, an all-black PNG of the
  inner shape for cameras, so the first observation of an episode is [0, ..., 0, first];
* a stacked camera travels as the concatenated PNG bytes of its stacks (oldest first), with
  ``compressed_channel_mapping`` [0, 1, ..., stacks * C - 1] for an RGB inner camera (what
  mlagents-envs uses to split it back into channels).

A scene model calls ``clear(idx)`` from ``reset`` and ``push(idx, values)`` from ``observe``
(the Academy calls ``observe`` exactly once per observation sent, before ``reset`` for a
terminal info).
"""
from __future__ import annotations

import numpy as np


def stacked_name(stacks: int, inner: str) -> str:
    return f"StackingSensor_size{stacks}_{inner}"


def png_channel_mapping(stacks: int, channels: int = 3) -> tuple[int, ...]:
    """StackingSensor.ConstructStackedCompressedChannelMapping for an inner camera of
    ``channels`` (3: RGB, no mapping of its own; 1: grayscale, PNG's 3 channels -> 1)."""
    if channels == 3:
        return tuple(range(3 * stacks))
    if channels == 1:
        return tuple(s for s in range(stacks) for _ in range(3))
    raise ValueError("cameras have 1 or 3 channels")


class VectorStack:
    """Stacks of a vector sensor of ``size`` floats for ``n`` agents."""

    def __init__(self, n: int, size: int, stacks: int):
        self.size, self.stacks = size, stacks
        self.buf = np.zeros((n, stacks, size), np.float32)
        """[agent, slot, value]: slot stacks-1 is the newest."""

    def clear(self, idx: np.ndarray) -> None:
        self.buf[idx] = 0.0

    def push(self, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Appends ``values`` [k, size]; returns the stacked observations [k, stacks * size]."""
        rows = self.buf[idx]
        rows[:, :-1] = rows[:, 1:]
        rows[:, -1] = values
        self.buf[idx] = rows
        return rows.reshape(len(idx), self.stacks * self.size)


class PngStack:
    """Stacks of a PNG camera for ``n`` agents: per agent the last ``stacks`` PNG byte strings."""

    def __init__(self, n: int, stacks: int, empty_png: bytes):
        self.stacks, self.empty = stacks, empty_png
        self.frames = [[empty_png] * stacks for _ in range(n)]

    def clear(self, idx: np.ndarray) -> None:
        for i in np.asarray(idx).tolist():
            self.frames[i] = [self.empty] * self.stacks

    def push(self, idx: np.ndarray, pngs: list[bytes]) -> list[bytes]:
        """Appends one PNG per agent; returns the concatenated stacks (oldest first)."""
        out = []
        for i, png in zip(np.asarray(idx).tolist(), pngs):
            frames = self.frames[i]
            del frames[0]
            frames.append(png)
            out.append(b"".join(frames))
        return out
