"""The learner's torch threads, chosen by measuring its own updates (``unity_rl.torch_threads:
null``).

Whether intra-op threads speed an update up depends on the machine as much as on the network.
Unity's GridWorld config (4.8M parameters in hyper layers) updated 1.61x faster on 2 threads
than on 1 on one 2-core machine (stop 33). On another (stop 34) 2 threads ran it 0.94x, 1.13x
and 1.88x as fast as 1 within one hour, and a whole sync run collected 148 agent-steps/s on 2
threads against 183 on 1: there its updates are bound by memory, which a second thread contends
for. The rule
(``wiring.learner_torch_threads``) says when several threads may pay; where it gives a learner
more than one, the run checks. ``ThreadTrial`` alternates the rule's count and 1 over the first
updates (after ``warmup`` of them, which warm the allocator), ``updates_each`` times each, then
keeps the count whose median update seconds were lower and logs both medians. The trial costs at
most ``updates_each`` updates at the slower count. The training session feeds it every round
(``observe_round``: the round's ``Runtime/Update Seconds``, summed over the behaviors that
trained). The trainer's ``set_threads`` gives a count to ``update_halves.set_learner_cores``:
on 2 cores PPO's update runs its actor's and critic's halves side by side, one thread each,
rather than in one piece on 2 threads.
"""
from __future__ import annotations

import logging
import statistics
from typing import Callable

import torch

logger = logging.getLogger(__name__)


class ThreadTrial:
    """Alternates ``candidates`` over the updates after ``warmup``, then keeps the fastest."""

    def __init__(self, candidates: tuple[int, ...], updates_each: int = 2, warmup: int = 1,
                 set_threads: Callable[[int], None] = torch.set_num_threads):
        if len(set(candidates)) < 2:
            raise ValueError(f"a thread trial needs two thread counts or more, got {candidates}")
        self.candidates = tuple(candidates)
        self.updates_each = updates_each
        self.warmup = warmup
        self.set_threads = set_threads
        self.seconds: dict[int, list[float]] = {n: [] for n in self.candidates}
        """Update seconds measured at each thread count."""
        self.chosen: int | None = None
        """The count kept once the trial is over (None: still trying)."""
        self._seen = 0
        self.current = self.candidates[0]
        """The count the next update runs with."""
        self.set_threads(self.current)

    def observe_round(self, round_) -> None:
        """A runner's ``Round``: observes its update seconds when anything trained in it."""
        seconds = [part.metrics["Runtime/Update Seconds"] for part in round_.behaviors.values()
                   if part.metrics and "Runtime/Update Seconds" in part.metrics]
        if seconds:
            self.observe(sum(seconds))

    def observe(self, update_seconds: float) -> None:
        """One update took ``update_seconds`` at ``current`` threads: sets the next count."""
        if self.chosen is not None:
            return
        self._seen += 1
        if self._seen <= self.warmup:
            return
        self.seconds[self.current].append(update_seconds)
        if all(len(s) >= self.updates_each for s in self.seconds.values()):
            medians = {n: statistics.median(s) for n, s in self.seconds.items()}
            self.chosen = min(self.candidates, key=lambda n: medians[n])
            logger.info("learner: keeps %d core(s); median update %s",
                        self.chosen, ", ".join(f"{medians[n]:.3f} s on {n}"
                                               for n in self.candidates))
            self.current = self.chosen
        else:
            index = self.candidates.index(self.current)
            self.current = self.candidates[(index + 1) % len(self.candidates)]
        self.set_threads(self.current)
