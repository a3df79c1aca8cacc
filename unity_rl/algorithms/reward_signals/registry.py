"""The one reward-signal registry: ``reward_signals`` key -> module that exports ``PROVIDER``.

Adding a signal is its module in this folder (a ``RewardSignal`` subclass exported as
``PROVIDER``; a learned one derives from ``learned.LearnedRewardSignal``) plus one line here,
and, if it has YAML keys of its own, its settings class in ``config.py`` (``SIGNAL_SETTINGS``).
Importing this module imports no torch.
"""
from __future__ import annotations

from unity_rl.algorithms.spec import registered_module

REWARD_SIGNALS: dict[str, str] = {
    "extrinsic": "unity_rl.algorithms.reward_signals.extrinsic",
    "curiosity": "unity_rl.algorithms.reward_signals.curiosity",
    "rnd": "unity_rl.algorithms.reward_signals.rnd",
    "gail": "unity_rl.algorithms.reward_signals.gail",
}
"""Signal name -> module whose ``PROVIDER`` is its ``RewardSignal`` class (imported on first use)."""

MLAGENTS_REWARD_SIGNALS = ("extrinsic", "curiosity", "gail", "rnd")
"""mlagents-learn 1.1.0's signals: one of these not registered here is refused as "not supported
yet" rather than "unknown"."""


def reward_signal_names() -> list[str]:
    """The registered signals, in registry order."""
    return list(REWARD_SIGNALS)


def provider_class(name: str) -> type:
    """The ``RewardSignal`` class of a registered signal; KeyError naming the known ones."""
    return registered_module(REWARD_SIGNALS, name, "reward signal").PROVIDER


def make_reward_signals(configs, obs_shapes, action_spec, device: str = "cpu") -> list:
    """One provider per ``RewardSignalConfig``, in the configs' order (the value heads' order),
    its modules on ``device`` (the learner's)."""
    return [provider_class(c.name)(c, obs_shapes, action_spec, device) for c in configs]
