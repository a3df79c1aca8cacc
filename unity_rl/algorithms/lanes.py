"""Update lanes: an update's independent halves (PPO's actor loss and critic loss, each with its
forward and backward pass) side by side on two cores.

Contract: ``run_lanes(first, second)`` calls two zero-argument callables and returns their
results ``(first(), second())``. The two must touch disjoint parameters (their backward passes
then accumulate into different ``.grad`` tensors) and write nothing the other reads. With one
lane (the default) they run one after the other in the caller's thread; with two
(``set_learner_cores``), ``second`` runs on a worker thread in a copy of the caller's context
(``contextvars``: the minibatch's ``image_layout.converted_once`` scope is shared, and its
conversions are locked) while ``first`` runs in the caller's thread. Either way the gradients
are the same values as one backward pass of the summed loss, bit for bit: each parameter is
reached from one half only. An exception in either half is raised after both have finished.

``set_learner_cores(cores, split)`` is the trainer's call (the host owns process-wide compute
state, as it owns ``torch.set_num_threads``): with ``split`` and 2 cores or more, two lanes of
``cores // 2`` intra-op threads each; otherwise one lane of ``cores`` threads. Two lanes of
several intra-op threads each would contend (4 busy threads on 2 cores ran 1.4x slower than
one lane of 2, stop 37). Why lanes rather than intra-op threads: a minibatch of 32 rows is too
small for torch's intra-op threads to pay on every op (``training/thread_trial.py``), but two
whole networks run at once keep two cores busy. Unity's GridWorld config (a camera and a hyper
layer in each of the actor's and critic's networks): 24 minibatch steps 0.99 -> 0.65 s and
1.05 -> 0.70 s in two pairs (stop 37, ``benchmarks/goal_update.py``).
"""
from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

import torch

A = TypeVar("A")
B = TypeVar("B")


class _Lanes:
    """The process's lane count and, with two, the worker thread the second lane runs on."""

    def __init__(self) -> None:
        self.count = 1
        self._worker: ThreadPoolExecutor | None = None

    def worker(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="unity_rl-lane")
        return self._worker


_LANES = _Lanes()
"""Process-wide, like torch's intra-op thread count (module doc); set by ``set_learner_cores``."""


def set_learner_cores(cores: int, split: bool) -> None:
    """The learner's cores: two lanes of ``cores // 2`` intra-op threads when ``split`` (every
    learner that trains runs its update in lanes) and ``cores`` >= 2, else one of ``cores``."""
    cores = max(1, int(cores))
    two = split and cores >= 2
    _LANES.count = 2 if two else 1
    torch.set_num_threads(cores // 2 if two else cores)


def lane_count() -> int:
    """How many lanes ``run_lanes`` uses now (1 or 2)."""
    return _LANES.count


def run_lanes(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``(first(), second())``, side by side when the process has two lanes (module doc)."""
    if _LANES.count < 2:
        return first(), second()
    context = contextvars.copy_context()
    future: Future = _LANES.worker().submit(context.run, second)
    try:
        first_result = first()
    finally:
        second_result = future.result()  # waits for it whatever ``first`` did; raises its error
    return first_result, second_result
