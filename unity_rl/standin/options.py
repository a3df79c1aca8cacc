"""Command-line arguments of a stand-in player, parsed the way a Unity player reads its own.

Unity arguments are single-dash flags (``-logFile PATH``, ``-nographics``, ``-batchmode``)
mixed with ML-Agents' ``--mlagents-port N``; argparse cannot read them, and a Unity player
ignores every argument it does not know. Stand-in options are named ``--standin-...`` and take
their value as the next token or after ``=``. Unlike unknown arguments, a malformed stand-in
option is an error (the player logs it and exits with code 2), so a typo in a test cannot
silently run the default scene.

Stand-in options (all optional; see unity_builds/README.md):

=================================  ========================================================
``--standin-agents N[,N2...]``     agents per behavior (one value for all, or one per behavior)
``--standin-max-step N``           Agent.MaxStep for every behavior (0 = unlimited)
``--standin-decision-period P``    DecisionRequester period for every agent
``--standin-decision-periods a,b``  per-agent periods, assigned cyclically by agent index
``--standin-late-agents K@N``      the last K agents of each behavior appear at academy step N
``--standin-crash-after N``        exit with the crash code after N academy steps
``--standin-crash-code C``         exit code of a crash (default 3)
``--standin-hang-after N``         stop answering (stay alive) after N academy steps
``--standin-step-delay S``         sleep S seconds per academy step (a slow build)
``--standin-seed S``               scene seed, overriding the trainer's handshake seed
``--standin-realtime``             pace at 50 x time_scale academy steps/s like a real player
``--standin-basic-start CELL``     Basic: start cell (default 10)
``--standin-spec JSON_OR_PATH``    Mock: its spec, JSON text or a JSON file (docs/testing.md)
``--standin-connect-timeout S``    give up (exit 1) when no trainer answers the handshake
``--standin-blind``                GridWorld: send all-black camera images (same shape, PNG);
                                   Sorter: send the buffer sensor with zero rows only
``--standin-gridworld-tinted``     GridWorld: the earlier stand-in shape (camera 3x40x40 only,
                                   target shown by the floor tint, 3x3, period 5, MaxStep 500)
``--standin-pyramid-pushes N``     Pyramids: touches that knock the pyramid over (default
                                   PUSHES of the scene)
``--standin-pyramid-rooms``        Pyramids: walls with one door each split the room into four
``--standin-pyramid-recover K``    Pyramids: after K decisions without a push the pyramid
                                   stands whole again (default 0: never)
``--standin-pyramid-push RULE``    Pyramids: which touches count as pushes: ``run-up`` (the
                                   agent stepped a cell on its previous decision) or ``touch``
                                   (every touch; the scene's rule through stop 29)
``--standin-heuristic``            Pyramids: act with the scene's built-in heuristic, ignoring
                                   the trainer's actions (Unity's "Heuristic Only")
``--standin-scripted-team N``      SoccerTwos, StrikersVsGoalie: team N's agents follow a
                                   script (chase the ball, kick it goalward) whatever actions
                                   they receive (they still request decisions)
``--standin-scripted-skill P``     with --standin-scripted-team: each academy step a scripted
                                   agent follows its script with probability P (default 1),
                                   else acts at random (a weaker opponent)
=================================  ========================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field


class OptionError(ValueError):
    """A stand-in option is malformed; the message names it."""


@dataclass
class PlayerOptions:
    port: int = 5004
    """--mlagents-port; Unity's default when the argument is absent is the Editor port 5004."""
    log_file: str | None = None
    """-logFile PATH ('-' = stdout, as in Unity); None: the player logs nowhere."""
    no_graphics: bool = False
    agents: tuple[int, ...] | None = None
    max_step: int | None = None
    decision_period: int | None = None
    decision_periods: tuple[int, ...] | None = None
    late_agents: tuple[int, int] | None = None
    """(count, academy step)."""
    crash_after: int | None = None
    crash_code: int = 3
    hang_after: int | None = None
    step_delay: float = 0.0
    seed: int | None = None
    realtime: bool = False
    basic_start: int | None = None
    spec: str | None = None
    """--standin-spec: the Mock scene's spec, JSON text or a file path (read by the scene)."""
    connect_timeout: float = 30.0
    blind: bool = False
    """GridWorld: all-black images, for a policy blind to the image (a baseline); Sorter: an
    all-padding buffer sensor (a policy that never sees the tiles)."""
    gridworld_tinted: bool = False
    """GridWorld: the tinted variant (the stand-in's shape before it matched Unity's scene)."""
    pyramid_pushes: int | None = None
    """Pyramids: touches that knock the pyramid over (None: the scene's default)."""
    pyramid_rooms: bool | None = None
    """Pyramids: four rooms with doors (None: the scene's default)."""
    pyramid_recover: int | None = None
    """Pyramids: decisions without a push after which the pyramid is whole again (None: the
    scene's default; 0: never)."""
    pyramid_push: str | None = None
    """Pyramids: ``run-up`` or ``touch``, which touches count as pushes (None: the scene's
    default)."""
    heuristic: bool = False
    """Pyramids: the agents act with the scene's built-in heuristic whatever actions arrive
    (Unity's Behavior Type "Heuristic Only"; for recording demonstrations)."""
    scripted_team: int | None = None
    """SoccerTwos / StrikersVsGoalie: the team whose agents play a scripted opponent."""
    scripted_skill: float = 1.0
    """Probability that a scripted agent follows its script at an academy step (else random)."""
    ignored: list[str] = field(default_factory=list)
    """Arguments the player did not recognise (Unity ignores them too)."""


def _int(name: str, text: str, minimum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name} expects an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"{name} must be >= {minimum}, got {value}")
    return value


def _float(name: str, text: str, minimum: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"{name} expects a number, got {text!r}") from None
    if minimum is not None and not value >= minimum:
        raise OptionError(f"{name} must be >= {minimum}, got {text}")
    return value


def _int_list(name: str, text: str, minimum: int) -> tuple[int, ...]:
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise OptionError(f"{name} expects a comma-separated list of integers, got {text!r}")
    return tuple(_int(name, p.strip(), minimum) for p in parts)


def _late(name: str, text: str) -> tuple[int, int]:
    count, sep, step = text.partition("@")
    if not sep:
        raise OptionError(f"{name} expects COUNT@STEP (e.g. 2@25), got {text!r}")
    return _int(name, count, 1), _int(name, step, 0)


def _set(opts: PlayerOptions, name: str, value: str) -> None:
    if name == "agents":
        opts.agents = _int_list("--standin-agents", value, 1)
    elif name == "max-step":
        opts.max_step = _int("--standin-max-step", value, 0)
    elif name == "decision-period":
        opts.decision_period = _int("--standin-decision-period", value, 1)
    elif name == "decision-periods":
        opts.decision_periods = _int_list("--standin-decision-periods", value, 1)
    elif name == "late-agents":
        opts.late_agents = _late("--standin-late-agents", value)
    elif name == "crash-after":
        opts.crash_after = _int("--standin-crash-after", value, 0)
    elif name == "crash-code":
        opts.crash_code = _int("--standin-crash-code", value, 0)
    elif name == "hang-after":
        opts.hang_after = _int("--standin-hang-after", value, 0)
    elif name == "step-delay":
        opts.step_delay = _float("--standin-step-delay", value, 0.0)
    elif name == "seed":
        opts.seed = _int("--standin-seed", value)
    elif name == "basic-start":
        opts.basic_start = _int("--standin-basic-start", value, 0)
    elif name == "spec":
        if not value.strip():
            raise OptionError("--standin-spec expects JSON text or a JSON file's path")
        opts.spec = value
    elif name == "pyramid-pushes":
        opts.pyramid_pushes = _int("--standin-pyramid-pushes", value, 1)
    elif name == "pyramid-recover":
        opts.pyramid_recover = _int("--standin-pyramid-recover", value, 0)
    elif name == "pyramid-push":
        if value not in ("run-up", "touch"):
            raise OptionError(f"--standin-pyramid-push expects run-up or touch, got {value!r}")
        opts.pyramid_push = value
    elif name == "scripted-team":
        opts.scripted_team = _int("--standin-scripted-team", value, 0)
    elif name == "scripted-skill":
        opts.scripted_skill = _float("--standin-scripted-skill", value, 0.0)
        if opts.scripted_skill > 1.0:
            raise OptionError(f"--standin-scripted-skill expects a probability in [0, 1], "
                              f"got {value}")
    elif name == "connect-timeout":
        opts.connect_timeout = _float("--standin-connect-timeout", value, 0.0)
    else:
        raise OptionError(f"unknown stand-in option --standin-{name}")


_FLAGS = {"realtime", "blind", "gridworld-tinted", "heuristic", "pyramid-rooms"}


def parse_args(argv: list[str]) -> PlayerOptions:
    """Parses a player's command line; raises OptionError on a malformed stand-in option."""
    opts = PlayerOptions()
    i = 0
    while i < len(argv):
        arg = argv[i]
        low = arg.lower()
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if low == "-logfile":
            if nxt is not None:
                opts.log_file = nxt
                i += 1
        elif low in ("-nographics", "-batchmode"):
            opts.no_graphics = opts.no_graphics or low == "-nographics"
        elif low == "--mlagents-port" or low.startswith("--mlagents-port="):
            text = arg.partition("=")[2] if "=" in arg else nxt
            if "=" not in arg:
                i += 1
            if text is None:
                raise OptionError("--mlagents-port expects a port number")
            opts.port = _int("--mlagents-port", text, 1)
        elif low.startswith("--standin-"):
            name, eq, value = arg[len("--standin-") :].partition("=")
            if name in _FLAGS:
                on = not eq or value.lower() in ("1", "true", "yes")
                setattr(opts, name.replace("-", "_"), on)
            else:
                if not eq:
                    if nxt is None:
                        raise OptionError(f"--standin-{name} expects a value")
                    value = nxt
                    i += 1
                _set(opts, name, value)
        else:
            opts.ignored.append(arg)
        i += 1
    return opts
