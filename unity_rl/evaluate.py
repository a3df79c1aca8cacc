"""Playing a trained policy on builds: ``unity-rl evaluate`` and ``unity-rl random``.

Contract: ``evaluate_policy(env, module, episodes)`` runs a deterministic export module (what
``export.load_policy`` returns) on a ``UnityVecEnv`` and returns ``episodes`` returns, every slot
playing as many episodes (so short failed episodes are not favoured); observations reach the
module as the trainer's networks saw them (``runtime.collector.flat_obs``), hybrid outputs go
back as one ``[n, C+B]`` action row. A memory policy keeps one memory per slot, from zeros at
each episode start (as Unity's inference keeps one per agent episode). ``record_policy_demo``
plays the same way and records the first agent's episodes for a ``.demo`` file
(``unity-rl record-demo``). ``open_vec_env`` builds the env from one ``LaunchSettings``:
the run's configuration (or the declared defaults) with the launch flags given on top, exactly
as ``train`` stacks them (``launch_settings``).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from unity_rl.envs.settings import LaunchSettings


def run_config(run_dir: Path | None):
    """The run's configuration.yaml, or None."""
    from unity_rl.config import CONFIG_FILE, load_config

    if run_dir is None or not (run_dir / CONFIG_FILE).is_file():
        return None
    return load_config(run_dir / CONFIG_FILE)


def launch_settings(args: argparse.Namespace, env_path: str, run_cfg) -> LaunchSettings:
    """The settings ``evaluate``/``random`` launch with, stacked as for training: the declared
    defaults < the run's configuration (``run_cfg``: engine settings, ``num_envs``,
    ``num_areas``, environment parameters... as it trained) < the launch flags given
    (``args``, the same flags as ``train``) < ``env_path``. Bad flag values raise ConfigError
    naming the flag."""
    from unity_rl.config import RunConfig, apply_overrides
    from unity_rl.envs.settings import launch_arguments

    cfg = run_cfg if run_cfg is not None else RunConfig()
    cfg = apply_overrides(cfg, **{**launch_arguments(args), "env_path": env_path})
    return cfg.launch_settings(tempfile.mkdtemp(prefix="unity_rl_play_"))


def open_vec_env(args: argparse.Namespace, env_path: str, run_cfg, behavior: str | None):
    """UnityVecEnv over ``launch_settings(args, env_path, run_cfg)``: its ``num_envs`` builds,
    seeds from its ``seed`` (0 for -1), its restart quota. With ``behavior`` named, the agents
    of the build's other behaviors receive zero actions (said in the log)."""
    from unity_rl.envs.build_set import BuildSet
    from unity_rl.envs.vec_env import UnityVecEnv

    settings = launch_settings(args, env_path, run_cfg)
    builds = BuildSet(settings, settings.num_envs, settings.build_seed)
    try:
        return UnityVecEnv.from_build_set(
            builds, behavior_name=behavior,
            other_behaviors="zeros" if behavior is not None else "error")
    except BaseException:
        builds.close()
        raise


def _flat(obs) -> np.ndarray:
    """A UnityVecEnv observation -> [n, obs_dim] float32, as the trainer's networks see it
    (observations side by side, in spec order; PNG images back to [0, 1])."""
    from unity_rl.runtime.collector import flat_obs

    return flat_obs(list(obs.values()) if isinstance(obs, dict) else [obs])


def _env_actions(out) -> np.ndarray:
    """The export module's output as UnityVecEnv actions (hybrid: one [n, C+B] float row)."""
    if isinstance(out, (tuple, list)):
        return np.concatenate([o.numpy().astype(np.float32) for o in out], axis=1)
    return out.numpy()


def finished_episodes(infos: dict) -> list[tuple[int, float]]:
    """(slot, return) of the episodes a UnityVecEnv step ended (SAME_STEP autoreset infos)."""
    return [(slot, ret) for slot, ret, _ in finished_episode_stats(infos)]


def finished_episode_stats(infos: dict) -> list[tuple[int, float, int]]:
    """(slot, return, length in decisions) of the episodes a UnityVecEnv step ended."""
    mask = infos.get("_final_info")
    if mask is None or not np.any(mask):
        return []
    episode = infos["final_info"]["episode"]
    returns, lengths = np.asarray(episode["r"]), np.asarray(episode["l"])
    return [(int(slot), float(returns[slot]), int(lengths[slot]))
            for slot in np.flatnonzero(mask)]


def evaluate_policy(env, module, episodes: int) -> list[tuple[float, int]]:
    """Runs ``module`` (obs[, masks] -> action) on ``env``; returns ``episodes`` (return,
    length in decisions) pairs.

    Taking the first N episodes to end would favour short (often failed) episodes when many
    agents play at once; instead every slot plays ceil(N / slots) episodes and the first ones of
    each slot are kept.
    """
    per_slot = -(-episodes // env.num_envs)
    done: list[list[tuple[float, int]]] = [[] for _ in range(env.num_envs)]
    actor = _Actor(env, module)
    obs, infos = env.reset()
    while min(len(d) for d in done) < per_slot:
        obs, _, _, _, infos = actor.step(obs, infos)
        for slot, ret, length in finished_episode_stats(infos):
            done[slot].append((ret, length))
    rounds = [[d[i] for d in done] for i in range(per_slot)]
    return [r for round_ in rounds for r in round_][:episodes]


class _Actor:
    """Steps ``env`` with a deterministic export module; a memory policy (``memory_size`` > 0
    takes recurrent_in last and returns recurrent_out last) keeps one memory per slot, zeros at
    the start of each of its episodes."""

    def __init__(self, env, module):
        self.env, self.module = env, module
        memory_size = int(getattr(module, "memory_size", 0))
        self.memory = torch.zeros(env.num_envs, 1, memory_size) if memory_size else None

    def actions(self, obs, infos) -> np.ndarray:
        """The env actions for ``obs`` (every slot)."""
        inputs = [torch.from_numpy(_flat(obs))]
        if "action_mask" in infos:
            inputs.append(torch.from_numpy(np.asarray(infos["action_mask"], np.float32)))
        with torch.no_grad():
            if self.memory is not None:
                *outputs, self.memory = self.module(*inputs, self.memory)
                out = outputs[0] if len(outputs) == 1 else tuple(outputs)
            else:
                out = self.module(*inputs)
        return _env_actions(out)

    def step(self, obs, infos, actions: np.ndarray | None = None):
        """One ``env.step`` with the module's actions (or ``actions``): its five results."""
        actions = self.actions(obs, infos) if actions is None else actions
        result = self.env.step(actions)
        if self.memory is not None:
            ended = np.logical_or(result[2], result[3])
            self.memory[torch.from_numpy(np.asarray(ended, bool))] = 0.0
        return result


def _sensors(obs, slot: int | None) -> list[np.ndarray]:
    """One slot's observation as one float array per sensor, in spec order (a UnityVecEnv's
    dict keeps it; PNG images back to [0, 1]); ``slot`` None: ``obs`` is already one slot's."""
    parts = list(obs.values()) if isinstance(obs, dict) else [obs]
    out = []
    for part in parts:
        row = np.asarray(part if slot is None else part[slot])
        out.append(row.astype(np.float32) / 255.0 if row.dtype == np.uint8
                   else row.astype(np.float32))
    return out


def record_policy_demo(env, module, episodes: int):
    """Plays ``module`` on ``env`` until slot 0 (the first agent) has finished ``episodes``
    episodes and returns its ``unity_rl.demos.EpisodeRecorder`` (every slot plays; one agent is
    recorded, as Unity's Demonstration Recorder sits on one agent). The recorded actions are
    the ones the build received."""
    from unity_rl.demos.recorder import EpisodeRecorder

    spec = env.spec_
    c = spec.action_spec.continuous_size
    actor, recorder = _Actor(env, module), EpisodeRecorder()
    obs, infos = env.reset()
    while len(recorder.episodes) < episodes:
        actions = actor.actions(obs, infos)
        row = np.asarray(actions[0]).reshape(-1)
        mask = np.asarray(infos["action_mask"][0], bool) if "action_mask" in infos else None
        recorder.decide(_sensors(obs, 0), row[:c],
                        np.rint(row[c:]).astype(np.int64) if spec.action_spec.discrete_branches
                        else None, mask)
        obs, rewards, terminated, truncated, infos = actor.step(obs, infos, actions)
        ended = bool(terminated[0] or truncated[0])
        recorder.outcome(float(rewards[0]), ended, bool(truncated[0]),
                         _sensors(infos["final_obs"][0], None) if ended else None)
    return recorder
