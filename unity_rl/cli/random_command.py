"""``unity-rl random``: drives a build with random actions through ``UnityVecEnv`` (a smoke
test of a build and of the connection) and prints agent-steps/s and the returns of the episodes
that finished."""
from __future__ import annotations

import argparse
import time

from unity_rl.cli.bundled import default_env_path


def cmd_random(args: argparse.Namespace) -> int:
    from unity_rl.envs.behavior import short_name
    from unity_rl.envs.launcher import resolve_env_path
    from unity_rl.evaluate import finished_episodes, open_vec_env

    env_path = resolve_env_path(args.env_path) if args.env_path else default_env_path()
    env = open_vec_env(args, env_path, None, behavior=args.behavior)
    try:
        env.action_space.seed(env.builds.seed)  # the builds' seed (0 for --seed -1)
        env.reset()
        returns: list[float] = []
        agent_steps = 0
        start = time.perf_counter()
        while agent_steps < args.steps:
            _, _, _, _, infos = env.step(env.action_space.sample())
            agent_steps += env.num_envs
            returns.extend(ret for _, ret in finished_episodes(infos))
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    print(f"[INFO] {short_name(env.behavior_name)}: {agent_steps} agent-steps in {elapsed:.2f} s = "
          f"{agent_steps / elapsed:,.0f} agent-steps/s ({env.num_envs} agents).", flush=True)
    if returns:
        print(f"[INFO] {len(returns)} episodes: mean return {sum(returns) / len(returns):.3f}, "
              f"min {min(returns):.3f}, max {max(returns):.3f}.", flush=True)
    else:
        print("[INFO] No episode finished.", flush=True)
    return 0
