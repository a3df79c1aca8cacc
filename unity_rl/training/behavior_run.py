"""One behavior's share of a training run: its host, counters, metrics and output files.

Every behavior a run trains (ML-Agents: one trainer per behavior) has its own
- learner host (``runtime/algorithm.py``) and seed,
- agent-step count and ``max_steps`` (the behavior stops training there; the run ends when
  every behavior is done), and checkpoint interval,
- TensorBoard folder and ``progress.csv`` under ``<run_dir>/<Behavior>/``,
- entry in each checkpoint (``checkpoint_entry``: the policy's metadata, the host's state, the
  counters and episode statistics), and ``<Behavior>.pt`` / ``<Behavior>.onnx`` in the run folder.

``<Behavior>`` is the behavior name without its '?team=N' suffix, unless two trained behaviors
share that short name (teams of one behavior): then the full name with '?' and '=' replaced.
"""
from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from unity_rl.checkpoint import atomic_write
from unity_rl.envs.types import short_name
from unity_rl.runtime.algorithm import LearnerHost
from unity_rl.runtime.messages import BehaviorInfo
from unity_rl.runtime.runners import BehaviorRound

logger = logging.getLogger(__name__)


def output_names(full_names: list[str]) -> dict[str, str]:
    """Full behavior name -> the name of its files and folders (see the module doc)."""
    short = {name: short_name(name) for name in full_names}
    taken = [s for s in short.values()]
    return {name: (s if taken.count(s) == 1 else name.replace("?", "_").replace("=", "-"))
            for name, s in short.items()}


class BehaviorRun:
    """Counters, metrics and outputs of one trained behavior."""

    def __init__(self, name: str, out_name: str, settings: Any, info: BehaviorInfo,
                 host: LearnerHost, run_dir: Path):
        self.name = name
        """Full behavior name."""
        self.out_name = out_name
        """Name of its files and folders."""
        self.settings = settings
        """Its ``BehaviorConfig``."""
        self.info = info
        self.host = host
        self.run_dir = run_dir
        self.metrics = None
        self.agent_steps = 0
        self.next_checkpoint = settings.checkpoint_interval

    # -- session --------------------------------------------------------------------------------
    def open_metrics(self, console: bool, wall_seconds: float) -> None:
        from unity_rl.metrics import MetricsWriter

        self.metrics = MetricsWriter(
            self.run_dir, self.settings.summary_freq, self.settings.max_steps,
            console=console, start_step=self.agent_steps, start_wall=wall_seconds,
            behavior_name=self.out_name)

    @property
    def done(self) -> bool:
        return self.agent_steps >= self.settings.max_steps

    def arrive(self, part: BehaviorRound) -> None:
        """Counts a round's agent-steps and episodes as they arrive, before any update on them
        (a summary window they complete is written now: ``MetricsWriter.reach``)."""
        self.agent_steps += part.collected_steps
        self.metrics.record_episodes(part.episode_returns, part.episode_lengths)
        self.metrics.reach(self.agent_steps)

    def record(self, part: BehaviorRound, log_always: bool = False,
               arrived: bool = False) -> bool:
        """Folds one round in (a progress row when it trained, or with ``log_always`` whenever
        steps arrived: inference); True when a checkpoint is due. ``arrived``: its steps and
        episodes were counted already (``arrive``)."""
        if not arrived:
            self.agent_steps += part.collected_steps
            self.metrics.record_episodes(part.episode_returns, part.episode_lengths)
        if part.metrics is not None or (log_always and part.collected_steps):
            self.metrics.log(self.agent_steps, part.metrics or {})
        if self.agent_steps >= self.next_checkpoint:
            interval = self.settings.checkpoint_interval
            self.next_checkpoint = (self.agent_steps // interval + 1) * interval
            return True
        return False

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()

    # -- checkpoints and files ------------------------------------------------------------------
    def policy_meta(self) -> dict:
        """What rebuilds the acting policy without the builds: shapes, action spec, network."""
        spec = self.info.action_spec
        return {"trainer_type": self.settings.trainer_type, "behavior_name": self.name,
                "obs_dim": self.info.obs_dim, "obs_shapes": self.info.obs_shapes,
                "action_spec": (int(spec.continuous_size),
                                tuple(int(b) for b in spec.discrete_branches)),
                "network": asdict(self.settings.network_settings)}

    def checkpoint_entry(self) -> dict:
        return {**self.policy_meta(), "learner": self.host.state_dict(),
                "agent_steps": self.agent_steps, "wall_seconds": self.metrics.elapsed(),
                "metrics": self.metrics.state_dict(), "next_checkpoint": self.next_checkpoint}

    def restore(self, entry: dict) -> None:
        """Loads ``checkpoint_entry()``'s output (before ``open_metrics``)."""
        self.host.load_state_dict(entry["learner"])
        self.agent_steps = int(entry["agent_steps"])
        self.next_checkpoint = int(entry["next_checkpoint"])

    def restore_metrics(self, entry: dict) -> None:
        self.metrics.load_state_dict(entry["metrics"])

    def save_policy(self) -> tuple[Path | None, Path]:
        """Writes <Behavior>.pt (always) and <Behavior>.onnx (when export works)."""
        torch_path = self.run_dir / f"{self.out_name}.pt"
        payload = {**self.policy_meta(), "weights": self.host.policy_weights(),
                   "agent_steps": self.agent_steps}
        atomic_write(torch_path, lambda f: torch.save(payload, f))
        try:
            from unity_rl.export import export_onnx

            onnx_path = export_onnx(self.host.export_module(), list(self.info.obs_shapes),
                                    self.info.action_spec, self.run_dir / f"{self.out_name}.onnx")
        except Exception as err:  # the weights are safe in the .pt; say why ONNX is missing
            logger.warning("ONNX export of %s's final policy failed: %s", self.name, err)
            onnx_path = None
        return onnx_path, torch_path
