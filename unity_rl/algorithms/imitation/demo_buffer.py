"""A demonstration as ML-Agents 1.1.0's trainers read it: ``DemoBuffer`` and ``load_demo_buffer``.

ML-Agents' ``demo_to_buffer(demo_path, sequence_length, behavior_spec)`` (``demo_loader.py``):

- one row per record but the last, over the records of all files in order: record i's
  observation and stored action, record i+1's reward and done (``Demonstration.mlagents_rows``);
- the rows are cut into chunks after each row whose done is set (so a chunk starts with the
  final observation of the episode before, paired with the next episode's first reward), and
  every chunk is padded at its end with zero rows to a whole number of ``sequence_length``
  sequences (``resequence_and_append``); BC does not mask the padded rows (TRAINERS.md §5).

That is the ``"mlagents"`` pairing (each observation with the *previous* action; the default,
``docs/imitation.md``). ``pairing="aligned"`` (``unity_rl.demo_pairing: aligned``) builds the rows
from ``load_demo(..., pairing="aligned")``'s episodes instead: each observation with the action
taken at it, one chunk per episode. Torch-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from unity_rl.algorithms.sequences import pad_sequences
from unity_rl.demos import load_demo
from unity_rl.demos.format import DemoError, DemoFileError, DemoSpecError


@dataclass(frozen=True, eq=False)
class DemoBuffer:
    """Training rows of a demonstration (padded to whole sequences, chunk by chunk)."""

    obs: np.ndarray
    """[N, obs_dim] float32: every observation flattened, side by side (the learners' rows)."""
    continuous_actions: np.ndarray
    """[N, C] float32: the expert's continuous action paired with the row."""
    discrete_actions: np.ndarray
    """[N, B] int64: the expert's discrete action of each branch."""
    dones: np.ndarray
    """[N] bool: the row's successor ends an episode (ML-Agents' ``done`` of the row)."""
    rewards: np.ndarray
    """[N] float32: the environment reward after the row."""
    sequence_length: int
    """L: every chunk was padded to a multiple of it (1: no padding)."""
    source: str
    """The ``demo_path`` read (for messages)."""

    def __len__(self) -> int:
        return len(self.dones)


def expected_spec(obs_shapes: Sequence[Sequence[int]], action_spec: Any) -> SimpleNamespace:
    """What ``unity_rl.demos.spec_mismatch`` compares a recording with, from a behavior's
    observation shapes and action spec."""
    from mlagents_envs.base_env import ActionSpec

    action = ActionSpec(int(getattr(action_spec, "continuous_size", 0)),
                        tuple(int(b) for b in getattr(action_spec, "discrete_branches", ()) or ()))
    return SimpleNamespace(action_spec=action, observation_specs=[
        SimpleNamespace(shape=tuple(int(d) for d in shape)) for shape in obs_shapes])


def load_demo_buffer(path: str, obs_shapes: Sequence[Sequence[int]], action_spec: Any,
                     sequence_length: int = 1, pairing: str = "mlagents",
                     where: str = "demo_path") -> DemoBuffer:
    """Reads ``path`` (a ``.demo`` file or a directory of them), checks its spec against the
    behavior's (``DemoSpecError`` naming ``where``, the file and the difference) and lays out its
    rows as ML-Agents' ``demo_to_buffer`` with ``sequence_length`` (module doc)."""
    try:
        demo = load_demo(path, expected_spec(obs_shapes, action_spec), pairing=pairing)
    except DemoFileError:
        raise  # it names the file and byte offset
    except DemoError as err:  # a missing path, a spec mismatch: say which key gave the path
        raise type(err)(f"{where}: {err}") from None
    if pairing == "mlagents":
        rows = demo.mlagents_rows()
        n_obs = len(demo.spec.observation_specs)
        obs = np.concatenate([rows[f"obs_{i}"].reshape(len(rows["done"]), -1)
                              for i in range(n_obs)], axis=1)
        columns = (obs, rows["continuous_action"], rows["discrete_action"], rows["done"],
                   rows["reward"])
        ends = np.flatnonzero(columns[3]) + 1
        chunks = [np.split(column, ends) for column in columns]
    else:
        chunks = [[], [], [], [], []]
        for episode in demo.episodes:
            obs = np.concatenate([o.reshape(len(episode), -1) for o in episode.observations],
                                 axis=1)
            for k, column in enumerate((obs, episode.continuous_actions,
                                        episode.discrete_actions, episode.dones,
                                        episode.rewards)):
                chunks[k].append(column)
    padded = [np.concatenate([pad_sequences(c, sequence_length) for c in column if len(c)])
              if any(len(c) for c in column) else None for column in chunks]
    if padded[0] is None:
        raise DemoSpecError(f"{where}: {path} holds no training step (a demonstration needs "
                            "at least two records)")
    return DemoBuffer(obs=padded[0].astype(np.float32),
                      continuous_actions=padded[1].astype(np.float32),
                      discrete_actions=padded[2].astype(np.int64),
                      dones=padded[3].astype(bool), rewards=padded[4].astype(np.float32),
                      sequence_length=int(sequence_length), source=str(path))
