"""Side-channel messages from the trainer, decoded as a Unity player does.

The side-channel field of each input is a stream of ``[16-byte channel UUID (bytes_le) | int32
little-endian length | payload]`` records. A player understands:

* engine configuration (``e951342c-4f7e-11ea-b238-784f4387d1f7``): int32 type, then
  0 width+height (int32, int32), 1 quality level (int32), 2 time scale (float32),
  3 target frame rate (int32), 4 capture frame rate (int32);
* environment parameters (``534c891e-810f-11ea-a9d0-822485860400``): string key (int32 length +
  ASCII), int32 type, then 0 FLOAT: float32 value, or 1 SAMPLER: int32 seed, int32 sampler type,
  and 0 UNIFORM min, max / 1 GAUSSIAN mean, stddev / 2 MULTIRANGEUNIFORM float list (int32 count
  + float32 values, [min0, max0, min1, max1, ...]).

A parameter holding a sampler yields a fresh draw at each read (each episode start), like
Unity's ``EnvironmentParameters.GetWithDefault``. Other channels (training analytics, float
properties, unknown ones) are reported to the log and otherwise ignored.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Callable

import numpy as np

ENGINE_CONFIGURATION = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
ENVIRONMENT_PARAMETERS = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
TRAINING_ANALYTICS = uuid.UUID("b664a4a9-d86f-5a5f-95cb-e8353a7e8356")
FLOAT_PROPERTIES = uuid.UUID("60ccf7d0-4f7e-11ea-b238-784f4387d1f7")
STATS = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")

_KNOWN_IGNORED = {
    TRAINING_ANALYTICS: "training analytics",
    FLOAT_PROPERTIES: "float properties",
    STATS: "stats",
}


class SideChannelError(ValueError):
    """The side-channel stream or one of its messages is malformed."""


def split_messages(data: bytes) -> list[tuple[uuid.UUID, bytes]]:
    """Splits the side-channel stream into (channel id, payload) records."""
    out = []
    pos = 0
    while pos < len(data):
        if pos + 20 > len(data):
            raise SideChannelError(f"truncated side-channel header at byte {pos}")
        channel = uuid.UUID(bytes_le=bytes(data[pos : pos + 16]))
        (length,) = struct.unpack_from("<i", data, pos + 16)
        pos += 20
        if length < 0 or pos + length > len(data):
            raise SideChannelError(f"side-channel message for {channel} is short")
        out.append((channel, bytes(data[pos : pos + length])))
        pos += length
    return out


class _Reader:
    """Reads values in the order IncomingMessage writes them."""

    def __init__(self, payload: bytes):
        self.buf = payload
        self.pos = 0

    def _take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise SideChannelError("side-channel message ended early")
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def int32(self) -> int:
        return self._take("<i")

    def float32(self) -> float:
        return self._take("<f")

    def string(self) -> str:
        n = self.int32()
        if n < 0 or self.pos + n > len(self.buf):
            raise SideChannelError("side-channel string ended early")
        s = self.buf[self.pos : self.pos + n].decode("ascii")
        self.pos += n
        return s

    def float32_list(self) -> list[float]:
        return [self.float32() for _ in range(self.int32())]


@dataclass
class EngineConfig:
    """Engine settings sent by the trainer; None where never set."""

    width: int | None = None
    height: int | None = None
    quality_level: int | None = None
    time_scale: float = 1.0
    target_frame_rate: int | None = None
    capture_frame_rate: int | None = None

    def apply(self, payload: bytes) -> str:
        """Applies one message; returns a description for the log."""
        r = _Reader(payload)
        kind = r.int32()
        if kind == 0:
            self.width, self.height = r.int32(), r.int32()
            return f"screen resolution {self.width}x{self.height}"
        if kind == 1:
            self.quality_level = r.int32()
            return f"quality level {self.quality_level}"
        if kind == 2:
            self.time_scale = r.float32()
            return f"time scale {self.time_scale:g}"
        if kind == 3:
            self.target_frame_rate = r.int32()
            return f"target frame rate {self.target_frame_rate}"
        if kind == 4:
            self.capture_frame_rate = r.int32()
            return f"capture frame rate {self.capture_frame_rate}"
        raise SideChannelError(f"unknown engine configuration type {kind}")


class _Sampler:
    def __init__(
        self, seed: int, draw: Callable[[np.random.Generator, int], np.ndarray], text: str
    ):
        self.rng = np.random.default_rng(seed & 0xFFFFFFFF)
        self.draw = draw
        self.text = text

    def sample(self, k: int) -> np.ndarray:
        return self.draw(self.rng, k)


def _multirange(intervals: list[float]) -> Callable[[np.random.Generator, int], np.ndarray]:
    if len(intervals) < 2 or len(intervals) % 2:
        raise SideChannelError("multi-range uniform sampler needs [min, max] pairs")
    lo = np.asarray(intervals[0::2], dtype=np.float64)
    hi = np.asarray(intervals[1::2], dtype=np.float64)
    widths = np.maximum(hi - lo, 0.0)
    total = float(widths.sum())

    def draw(rng: np.random.Generator, k: int) -> np.ndarray:
        # Uniform over the union of the ranges: pick a range in proportion to its width.
        if total <= 0.0:
            return lo[rng.integers(0, len(lo), size=k)]
        u = rng.uniform(0.0, total, size=k)
        edges = np.cumsum(widths)
        which = np.minimum(np.searchsorted(edges, u, side="right"), len(lo) - 1)
        return lo[which] + (u - (edges[which] - widths[which]))

    return draw


class EnvironmentParameters:
    """Float values and samplers by key, as set through the environment-parameters channel."""

    def __init__(self) -> None:
        self._values: dict[str, float | _Sampler] = {}

    def apply(self, payload: bytes) -> str:
        r = _Reader(payload)
        key = r.string()
        kind = r.int32()
        if kind == 0:
            value = r.float32()
            self._values[key] = value
            return f"{key} = {value:g}"
        if kind != 1:
            raise SideChannelError(f"unknown environment parameter type {kind} for {key!r}")
        seed = r.int32()
        sampler = r.int32()
        if sampler == 0:
            lo, hi = r.float32(), r.float32()
            draw = lambda rng, k: rng.uniform(lo, hi, size=k)  # noqa: E731
            text = f"uniform({lo:g}, {hi:g})"
        elif sampler == 1:
            mean, std = r.float32(), r.float32()
            draw = lambda rng, k: rng.normal(mean, std, size=k)  # noqa: E731
            text = f"gaussian({mean:g}, {std:g})"
        elif sampler == 2:
            intervals = r.float32_list()
            draw = _multirange(intervals)
            text = f"multirange_uniform({intervals})"
        else:
            raise SideChannelError(f"unknown sampler type {sampler} for {key!r}")
        self._values[key] = _Sampler(seed, draw, text)
        return f"{key} ~ {text}, seed {seed}"

    def sample(self, key: str, default: float, k: int) -> np.ndarray:
        """k values of ``key`` (float64), one per agent starting an episode."""
        value = self._values.get(key)
        if value is None:
            return np.full(k, default, dtype=np.float64)
        if isinstance(value, _Sampler):
            return value.sample(k).astype(np.float64)
        return np.full(k, value, dtype=np.float64)

    def get(self, key: str, default: float) -> float:
        return float(self.sample(key, default, 1)[0])

    def __contains__(self, key: str) -> bool:
        return key in self._values


class SideChannelReceiver:
    """Dispatches the side-channel stream of each input to the engine config and parameters."""

    def __init__(self, log: Callable[[str], None]):
        self.engine = EngineConfig()
        self.parameters = EnvironmentParameters()
        self._log = log
        self.progress: Callable[[], str] | None = None
        """Where the build stands (the player sets it: academy steps, decisions sent per
        behavior); logged after a batch of environment parameters, so a benchmark can read at
        which agent-step each lesson reached the build."""

    def process(self, data: bytes) -> None:
        if not data:
            return
        try:
            messages = split_messages(data)
        except SideChannelError as err:
            self._log(f"side channel: malformed stream ignored ({err})")
            return
        parameters = False
        for channel, payload in messages:
            try:
                if channel == ENGINE_CONFIGURATION:
                    self._log(f"engine configuration: {self.engine.apply(payload)}")
                elif channel == ENVIRONMENT_PARAMETERS:
                    self._log(f"environment parameter: {self.parameters.apply(payload)}")
                    parameters = True
                elif channel in _KNOWN_IGNORED:
                    self._log(
                        f"side channel: {_KNOWN_IGNORED[channel]} message ignored "
                        f"({len(payload)} bytes)"
                    )
                else:
                    self._log(
                        f"side channel: unknown channel {channel} ignored ({len(payload)} bytes)"
                    )
            except (SideChannelError, UnicodeDecodeError) as err:
                self._log(f"side channel: malformed message on {channel} ignored ({err})")
        if parameters and self.progress is not None:
            self._log(f"environment parameters received at: {self.progress()}")
