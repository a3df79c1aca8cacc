"""Minibatches for the learners' networks: gathered and put channels-last once, in memory
reused from one minibatch to the next.

``channels_last(images)``: while gradients are recorded (a learner's minibatch), NCHW images
stored channels-last (NHWC in memory, the same NCHW tensor logically): the convolutions of the
encoders that say ``channels_last`` (``simple``, ``nature_cnn``, ``resnet``; not ``match3``'s
small boards) train faster on it even counting the conversion
(``benchmarks/visual_encoder_speed.py``). Without gradients (an actor's decision, value
estimates) the conversion costs more than it saves, so the images stay as they are; so they do
while ``torch.onnx`` traces (the export keeps its NCHW graph). Values are unchanged; sums may
differ in the last bits.

``converted_once(workspace)``: several networks read the same minibatch (PPO's actor and
critic; SAC's policy, Q1, Q2 and V), and each would copy its cameras channels-last again. A
learner wraps one minibatch's forward passes in ``with converted_once(...):``; inside, the first
conversion of a camera batch is kept and handed to every later reader of the same tensor (the
same memory, shape, strides and version), from any thread in its context (a learner's update
halves, ``update_halves.py``; a lock orders them). The scope holds the source tensors, so their memory
cannot be reused for another batch while it lasts; leaving it drops them.

``MinibatchWorkspace``: a camera minibatch is ~100 MB (256 rows of 12x84x84 floats), and
memory that large comes fresh from the OS at every allocation (page faults cost more than the
copy itself: 70 ms against 16 ms for a gather on the development machine). A learner keeps one
workspace; ``rows`` gathers a minibatch into a buffer kept for the next one, and the
conversions inside ``converted_once(workspace)`` write into kept buffers too (the k-th camera
batch of an image shape (C, H, W) in a minibatch always into the same one, whatever its rows).
The buffers are overwritten by the next minibatch: the learner must be done with the previous
one (its backward pass and optimiser step), as every learner here is.
"""
from __future__ import annotations

import contextlib
import threading
from contextvars import ContextVar
from typing import Iterator

import torch

from unity_rl.algorithms.attention import exporting


class MinibatchWorkspace:
    """Buffers a learner reuses from one minibatch to the next (module doc)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def rows(self, name: str, source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``source[index]`` (rows), written into the buffer ``name`` keeps."""
        shape = (len(index),) + tuple(source.shape[1:])
        out = self._buffer(("rows", name, source.dtype, source.device), shape,
                           torch.contiguous_format, source)
        return torch.index_select(source, 0, index, out=out)

    def channels_last_copy(self, images: torch.Tensor, k: int) -> torch.Tensor:
        """``images`` copied channels-last into the k-th kept buffer of their shape."""
        out = self._buffer(("images", k, images.dtype, images.device), tuple(images.shape),
                           torch.channels_last, images)
        return out.copy_(images)

    def _buffer(self, key: tuple, shape: tuple, memory_format, like: torch.Tensor):
        """The kept buffer ``key``, its first ``shape[0]`` rows (a short last minibatch reads a
        view of the largest one so far)."""
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape[1:] != shape[1:] or buffer.shape[0] < shape[0]:
            buffer = self._buffers[key] = torch.empty(shape, dtype=like.dtype,
                                                      device=like.device,
                                                      memory_format=memory_format)
        return buffer[:shape[0]]


class _Scope:
    def __init__(self, workspace: MinibatchWorkspace | None):
        self.workspace = workspace
        self.converted: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        """(data_ptr, shape, strides, version) -> (source, converted)."""
        self.per_shape: dict[tuple, int] = {}
        """Camera batches converted so far per image shape (C, H, W)."""
        self.lock = threading.Lock()
        """Held while a conversion is looked up or made: a learner's update halves
        (``update_halves.py``) may read one minibatch from two threads."""


_SCOPE: ContextVar[_Scope | None] = ContextVar("unity_rl_minibatch_images", default=None)


@contextlib.contextmanager
def converted_once(workspace: MinibatchWorkspace | None = None) -> Iterator[None]:
    """Within it, each camera batch is converted channels-last once (module doc)."""
    token = _SCOPE.set(_Scope(workspace))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def channels_last(images: torch.Tensor) -> torch.Tensor:
    """``images`` channels-last while gradients are recorded, else as they are (module doc)."""
    if exporting() or not torch.is_grad_enabled():
        return images
    scope = _SCOPE.get()
    if scope is None:
        return _convert(images)
    key = (images.data_ptr(), tuple(images.shape), images.stride(), images._version)
    with scope.lock:
        return _converted_in(scope, key, images)


def _converted_in(scope: _Scope, key: tuple, images: torch.Tensor) -> torch.Tensor:
    """The conversion ``scope`` keeps for ``key``, made now if it has none."""
    hit = scope.converted.get(key)
    if hit is None:
        # counted per image shape (C, H, W), whatever the rows: batches of one image shape
        # share their buffers' key space, so two in one minibatch (POCA's own cameras and its
        # mates') must never get the same k, or the second would overwrite the first
        image_shape = tuple(images.shape[1:])
        k = scope.per_shape.get(image_shape, 0)
        scope.per_shape[image_shape] = k + 1
        hit = scope.converted[key] = (images, _convert(images, scope.workspace, k))
    return hit[1]


def _convert(images: torch.Tensor, workspace: MinibatchWorkspace | None = None,
             k: int = 0) -> torch.Tensor:
    """The one place images are copied channels-last: fresh, or into a workspace buffer."""
    if workspace is None:
        return images.contiguous(memory_format=torch.channels_last)
    return workspace.channels_last_copy(images, k)
