"""Actors, backends and runners, and the seam trainer types plug into (docs/architecture.md).

- ``collector``: StepResults -> per-agent Trajectories (cuts, bootstrapping, episode stats);
- ``actor``: one AgentStream + a policy copy -> Segments; ``actor_spec``: what an actor is
  given; ``actor_loop``: an actor process's body over any channels;
- ``messages``: typed learner <-> actor messages (weights, control, reports);
- ``backend``: the seam (start K actors, broadcast weights and control, receive segments, stop);
  ``supervisor``: the one ``ActorSupervisor`` (slot states, restarts, timeouts) under both
  transports, ``local`` (spawn-context processes and queues) and ``ray_backend`` (Ray actors);
  ``unity_rl.training.wiring.make_backend`` picks one;
- ``runners``: the sync and async wirings;
- ``algorithm`` / ``acting``: the seam (``Algorithm``, ``LearnerHost``, ``ActingPolicy``).

The run itself (config -> algorithms, backend, loop) is ``unity_rl.training``.
"""
