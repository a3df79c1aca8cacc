"""Observation encoders: ML-Agents 1.1.0's visual encoders and the per-observation splitter.

Contract:
- Observations travel as one flat float32 row per agent: every observation of the BehaviorSpec
  flattened (C-order) and concatenated in spec order (``runtime/collector.flat_obs``).  Networks
  get the observation *shapes* and split the row back with ``ObservationLayout``.
- Rank-1 observations are vectors: they pass through unchanged (normalised numpy-side first
  when ``network_settings.normalize``; see ``ObservationLayout.normalize``).  Rank-3
  observations are images or grids, channels-first (C, H, W) as mlagents-envs 1.1.0 reports
  them; each goes through its own visual encoder chosen by ``vis_encode_type``; images are never
  normalised.  Rank-2 observations [max_entities, entity_size] are variable-length (buffer
  sensor) observations, padded with zero rows: ML-Agents' attention path (``attention.py``), never
  normalised (as ML-Agents: only ``VectorInput`` normalises).
- Visual encoders map NCHW float [n, C, H, W] -> [n, h_size] and mirror the layer structure of
  ML-Agents' ``torch_entities/encoders.py`` (``simple``, ``nature_cnn``, ``resnet``, ``match3``,
  ``fully_connected``), with its minimum resolutions (``MIN_RESOLUTION``) and its
  initialisation of the dense layer (Kaiming normal, linear gain, times 1.41, zero bias).
- ``ObservationEncoder`` outputs the encodings concatenated in observation order (as
  ML-Agents' ``ObservationEncoder``); ``output_size`` is their total width. With buffer sensors
  (ML-Agents' ``ObservationEncoder.forward``): each gets an ``EntityEmbedding(size, max, 128)``;
  when other observations exist their concatenated encoding x goes through ``x_self_encoder``
  (Linear(width -> 128) + Swish) and every entity is embedded as ``[x_self, entity]``; the
  embeddings of all buffer sensors (in observation order) go through one
  ``ResidualSelfAttention(128, Σ max)`` with the zero rows masked (``get_zero_entities_mask``),
  and its masked mean-pool (128 wide) is appended after the other encodings. Off export, entity
  columns that are padding in every row of the batch are dropped first (``trim_padding``: the
  same pooled vector; Sorter's first lessons fill 1 or 2 of 20 rows). Parameters register
  in ML-Agents' order (per-observation encoders in observation order, ``rsa``,
  ``x_self_encoder``), so ML-Agents' encoder parameters map on by position. A buffer sensor
  cannot be a goal observation (ML-Agents refuses it too). Given the indices of
  the goal (GOAL_SIGNAL) observations, ``encode`` also returns the goal encoding: those
  observations' encodings concatenated (a vector goal as it is), ML-Agents' ``get_goal_encoding``;
  ``goal_size`` is its width.

Size (about 420 lines): the five encoders, the row layout and the splitter are one contract
(how a flat row becomes encodings, which ML-Agents' parameter order relies on); the attention
parts already live in ``attention.py`` and goal conditioning in ``conditioning.py``.
"""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.attention import (EntityEmbedding, LinearEncoder, ResidualSelfAttention,
                                           attention_gain, exporting, get_zero_entities_mask,
                                           trim_padding)
from unity_rl.algorithms.image_layout import channels_last
from unity_rl.algorithms.network_config import VISUAL_ENCODERS
from unity_rl.algorithms.nets import Swish  # noqa: F401 (re-exported: its historical home)
from unity_rl.algorithms.normalizer import RunningNormalizer
from unity_rl.algorithms.spec import load_attribute

ObsShapes = tuple[tuple[int, ...], ...]
ObsShapesLike = Union[int, Sequence[Sequence[int]], Sequence[int]]


def as_obs_shapes(obs_shapes: ObsShapesLike) -> ObsShapes:
    """Normalises ``obs_shapes``: an int ``d`` means one vector observation ``((d,),)``; a list of
    ints means several vector observations; otherwise a list of shapes."""
    if isinstance(obs_shapes, (int, np.integer)):
        return ((int(obs_shapes),),)
    items = list(obs_shapes)
    if not items:
        raise ValueError("a behavior needs at least one observation")
    if all(isinstance(i, (int, np.integer)) for i in items):
        return tuple((int(i),) for i in items)
    return tuple(tuple(int(d) for d in shape) for shape in items)


def dense(in_size: int, out_size: int) -> nn.Linear:
    """ML-Agents' encoder dense layer: Kaiming-normal (linear) weights × 1.41, zero bias."""
    layer = nn.Linear(in_size, out_size)
    nn.init.kaiming_normal_(layer.weight, nonlinearity="linear")
    with torch.no_grad():
        layer.weight.mul_(1.41)
    nn.init.zeros_(layer.bias)
    return layer


def conv_out(hw: tuple[int, int], kernel: int, stride: int = 1, padding: int = 0) -> tuple[int, int]:
    """Height and width after a Conv2d (dilation 1)."""
    return tuple((s + 2 * padding - kernel) // stride + 1 for s in hw)  # type: ignore[return-value]


class FullyConnectedVisualEncoder(nn.Module):
    """``fully_connected``: flatten, one dense layer, LeakyReLU (min 1x1)."""

    def __init__(self, height: int, width: int, channels: int, h_size: int):
        super().__init__()
        self.input_size = channels * height * width
        self.dense = nn.Sequential(dense(self.input_size, h_size), nn.LeakyReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(x.reshape(-1, self.input_size))


class SmallVisualEncoder(nn.Module):
    """``match3``: two 3x3 stride-1 convs (35, 144 channels), LeakyReLU, dense (min 5x5)."""

    def __init__(self, height: int, width: int, channels: int, h_size: int):
        super().__init__()
        h, w = conv_out(conv_out((height, width), 3), 3)
        self.final_flat = h * w * 144
        self.conv_layers = nn.Sequential(nn.Conv2d(channels, 35, 3, 1), nn.LeakyReLU(),
                                         nn.Conv2d(35, 144, 3, 1), nn.LeakyReLU())
        self.dense = nn.Sequential(dense(self.final_flat, h_size), nn.LeakyReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.conv_layers(x).reshape(-1, self.final_flat))


class SimpleVisualEncoder(nn.Module):
    """``simple``: 8x8/4 conv to 16, 4x4/2 conv to 32, LeakyReLU, dense (min 20x20)."""

    channels_last = True
    """Trains faster on channels-last images (``channels_last``)."""

    def __init__(self, height: int, width: int, channels: int, h_size: int):
        super().__init__()
        h, w = conv_out(conv_out((height, width), 8, 4), 4, 2)
        self.final_flat = h * w * 32
        self.conv_layers = nn.Sequential(nn.Conv2d(channels, 16, 8, 4), nn.LeakyReLU(),
                                         nn.Conv2d(16, 32, 4, 2), nn.LeakyReLU())
        self.dense = nn.Sequential(dense(self.final_flat, h_size), nn.LeakyReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.conv_layers(x).reshape(-1, self.final_flat))


class NatureVisualEncoder(nn.Module):
    """``nature_cnn`` (Mnih et al. 2015): 8x8/4 to 32, 4x4/2 to 64, 3x3/1 to 64, dense (min 36x36)."""

    channels_last = True
    """Trains faster on channels-last images (``channels_last``)."""

    def __init__(self, height: int, width: int, channels: int, h_size: int):
        super().__init__()
        h, w = conv_out(conv_out(conv_out((height, width), 8, 4), 4, 2), 3, 1)
        self.final_flat = h * w * 64
        self.conv_layers = nn.Sequential(nn.Conv2d(channels, 32, 8, 4), nn.LeakyReLU(),
                                         nn.Conv2d(32, 64, 4, 2), nn.LeakyReLU(),
                                         nn.Conv2d(64, 64, 3, 1), nn.LeakyReLU())
        self.dense = nn.Sequential(dense(self.final_flat, h_size), nn.LeakyReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.conv_layers(x).reshape(-1, self.final_flat))


class ResNetBlock(nn.Module):
    """x + conv(swish(conv(swish(x)))), 3x3 convs with padding 1."""

    def __init__(self, channels: int):
        super().__init__()
        self.layers = nn.Sequential(Swish(), nn.Conv2d(channels, channels, 3, 1, padding=1),
                                    Swish(), nn.Conv2d(channels, channels, 3, 1, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.layers(x)


class ResNetVisualEncoder(nn.Module):
    """``resnet`` (IMPALA, Espeholt et al. 2018): 3 stacks (16, 32, 32 channels) of conv,
    3x3/2 max-pool and 2 residual blocks; Swish; dense; ReLU (min 15x15)."""

    channels_last = True
    """Trains faster on channels-last images (``channels_last``)."""

    def __init__(self, height: int, width: int, channels: int, h_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        last = channels
        for stack_channels in (16, 32, 32):
            layers += [nn.Conv2d(last, stack_channels, 3, 1, padding=1), nn.MaxPool2d(3, 2)]
            height, width = (height - 3) // 2 + 1, (width - 3) // 2 + 1
            layers += [ResNetBlock(stack_channels), ResNetBlock(stack_channels)]
            last = stack_channels
        layers.append(Swish())
        self.final_flat_size = last * height * width
        self.sequential = nn.Sequential(*layers)
        self.dense = dense(self.final_flat_size, h_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.dense(self.sequential(x).reshape(-1, self.final_flat_size)))


MIN_RESOLUTION: dict[str, int] = {name: minimum for name, (_, minimum) in VISUAL_ENCODERS.items()}
"""Smallest height and width each encoder accepts (ML-Agents' ``MIN_RESOLUTION_FOR_ENCODER``)."""


def visual_encoder(vis_encode_type: str, shape: Sequence[int], h_size: int,
                   obs_index: int = 0) -> nn.Module:
    """The encoder for one (C, H, W) observation; ValueError if the image is too small."""
    if vis_encode_type not in VISUAL_ENCODERS:
        raise ValueError(f"unknown vis_encode_type {vis_encode_type!r}; "
                         f"expected one of {', '.join(VISUAL_ENCODERS)}")
    channels, height, width = (int(s) for s in shape)
    minimum = MIN_RESOLUTION[vis_encode_type]
    if height < minimum or width < minimum:
        raise ValueError(f"observation {obs_index} is {height}x{width} (shape {tuple(shape)}), "
                         f"smaller than the {minimum}x{minimum} minimum of vis_encode_type "
                         f"{vis_encode_type!r}; choose an encoder with a smaller minimum "
                         f"({', '.join(f'{k}: {v}' for k, v in MIN_RESOLUTION.items())})")
    return load_attribute(VISUAL_ENCODERS[vis_encode_type][0])(height, width, channels, h_size)


class ObservationLayout:
    """Where each observation lies in the flat row, and which columns are vector columns."""

    def __init__(self, obs_shapes: ObsShapesLike):
        self.obs_shapes = as_obs_shapes(obs_shapes)
        sizes = [int(np.prod(s)) for s in self.obs_shapes]
        self.offsets = tuple(int(o) for o in np.cumsum([0] + sizes))
        self.obs_dim = self.offsets[-1]
        """Width of the flat row."""
        self.slices = tuple(slice(a, b) for a, b in zip(self.offsets[:-1], self.offsets[1:]))
        self.vector_slices = tuple(s for s, shape in zip(self.slices, self.obs_shapes)
                                   if len(shape) == 1)
        self.vector_columns = np.concatenate(
            [np.arange(s.start, s.stop) for s in self.vector_slices] or [np.zeros(0, int)])
        """Indices of the flat row's vector (rank-1) columns, in order."""
        self.vector_size = len(self.vector_columns)

    def vectors(self, flat: np.ndarray) -> np.ndarray:
        """[n, vector_size]: the vector columns of flat rows [n, obs_dim]."""
        return np.asarray(flat)[:, self.vector_columns]

    def make_normalizer(self, normalize: bool) -> RunningNormalizer | None:
        """A ``RunningNormalizer`` over the vector columns, or None without normalisation."""
        return RunningNormalizer((self.vector_size,)) if normalize else None

    def update(self, normalizer: RunningNormalizer | None, flat: np.ndarray) -> None:
        """Folds the vector columns of ``flat`` into ``normalizer`` (no-op when None)."""
        if normalizer is not None:
            normalizer.update(np.asarray(self.vectors(flat), np.float64))

    def normalize(self, normalizer: RunningNormalizer | None, flat: np.ndarray) -> np.ndarray:
        """``flat`` [n, obs_dim] as float32 with only its vector columns normalised: a copy when
        there is something to normalise, else ``flat`` itself where it is float32 already (image
        rows are large: a buffer of camera observations is not copied for nothing)."""
        if normalizer is None or not self.vector_size:
            return np.asarray(flat, np.float32).reshape(-1, self.obs_dim)
        flat = np.array(flat, np.float32, copy=True).reshape(-1, self.obs_dim)
        if normalizer is not None and self.vector_size:
            flat[:, self.vector_columns] = normalizer.normalize(flat[:, self.vector_columns])
        return flat


class ObservationEncoder(nn.Module):
    """Flat rows [n, obs_dim] -> [n, output_size]: vectors as they are, images encoded, buffer
    sensors through self-attention (its pooled vector last).

    ``network_cfg`` needs ``hidden_units`` (each visual encoder's output size) and
    ``vis_encode_type``.  Rows are expected already normalised (``ObservationLayout.normalize``).
    A behavior with only vector observations gets a parameter-free encoder (identity).
    """

    ATTENTION_EMBEDDING_SIZE = 128
    """ML-Agents' fixed attention width (its ``ObservationEncoder.ATTENTION_EMBEDDING_SIZE``)."""

    def __init__(self, obs_shapes: ObsShapesLike, network_cfg, goal_indices: Sequence[int] = ()):
        super().__init__()
        self.layout = ObservationLayout(obs_shapes)
        vis_encode_type = getattr(network_cfg, "vis_encode_type", "simple")
        self.encoders = nn.ModuleDict()
        self.output_size = 0
        self.goal_indices = tuple(int(i) for i in goal_indices)
        """Observations whose encodings make the goal encoding (``encode``)."""
        if any(not 0 <= i < len(self.layout.obs_shapes) for i in self.goal_indices):
            raise ValueError(f"goal observation indices {self.goal_indices} outside the "
                             f"{len(self.layout.obs_shapes)} observations")
        self.goal_size = 0
        """Width of the goal encoding (0 without goal observations)."""
        for i, shape in enumerate(self.layout.obs_shapes):
            size = 0
            if len(shape) == 1:
                size = shape[0]
            elif len(shape) == 3:
                encoder = visual_encoder(vis_encode_type, shape, network_cfg.hidden_units, i)
                self.encoders[str(i)] = encoder
                size = network_cfg.hidden_units
            elif len(shape) == 2:
                if i in self.goal_indices:
                    raise ValueError(f"observation {i} (shape {shape}) is a goal signal and a "
                                     f"variable-length (buffer sensor) observation: ML-Agents does "
                                     f"not support that use case either")
                self.encoders[str(i)] = EntityEmbedding(shape[1], shape[0],
                                                        self.ATTENTION_EMBEDDING_SIZE)
            else:
                raise ValueError(f"observation {i} has shape {shape}: only rank-1 (vector) and "
                                 f"rank-3 (C, H, W image or grid) observations are supported")
            self.output_size += size
            self.goal_size += size if i in self.goal_indices else 0
        self.entity_indices = tuple(i for i, shape in enumerate(self.layout.obs_shapes)
                                    if len(shape) == 2)
        """The variable-length (buffer sensor) observations, in observation order."""
        if self.entity_indices:
            width = self.ATTENTION_EMBEDDING_SIZE
            self.rsa = ResidualSelfAttention(
                width, sum(self.layout.obs_shapes[i][0] for i in self.entity_indices))
            self.x_self_encoder = None
            if self.output_size:  # other observations: entities are embedded with them
                self.x_self_encoder = LinearEncoder(self.output_size, 1, width,
                                                    attention_gain(width))
                for i in self.entity_indices:
                    self.encoders[str(i)].add_self_embedding(width)
            self.output_size += width
        self.is_identity = not self.encoders
        """True when every observation is a vector: forward returns its input."""

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        return self.encode(flat)[0]

    def encode(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(encoding [n, output_size], goal encoding [n, goal_size] or None without goals)."""
        if self.is_identity and not self.goal_indices:
            return flat, None
        n = flat.shape[0]
        parts: list[torch.Tensor | None] = []
        for i, (shape, columns) in enumerate(zip(self.layout.obs_shapes, self.layout.slices)):
            part = flat[:, columns]
            parts.append(None if len(shape) == 2 else
                         self._encode_image(self.encoders[str(i)], part.reshape(n, *shape))
                         if len(shape) == 3 else part)
        if self.is_identity:
            encoding = flat
        else:
            encodes = [p for p in parts if p is not None]
            encoding = torch.cat(encodes, dim=1) if encodes else None
            if self.entity_indices:
                pooled = self.attend(flat, encoding)
                encoding = pooled if encoding is None else torch.cat([encoding, pooled], dim=1)
        if not self.goal_indices:
            return encoding, None
        goals = [parts[i] for i in self.goal_indices]
        return encoding, goals[0] if len(goals) == 1 else torch.cat(goals, dim=1)

    @staticmethod
    def _encode_image(encoder: nn.Module, images: torch.Tensor) -> torch.Tensor:
        if getattr(encoder, "channels_last", False):
            images = channels_last(images)
        return encoder(images)

    def attend(self, flat: torch.Tensor, encoded_self: torch.Tensor | None) -> torch.Tensor:
        """The buffer sensors' pooled attention vector [n, 128] (ML-Agents' ``ObservationEncoder``
        forward): entities embedded with the agent's own encoding, padding rows masked."""
        n = flat.shape[0]
        entities = [flat[:, self.layout.slices[i]].reshape(n, *self.layout.obs_shapes[i])
                    for i in self.entity_indices]
        masks = get_zero_entities_mask(entities)
        if not exporting():  # columns that are padding in every row change nothing: dropped
            entities, masks = map(list, zip(*(trim_padding(e, m)
                                              for e, m in zip(entities, masks))))
        processed_self = (self.x_self_encoder(encoded_self)
                          if self.x_self_encoder is not None and encoded_self is not None else None)
        embeddings = [self.encoders[str(i)](processed_self, ent)
                      for i, ent in zip(self.entity_indices, entities)]
        return self.rsa(torch.cat(embeddings, dim=1), masks)


def concat_inputs(inputs: Sequence[torch.Tensor], obs_dim: int
                  ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Export-module input convention: flattens and concatenates leading inputs until they make a
    flat row of width ``obs_dim``; returns (flat [n, obs_dim], the remaining inputs).

    So ``module(obs_0, .., obs_k[, action_masks])`` (separate observations, images NCHW) and
    ``module(flat[, action_masks])`` (one flat row) both work.
    """
    parts, width, i = [], 0, 0
    while width < obs_dim:
        if i >= len(inputs):
            raise ValueError(f"observations cover {width} of the {obs_dim} observation values")
        part = inputs[i].reshape(inputs[i].shape[0], -1)
        parts.append(part)
        width += part.shape[1]
        i += 1
    if width != obs_dim:
        raise ValueError(f"observations have {width} values, the network expects {obs_dim}")
    flat = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    return flat, list(inputs[i:])


class FoldedNormalizer(nn.Module):
    """Torch (and ONNX) copy of ``ObservationLayout.normalize``: the normaliser's statistics as
    constants, applied to the vector columns of flat rows only."""

    def __init__(self, layout: ObservationLayout, normalizer: RunningNormalizer | None):
        super().__init__()
        self.slices = [(s.start, s.stop) for s in layout.slices]
        self.is_vector = [len(shape) == 1 for shape in layout.obs_shapes]
        self.active = normalizer is not None and layout.vector_size > 0
        if self.active:
            mean = torch.as_tensor(normalizer.mean, dtype=torch.float32)
            std = torch.as_tensor(np.sqrt(normalizer.var + normalizer.epsilon), dtype=torch.float32)
            self.clip = float(normalizer.clip)
        else:
            mean, std, self.clip = torch.zeros(layout.vector_size), torch.ones(layout.vector_size), 0.0
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_std", std)

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        if not self.active:
            return flat
        parts, v = [], 0
        for (start, stop), is_vector in zip(self.slices, self.is_vector):
            part = flat[:, start:stop]
            if is_vector:
                w = stop - start
                part = (part - self.obs_mean[v:v + w]) / self.obs_std[v:v + w]
                part = torch.clamp(part, -self.clip, self.clip)
                v += w
            parts.append(part)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
