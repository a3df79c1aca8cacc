"""Process-wide state the learner host owns: signals during a run (SIGTERM as
``unity_rl.interrupts.Terminated``, ``shielded`` clean-up), the RNG states that checkpoints
carry (learners never touch either: ``runtime/algorithm.py``), and imports worth starting
early (``import_in_background``)."""
from __future__ import annotations

import contextlib
import importlib
import logging
import random
import signal
import threading

import numpy as np
import torch

logger = logging.getLogger(__name__)

OPTIMISER_IMPORTS = ("torch._dynamo",)
"""What a learner's first optimiser imports: ``torch.optim.Optimizer.__init__`` is wrapped by
``torch._disable_dynamo``, whose first call imports ``torch._dynamo`` (2.5-2.7 s of one core
here, torch 2.13), so the first learner built would pay it while every actor already waits."""


def import_in_background(modules: tuple[str, ...] = OPTIMISER_IMPORTS) -> threading.Thread:
    """Starts importing ``modules`` in a daemon thread and returns it (join it before the code
    that needs them). The trainer starts it before the builds, whose start-up it overlaps: the
    main thread then mostly waits on pipes. A failed import is logged at DEBUG and left to fail
    again, with its own error, where the module is used."""
    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as err:  # the real import, later, says what is wrong
                logger.debug("background import of %s failed: %r", name, err)

    thread = threading.Thread(target=run, name="unity_rl-imports", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def shielded():
    """Ignores SIGINT/SIGTERM during the final clean-up (seconds), so it cannot be torn."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# ----------------------------------------------------------------------------------------------
# RNG state
# ----------------------------------------------------------------------------------------------

def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state()}


def load_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
