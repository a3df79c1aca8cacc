"""Imitation from Unity ``.demo`` demonstrations (ML-Agents 1.1.0's meaning).

- ``config.py``: ``BehavioralCloningConfig`` (the ``behavioral_cloning:`` section), torch-free;
- ``demo_buffer.py``: a demonstration as ML-Agents' trainers read it (``demo_to_buffer``: rows,
  episode chunks padded to whole sequences), with the spec check against the behavior;
- ``behavioral_cloning.py``: ``BehavioralCloning``, ML-Agents' ``BCModule`` as an
  ``AuxiliaryUpdate`` (its own Adam on the actor, run after each PPO update / SAC update step),
  and ``make_behavioral_cloning``, which builds it from a trainer type's ``ImitationPolicy``
  (``ppo/imitation.py``, ``sac/imitation.py`` hold only their policy and its settings).

GAIL is a reward signal (``reward_signals/gail.py``) and reads demos through ``demo_buffer``.
This package's ``__init__`` imports nothing, so ``unity_rl.config`` reads it without torch.
"""
