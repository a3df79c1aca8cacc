"""Visual encoders on the CPU: a training step on channels-last images (what
``unity_rl.algorithms.encoders`` does while gradients are recorded) against contiguous NCHW, per
ML-Agents encoder type; and what the same conversion would do to an actor's forward (where the
encoders do not convert).

For each encoder (``simple``, ``nature_cnn``, ``resnet``, ``match3``) on a camera shaped like
Unity's examples (Visual3DBall's 4 stacked 84×84 RGB frames; Match3's 8×8 board for
``match3``), one torch thread, the two layouts alternating ``--repeats`` times:

- **train step**: forward, backward and an Adam step of the encoder plus a linear head on a
  minibatch of ``--batch`` images (PPO's and SAC's inner loop);
- **act**: forward of ``--agents`` images without gradients (an actor's decision).

The images arrive NCHW-contiguous (as the flat observation rows hold them), so the channels-last
timings include converting them (``image_layout.channels_last``; a learner converts once per
minibatch for all its networks, into a kept buffer), as the learners do.

Both layouts start from the same weights and inputs; the table shows the median milliseconds and
the ratio, and the largest difference of their outputs (the layouts sum in different orders).

    .venv/bin/python benchmarks/visual_encoder_speed.py [--batch 256] [--agents 8] [--repeats 5]

Writes ``benchmarks/results/visual_encoder_speed.json``.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from unity_rl.algorithms.encoders import visual_encoder  # noqa: E402

SHAPES = {"simple": (12, 84, 84), "nature_cnn": (12, 84, 84), "resnet": (12, 84, 84),
          "match3": (16, 8, 8)}


def make(name: str, layout: torch.memory_format) -> torch.nn.Module:
    torch.manual_seed(0)
    encoder = visual_encoder(name, SHAPES[name], 128)  # weights as the product keeps them
    return torch.nn.Sequential(encoder, torch.nn.Linear(128, 1))


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def measure(name: str, layout: torch.memory_format, batch: torch.Tensor, agents: torch.Tensor,
            inner: int) -> dict:
    model = make(name, layout)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)

    if not getattr(model[0], "channels_last", False):
        layout = torch.contiguous_format  # the product converts only for encoders that say so

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        model(batch.contiguous(memory_format=layout)).square().mean().backward()
        optimizer.step()

    def act():
        with torch.no_grad():
            model(agents.contiguous(memory_format=layout))

    with torch.no_grad():
        out = make(name, layout)(agents.contiguous(memory_format=layout))
    return {"train_ms": timed(train_step, inner), "act_ms": timed(act, inner * 4), "out": out}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--inner", type=int, default=5, help="timed calls per measurement")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/visual_encoder_speed.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    layouts = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
    rows = []
    print(f"{'encoder':>10} | {'train ms (NCHW / NHWC)':>24} | {'ratio':>5} | "
          f"{'act ms (NCHW / NHWC)':>22} | {'ratio':>5} | max |diff|")
    for name, shape in SHAPES.items():
        gen = torch.Generator().manual_seed(1)
        batch = torch.rand((args.batch, *shape), generator=gen)
        agents = torch.rand((args.agents, *shape), generator=gen)
        runs: dict[str, list[dict]] = {k: [] for k in layouts}
        for _ in range(args.repeats):
            for label, layout in layouts.items():
                runs[label].append(measure(name, layout, batch, agents, args.inner))
        med = {label: {key: statistics.median(r[key] for r in rs) for key in ("train_ms", "act_ms")}
               for label, rs in runs.items()}
        diff = float((runs["contiguous"][0]["out"] - runs["channels_last"][0]["out"]).abs().max())
        row = {"encoder": name, "shape": list(shape), **{f"{label}_{k}": v for label, m in med.items()
                                                          for k, v in m.items()},
               "train_ratio": med["channels_last"]["train_ms"] / med["contiguous"]["train_ms"],
               "act_ratio": med["channels_last"]["act_ms"] / med["contiguous"]["act_ms"],
               "max_abs_output_diff": diff}
        rows.append(row)
        print(f"{name:>10} | {med['contiguous']['train_ms']:>10.1f} / {med['channels_last']['train_ms']:>10.1f}"
              f" | {row['train_ratio']:>5.2f} | {med['contiguous']['act_ms']:>9.2f} / "
              f"{med['channels_last']['act_ms']:>9.2f} | {row['act_ratio']:>5.2f} | {diff:.1e}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "benchmarks/visual_encoder_speed.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": torch.get_num_threads(), "python": platform.python_version(),
                    "torch": torch.__version__},
        "batch": args.batch, "agents": args.agents, "repeats": args.repeats, "rows": rows},
        indent=2))
    print(f"written: {args.out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
