"""Actors, wirings and the learner host (docs/architecture.md).

- ``collector``: StepResults -> per-agent Trajectories (cuts, bootstrapping, episode stats);
- ``actor``: one AgentStream + a policy copy -> Segments; ``actor_loop`` is an actor's body;
- ``messages``: typed learner <-> actor messages;
- ``backend``: the seam (start K actors, broadcast weights, receive segments, stop);
  ``local``: spawn-context processes and queues;
- ``runners``: the sync and async wirings;
- ``trainer``: ``train(cfg, run_dir, resume=...) -> TrainResult``.
"""
