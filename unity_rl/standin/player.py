"""The stand-in player process: a gRPC *client* of the trainer, like a Unity build.

Run as ``python -m unity_rl.standin SCENE [Unity-style args]`` (the launchers in unity_builds/ do
this). Sequence, as Unity's RpcCommunicator:

1. connect to ``localhost:<--mlagents-port>`` and call ``Exchange`` with status 200 and the
   ``rl_initialization_output`` (name "AcademySingleton", communication version 1.5.0,
   capabilities); the reply's ``rl_initialization_input`` gives the seed and num_areas;
2. call ``Exchange`` again with an empty status-200 message; the reply is the first input
   (normally RESET with the queued side-channel messages);
3. loop over academy steps (``unity_rl.standin.academy``): exchange one message at each step
   where an agent decides or has a pending terminal, and apply the reply (side channels first,
   then the command: 0 STEP with actions, 1 RESET, 2 QUIT).

Exit: status 400 from the trainer (its ``close()``), QUIT, or any gRPC error (the trainer went
away, its server stopped) -> exit 0 at once. SIGTERM/SIGINT -> logged, then the process dies of
that signal. The player writes nothing on stdout/stderr: file descriptors 1 and 2 are
redirected to the ``-logFile`` (or /dev/null) before anything else runs.
"""
from __future__ import annotations

import os
import signal
import sys
import time

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_ARGS = 2

COMMUNICATION_VERSION = "1.5.0"
PACKAGE_VERSION = "3.0.0"
"""com.unity.ml-agents release paired with mlagents-envs 1.1.0 (release 22)."""
ACADEMY_NAME = "AcademySingleton"
EXCHANGE_METHOD = "/communicator_objects.UnityToExternalProto/Exchange"


class PlayerLog:
    """Line-buffered log, like a Unity Player.log; silent when no -logFile was given."""

    def __init__(self, path: str | None):
        self._file = None
        devnull = os.open(os.devnull, os.O_WRONLY)
        target = devnull
        if path == "-":
            target = os.dup(1)  # Unity: "-logFile -" logs to the console
        elif path:
            try:
                parent = os.path.dirname(os.path.abspath(path))
                os.makedirs(parent, exist_ok=True)
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            except OSError:
                target = devnull
        # Nothing of this process (Python warnings, tracebacks, gRPC C-core) may reach the
        # trainer's console: stdout goes nowhere, stderr into the log.
        os.dup2(devnull, 1)
        os.dup2(target, 2)
        if target != devnull:
            self._file = os.fdopen(os.dup(target), "a", buffering=1)
            os.close(target)
        os.close(devnull)
        sys.stdout = open(os.devnull, "w")
        sys.stderr = os.fdopen(2, "w", buffering=1)

    def __call__(self, message: str) -> None:
        if self._file is not None:
            self._file.write(f"{time.strftime('%H:%M:%S')} [stand-in] {message}\n")


def _install_signal_handlers(log: PlayerLog) -> None:
    def handler(signum, _frame):
        try:
            log(f"received {signal.Signals(signum).name}, quitting")
        except (RuntimeError, OSError):  # the log was being written when the signal came
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)


def _hang(log: PlayerLog, parent: int) -> int:
    """Stops answering but stays alive; only a signal or the launcher's death ends it."""
    log("hanging (--standin-hang-after): no more messages, waiting for a signal")
    while True:
        time.sleep(0.25)
        if os.getppid() != parent:
            log("parent process gone while hanging, quitting")
            return EXIT_OK


class _Pacer:
    """Real-time pacing of a Unity player: 50 x time_scale academy steps per second, unless a
    capture frame rate makes the engine run as fast as it can."""

    def __init__(self):
        self.next = time.monotonic()

    def wait(self, engine) -> None:
        if engine.capture_frame_rate is not None and engine.capture_frame_rate > 0:
            self.next = time.monotonic()
            return
        rate = 50.0 * max(engine.time_scale, 1e-3)
        self.next += 1.0 / rate
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.5:
            self.next = time.monotonic()


def _rpc_reason(err) -> str:
    code = getattr(err, "code", None)
    return code().name if callable(code) else type(err).__name__


def _setup(scene_name: str, argv: list[str]):
    """Parses and validates the command line, opens the log: (opts, log, behaviors) or an exit
    code. Nothing touches the network before the options are known to be valid."""
    from unity_rl.standin.options import OptionError, parse_args  # stdlib only

    try:
        opts, error = parse_args(argv), None
    except OptionError as err:
        opts, error = None, err
    if opts is not None:
        log_path = opts.log_file
    else:  # still honour -logFile to report the error
        low = [a.lower() for a in argv]
        at = low.index("-logfile") + 1 if "-logfile" in low else len(argv)
        log_path = argv[at] if at < len(argv) else None
    log = PlayerLog(log_path)
    _install_signal_handlers(log)
    log(f"stand-in Unity player (not a real Unity build), scene {scene_name}, pid {os.getpid()}")
    log(f"arguments: {' '.join(argv)}")
    # numpy and the scenes load only now: an import error lands in the log, not on a console.
    from unity_rl.standin.agent_groups import plan_groups
    from unity_rl.standin.scenes import SCENES

    behaviors = SCENES.get(scene_name)
    try:
        if error is not None:
            raise error
        if behaviors is None:
            raise OptionError(f"unknown scene {scene_name!r}; known: {', '.join(SCENES)}")
        if callable(behaviors):  # a scene configured by its options (Mock: --standin-spec)
            behaviors = behaviors(opts)
        plan_groups(behaviors, opts)
        if opts.basic_start is not None and not 0 <= opts.basic_start < 20:
            raise OptionError(f"--standin-basic-start must be in 0..19, got {opts.basic_start}")
    except OptionError as err:
        log(f"error: {err}")
        return EXIT_BAD_ARGS
    if opts.ignored:
        log(f"ignored arguments: {' '.join(opts.ignored)}")
    return opts, log, behaviors


def _hello() -> bytes:
    """Handshake call 1: status 200 and the academy's rl_initialization_output."""
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    hello = UnityMessageProto()
    hello.header.status = 200
    init = hello.unity_output.rl_initialization_output
    init.name = ACADEMY_NAME
    init.communication_version = COMMUNICATION_VERSION
    init.package_version = PACKAGE_VERSION
    caps = init.capabilities
    caps.baseRLCapabilities = True
    caps.concatenatedPngObservations = True
    caps.compressedChannelMapping = True
    caps.hybridActions = True
    caps.trainingAnalytics = True
    caps.variableLengthObservation = True
    caps.multiAgentGroups = True
    return hello.SerializeToString()


def run(scene_name: str, argv: list[str]) -> int:
    setup = _setup(scene_name, argv)
    if isinstance(setup, int):
        return setup
    opts, log, behaviors = setup

    import grpc
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    from unity_rl.standin.academy import Academy
    from unity_rl.standin.side_channels import SideChannelReceiver
    from unity_rl.standin.wire import EMPTY_OK_MESSAGE, STATUS_OK

    parent = os.getppid()
    channel = grpc.insecure_channel(
        f"localhost:{opts.port}",
        options=[
            ("grpc.max_send_message_length", -1),
            ("grpc.max_receive_message_length", -1),
            ("grpc.enable_http_proxy", 0),
        ],
    )
    exchange = channel.unary_unary(EXCHANGE_METHOD)  # no (de)serializers: bytes in, bytes out

    # Handshake call 1: our capabilities for the trainer's seed and num_areas.
    try:
        raw = exchange(_hello(), wait_for_ready=True, timeout=opts.connect_timeout)
    except grpc.RpcError as err:
        log(f"no trainer answered on port {opts.port} ({_rpc_reason(err)}); quitting")
        return EXIT_ERROR
    reply = UnityMessageProto.FromString(raw)
    if reply.header.status != STATUS_OK:
        log(f"trainer refused the connection (status {reply.header.status}); quitting")
        return EXIT_OK
    init_in = reply.unity_input.rl_initialization_input
    log(
        f"connected to trainer: mlagents-envs {init_in.package_version}, communication "
        f"{init_in.communication_version}, seed {init_in.seed}, num_areas {init_in.num_areas}"
    )
    if init_in.communication_version.split(".")[0] != COMMUNICATION_VERSION.split(".")[0]:
        log("warning: communication API major versions differ")
    receiver = SideChannelReceiver(log)
    academy = Academy(
        behaviors,
        opts,
        seed=init_in.seed if opts.seed is None else opts.seed,
        parameters=receiver.parameters,
        num_areas=max(1, init_in.num_areas),
    )
    receiver.progress = academy.progress
    log("behaviors: " + ", ".join(
        f"{g.name} x{g.n} (period {g.uniform_period or list(g.periods)}, max step {g.max_step})"
        for g in academy.groups
    ))
    loop_cpu = time.process_time()

    def shutdown(reason: str) -> None:
        now = time.process_time()
        log(
            f"{reason}; academy steps {academy.total_steps}, messages {academy.messages}, "
            f"resets {academy.resets}, cpu {now - loop_cpu:.3f} s (after the handshake; "
            f"{now:.3f} s in all)"
        )

    # Handshake call 2: an empty message; the reply is the first input (normally RESET).
    try:
        first = exchange(EMPTY_OK_MESSAGE)
    except grpc.RpcError as err:
        shutdown(f"trainer went away during the handshake ({_rpc_reason(err)})")
        return EXIT_OK
    return _serve(exchange, grpc.RpcError, first, academy, receiver, opts, log, shutdown, parent)


def _serve(exchange, rpc_error, first: bytes, academy, receiver, opts, log, shutdown,
           parent: int) -> int:
    """The academy loop: one EnvironmentStep per iteration, a message when one is due."""
    from unity_rl.standin.wire import STATUS_OK
    from unity_rl.standin.wire_input import COMMAND_QUIT, COMMAND_RESET, decode_input_message

    pacer = _Pacer() if opts.realtime else None
    step_delay, crash_after, hang_after = opts.step_delay, opts.crash_after, opts.hang_after

    def finish_step() -> None:  # AgentAct + physics, then the pace of a slow or real-time build
        academy.end_step()
        if pacer is not None:
            pacer.wait(receiver.engine)
        if step_delay:
            time.sleep(step_delay)

    raw: bytes | None = first
    while True:
        if raw is not None:
            inp = decode_input_message(raw)
            raw = None
            if inp.status != STATUS_OK:
                shutdown(f"trainer closed the connection (status {inp.status})")
                return EXIT_OK
            receiver.process(inp.side_channel)  # side channels first, then the command
            if inp.command == COMMAND_QUIT:
                shutdown("QUIT command")
                return EXIT_OK
            if inp.command == COMMAND_RESET:
                academy.reset()
                log(f"RESET (reset #{academy.resets}, academy step {academy.total_steps})")
            else:
                academy.apply_actions(inp.actions)
                finish_step()
        if crash_after is not None and academy.total_steps >= crash_after:
            shutdown(f"crashing on purpose (--standin-crash-after {crash_after})")
            os._exit(opts.crash_code)
        if hang_after is not None and academy.total_steps >= hang_after:
            shutdown(f"hanging on purpose (--standin-hang-after {hang_after})")
            return _hang(log, parent)
        message = academy.begin_step()
        if message is None:  # nobody decides and no terminal is pending: no exchange
            finish_step()
            continue
        try:
            raw = exchange(academy.encode(message))
        except rpc_error as err:
            shutdown(f"trainer went away ({_rpc_reason(err)})")
            return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        code = EXIT_BAD_ARGS  # no scene: nothing to run (and nowhere to say so)
    else:
        try:
            code = run(argv[0], argv[1:])
        except BaseException:  # noqa: BLE001 - the traceback goes to the log (fd 2)
            import traceback

            traceback.print_exc()
            code = EXIT_ERROR
    try:
        sys.stderr.flush()
    finally:
        # Skip interpreter teardown: gRPC's threads can delay a normal exit.
        os._exit(code)
