"""What a run reports while it trains: TensorBoard scalars, ``progress.csv`` and the console.

Contract:
- step counts are agent-steps (one per agent decision), as in mlagents-learn;
- one writer per behavior: TensorBoard events and ``progress.csv`` go to
  ``<run_dir>/<behavior_name>/`` (ML-Agents' layout);
- ``record_episodes(returns, lengths)`` feeds finished episodes; ``log(agent_steps, scalars)``
  writes a ``progress.csv`` row (flushed at once), the TensorBoard scalars and the console
  progress; ``reach(agent_steps)`` (data arrived, no update on it yet) closes a window without a
  row. The CSV's ``mean_return`` is over the last 100 episodes (the benchmark's target);
  TensorBoard gets one point per ``summary_freq`` window, as ML-Agents: at the first ``reach``
  or ``log`` past a multiple of ``summary_freq``, labelled with it, ``Environment/Cumulative
  Reward`` and ``Environment/Episode Length`` the means of the window's episodes, each learner
  scalar its mean over the window's logs, ``Environment/Cumulative Reward (last 100)`` the
  rolling value and a ``set_stat`` scalar (a lesson number) its latest value. ``close`` writes
  a last, partial window (labelled with the last step) so that short runs are not empty;
- learner scalars keep names that already have a section (``"Losses/Value Loss"``); the plain
  names learners tend to return (``policy_loss``, ``learning_rate``, ...) are mapped onto
  ML-Agents' names by ``tensorboard_name``; ``policy_lag`` (or ``Policy/Lag``) also fills the
  CSV's ``policy_lag`` column;
- resume: with ``start_step``/``start_wall`` (from the checkpoint) the CSV is appended and wall
  time continues; rows past ``start_step`` (work lost to a kill) and a torn last line are
  dropped first, and TensorBoard events past ``start_step`` are purged (``purge_step``);
- the console shows a live line (steps, steps/s, mean return, ETA): redrawn with ``\\r`` on a
  TTY, otherwise a plain line at most every ``plain_interval_s``; and every ``summary_freq``
  steps an ML-Agents-like summary line:
  ``[INFO] 3DBall. Step: 12000. Time Elapsed: 31.2 s. Mean Reward: 1.2. Std of Reward: 0.7. Training.``
"""
from __future__ import annotations

import collections
import csv
import math
import os
import sys
import time
from pathlib import Path
from typing import IO, Iterable, Mapping

import numpy as np

CSV_NAME = "progress.csv"
CSV_COLUMNS = ("agent_steps", "wall_seconds", "episodes", "mean_return", "mean_episode_length",
               "agent_steps_per_second", "policy_lag")
RETURN_WINDOW = 100

# Plain learner metric names -> ML-Agents' TensorBoard names.
_ML_AGENTS_NAMES = {
    "policy_loss": "Losses/Policy Loss",
    "value_loss": "Losses/Value Loss",
    "entropy": "Policy/Entropy",
    "learning_rate": "Policy/Learning Rate",
    "lr": "Policy/Learning Rate",
    "epsilon": "Policy/Epsilon",
    "beta": "Policy/Beta",
    "approx_kl": "Policy/Approx KL",
    "clip_fraction": "Policy/Clip Fraction",
    "explained_variance": "Policy/Explained Variance",
    "value_estimate": "Policy/Extrinsic Value Estimate",
    "policy_lag": "Policy/Lag",
    "q_loss": "Losses/Q Loss",
    "critic_loss": "Losses/Q Loss",
    "actor_loss": "Losses/Policy Loss",
}


def tensorboard_name(key: str) -> str:
    """ML-Agents-style tag for a learner metric: kept if it has a section, else mapped."""
    if "/" in key:
        return key
    return _ML_AGENTS_NAMES.get(key) or "Policy/" + key.replace("_", " ").title()


def format_duration(seconds: float) -> str:
    """'1h02m', '3m05s', '42s'; '?' when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class MetricsWriter:
    """TensorBoard events, ``progress.csv`` and console progress for one run directory."""

    def __init__(self, run_dir: str | os.PathLike, summary_freq: int, max_steps: int,
                 console: bool = True, start_step: int = 0, start_wall: float = 0.0, *,
                 behavior_name: str = "policy", stream: IO[str] | None = None,
                 tensorboard: bool = True, plain_interval_s: float = 10.0,
                 redraw_interval_s: float = 0.25):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.summary_freq = max(1, int(summary_freq))
        self.max_steps = int(max_steps)
        self.behavior_name = behavior_name
        self.console = console
        self.stream = stream if stream is not None else sys.stdout
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.plain_interval_s = plain_interval_s
        self.redraw_interval_s = redraw_interval_s

        self.start_step = int(start_step)
        self.start_wall = float(start_wall)
        self._t0 = time.monotonic()
        self.episodes = 0
        self._window_returns: collections.deque[float] = collections.deque(maxlen=RETURN_WINDOW)
        self._window_lengths: collections.deque[float] = collections.deque(maxlen=RETURN_WINDOW)
        self._tb_episodes: list[tuple[float, float]] = []    # episodes of the TensorBoard window
        self._tb_sums: dict[str, list[float]] = {}           # tag -> [sum, count] in the window
        self._tb_latest: dict[str, float] = {}               # tag -> most recent (set_stat)
        self._tb_bucket = self.start_step // self.summary_freq
        self._last_step = self.start_step
        self._since_summary: list[float] = []                # returns since the last summary
        self._last_log = (self.start_step, 0.0)               # (agent_steps, elapsed) at last log
        self._last_summary_bucket = self.start_step // self.summary_freq
        self._last_console = -math.inf
        self._live_width = 0
        self._closed = False

        self.csv_path = self.run_dir / behavior_name / CSV_NAME
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self._csv_file = self._open_csv()
        self._csv = csv.writer(self._csv_file)
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # heavy import: only when used
            tb_dir = self.run_dir / behavior_name
            purge = self.start_step + 1 if self.start_step > 0 else None  # drop steps > start
            self._tb = SummaryWriter(log_dir=str(tb_dir), purge_step=purge)

    # -- CSV --------------------------------------------------------------------------------
    def _open_csv(self) -> IO[str]:
        """Opens progress.csv for appending; on resume drops lost rows and a torn last line."""
        if self.csv_path.exists() and self.start_step > 0:
            self._trim_csv()
        elif self.csv_path.exists():
            self.csv_path.unlink()  # a fresh run (the CLI wipes with --force anyway)
        new = not self.csv_path.exists()
        f = open(self.csv_path, "a", newline="", encoding="utf-8")
        if new:
            f.write(",".join(CSV_COLUMNS) + "\n")
            f.flush()
        return f

    def _trim_csv(self) -> None:
        original = self.csv_path.read_text(encoding="utf-8", errors="replace")
        lines = original.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()  # the writer was killed mid-line
        kept = [",".join(CSV_COLUMNS) + "\n"]
        if lines and lines[0].startswith("agent_steps"):
            kept = [lines.pop(0)]
        for line in lines:
            try:
                if int(float(line.split(",", 1)[0])) <= self.start_step:
                    kept.append(line)
            except ValueError:
                continue  # not a data row
        data = "".join(kept)
        if data != original:
            from unity_rl.checkpoint import atomic_write
            atomic_write(self.csv_path, lambda f: f.write(data.encode("utf-8")))

    # -- inputs -----------------------------------------------------------------------------
    def record_episodes(self, returns: Iterable[float], lengths: Iterable[float]) -> None:
        """Feeds finished episodes (returns and lengths in decisions, same order)."""
        returns = [float(r) for r in returns]
        lengths = [float(n) for n in lengths]
        if len(returns) != len(lengths):
            raise ValueError(f"{len(returns)} returns but {len(lengths)} lengths")
        self.episodes += len(returns)
        self._window_returns.extend(returns)
        self._window_lengths.extend(lengths)
        self._tb_episodes.extend(zip(returns, lengths))
        self._since_summary.extend(returns)

    @property
    def mean_return(self) -> float:
        """Mean return of the last 100 episodes (NaN before the first)."""
        return float(np.mean(self._window_returns)) if self._window_returns else math.nan

    @property
    def mean_episode_length(self) -> float:
        return float(np.mean(self._window_lengths)) if self._window_lengths else math.nan

    def elapsed(self) -> float:
        """Wall seconds of the whole run, previous sessions included."""
        return self.start_wall + (time.monotonic() - self._t0)

    # -- output -----------------------------------------------------------------------------
    def log(self, agent_steps: int, scalars: Mapping[str, float] | None = None) -> dict:
        """Writes one CSV row, the TensorBoard scalars and the console; returns the CSV row."""
        if self._closed:
            raise RuntimeError("MetricsWriter is closed")
        scalars = dict(scalars or {})
        agent_steps = int(agent_steps)
        now = time.monotonic() - self._t0
        last_steps, last_time = self._last_log
        dt = now - last_time
        rate = (agent_steps - last_steps) / dt if dt > 0 else math.nan
        self._last_log = (agent_steps, now)
        lag = scalars.pop("policy_lag", scalars.pop("Policy/Lag", math.nan))

        row = {"agent_steps": agent_steps, "wall_seconds": round(self.elapsed(), 3),
               "episodes": self.episodes, "mean_return": self.mean_return,
               "mean_episode_length": self.mean_episode_length,
               "agent_steps_per_second": rate, "policy_lag": lag}
        self._csv.writerow([_fmt(row[c]) for c in CSV_COLUMNS])
        self._csv_file.flush()

        if self._tb is not None:
            self._window_scalars(scalars, rate, lag)
            self._close_window(agent_steps)
        self._last_step = agent_steps
        if self.console:
            self._console(agent_steps, now)
        return row

    def reach(self, agent_steps: int) -> None:
        """The run's data has arrived up to ``agent_steps`` (no update on it yet): writes the
        TensorBoard window and the console's summary line of a multiple of ``summary_freq`` it
        passed, as mlagents-learn writes them as soon as its step count passes one. The next
        ``log`` then writes its CSV row; its learner scalars join the next window."""
        if self._closed:
            raise RuntimeError("MetricsWriter is closed")
        agent_steps = int(agent_steps)
        if self._tb is not None:
            self._close_window(agent_steps)
        self._last_step = max(self._last_step, agent_steps)  # the last window's label
        if self.console and self._summarise(agent_steps):
            self._console(agent_steps, time.monotonic() - self._t0)

    def _close_window(self, agent_steps: int) -> None:
        bucket = agent_steps // self.summary_freq
        if bucket > self._tb_bucket:
            self._tb_bucket = bucket
            self._write_tensorboard(bucket * self.summary_freq)

    def set_stat(self, tag: str, value: float) -> None:
        """A scalar written with its most recent value at every TensorBoard summary
        (ML-Agents' ``set_stat``: e.g. ``Environment/Lesson Number/<parameter>``)."""
        self._tb_latest[tag] = float(value)

    def _window_scalars(self, scalars: dict, rate: float, lag: float) -> None:
        """Adds one log's scalars to the TensorBoard window's sums."""
        values = {"Environment/Agent Steps Per Second": rate, "Policy/Lag": lag}
        for key, value in scalars.items():
            try:
                values[tensorboard_name(key)] = float(value)
            except (TypeError, ValueError):
                continue
        for tag, value in values.items():
            if math.isfinite(value):
                total = self._tb_sums.setdefault(tag, [0.0, 0])
                total[0] += value
                total[1] += 1

    def _write_tensorboard(self, step: int) -> None:
        """Writes the window's means at ``step`` and starts a new window."""
        tb = self._tb
        if self._tb_episodes:
            returns, lengths = zip(*self._tb_episodes)
            tb.add_scalar("Environment/Cumulative Reward", float(np.mean(returns)), step)
            tb.add_scalar("Environment/Episode Length", float(np.mean(lengths)), step)
        if self._window_returns:
            tb.add_scalar("Environment/Cumulative Reward (last 100)", self.mean_return, step)
        for tag, (total, count) in self._tb_sums.items():
            tb.add_scalar(tag, total / count, step)
        for tag, value in self._tb_latest.items():
            tb.add_scalar(tag, value, step)
        tb.flush()
        self._tb_episodes.clear()
        self._tb_sums.clear()

    def _summarise(self, agent_steps: int) -> bool:
        """Prints the summary line of a ``summary_freq`` multiple ``agent_steps`` passed."""
        bucket = agent_steps // self.summary_freq
        if bucket <= self._last_summary_bucket:
            return False
        self._last_summary_bucket = bucket
        self._clear_live()
        self._print(self.summary_line(bucket * self.summary_freq) + "\n")
        self._since_summary.clear()
        self._last_console = -math.inf  # redraw the live line right away
        return True

    def _console(self, agent_steps: int, now: float) -> None:
        self._summarise(agent_steps)
        interval = self.redraw_interval_s if self.is_tty else self.plain_interval_s
        if now - self._last_console < interval:
            return
        self._last_console = now
        line = self.progress_line(agent_steps)
        if self.is_tty:
            pad = max(0, self._live_width - len(line))
            self._print("\r" + line + " " * pad)
            self._live_width = len(line)
        else:
            self._print(line + "\n")

    def progress_line(self, agent_steps: int) -> str:
        """'[3DBall] 12,000/500,000 steps (2.4%) | 1,530 steps/s | mean return 1.20 | ETA 5m19s'"""
        run_rate = self._run_rate(agent_steps)
        mean = self.mean_return
        mean_text = f"{mean:.2f}" if math.isfinite(mean) else "-"
        parts = [f"[{self.behavior_name}] {agent_steps:,}"]
        if self.max_steps > 0:
            parts[0] += f"/{self.max_steps:,} steps ({100.0 * agent_steps / self.max_steps:.1f}%)"
            left = max(0, self.max_steps - agent_steps)
            eta = left / run_rate if run_rate > 0 else (0.0 if left == 0 else math.nan)
        else:
            parts[0] += " steps"
            eta = math.nan
        parts.append(f"{run_rate:,.0f} steps/s" if math.isfinite(run_rate) else "- steps/s")
        parts.append(f"mean return {mean_text} ({min(self.episodes, RETURN_WINDOW)} ep)")
        parts.append(f"ETA {format_duration(eta)}")
        return " | ".join(parts)

    def summary_line(self, step: int) -> str:
        """ML-Agents' summary line over the episodes finished since the previous one."""
        head = f"[INFO] {self.behavior_name}. Step: {step}. Time Elapsed: {self.elapsed():.1f} s."
        if not self._since_summary:
            return f"{head} No episode was completed since last summary. Training."
        mean = float(np.mean(self._since_summary))
        std = float(np.std(self._since_summary))
        return f"{head} Mean Reward: {mean:.3f}. Std of Reward: {std:.3f}. Training."

    def _run_rate(self, agent_steps: int) -> float:
        """Agent-steps/s over this session (steady, unlike the per-log rate)."""
        dt = time.monotonic() - self._t0
        return (agent_steps - self.start_step) / dt if dt > 0 else math.nan

    def _clear_live(self) -> None:
        if self.is_tty and self._live_width:
            self._print("\r" + " " * self._live_width + "\r")
            self._live_width = 0

    def _print(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed console must not stop training

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """What a checkpoint needs to continue the statistics exactly."""
        return {"episodes": self.episodes, "wall_seconds": self.elapsed(),
                "window_returns": list(self._window_returns),
                "window_lengths": list(self._window_lengths)}

    def load_state_dict(self, state: Mapping) -> None:
        self.episodes = int(state.get("episodes", 0))
        self._window_returns.clear()
        self._window_returns.extend(float(x) for x in state.get("window_returns", ()))
        self._window_lengths.clear()
        self._window_lengths.extend(float(x) for x in state.get("window_lengths", ()))

    # -- end --------------------------------------------------------------------------------
    def close(self) -> None:
        """Ends the live line and closes the files; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.console and self.is_tty and self._live_width:
            self._print("\n")
        self._csv_file.close()
        if self._tb is not None:
            if self._tb_episodes or self._tb_sums:  # the last, partial window
                self._write_tensorboard(self._last_step)
            self._tb.close()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fmt(value) -> str:
    """CSV cell: empty for NaN/None, compact floats."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def read_progress(path: str | os.PathLike) -> list[dict[str, float]]:
    """Rows of a progress.csv as dicts of floats (NaN for empty cells)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: (float(v) if v not in ("", None) else math.nan) for k, v in row.items()}
                for row in csv.DictReader(f)]

