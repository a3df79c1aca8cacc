"""The communicator seam: the one place that touches mlagents-envs' gRPC plumbing.

``UnityBuild`` is mlagents-envs 1.1.0's ``UnityEnvironment`` with two changes, both confined to
its communicator:

1. **Split phase.** The exchange is split into ``send_*`` and ``receive`` so that the Python side
   hands actions to N builds first and then collects their answers as they come: the builds
   simulate in parallel while Python waits.
2. **No pickling hop.** mlagents-envs passes every message between its gRPC server thread and the
   main thread through a ``multiprocessing.Pipe``, which pickles the protobuf message, i.e.
   serialises and re-parses it in pure-Python protobuf, in both directions. Here the servicer
   hands the parsed message over an in-process queue instead; each arrival also notifies an
   optional listener (``BuildSet`` waits on one queue for all its builds, with no busy polling).

3. **The step codec.** Step messages are parsed by protobuf's C parser (upb: mlagents-envs'
   message modules are rebuilt for it by ``envs/protocol.py``) and turned into
   ``DecisionSteps``/``TerminalSteps`` by ``protocol.steps_from_agent_infos``; step actions are
   written as bytes by ``protocol.encode_step_input``. Both give what mlagents-envs'
   ``steps_from_proto``/``_generate_step_input`` give (``tests/envs/test_protocol.py``).

4. **Compression types.** Which observations of each behavior travel PNG-compressed
   (``ObservationProto.compression_type``) is read from the messages that announce a behavior
   and exposed as ``png_observations`` (mlagents-envs decodes PNG and uncompressed observations
   to the same float arrays and forgets which was which).

Launch, handshake content, side channels, behavior specs, resets and close are mlagents-envs' own
code.
It relies on private members of ``UnityEnvironment`` (pinned at ==1.1.0): ``_communicator``,
``_env_actions``, ``_env_specs``, ``_env_state``, ``_generate_reset_input``, ``_update_behavior_specs``, ``_update_state``, ``_poll_process``,
``_side_channel_manager`` (and its ``_side_channels_dict``: the environment-parameters channel).
"""
from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Optional

import grpc

from unity_rl.envs import protocol

protocol.install()  # before mlagents-envs' message modules (unity_rl/__init__ did it already)

from mlagents_envs.base_env import DecisionSteps, TerminalSteps  # noqa: E402
from mlagents_envs.communicator_objects.observation_pb2 import PNG
from mlagents_envs.communicator_objects.unity_input_pb2 import UnityInputProto
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
from mlagents_envs.communicator_objects.unity_output_pb2 import UnityOutputProto
from mlagents_envs.communicator_objects.unity_to_external_pb2_grpc import (
    UnityToExternalProtoServicer,
    add_UnityToExternalProtoServicer_to_server,
)
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import (
    UnityCommunicatorStoppedException,
    UnityTimeOutException,
    UnityWorkerInUseException,
)
from mlagents_envs.rpc_communicator import RpcCommunicator
from mlagents_envs.side_channel.environment_parameters_channel import (
    EnvironmentParametersChannel,
)

ENVIRONMENT_PARAMETERS_ID = EnvironmentParametersChannel().channel_id

# How often a wait on a build re-checks that its process is alive (seconds).
PROCESS_POLL_INTERVAL = 0.5
# UnityMessageProto.header with status 200, serialized.
_HEADER_OK = protocol.len_field(1, b"\x08" + protocol.varint(200))


class _QueueServicer(UnityToExternalProtoServicer):
    """gRPC handler: each Exchange call hands the build's message to Python and waits for the
    reply. One call is in flight at a time (the build is a strict request/reply client)."""

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.replies: queue.SimpleQueue = queue.SimpleQueue()
        self.listener: Callable[[], None] | None = None

    def Exchange(self, request, context):  # noqa: N802 - gRPC's name
        self.requests.put(request)
        listener = self.listener
        if listener is not None:
            listener()
        return self.replies.get()


class QueueCommunicator(RpcCommunicator):
    """``RpcCommunicator`` with ``exchange`` split into ``send``/``receive`` over queues."""

    def create_server(self):
        self.check_port(self.port)
        try:
            self.server = grpc.server(thread_pool=ThreadPoolExecutor(max_workers=2),
                                      options=(("grpc.so_reuseport", 1),))
            self.unity_to_external = _QueueServicer()
            add_UnityToExternalProtoServicer_to_server(self.unity_to_external, self.server)
            self.server.add_insecure_port("[::]:" + str(self.port))
            self.server.start()
            self.is_open = True
        except Exception as err:  # mlagents-envs reports any bind failure this way
            raise UnityWorkerInUseException(self.worker_id) from err

    def set_listener(self, listener: Callable[[], None] | None) -> None:
        """``listener()`` is called (from a gRPC thread) whenever the build sends a message."""
        self.unity_to_external.listener = listener

    def has_message(self) -> bool:
        return not self.unity_to_external.requests.empty()

    def poll_for_timeout(self, poll_callback=None) -> None:
        deadline = time.monotonic() + self.timeout_wait
        while not self.has_message():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnityTimeOutException(
                    f"The Unity environment on port {self.port} did not answer within "
                    f"{self.timeout_wait:g} s.")
            try:
                message = self.unity_to_external.requests.get(
                    timeout=min(PROCESS_POLL_INTERVAL, remaining))
            except queue.Empty:
                if poll_callback:
                    poll_callback()
                continue
            self._peeked = message
            return

    def _next_message(self) -> UnityMessageProto:
        message = getattr(self, "_peeked", None)
        if message is not None:
            self._peeked = None
            return message
        return self.unity_to_external.requests.get_nowait()

    def initialize(self, inputs: UnityInputProto, poll_callback=None) -> UnityOutputProto:
        self.poll_for_timeout(poll_callback)
        academy_output = self._next_message().unity_output
        self.send(inputs)
        self.poll_for_timeout(poll_callback)
        self._next_message()  # the second handshake call: an empty output
        return academy_output

    def send(self, inputs: UnityInputProto) -> None:
        message = UnityMessageProto()
        message.header.status = 200
        message.unity_input.CopyFrom(inputs)
        self.unity_to_external.replies.put(message)

    def send_bytes(self, unity_input: bytes) -> None:
        """Sends a serialized UnityInputProto (status 200)."""
        self.unity_to_external.replies.put(
            UnityMessageProto.FromString(_HEADER_OK + protocol.len_field(3, unity_input)))

    def receive(self, poll_callback=None) -> Optional[UnityOutputProto]:
        self.poll_for_timeout(poll_callback)
        output = self._next_message()
        if output.header.status != 200:
            return None
        return output.unity_output

    def exchange(self, inputs, poll_callback=None):
        self.send(inputs)
        return self.receive(poll_callback)

    def close(self):
        if self.is_open:
            goodbye = UnityMessageProto()
            goodbye.header.status = 400
            self.unity_to_external.replies.put(goodbye)
            self.unity_to_external.listener = None
            self.server.stop(False)
            self.is_open = False


class UnityBuild(UnityEnvironment):
    """A ``UnityEnvironment`` that can send a step or reset now and receive its answer later."""

    @staticmethod
    def _get_communicator(worker_id, base_port, timeout_wait):
        return QueueCommunicator(worker_id, base_port, timeout_wait)

    @property
    def png_observations(self) -> dict[str, tuple[bool, ...]]:
        """Behavior -> per observation, True when the build sends it PNG-compressed."""
        return getattr(self, "_png_observations", {})

    def _update_behavior_specs(self, output: UnityOutputProto) -> None:
        super()._update_behavior_specs(output)
        flags = self.__dict__.setdefault("_png_observations", {})
        for brain_param in output.rl_initialization_output.brain_parameters:
            infos = output.rl_output.agentInfos[brain_param.brain_name].value
            if infos:
                flags[brain_param.brain_name] = tuple(
                    obs.compression_type == PNG for obs in infos[0].observations)

    @property
    def process(self):
        """The build's ``subprocess.Popen`` (None once closed)."""
        return self._process

    def set_listener(self, listener: Callable[[], None] | None) -> None:
        """Called from a gRPC thread each time the build sends a message."""
        self._communicator.set_listener(listener)

    def has_answer(self) -> bool:
        """True when the answer to the last send has arrived (``receive`` will not block)."""
        return self._communicator.has_message()

    def set_answer_timeout(self, seconds: float) -> None:
        """How long ``receive`` waits for an answer before raising UnityTimeOutException."""
        self._communicator.timeout_wait = seconds

    def set_environment_parameters(self, parameters: Mapping[str, Any], seed: int = 0) -> None:
        """Queues environment parameters (floats or sampler specs; a sampler seed of -1 takes
        ``seed``) on the build's environment-parameters side channel (the one ``launcher``
        creates); they travel with the next reset or step."""
        channel = self._side_channel_manager._side_channels_dict.get(ENVIRONMENT_PARAMETERS_ID)
        if channel is None:
            raise RuntimeError("this build was started without an environment-parameters channel")
        for name, value in parameters.items():
            send_environment_parameter(channel, name, value, seed)

    def send_reset(self) -> None:
        self._communicator.send(self._generate_reset_input())

    def send_step(self) -> None:
        """Sends the actions set since the last answer (zeros for agents left without one)."""
        for name, spec in self._env_specs.items():
            if name not in self._env_actions:
                n_agents = len(self._env_state[name][0]) if name in self._env_state else 0
                self._env_actions[name] = spec.action_spec.empty_action(n_agents)
        n_agents = {name: len(state[0]) for name, state in self._env_state.items()}
        side_channel = bytes(self._side_channel_manager.generate_side_channel_messages())
        self._communicator.send_bytes(
            protocol.encode_step_input(self._env_actions, n_agents, side_channel))

    def _update_state(self, output) -> None:
        """``UnityEnvironment._update_state`` with the fast step decoder."""
        for name, spec in self._env_specs.items():
            if name in output.agentInfos:
                self._env_state[name] = protocol.steps_from_agent_infos(
                    output.agentInfos[name].value, spec)
            else:
                self._env_state[name] = (DecisionSteps.empty(spec), TerminalSteps.empty(spec))
        self._side_channel_manager.process_side_channel_message(output.side_channel)

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


def send_environment_parameter(channel: EnvironmentParametersChannel, name: str, value: Any,
                               seed: int) -> None:
    """Queues one environment parameter (a float, or a sampler spec) on ``channel``."""
    kind = getattr(value, "sampler_type", "constant")
    sampler_seed = getattr(value, "seed", -1)
    sampler_seed = seed if sampler_seed is None or sampler_seed < 0 else sampler_seed
    if kind == "constant":
        channel.set_float_parameter(name, float(getattr(value, "value", value)))
    elif kind == "uniform":
        channel.set_uniform_sampler_parameters(name, value.min_value, value.max_value,
                                               sampler_seed)
    elif kind == "gaussian":
        channel.set_gaussian_sampler_parameters(name, value.mean, value.st_dev, sampler_seed)
    elif kind == "multirangeuniform":
        channel.set_multirangeuniform_sampler_parameters(
            name, [list(i) for i in value.intervals], sampler_seed)
    else:
        raise ValueError(f"environment parameter '{name}': unknown sampler_type {kind!r}")
