"""``OffPolicyLearner``: the small protocol an off-policy learner fits to run on ``OffPolicyHost``.

A learner is pure (no processes, no I/O, no replay: the host samples and hands it batches) and
reads top to bottom in its paper's order inside ``update``. What the host needs of it:

    cfg                                  a ``ReplayConfig`` (batch size, replay ratio, PER ...)
    updates                              gradient updates done; also its weights' version
    agent_steps                          the behavior's collected agent-steps (the host sets
                                         it before updating: schedules)
    observe(obs)                         newly collected observations, as they arrive (the
                                         normaliser; a learner may ignore them)
    update(batch, importance_weights)    one gradient step -> UpdateResult(metrics, td_errors)
    weights(include_critic)              what the acting policy loads (CPU tensors, plain dicts);
                                         with include_critic also what it needs for td_errors
    export_module()                      the deterministic policy as a CPU torch module (ONNX)
    state_dict() / load_state_dict()     everything to resume (a copy: later updates leave it be)

``td_errors`` are |δ| per batch row, computed before the step's changes: the host writes them
back as the rows' new priorities when ``cfg.prioritized``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from unity_rl.algorithms.offpolicy.config import ReplayConfig
from unity_rl.experience import TransitionBatch

if TYPE_CHECKING:
    import torch


class UpdateResult(NamedTuple):
    """What one gradient step reports."""

    metrics: dict[str, float]
    """TensorBoard tag -> value of this step (the host averages them over a round)."""
    td_errors: np.ndarray
    """[n] float32 |TD error| of each batch row under the networks before the step."""


class OffPolicyLearner(Protocol):
    """One behavior's off-policy learner, as ``OffPolicyHost`` drives it (see module doc)."""

    cfg: ReplayConfig
    updates: int
    agent_steps: int

    def observe(self, obs: np.ndarray) -> None: ...

    def update(self, batch: TransitionBatch,
               importance_weights: np.ndarray | None = None) -> UpdateResult: ...

    def weights(self, include_critic: bool = False) -> dict: ...

    def export_module(self) -> torch.nn.Module: ...

    def parameter_count(self) -> int: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
