"""The one trainer-type registry: ``trainer_type`` -> the package that exports its ``SPEC``.

Adding a trainer type is its folder under ``unity_rl/algorithms/`` plus one line here. Nothing
outside a trainer type's folder compares ``trainer_type`` with a name: config, dump, export,
evaluate and the runtime all ask this registry. Importing it imports no torch.
"""
from __future__ import annotations

from unity_rl.algorithms.spec import TrainerTypeSpec, registered_module

TRAINER_TYPES: dict[str, str] = {
    "ppo": "unity_rl.algorithms.ppo",
    "ddpg": "unity_rl.algorithms.ddpg",
    "sac": "unity_rl.algorithms.sac",
    "poca": "unity_rl.algorithms.poca",
}
"""trainer_type -> package whose ``SPEC`` describes it (imported on first use)."""

MLAGENTS_TRAINER_TYPES = ("ppo", "sac", "poca")
"""mlagents-learn 1.1.0's trainer types: one of these that is not registered here is refused as
"not supported yet" rather than "unknown"."""


def trainer_type_names() -> list[str]:
    """The registered trainer types, in registry order."""
    return list(TRAINER_TYPES)


def trainer_type(name: str) -> TrainerTypeSpec:
    """The spec of a registered trainer type; KeyError (naming the known ones) otherwise."""
    return registered_module(TRAINER_TYPES, name, "trainer_type").SPEC
