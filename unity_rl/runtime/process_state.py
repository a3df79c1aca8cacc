"""Process-wide state the learner host owns: signals during a run (SIGTERM as
``unity_rl.interrupts.Terminated``, ``shielded`` clean-up), and the RNG states that checkpoints
carry (learners never touch either: ``runtime/algorithm.py``)."""
from __future__ import annotations

import contextlib
import random
import signal
import threading


import numpy as np
import torch



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
