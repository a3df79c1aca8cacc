"""What every off-policy trainer type shares: replay, warm-up, replay ratio, prioritised replay,
Ape-X placement, policy lag and replay checkpoints — over a small learner protocol.

- ``config.py``: ``ReplayConfig``, the torch-free hyperparameters every type shares (a type's
  config subclasses it) and the replay-ratio rule ``updates_owed``;
- ``learner.py``: ``OffPolicyLearner``, the protocol a type's pure learner fits
  (``update(batch, importance_weights) -> UpdateResult(metrics, td_errors)``, ``weights``,
  ``state_dict``, ``export_module``);
- ``acting.py``: trajectories -> transitions and ``OffPolicyActingPolicy``, the actors' side
  (warm-up, actor-side priorities, shared-replay writes) over a type's way of acting;
- ``host.py``: ``OffPolicyHost``, learner + replay + counters on the runtime seam;
- ``algorithm.py``: ``OffPolicyAlgorithm``, replay placement, the actors' plan, one host per
  behavior.

Adding an off-policy trainer type (SAC): its folder with a config (subclass ``ReplayConfig``), a
learner fitting ``OffPolicyLearner``, an acting policy (subclass ``OffPolicyActingPolicy``), an
``OffPolicyAlgorithm`` subclass of a few lines, an export loader and ``SPEC`` — plus its line in
``unity_rl.algorithms.registry``. ``unity_rl.algorithms.ddpg`` is the example. Replay storage and
its process plumbing live in ``unity_rl.replay``; nothing here starts or talks to a process.

This ``__init__`` imports nothing (the config reads ``config.py`` without torch).
"""
