"""Playing a trained policy on builds: ``unity-rl evaluate`` and ``unity-rl random``.

Contract: ``evaluate_policy(env, module, episodes)`` runs a deterministic export module (what
``export.load_policy`` returns) on a ``UnityVecEnv`` and returns ``episodes`` returns, every slot
playing as many episodes (so short failed episodes are not favoured); observations reach the
module as the trainer's networks saw them (``runtime.collector.flat_obs``), hybrid outputs go
back as one ``[n, C+B]`` action row. ``open_vec_env`` builds the env from the flags given, else
the run's configuration, else mlagents-learn's defaults.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

def run_config(run_dir: Path | None):
    """The run's configuration.yaml, or None."""
    from unity_rl.cli import CONFIG_FILE

    if run_dir is None or not (run_dir / CONFIG_FILE).is_file():
        return None
    from unity_rl.config import load_config
    return load_config(run_dir / CONFIG_FILE)


def open_vec_env(args: argparse.Namespace, env_path: str, run_cfg, behavior: str | None):
    """UnityVecEnv with the flags given, else the run's settings, else mlagents-learn's defaults."""
    from unity_rl.envs.vec_env import UnityVecEnv

    env_cfg = run_cfg.env_settings if run_cfg else None
    engine = run_cfg.engine_settings if run_cfg else None

    def pick(flag, from_cfg, default):
        if flag is not None:
            return flag
        return from_cfg if from_cfg is not None else default

    seed = pick(args.seed, env_cfg.seed if env_cfg else None, 0)
    no_graphics = None if args.graphics is None else not args.graphics
    return UnityVecEnv(
        env_path,
        num_builds=pick(args.num_envs, None, 1),
        base_port=pick(args.base_port, env_cfg.base_port if env_cfg else None, 5005),
        no_graphics=pick(no_graphics, engine.no_graphics if engine else None, True),
        time_scale=pick(args.time_scale, engine.time_scale if engine else None, 20.0),
        env_args=tuple((env_cfg.env_args or ()) if env_cfg else ()),
        seed=max(0, int(seed)),
        timeout_wait=float(pick(args.timeout_wait, env_cfg.timeout_wait if env_cfg else None, 60)),
        behavior_name=behavior,
    )


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
    mask = infos.get("_final_info")
    if mask is None or not np.any(mask):
        return []
    returns = np.asarray(infos["final_info"]["episode"]["r"])
    return [(int(slot), float(returns[slot])) for slot in np.flatnonzero(mask)]


def evaluate_policy(env, module, episodes: int) -> list[float]:
    """Runs ``module`` (obs[, masks] -> action) on ``env``; returns ``episodes`` returns.

    Taking the first N episodes to end would favour short (often failed) episodes when many
    agents play at once; instead every slot plays ceil(N / slots) episodes and the first ones of
    each slot are kept.
    """
    per_slot = -(-episodes // env.num_envs)
    done: list[list[float]] = [[] for _ in range(env.num_envs)]
    obs, infos = env.reset()
    with torch.no_grad():
        while min(len(d) for d in done) < per_slot:
            x = torch.from_numpy(_flat(obs))
            if "action_mask" in infos:
                masks = torch.from_numpy(np.asarray(infos["action_mask"], np.float32))
                actions = module(x, masks)
            else:
                actions = module(x)
            obs, _, _, _, infos = env.step(_env_actions(actions))
            for slot, ret in finished_episodes(infos):
                done[slot].append(ret)
    rounds = [[d[i] for d in done] for i in range(per_slot)]
    return [r for round_ in rounds for r in round_][:episodes]
