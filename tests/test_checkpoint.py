"""CheckpointManager: atomic saves, pruning, fallbacks, and a SIGKILL in the middle of a write."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from unity_rl.checkpoint import CheckpointError, CheckpointManager, load_checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent


def _state(step: int) -> dict:
    return {"step": step, "weights": torch.full((4,), float(step)),
            "rng": np.random.default_rng(step).bit_generator.state}


def test_save_load_and_keep_last_n(tmp_path):
    mgr = CheckpointManager(tmp_path, keep=2)
    assert mgr.latest() is None
    for step in (100, 200, 300):
        path = mgr.save(_state(step), step)
        assert path.name == f"step-{step}.pt"
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["step-200.pt", "step-300.pt"]  # no pointer file: the folder is the truth
    assert mgr.latest() == tmp_path / "checkpoints" / "step-300.pt"
    assert mgr.latest_step() == 300
    state = mgr.load()
    assert state["step"] == 300 and torch.equal(state["weights"], torch.full((4,), 300.0))
    assert mgr.load(tmp_path / "checkpoints" / "step-200.pt")["step"] == 200


def test_steps_sort_numerically_not_by_name(tmp_path):
    mgr = CheckpointManager(tmp_path, keep=0)
    for step in (9000, 10000, 500):
        mgr.save(_state(step), step)
    assert [s for s, _ in mgr.checkpoints()] == [500, 9000, 10000]
    assert mgr.latest_step() == 10000


def test_unreadable_newest_file_falls_back_to_the_newest_readable(tmp_path, caplog):
    mgr = CheckpointManager(tmp_path, keep=5)
    mgr.save(_state(1), 1)
    mgr.save(_state(2), 2)
    ckpt = tmp_path / "checkpoints"
    data = (ckpt / "step-2.pt").read_bytes()
    # a stale or garbage pointer left by an older version is ignored
    (ckpt / "latest.json").write_text(json.dumps({"step": 1, "file": "step-1.pt"}))
    assert mgr.latest().name == "step-2.pt"
    (ckpt / "latest.json").write_text("{not json")
    assert mgr.latest().name == "step-2.pt"
    # a truncated file under a newer checkpoint name (e.g. copied by hand) is skipped, loudly
    (ckpt / "step-3.pt").write_bytes(data[: len(data) // 2])
    with caplog.at_level("WARNING", logger="unity_rl.checkpoint"):
        assert mgr.latest().name == "step-2.pt"
    assert "step-3.pt" in caplog.text and "skipped" in caplog.text
    assert mgr.latest_step() == 2 and mgr.load()["step"] == 2
    # every step file unreadable: no checkpoint at all, not a crash
    (ckpt / "step-1.pt").write_bytes(b"garbage")
    (ckpt / "step-2.pt").write_bytes(data[:100])
    assert mgr.latest() is None and not mgr.has_checkpoint()
    with pytest.raises(CheckpointError, match="No checkpoint"):
        mgr.load()
    # a temp file is never a checkpoint, even a complete one
    (ckpt / ".step-4.pt.abc.tmp").write_bytes(data)
    assert mgr.latest() is None
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(ckpt / "step-3.pt")


def test_load_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="No checkpoint"):
        CheckpointManager(tmp_path).load()


_WRITER = textwrap.dedent("""
    import sys, torch
    from unity_rl.checkpoint import CheckpointManager
    mgr = CheckpointManager(sys.argv[1], keep=2)
    big = torch.randn(6_000_000)  # ~24 MB: a save takes long enough to be killed mid-write
    step = 0
    while True:
        step += 1000
        mgr.save({"step": step, "big": big}, step)
""")


@pytest.mark.slow
def test_sigkill_during_saves_never_corrupts(tmp_path):
    """Kill the writer while a temp file exists (mid-write); the run dir stays loadable."""
    ckpt = tmp_path / "checkpoints"
    killed_mid_write = False
    for _attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], cwd=REPO_ROOT)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                done = list(ckpt.glob("step-*.pt")) if ckpt.is_dir() else []
                temps = list(ckpt.glob(".*.tmp")) if ckpt.is_dir() else []
                if done and temps:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed_mid_write = True
                    break
                time.sleep(0.002)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        assert proc.returncode is not None
        if killed_mid_write:
            break
    assert killed_mid_write, "never saw a save in progress"

    mgr = CheckpointManager(tmp_path, keep=2)
    latest = mgr.latest()
    assert latest is not None and latest.name.startswith("step-") and latest.suffix == ".pt"
    state = mgr.load()
    assert state["step"] == mgr.latest_step()
    assert state["big"].shape == (6_000_000,)
    # the next save of a resumed run clears the killed writer's temp files
    mgr.save({"step": state["step"] + 1}, state["step"] + 1)
    assert not list(ckpt.glob(".*.tmp"))
    assert mgr.load()["step"] == state["step"] + 1
