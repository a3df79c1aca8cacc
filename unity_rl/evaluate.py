"""Playing a trained policy on builds: ``unity-rl evaluate`` and ``unity-rl random``.

Contract: ``evaluate_policy(env, module, episodes)`` runs a deterministic export module (what
``export.load_policy`` returns) on a ``UnityVecEnv`` and returns ``episodes`` returns, every slot
playing as many episodes (so short failed episodes are not favoured); observations reach the
module as the trainer's networks saw them (``runtime.collector.flat_obs``), hybrid outputs go
back as one ``[n, C+B]`` action row. A memory policy keeps one memory per slot, from zeros at
each episode start (as Unity's inference keeps one per agent episode). ``open_vec_env`` builds the env from one ``LaunchSettings``:
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
    # a memory policy (``memory_size`` > 0) takes recurrent_in last and returns recurrent_out
    # last: one memory per slot, zeros at the start of each of its episodes
    memory_size = int(getattr(module, "memory_size", 0))
    memory = torch.zeros(env.num_envs, 1, memory_size) if memory_size else None
    obs, infos = env.reset()
    with torch.no_grad():
        while min(len(d) for d in done) < per_slot:
            inputs = [torch.from_numpy(_flat(obs))]
            if "action_mask" in infos:
                inputs.append(torch.from_numpy(np.asarray(infos["action_mask"], np.float32)))
            if memory is not None:
                *outputs, memory = module(*inputs, memory)
                actions = outputs[0] if len(outputs) == 1 else tuple(outputs)
            else:
                actions = module(*inputs)
            obs, _, terminated, truncated, infos = env.step(_env_actions(actions))
            if memory is not None:
                ended = np.logical_or(terminated, truncated)
                memory[torch.from_numpy(np.asarray(ended, bool))] = 0.0
            for slot, ret, length in finished_episode_stats(infos):
                done[slot].append((ret, length))
    rounds = [[d[i] for d in done] for i in range(per_slot)]
    return [r for round_ in rounds for r in round_][:episodes]
