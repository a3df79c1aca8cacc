"""Reading ``.demo`` files into numpy arrays: ``load_demo``.

Contract: observations are decoded exactly as mlagents-envs decodes a step (float32; a PNG camera
to [0, 1] channel-first, a grayscale one averaged to one channel), through the project's step
codec (``unity_rl/envs/protocol.py``). Files of a directory are read in sorted name order.
Every file of a demonstration must record the same behavior spec; an expected spec, when given,
must match it (same action spec, same number and shapes of observations, as ML-Agents checks).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from unity_rl.demos.format import DemoError, DemoFileError, DemoMeta, DemoSpecError, parse_file

Pairing = Literal["mlagents", "aligned"]
PAIRINGS = ("mlagents", "aligned")


@dataclass(frozen=True, eq=False)
class DemoRecords:
    """One file's records as stored, one row per ``AgentInfoActionPairProto``."""

    observations: tuple[np.ndarray, ...]
    """Per observation of the spec, [N, *shape] float32."""
    continuous_actions: np.ndarray
    """[N, continuous_size] float32: the record's ``action_info``, i.e. the agent's stored action
    when the record was made (Unity: the action *before* this observation's decision)."""
    discrete_actions: np.ndarray
    """[N, len(branches)] int32, the same for discrete branches."""
    rewards: np.ndarray
    """[N] float32: the reward gathered since the agent's previous record."""
    dones: np.ndarray
    """[N] bool: the record ends an episode (its observation is the final one)."""
    max_step_reached: np.ndarray
    """[N] bool: the episode was cut by max step (an interruption, not a real end)."""
    action_masks: np.ndarray | None
    """[N, sum(branches)] bool, True where the action is *allowed* (the project's convention;
    the file stores the opposite); None when no record holds a mask or there are no branches."""

    def __len__(self) -> int:
        return len(self.rewards)


@dataclass(frozen=True, eq=False)
class DemoEpisode:
    """One episode's (or, at the end of a file, one unfinished episode's) training steps."""

    observations: tuple[np.ndarray, ...]
    """Per observation of the spec, [T, *shape] float32: the observation of step t."""
    continuous_actions: np.ndarray
    """[T, continuous_size] float32: the action paired with step t (see ``load_demo``)."""
    discrete_actions: np.ndarray
    """[T, len(branches)] int32."""
    rewards: np.ndarray
    """[T] float32: the reward received after step t."""
    dones: np.ndarray
    """[T] bool: step t's successor is the episode's final observation."""
    interrupted: np.ndarray
    """[T] bool: ``dones`` by max step (truncation)."""
    action_masks: np.ndarray | None
    """[T, sum(branches)] bool, True where allowed at step t; None when not recorded."""

    def __len__(self) -> int:
        return len(self.rewards)


@dataclass(frozen=True, eq=False)
class Demonstration:
    """What ``load_demo`` returns."""

    spec: object
    """The recorded ``mlagents_envs.base_env.BehaviorSpec``."""
    behavior_name: str
    """The ``brain_name`` of the (first) file's brain parameters."""
    pairing: str
    """How ``episodes`` pair observations with actions: "mlagents" or "aligned"."""
    files: tuple[str, ...]
    """The files read, in order."""
    metas: tuple[DemoMeta, ...]
    """Each file's meta message."""
    records: tuple[DemoRecords, ...]
    """Each file's records as stored."""
    episodes: tuple[DemoEpisode, ...] = field(default=())
    """The episodes of all files, in file order, in ``pairing``."""

    @property
    def num_steps(self) -> int:
        return sum(len(e) for e in self.episodes)

    def mlagents_rows(self) -> dict[str, np.ndarray]:
        """The rows of ML-Agents 1.1.0's ``make_demo_buffer`` (``sequence_length`` 1) over the
        records of all files in ``files`` order, keys ``obs_<i>``, ``continuous_action``,
        ``discrete_action``, ``reward``, ``done``: row i is record i's observation and stored
        action with record i+1's reward and done, for every record but the last. Unlike
        ``episodes``, this keeps ML-Agents' rows that pair an episode's final observation with
        the next episode's first reward (ML-Agents lists a directory in ``os.listdir`` order)."""
        cat = lambda get: np.concatenate([get(r) for r in self.records])  # noqa: E731
        rows = {f"obs_{i}": cat(lambda r, i=i: r.observations[i])[:-1]
                for i in range(len(self.spec.observation_specs))}
        rows["continuous_action"] = cat(lambda r: r.continuous_actions)[:-1]
        rows["discrete_action"] = cat(lambda r: r.discrete_actions)[:-1]
        rows["reward"] = cat(lambda r: r.rewards)[1:]
        rows["done"] = cat(lambda r: r.dones)[1:]
        return rows


def demo_files(path: str) -> list[str]:
    """``path`` if it is a ``.demo`` file, or the ``*.demo`` files of a directory, sorted."""
    if os.path.isfile(path):
        if not path.endswith(".demo"):
            raise DemoError(f"{path} is not a .demo file: give a Unity demonstration file "
                            "(name ending in .demo) or a directory of them")
        return [path]
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".demo"))
        if not files:
            raise DemoError(f"the directory {path} holds no .demo files")
        return files
    raise DemoError(f"the demonstration file or directory {path} does not exist")


def spec_mismatch(recorded, expected) -> str | None:
    """What differs between two BehaviorSpecs, as ML-Agents' ``demo_to_buffer`` checks them
    (action spec, number of observations, their shapes), or None."""
    if recorded.action_spec != expected.action_spec:
        return (f"records the action spec {_actions(recorded.action_spec)}, the behavior has "
                f"{_actions(expected.action_spec)}")
    rec_obs, exp_obs = recorded.observation_specs, expected.observation_specs
    if len(rec_obs) != len(exp_obs):
        return (f"records {len(rec_obs)} observations {[tuple(o.shape) for o in rec_obs]}, the "
                f"behavior has {len(exp_obs)} {[tuple(o.shape) for o in exp_obs]}")
    for i, (rec, exp) in enumerate(zip(rec_obs, exp_obs)):
        if tuple(rec.shape) != tuple(exp.shape):
            return (f"records observation {i} of shape {tuple(rec.shape)}, the behavior has "
                    f"{tuple(exp.shape)}")
    return None


def _actions(action_spec) -> str:
    return (f"(continuous {action_spec.continuous_size}, discrete branches "
            f"{tuple(action_spec.discrete_branches)})")


def decode_records(parsed, spec) -> DemoRecords:
    """One parsed file's records as arrays (observations decoded like mlagents-envs)."""
    from unity_rl.envs.protocol import steps_from_agent_infos

    infos = [record.agent_info for record in parsed.records]
    try:
        decision, terminal = steps_from_agent_infos(infos, spec)
    except Exception as err:  # shapes that disagree, NaN, a broken PNG: name file and record
        row = _first_bad_record(infos, spec)
        raise DemoFileError(parsed.path, None if row is None else parsed.offsets[row],
                            f"cannot decode {'the' if row is None else f'record {row}'}'s "
                            f"observations with the recorded spec ({err}): corrupt "
                            "file") from None
    n = len(infos)
    dones = np.array([info.done for info in infos], bool)
    dec_rows, term_rows = np.flatnonzero(~dones), np.flatnonzero(dones)
    observations = []
    for i, obs_spec in enumerate(spec.observation_specs):
        obs = np.zeros((n,) + tuple(obs_spec.shape), np.float32)
        obs[dec_rows], obs[term_rows] = decision.obs[i], terminal.obs[i]
        observations.append(obs)
    rewards = np.zeros(n, np.float32)
    rewards[dec_rows], rewards[term_rows] = decision.reward, terminal.reward
    action_spec = spec.action_spec
    cont = np.zeros((n, action_spec.continuous_size), np.float32)
    disc = np.zeros((n, action_spec.discrete_size), np.int32)
    for row, (record, offset) in enumerate(zip(parsed.records, parsed.offsets)):
        action = record.action_info
        c, d = list(action.continuous_actions), list(action.discrete_actions)
        if not c and not d:  # the deprecated field, as ML-Agents falls back to it
            old = list(action.vector_actions_deprecated)
            c, d = (old, []) if action_spec.continuous_size > 0 else ([], old)
        if len(c) != action_spec.continuous_size or len(d) != action_spec.discrete_size:
            raise DemoFileError(parsed.path, offset, f"record {row} holds {len(c)} continuous and "
                                                     f"{len(d)} discrete actions, the recorded "
                                                     f"spec {_actions(action_spec)}")
        cont[row], disc[row] = c, d
    masks = None
    width = int(sum(action_spec.discrete_branches))
    if width and any(len(info.action_mask) for info in infos):
        masks = np.ones((n, width), bool)
        for row, info in enumerate(infos):
            if len(info.action_mask) == width:
                masks[row] = ~np.array(info.action_mask, bool)
    max_step = np.array([info.max_step_reached for info in infos], bool)
    return DemoRecords(tuple(observations), cont, disc, rewards, dones, max_step, masks)


def _first_bad_record(infos: list, spec) -> int | None:
    from unity_rl.envs.protocol import steps_from_agent_infos

    for row, info in enumerate(infos):
        try:
            steps_from_agent_infos([info], spec)
        except Exception:
            return row
    return None


def episodes_of(records: DemoRecords, pairing: str) -> list[DemoEpisode]:
    """The episodes of one file's records in ``pairing`` (see ``load_demo``)."""
    ends = list(np.flatnonzero(records.dones)) + [len(records) - 1]
    episodes, start = [], 0
    for end in ends:
        if end < start:
            continue  # the file ends with a done record
        if pairing == "mlagents":
            steps, acts = np.arange(start, end), np.arange(start, end)
        elif records.dones[end]:  # Unity never records the action of the last decision
            steps = np.arange(start, end - 1)
            acts = steps + 1
        else:
            steps = np.arange(start, end)
            acts = steps + 1
        start = end + 1
        if len(steps) == 0:
            continue
        nxt = steps + 1
        episodes.append(DemoEpisode(
            tuple(obs[steps] for obs in records.observations),
            records.continuous_actions[acts], records.discrete_actions[acts],
            records.rewards[nxt], records.dones[nxt], records.max_step_reached[nxt],
            None if records.action_masks is None else records.action_masks[steps]))
    return episodes


def load_demo(path: str, behavior_spec=None, *, pairing: Pairing = "mlagents") -> Demonstration:
    """Reads a ``.demo`` file, or every ``*.demo`` file of a directory (sorted by name).

    A file holds one record per agent step: the observation, the reward since the previous
    record, the done flag, the action mask, and the agent's *stored* action. Unity makes the
    record before the agent decides, so the stored action of record t is the action decided at
    record t-1 (zeros at the first record of an episode), and the final record of an episode
    repeats the stored action of the one before it: the action of an episode's last decision
    is never recorded (TRAINERS.md §5 "pairing quirk"; ml-agents issue #1833).

    ``pairing`` chooses how ``Demonstration.episodes`` pair them (step t = record t, reward and
    done = those of record t+1, every record of an episode but its final one):

    - ``"mlagents"`` (default): step t's action is record t's stored action, a_{t-1}, the
      one-step-shifted pairing ML-Agents 1.1.0's ``demo_to_buffer`` trains BC and GAIL on.
      (``Demonstration.mlagents_rows()`` gives ML-Agents' rows exactly, including its rows that
      pair an episode's final observation with the next episode's first reward.)
    - ``"aligned"``: step t's action is record t+1's stored action, a_t, the action the agent
      took at that observation. An ended episode loses its last step (its action is unknown).

    ``behavior_spec`` (a ``BehaviorSpec``), when given, must match the recorded spec, else
    ``DemoSpecError`` names the file and the difference. A truncated or corrupt file raises
    ``DemoFileError`` naming the file and byte offset.
    """
    if pairing not in PAIRINGS:
        raise DemoError(f"pairing {pairing!r} is not one of {', '.join(PAIRINGS)}")
    from mlagents_envs.rpc_utils import behavior_spec_from_proto

    files = demo_files(path)
    spec, behavior_name, first = None, "", None
    metas, records, episodes = [], [], []
    for file in files:
        parsed = parse_file(file)
        if not parsed.records:
            raise DemoFileError(file, None, "the file records no steps")
        file_spec = behavior_spec_from_proto(parsed.brain, parsed.records[0].agent_info)
        if spec is None:
            spec, behavior_name, first = file_spec, parsed.brain.brain_name, file
        elif (problem := spec_mismatch(file_spec, spec)) is not None:
            raise DemoSpecError(f"{file} {problem.replace('the behavior', first)}: all the "
                                "files of a demonstration directory must record one behavior")
        metas.append(parsed.meta)
        records.append(decode_records(parsed, spec))
        episodes += episodes_of(records[-1], pairing)
    if behavior_spec is not None and (problem := spec_mismatch(spec, behavior_spec)) is not None:
        raise DemoSpecError(f"{first} {problem}: record the demonstration with this behavior's "
                            "observations and actions, or point demo_path at one that was")
    return Demonstration(spec, behavior_name, pairing, tuple(files), tuple(metas),
                         tuple(records), tuple(episodes))
