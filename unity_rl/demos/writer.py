"""Writing ``.demo`` files in Unity's format: ``write_demo``.

Contract: the file holds what Unity's Demonstration Recorder would have written for the same
episodes (one record per decision plus a final record per episode, the stored-action shift of
``load_demo``'s docstring included), so ML-Agents' ``demo_loader`` and Unity read it as their own.
Cameras (rank-3 observations of 1 or 3 channels) are PNG-compressed by default, as Unity's camera
sensors send them: values are clipped to [0, 1] and rounded to multiples of 1/255.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from unity_rl.demos.format import DemoError, DemoMeta, file_bytes


@dataclass(frozen=True, eq=False)
class RecordedEpisode:
    """One agent's episode as a policy or heuristic played it: T decisions and the final
    observation."""

    observations: Sequence[np.ndarray]
    """Per observation of the spec, [T+1, *shape]: the observation at each of the T decisions,
    then the final one (after the last action)."""
    continuous_actions: np.ndarray | None = None
    """[T, continuous_size]: the action taken at decision t (None without continuous actions)."""
    discrete_actions: np.ndarray | None = None
    """[T, len(branches)] ints (None without discrete branches)."""
    rewards: np.ndarray | None = None
    """[T]: the reward received after action t (None: all 0)."""
    done: bool = True
    """The episode ended at the final observation; False: the recording stopped mid-episode
    (the final observation is then an ordinary decision record)."""
    interrupted: bool = False
    """The episode ended by max step (``max_step_reached``)."""
    action_masks: np.ndarray | None = None
    """[T, sum(branches)] bool, True where allowed at decision t (None: no mask recorded)."""


def _check(episode: RecordedEpisode, spec, index: int) -> tuple:
    """(observations, continuous, discrete, rewards, T) as arrays of the right shapes."""
    obs = [np.asarray(o, np.float32) for o in episode.observations]
    if len(obs) != len(spec.observation_specs):
        raise DemoError(f"episode {index} has {len(obs)} observations, the spec "
                        f"{len(spec.observation_specs)}")
    steps = len(obs[0]) - 1 if obs else None
    if steps is None or steps < 0:
        raise DemoError(f"episode {index} has no observations: give [T+1, *shape] per sensor")
    for i, (o, obs_spec) in enumerate(zip(obs, spec.observation_specs)):
        if o.shape != (steps + 1,) + tuple(obs_spec.shape):
            raise DemoError(f"episode {index}: observation {i} has shape {o.shape}, expected "
                            f"{(steps + 1,) + tuple(obs_spec.shape)} (T+1 = {steps + 1} rows)")
    action_spec = spec.action_spec

    def actions(given, width, dtype, what):
        if given is None:
            if width:
                raise DemoError(f"episode {index} gives no {what} actions, the spec has {width}")
            return np.zeros((steps, 0), dtype)
        array = np.asarray(given, dtype).reshape(len(given), -1) if len(given) else \
            np.zeros((0, width), dtype)
        if array.shape != (steps, width):
            raise DemoError(f"episode {index}: {what} actions have shape {array.shape}, "
                            f"expected {(steps, width)}")
        return array

    cont = actions(episode.continuous_actions, action_spec.continuous_size, np.float32,
                   "continuous")
    disc = actions(episode.discrete_actions, action_spec.discrete_size, np.int32, "discrete")
    rewards = np.zeros(steps, np.float32) if episode.rewards is None else \
        np.asarray(episode.rewards, np.float32).reshape(-1)
    if rewards.shape != (steps,):
        raise DemoError(f"episode {index}: rewards have shape {rewards.shape}, expected "
                        f"({steps},)")
    return obs, cont, disc, rewards, steps


def _png(image: np.ndarray) -> bytes:
    """A [C, H, W] camera image (C = 1 or 3) as the PNG Unity sends: RGB, 8 bits."""
    from PIL import Image

    pixels = np.rint(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)
    if pixels.shape[0] == 1:  # Unity encodes a grayscale camera as RGB with equal channels
        pixels = np.repeat(pixels, 3, axis=0)
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(np.moveaxis(pixels, 0, -1)), "RGB").save(out, "PNG")
    return out.getvalue()


def _observation_proto(value: np.ndarray, obs_spec, png: bool):
    from mlagents_envs.communicator_objects.observation_pb2 import ObservationProto

    proto = ObservationProto(shape=list(obs_spec.shape), name=obs_spec.name or "",
                             observation_type=obs_spec.observation_type.value,
                             dimension_properties=[d.value for d in obs_spec.dimension_property])
    if png:
        proto.compression_type = 1  # PNG
        proto.compressed_data = _png(value)
    else:
        proto.float_data.data.extend(value.reshape(-1).tolist())
    return proto


def brain_parameters(spec, behavior_name: str):
    """The ``BrainParametersProto`` Unity writes for a behavior (``is_training`` false)."""
    from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto
    from mlagents_envs.communicator_objects.space_type_pb2 import continuous, discrete

    action_spec = spec.action_spec
    proto = BrainParametersProto(brain_name=behavior_name, is_training=False)
    proto.action_spec.num_continuous_actions = action_spec.continuous_size
    proto.action_spec.num_discrete_actions = action_spec.discrete_size
    proto.action_spec.discrete_branch_sizes.extend(int(b) for b in action_spec.discrete_branches)
    proto.vector_action_space_type_deprecated = (
        continuous if action_spec.continuous_size else discrete)
    return proto


def episode_records(episode: RecordedEpisode, spec, index: int = 0,
                    compress_visual: bool = True, agent_id: int = 0) -> list:
    """The ``AgentInfoActionPairProto``s Unity records for one episode: record t (t < T) holds
    observation t, the reward since decision t-1 (0 at t = 0), the mask of decision t and the
    stored action a_{t-1} (zeros at t = 0); the final record holds the final observation, the
    last reward, the done flags and, as Unity's ``NotifyAgentDone`` leaves it, the stored action
    of the record before it (for an unfinished episode, a_{T-1} as any decision record)."""
    from mlagents_envs.communicator_objects.agent_info_action_pair_pb2 import (
        AgentInfoActionPairProto)

    obs, cont, disc, rewards, steps = _check(episode, spec, index)
    png = [compress_visual and len(s.shape) == 3 and s.shape[0] in (1, 3)
           for s in spec.observation_specs]
    masks = episode.action_masks
    width = int(sum(spec.action_spec.discrete_branches))
    if masks is not None:
        masks = np.asarray(masks, bool)
        if masks.shape != (steps, width):
            raise DemoError(f"episode {index}: action masks have shape {masks.shape}, expected "
                            f"{(steps, width)}")
    records = []
    for t in range(steps + 1):
        final = t == steps
        record = AgentInfoActionPairProto()
        info = record.agent_info
        info.reward = 0.0 if t == 0 else float(rewards[t - 1])
        info.done = final and episode.done
        info.max_step_reached = final and episode.done and episode.interrupted
        info.id = agent_id
        info.observations.extend(_observation_proto(o[t], s, p)
                                 for o, s, p in zip(obs, spec.observation_specs, png))
        if masks is not None:
            info.action_mask.extend((~masks[min(t, steps - 1)]).tolist() if steps else [])
        stored = t - 1 if not info.done else t - 2  # Unity's stored action (see docstring)
        if stored >= 0:
            record.action_info.continuous_actions.extend(cont[stored].tolist())
            record.action_info.discrete_actions.extend(disc[stored].tolist())
        else:
            record.action_info.continuous_actions.extend([0.0] * cont.shape[1])
            record.action_info.discrete_actions.extend([0] * disc.shape[1])
        records.append(record)
    return records


def write_demo(path: str, spec, episodes: Iterable[RecordedEpisode], name: str | None = None,
               *, behavior_name: str | None = None, compress_visual: bool = True) -> DemoMeta:
    """Writes ``episodes`` of one agent of ``spec`` (a ``BehaviorSpec``) as a Unity ``.demo``
    file at ``path`` and returns its meta. ``name`` is the demonstration name (default: the
    file's stem; the meta message must fit in 32 bytes, so keep it to Unity's 16 characters);
    ``behavior_name`` the brain name (default ``name``). ``compress_visual``: PNG for cameras
    of 1 or 3 channels (lossy, as Unity's), else raw floats."""
    if not str(path).endswith(".demo"):
        raise DemoError(f"{path}: a demonstration file's name must end in .demo (ML-Agents "
                        "reads no other)")
    name = name if name is not None else os.path.splitext(os.path.basename(path))[0]
    records, episodes_done, total_reward, unfinished = [], 0, 0.0, None
    for index, episode in enumerate(episodes):
        if unfinished is not None:
            raise DemoError(f"episode {unfinished} is unfinished (done=False) but episode "
                            f"{index} follows it: only the last episode may be unfinished")
        new = episode_records(episode, spec, index, compress_visual)
        records += new
        episodes_done += int(episode.done)
        unfinished = None if episode.done else index
        total_reward += sum(r.agent_info.reward for r in new)
    # Unity's DemonstrationWriter counts an episode at each done record and one more when the
    # recording closes, and divides the summed rewards of all records by that count.
    number_episodes = episodes_done + 1
    meta = DemoMeta(name, len(records), number_episodes, total_reward / number_episodes)
    data = file_bytes(meta, brain_parameters(spec, behavior_name or name), records)
    with open(path, "wb") as f:
        f.write(data)
    return meta
