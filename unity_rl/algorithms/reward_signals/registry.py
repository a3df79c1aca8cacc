"""The one reward-signal registry: ``reward_signals`` key -> module that exports ``PROVIDER``.

Adding a signal is its module in this folder (a ``RewardSignal`` subclass exported as
``PROVIDER``) plus one line here. Importing this module imports no torch.
"""
from __future__ import annotations

from unity_rl.algorithms.spec import registered_module

REWARD_SIGNALS: dict[str, str] = {
    "extrinsic": "unity_rl.algorithms.reward_signals.extrinsic",
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


def make_reward_signals(configs, obs_shapes, action_spec) -> list:
    """One provider per ``RewardSignalConfig``, in the configs' order (the value heads' order)."""
    return [provider_class(c.name)(c, obs_shapes, action_spec) for c in configs]
