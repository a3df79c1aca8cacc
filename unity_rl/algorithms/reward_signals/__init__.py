"""Reward signals: one provider per ``reward_signals`` entry of a behavior (ML-Agents' meaning).

- ``config.py``: ``RewardSignalConfig`` (name, gamma, strength, network_settings), torch-free, what
  the behavior config holds, one per YAML entry in YAML order;
- ``base.py``: ``RewardSignal``, the provider contract (``rewards(trajectory)``, optional
  ``update``, ``state_dict``);
- ``extrinsic.py``: the environment's reward;
- ``registry.py``: signal name -> module, one line per signal.

PPO gives every signal a value head of its own, runs GAE per signal with that signal's gamma on
its strength-scaled rewards and takes the mean of the advantages (docs/reward_signals.md).
This package's ``__init__`` imports nothing, so ``unity_rl.config`` reads it without torch.
"""
