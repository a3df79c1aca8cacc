"""Trainer types and the pieces they share.

- one folder per trainer type (``ppo/``, ``ddpg/``): its torch-free config and YAML keys
  (``config.py``), pure learner (``learner.py``), acting policy (``acting.py``), learner host and
  runtime ``Algorithm`` (``host.py``), policy loader for evaluate/export (``export.py``), and
  ``SPEC`` in its ``__init__`` — registered by one line in ``registry.py``;
- ``offpolicy/``: what every off-policy type shares (replay config, the ``OffPolicyLearner``
  protocol, acting policy, host and ``Algorithm`` base); an off-policy type's folder adds its
  learner, config, nets and a thin acting policy (``ddpg/`` is the example);
- ``reward_signals/`` (one module per signal, one registry line each) and ``auxiliary``
  (updates that run beside a learner's);
- shared pieces beside them: ``encoders`` (ML-Agents' observation encoders), ``conditioning``
  (goal signals' HyperNetwork), ``nets``, ``network_config`` (torch-free), ``distributions``,
  ``gae``, ``normalizer``, ``noise``.

The data they consume (``Trajectory``, ``Segment``, ``TransitionBatch``) is ``unity_rl.experience``,
below both this package and the runtime; trainer types plug into the runtime's seam
(``runtime/algorithm.py``, ``runtime/acting.py``) and the runtime reaches them only through
``registry.py``.

Learners are pure: no processes, no I/O, no process-wide torch state. This package's ``__init__``
imports nothing, so ``unity_rl.config`` can read the registry without torch.
"""
