"""A training run, wired from its configuration (docs/architecture.md).

- ``wiring``: config sections -> trainer types' ``Algorithm`` (through the registry), actor
  specs, and the mode × backend choice, in one place;
- ``trainer``: ``train``, the run from start to clean shutdown; ``session``: its setup and
  loop — per-behavior budgets and metrics, checkpoints, lessons; ``resume``: where a run starts
  from (seed, checkpoints, lessons); ``results``: what it returns;
- ``behavior_run``: one behavior's step budget, metrics writer, checkpoint entry and outputs.

It sits above the runtime (actors, backends, runners) and the trainer types it wires together.
"""
