"""An update's two independent halves (PPO's actor loss and critic loss, each with its forward
and backward pass) side by side on two cores.

Contract: ``run_halves(first, second)`` calls two zero-argument callables and returns their
results ``(first(), second())``. The two must touch disjoint parameters (their backward passes
then accumulate into different ``.grad`` tensors) and write nothing the other reads. By default
they run one after the other in the caller's thread; side by side (``set_learner_cores`` with
``split``), ``second`` runs on a worker thread in a copy of the caller's context
(``contextvars``: the minibatch's ``image_layout.converted_once`` scope is shared, and its
conversions are locked) while ``first`` runs in the caller's thread. Either way the gradients
are the same values as one backward pass of the summed loss, bit for bit: each parameter is
reached from one half only. An exception in either half is raised after both have finished.

``set_learner_cores(cores, split)`` is the trainer's call (the host owns process-wide compute
state, as it owns ``torch.set_num_threads``): with ``split`` and 2 cores or more, the halves
side by side on ``cores // 2`` intra-op threads each; otherwise one after the other on
``cores`` threads. Halves of several intra-op threads each would contend (4 busy threads on 2
cores: 0.92 s for 24 minibatch steps of GridWorld's config against 0.75 s on 2 threads in one
piece, stop 37).

Why halves rather than intra-op threads: a minibatch of 32 rows is too small for torch's
intra-op threads to pay on every op (``training/thread_trial.py``), but two whole networks run
at once keep two cores busy. Unity's GridWorld config (a camera and a hyper layer in each of the
actor's and the critic's networks), 24 minibatch steps on 2 cores: 0.99 -> 0.65 s and 1.05 ->
0.70 s in two pairs against one thread; its whole update 1.077 -> 0.830 s in the trainer's own
trial (median of 2 each). ``benchmarks/learner_threads.py`` compares the two ways to use N cores on the sizes of
Unity's example configs (``learner_threads_halves_stop37.json``): side by side is as fast or
faster than N intra-op threads on all six, from 3DBall's to Worm's.
"""
from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

import torch

A = TypeVar("A")
B = TypeVar("B")


class _Halves:
    """Whether the process runs halves side by side and, if so, the thread the second runs on."""

    def __init__(self) -> None:
        self.side_by_side = False
        self._worker: ThreadPoolExecutor | None = None

    def worker(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="unity_rl-update-half")
        return self._worker


_HALVES = _Halves()
"""Process-wide, like torch's intra-op thread count (module doc); set by ``set_learner_cores``."""


def set_learner_cores(cores: int, split: bool) -> None:
    """The learner's cores: halves side by side on ``cores // 2`` intra-op threads each when
    ``split`` (every learner that trains splits its update) and ``cores`` >= 2, else one piece
    on ``cores`` threads."""
    cores = max(1, int(cores))
    _HALVES.side_by_side = split and cores >= 2
    torch.set_num_threads(cores // 2 if _HALVES.side_by_side else cores)


def halves_side_by_side() -> bool:
    """Whether ``run_halves`` runs its two callables at once now."""
    return _HALVES.side_by_side


def run_halves(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``(first(), second())``, side by side when the learner's cores allow (module doc)."""
    if not _HALVES.side_by_side:
        return first(), second()
    context = contextvars.copy_context()
    future: Future = _HALVES.worker().submit(context.run, second)
    try:
        first_result = first()
    finally:
        second_result = future.result()  # waits for it whatever ``first`` did; raises its error
    return first_result, second_result
