"""The communicator seam: the one place that touches mlagents-envs' gRPC plumbing.

``UnityBuild`` is mlagents-envs 1.1.0's ``UnityEnvironment`` with its exchange split in two
halves, ``send_*`` and ``receive``, so that the Python side can hand actions to N builds first and
then collect their answers as they come: the builds simulate in parallel while Python waits on
all their pipes at once (``multiprocessing.connection.wait``), with no busy polling.  Launch,
handshake, side channels, message parsing and close are mlagents-envs' own code, unchanged.

It relies on private members of ``UnityEnvironment`` (pinned at ==1.1.0): ``_communicator``,
``_env_actions``, ``_env_specs``, ``_env_state``, ``_generate_step_input``,
``_generate_reset_input``, ``_update_behavior_specs``, ``_update_state``, ``_poll_process``.
A faster protocol path replaces this module and nothing else.
"""
from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Optional

from mlagents_envs.communicator_objects.unity_input_pb2 import UnityInputProto
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
from mlagents_envs.communicator_objects.unity_output_pb2 import UnityOutputProto
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import UnityCommunicatorStoppedException, UnityTimeOutException
from mlagents_envs.rpc_communicator import RpcCommunicator

# How often a wait on a build re-checks that its process is alive (seconds).
PROCESS_POLL_INTERVAL = 0.5


class SplitPhaseCommunicator(RpcCommunicator):
    """``RpcCommunicator`` with ``exchange`` split into ``send`` and ``receive``.

    ``poll_for_timeout`` is replaced because the original polls with ``timeout_wait // 10``
    seconds between liveness checks, which is a busy loop for timeouts under 10 s.
    """

    @property
    def connection(self) -> Connection:
        """The pipe end that becomes readable when the build's answer has arrived."""
        return self.unity_to_external.parent_conn

    def poll_for_timeout(self, poll_callback=None) -> None:
        deadline = time.monotonic() + self.timeout_wait
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnityTimeOutException(
                    f"The Unity environment on port {self.port} did not answer within "
                    f"{self.timeout_wait:g} s."
                )
            if self.connection.poll(min(PROCESS_POLL_INTERVAL, remaining)):
                return
            if poll_callback:
                poll_callback()

    def send(self, inputs: UnityInputProto) -> None:
        message = UnityMessageProto()
        message.header.status = 200
        message.unity_input.CopyFrom(inputs)
        self.connection.send(message)

    def receive(self, poll_callback=None) -> Optional[UnityOutputProto]:
        self.poll_for_timeout(poll_callback)
        output = self.connection.recv()
        if output.header.status != 200:
            return None
        return output.unity_output

    def exchange(self, inputs, poll_callback=None):
        self.send(inputs)
        return self.receive(poll_callback)


class UnityBuild(UnityEnvironment):
    """A ``UnityEnvironment`` that can send a step or reset now and receive its answer later."""

    @staticmethod
    def _get_communicator(worker_id, base_port, timeout_wait):
        return SplitPhaseCommunicator(worker_id, base_port, timeout_wait)

    @property
    def connection(self) -> Connection:
        return self._communicator.connection

    @property
    def process(self):
        """The build's ``subprocess.Popen`` (None once closed)."""
        return self._process

    def set_answer_timeout(self, seconds: float) -> None:
        """How long ``receive`` waits for an answer before raising UnityTimeOutException."""
        self._communicator.timeout_wait = seconds

    def send_reset(self) -> None:
        self._communicator.send(self._generate_reset_input())

    def send_step(self) -> None:
        """Sends the actions set since the last answer (zeros for agents left without one)."""
        for name, spec in self._env_specs.items():
            if name not in self._env_actions:
                n_agents = len(self._env_state[name][0]) if name in self._env_state else 0
                self._env_actions[name] = spec.action_spec.empty_action(n_agents)
        self._communicator.send(self._generate_step_input(self._env_actions))

    def receive(self) -> None:
        """Reads the answer to the last send; afterwards ``get_steps`` reflects it."""
        outputs = self._communicator.receive(self._poll_process)
        if outputs is None:
            raise UnityCommunicatorStoppedException("Communicator has exited.")
        self._update_behavior_specs(outputs)
        self._update_state(outputs.rl_output)
        self._is_first_message = False
        self._env_actions.clear()

    def check_alive(self) -> None:
        """Raises UnityEnvironmentException if the build's process has exited."""
        self._poll_process()
