"""Trainer types and the pieces they share.

- one folder per trainer type (``ppo/``, ``ddpg/``): its torch-free config and YAML keys
  (``config.py``), pure learner (``learner.py``), acting policy (``acting.py``), learner host and
  runtime ``Algorithm`` (``host.py``), policy loader for evaluate/export (``export.py``), and
  ``SPEC`` in its ``__init__`` — registered by one line in ``registry.py``;
- ``offpolicy/``: what every off-policy type shares (replay config, the ``OffPolicyLearner``
  protocol, acting policy, host and ``Algorithm`` base); an off-policy type's folder adds its
  learner, config, nets and a thin acting policy (``ddpg/`` is the example);
- shared pieces beside them: ``encoders`` (ML-Agents' observation encoders), ``nets``,
  ``network_config`` (torch-free), ``distributions``, ``gae``, ``normalizer``, ``noise`` and
  ``types`` (``Trajectory``, ``Segment``, ``TransitionBatch``).

Learners are pure: no processes, no I/O, no process-wide torch state. This package's ``__init__``
imports nothing, so ``unity_rl.config`` can read the registry without torch.
"""
