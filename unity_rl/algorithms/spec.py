"""``TrainerTypeSpec``: everything the rest of unity_rl knows about one trainer type.

A trainer type is one folder under ``unity_rl/algorithms/`` whose ``__init__`` exports ``SPEC``
(and one line in ``registry.TRAINER_TYPES``). The spec is torch-free: config loading, dumping
and the CLI read it without importing torch. What needs torch (the runtime ``Algorithm``, the
loader that rebuilds a saved policy for evaluate/ONNX export) is named as ``"module:attribute"``
and imported only when used — the pattern of ML-Agents' ``plugins/trainer_type.py``, which fills
its trainer and settings tables together. ``TrainerTypeSpec.declare`` is how a type's ``__init__``
writes its spec: the name is its hyperparameters' ``TRAINER_TYPE`` (written once, in the config,
whose errors already use it), the ``"module:attribute"`` references are relative to the package,
and the policy loader is the package's ``export:load_policy_module`` unless it says otherwise.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def registered_module(table: Mapping[str, str], name: Any, what: str):
    """The module a registry (name -> dotted module path) names for ``name``, imported now;
    KeyError naming ``what`` and the registered names otherwise."""
    try:
        module = table[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown {what} {name!r}; known: "
                       f"{', '.join(repr(n) for n in table)}") from None
    return importlib.import_module(module)


def load_attribute(ref: str) -> Any:
    """The object named by ``"package.module:attribute"`` (imported now)."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def saved_obs_shapes(state: dict, weights: dict):
    """The observation shapes the saved network was built from: recorded with its weights, or
    (older files) one flat vector of ``obs_dim`` (the network was an MLP on the flat row)."""
    return weights.get("obs_shapes") or int(state["obs_dim"])


@dataclass(frozen=True)
class TrainerTypeSpec:
    """One trainer type, as config, export, evaluate and the runtime see it."""

    name: str
    """The ``trainer_type`` value in YAML ('ppo', 'ddpg', ...)."""
    hyperparameters: type
    """Torch-free frozen dataclass that ``behaviors.<name>.hyperparameters`` fills."""
    yaml_keys: Mapping[str, str]
    """YAML key under ``hyperparameters`` -> field of ``hyperparameters`` (strict: nothing else)."""
    algorithm: str
    """``"module:Class"`` of its ``runtime.algorithm.Algorithm`` (imported when a run starts)."""
    policy_loader: str
    """``"module:function"``: ``(state, action_layout, network_cfg) -> torch.nn.Module`` rebuilds
    the deterministic policy of a saved checkpoint entry or ``<Behavior>.pt`` (evaluate, ONNX)."""
    default_segment_steps: Callable[[Any, int, int], int]
    """``(hyperparameters, num_actors, time_horizon) -> agent-steps per actor segment`` when
    ``unity_rl.segment_steps`` is not set."""
    off_values: Mapping[str, tuple] = field(default_factory=dict)
    """ML-Agents hyperparameter keys this type does not implement, accepted only with the values
    that mean "feature off" (any other value is refused by name)."""
    fill_defaults: Callable[[dict], dict] | None = None
    """ML-Agents' key defaults that depend on other keys, applied to the raw YAML mapping before it
    is read (PPO: beta and epsilon schedules follow learning_rate_schedule)."""
    from_elsewhere: tuple[str, ...] = ("gamma", "max_steps")
    """Fields of ``hyperparameters`` that other YAML keys fill (reward_signals.extrinsic.gamma for
    one-discount learners, max_steps)."""

    behavioral_cloning: bool = False
    """The type runs ``behavioral_cloning:`` (its host builds the BC update); others refuse it."""
    learned_reward_signals: bool = True
    """Whether the type trains learned reward signals (curiosity, RND, GAIL) beside extrinsic;
    False refuses them in the config."""
    self_play: bool = True
    """Whether ``self_play:`` may wrap it (ML-Agents' GhostTrainer wraps any of its trainer
    types; a type that is not ML-Agents' says False and the config refuses the section)."""

    quirk_fixes: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    """``unity_rl.fix_quirks`` entries this type knows -> (hyperparameters field, value): an
    ML-Agents quirk the type copies by default and fixes when a run names the entry."""

    @classmethod
    def declare(cls, package: str, hyperparameters: type, **fields: Any) -> TrainerTypeSpec:
        """The spec of the trainer type whose ``__init__`` is ``package`` (its ``__name__``):
        ``name`` is ``hyperparameters.TRAINER_TYPE``; ``algorithm`` and ``policy_loader`` may be
        relative to the package, as relative imports are (``".host:PPOAlgorithm"``);
        ``policy_loader`` is ``".export:load_policy_module"`` unless given. The other fields
        are the dataclass's, by keyword."""
        fields.setdefault("policy_loader", ".export:load_policy_module")
        for key in ("algorithm", "policy_loader"):
            if fields[key].startswith("."):
                fields[key] = package + fields[key]
        return cls(name=hyperparameters.TRAINER_TYPE, hyperparameters=hyperparameters, **fields)

    def make_algorithm(self, run_cfg: Any, section: str, behavior_cfg: Any):
        """The runtime ``Algorithm`` of one config section (imports torch)."""
        return load_attribute(self.algorithm)(run_cfg, section, behavior_cfg)

    def load_policy_module(self, state: dict, action_layout: Any, network_cfg: Any):
        """The saved deterministic policy as a ``torch.nn.Module`` (imports torch)."""
        return load_attribute(self.policy_loader)(state, action_layout, network_cfg)
