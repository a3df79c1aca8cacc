"""The one reward-signal registry: ``reward_signals`` key -> module that exports ``PROVIDER``.

Adding a signal is its module in this folder (a ``RewardSignal`` subclass exported as
``PROVIDER``) plus one line here. Importing this module imports no torch.
"""
from __future__ import annotations

import importlib

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
    try:
        module = REWARD_SIGNALS[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown reward signal {name!r}; known: "
                       f"{', '.join(repr(n) for n in REWARD_SIGNALS)}") from None
    return importlib.import_module(module).PROVIDER


def make_reward_signals(configs, obs_shapes, action_spec) -> list:
    """One provider per ``RewardSignalConfig``, in the configs' order (the value heads' order)."""
    return [provider_class(c.name)(c, obs_shapes, action_spec) for c in configs]
