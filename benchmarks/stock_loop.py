"""The stock mlagents-envs loop, run by benchmarks/env_throughput.py in the stock venv.

One ``UnityEnvironment`` per build, stepped one after the other with random actions
(get_steps -> set_actions -> step), as a hand-written mlagents-envs loop does. Imports only
mlagents-envs (protobuf 3.20.3 there). Prints one JSON line: agent-steps/s and versions.

    STOCK_PYTHON benchmarks/stock_loop.py ENV NUM_BUILDS SECONDS BASE_PORT
"""
import json
import os
import sys
import time

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import google.protobuf  # noqa: E402
import numpy as np  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402
from mlagents_envs.environment import UnityEnvironment  # noqa: E402
from mlagents_envs.side_channel.engine_configuration_channel import (  # noqa: E402
    EngineConfigurationChannel,
)


def main() -> None:
    env_path, num_builds, seconds, base_port = sys.argv[1], int(sys.argv[2]), float(
        sys.argv[3]), int(sys.argv[4])
    envs = []
    try:
        for i in range(num_builds):
            engine = EngineConfigurationChannel()
            engine.set_configuration_parameters(time_scale=20.0)
            envs.append(UnityEnvironment(env_path, worker_id=i, base_port=base_port, seed=i,
                                         no_graphics=True, side_channels=[engine]))
        for env in envs:
            env.reset()
        name = next(iter(envs[0].behavior_specs))
        spec = envs[0].behavior_specs[name]
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for env in envs:
                decisions, _ = env.get_steps(name)
                n = len(decisions)
                steps += n
                action = spec.action_spec.empty_action(n)
                action.add_continuous(rng.uniform(-1, 1, (n, spec.action_spec.continuous_size))
                                      .astype(np.float32))
                env.set_actions(name, action)
                env.step()
        rate = steps / (time.perf_counter() - start)
    finally:
        for env in envs:
            env.close()
    print(json.dumps({"agent_steps_per_s": rate, "protobuf": google.protobuf.__version__,
                      "protobuf_backend": api_implementation.Type(),
                      "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
