"""For tests that interrupt a child process with SIGINT (Ctrl-C): started from a shell without
job control (``pytest ... &``, ``nohup``), the test run ignores SIGINT, its children inherit
that, and Python then never raises KeyboardInterrupt in them, so such tests would hang until
their timeout. ``sigint_as_in_a_terminal`` (a ``preexec_fn``) gives the child the default
disposition, as a terminal's foreground job has."""
from __future__ import annotations

import signal


def sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
