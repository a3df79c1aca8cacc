"""Replay buffers: ours (numpy ring, sum-tree PER, shared memory) versus cpprb's, cycle by cycle.

One cycle is what the DDPG learner and its actors do per gradient update at the shipped scale:
add 24 rows (one decision step of 24 agents), sample 256 rows, update those 256 priorities
(uniform buffers skip the update). Buffers hold capacity 1M rows of obs_dim 8, act_dim 2
(3DBall), pre-filled to capacity so sampling runs over full trees. Each buffer is timed for
``--seconds`` of this process's CPU time after a warm-up, ``--repeats`` times, interleaved; the
median cycles per CPU-second is the headline (the cores are shared with other work, which skews
wall-clock rates; those are reported too).
Everything runs in this one process (the shared-memory buffers pay their locks, not contention).

    .venv/bin/python benchmarks/replay_buffers.py [--seconds 2] [--repeats 3] [--capacity 1000000]

Prints a table and writes ``benchmarks/results/replay_buffers.json``. The machine is shared with
whatever else runs: compare rows of one invocation, not across invocations.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import unity_rl.replay as ours  # noqa: E402
from unity_rl.experience import TransitionBatch  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
OBS_DIM, ACT_DIM, ADD, BATCH = 8, 2, 24, 256


def _batch(rng: np.random.Generator, n: int) -> TransitionBatch:
    return TransitionBatch(rng.standard_normal((n, OBS_DIM), np.float32),
                           rng.uniform(-1, 1, (n, ACT_DIM)).astype(np.float32),
                           rng.standard_normal(n, np.float32),
                           rng.standard_normal((n, OBS_DIM), np.float32),
                           (rng.random(n) < 0.01).astype(np.float32))


# ----------------------------------------------------------------------------------------------
# Candidates: each is (make(capacity) -> buffer, cycle(buffer, batch, priorities), close(buffer))
# ----------------------------------------------------------------------------------------------

def _ours(cls, prioritized: bool, **kwargs):
    def make(capacity):
        return cls(capacity, OBS_DIM, ACT_DIM, seed=0, prioritized=prioritized, **kwargs)

    def fill(buf, batch, prio):
        buf.add(batch, prio if prioritized else None)

    def cycle(buf, batch, prio, rng):
        buf.add(batch, prio if prioritized else None)
        sample = buf.sample_indexed(BATCH, 0.4)
        if prioritized:
            buf.update_priorities(sample.indices, rng.random(BATCH))

    def close(buf):
        if hasattr(buf, "unlink"):
            buf.close()
            buf.unlink()
    return make, fill, cycle, close


def _cpprb(kind: str):
    import cpprb
    env = {"obs": {"shape": OBS_DIM}, "act": {"shape": ACT_DIM}, "rew": {},
           "next_obs": {"shape": OBS_DIM}, "done": {}}
    prioritized = kind != "uniform"

    def make(capacity):
        if kind == "uniform":
            return cpprb.ReplayBuffer(capacity, env)
        if kind == "per":
            return cpprb.PrioritizedReplayBuffer(capacity, env, alpha=0.6, eps=1e-6)
        return cpprb.MPPrioritizedReplayBuffer(capacity, env, alpha=0.6, eps=1e-6)

    def add(buf, batch, prio):
        kw = dict(obs=batch.obs, act=batch.actions, rew=batch.rewards, next_obs=batch.next_obs,
                  done=batch.terminated)
        if prioritized:
            kw["priorities"] = prio
        buf.add(**kw)

    def cycle(buf, batch, prio, rng):
        add(buf, batch, prio)
        sample = buf.sample(BATCH, beta=0.4) if prioritized else buf.sample(BATCH)
        if prioritized:
            buf.update_priorities(sample["indexes"], rng.random(BATCH))

    return make, add, cycle, lambda buf: None


def candidates() -> dict[str, tuple]:
    found = {
        "ours ReplayBuffer (uniform)": _ours(ours.ReplayBuffer, False),
        "ours ReplayBuffer (prioritized, numpy sampler)": _ours(ours.ReplayBuffer, True),
        "ours ReplayBuffer (prioritized, cpprb sampler)": _ours(ours.ReplayBuffer, True,
                                                               sampler="cpprb"),
        "ours SharedReplayBuffer (uniform)": _ours(ours.SharedReplayBuffer, False),
        "ours SharedReplayBuffer (prioritized)": _ours(ours.SharedReplayBuffer, True),
        "cpprb ReplayBuffer": _cpprb("uniform"),
        "cpprb PrioritizedReplayBuffer": _cpprb("per"),
        "cpprb MPPrioritizedReplayBuffer": _cpprb("mp"),
    }
    return found


def measure(spec, capacity: int, seconds: float) -> tuple[float, float]:
    """(cycles per CPU-second of this process, cycles per wall second)."""
    make, fill, cycle, close = spec
    rng = np.random.default_rng(0)
    buf = make(capacity)
    try:
        chunk = _batch(rng, 50_000)
        prio = rng.random(50_000)
        for _ in range(max(1, capacity // 50_000)):
            fill(buf, chunk, prio)
        batch, prio = _batch(rng, ADD), rng.random(ADD)
        for _ in range(50):  # warm-up
            cycle(buf, batch, prio, rng)
        n, start, cpu0 = 0, time.perf_counter(), time.process_time()
        while True:
            for _ in range(20):
                cycle(buf, batch, prio, rng)
            n += 20
            cpu = time.process_time() - cpu0
            if cpu >= seconds:
                return n / cpu, n / (time.perf_counter() - start)
    finally:
        close(buf)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--only", nargs="*", default=None, help="substrings of names to run")
    parser.add_argument("--out", type=Path, default=RESULTS / "replay_buffers.json")
    args = parser.parse_args(argv)
    specs = candidates()
    if args.only:
        specs = {k: v for k, v in specs.items() if any(s in k for s in args.only)}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in specs}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for name, spec in specs.items():
            runs[name].append(measure(spec, args.capacity, args.seconds))
    rows = {name: {"cycles_per_cpu_s": statistics.median(c for c, _ in v),
                   "cycles_per_wall_s": statistics.median(w for _, w in v),
                   "runs_cycles_per_cpu_s": [round(c, 1) for c, _ in v]}
            for name, v in runs.items()}
    width = max(map(len, rows))
    print(f"{'buffer':<{width}}  {'cycles/CPU-s':>12}  {'cycles/wall-s':>13}  "
          f"runs (cycles/CPU-s, median of {args.repeats} shown)")
    for name, row in rows.items():
        runs_txt = ", ".join(f"{x:,.0f}" for x in row["runs_cycles_per_cpu_s"])
        print(f"{name:<{width}}  {row['cycles_per_cpu_s']:>12,.0f}  "
              f"{row['cycles_per_wall_s']:>13,.0f}  {runs_txt}")
    import cpprb
    result = {
        "cycle": {"add_rows": ADD, "sample": BATCH, "update_priorities": BATCH,
                  "capacity": args.capacity, "obs_dim": OBS_DIM, "act_dim": ACT_DIM,
                  "prefilled": True},
        "cpu_seconds_per_run": args.seconds, "repeats": args.repeats,
        "load_average_before_after": [load_before, os.getloadavg()],
        "primary_metric": "cycles_per_cpu_s (CPU time of this process: robust to other "
                          "processes sharing the cores; wall rates are noisier)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__, "cpprb": getattr(cpprb, "__version__", "11.0.0")},
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
