"""``AuxiliaryUpdate``: an update that runs beside a learner's own, on the same buffer.

The PPO host calls each one after its PPO update (``PPOHost.train``), in order, merges the
metrics it returns into the update's metrics and checkpoints its ``state_dict`` under its
``name``. Behavioral cloning is one (ML-Agents runs ``bc_module.update()`` once after the PPO
epochs). Learned reward signals are not: they train inside the PPO epochs, once per minibatch
(``reward_signals/base.py``).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from unity_rl.experience import Trajectory


@runtime_checkable
class AuxiliaryUpdate(Protocol):
    """What the PPO host needs of an auxiliary update."""

    name: str
    """Unique among a behavior's auxiliary updates: the key of its state in checkpoints."""

    def update(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One update on the buffer the learner just trained on -> metrics (TensorBoard tags)."""

    def state_dict(self) -> dict:
        """What a checkpoint keeps (tensors and plain values only)."""

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output."""
