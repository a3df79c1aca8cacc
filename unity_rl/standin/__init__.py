"""Stand-in Unity builds: simulated ML-Agents scenes that speak the real Unity wire protocol.

No Unity player exists on the machines this project is tested on, so the executables in
``unity_builds/`` (``3DBall.x86_64``, ``Basic.x86_64``, ``VisualBall.x86_64``,
``TwoBehaviors.x86_64``) are small launchers that run ``python -m unity_rl.standin SCENE``. The
process behaves like a Unity player for ``mlagents_envs.environment.UnityEnvironment``: same
command line, same gRPC client role and handshake, same message timing and agent lifecycle
(decision periods, terminal infos sent one step late, max-step truncation, RESET), side
channels decoded. They are stand-ins, not Unity: the physics is a numpy model.

Modules: ``player`` (process, gRPC loop), ``academy`` (Unity's lifecycle) over ``agent_groups``
(one group of agents per behavior), ``wire`` and ``wire_input`` (protobuf bytes of the hot path,
written and read, over ``proto_bytes``), ``side_channels``, ``options`` (command line),
``scenes`` (models).
Importing this package imports nothing heavy; the player imports numpy and gRPC when it runs.
"""
