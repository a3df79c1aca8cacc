"""Writes ``gail_<case>.npz`` (+ ``gail_<case>.demo``): GAIL's rewards and two discriminator
updates as mlagents-learn 1.1.0's own ``GAILRewardProvider`` computes them.

Run with the Python of an mlagents-learn venv, from the repository root::

    DIR/venv/bin/python tests/algos/mlagents_reference/make_gail_reference.py

For each case (discrete branches, observations only; two vector observations with a normaliser
and ``use_actions`` on a hybrid action, where the gradient penalty differentiates with respect
to the first observation only; ``use_vail`` with ``use_actions`` on continuous actions) it writes
a demonstration of random episodes with this project's ``write_demo``, builds ML-Agents' provider
on it (``torch.manual_seed(0)``: its initial weights), draws two policy minibatches of random
rows, and saves: the weights (encoder parameters in order, estimator, VAIL's μ layer and σ), the
rewards ``evaluate`` gives for both minibatches, then for each of two ``update`` calls the expert
rows ``sample_mini_batch`` drew (``np.random.randint`` wrapped), torch's seed before it
(``torch.manual_seed(50 + k)``: the interpolation ε and VAIL's noise come from it), its stats
and the weights after; finally the rewards again.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # this repository, for unity_rl.demos
sys.path.insert(0, str(HERE))
from unity_rl.demos import RecordedEpisode, write_demo  # noqa: E402

from mlagents.trainers.buffer import AgentBuffer, BufferKey  # noqa: E402
from mlagents.trainers.settings import GAILSettings, NetworkSettings  # noqa: E402
from mlagents.trainers.torch_entities.components.reward_providers.gail_reward_provider import (  # noqa: E402
    GAILRewardProvider)
from mlagents.trainers.trajectory import ObsUtil  # noqa: E402
from reference_common import vector_spec  # noqa: E402

CASES = {
    "discrete": dict(obs=[(6,)], continuous=0, branches=(3, 2), hidden=16, layers=2,
                     normalize=False, use_actions=False, use_vail=False),
    "hybrid_actions": dict(obs=[(5,), (3,)], continuous=2, branches=(3,), hidden=12, layers=2,
                           normalize=True, use_actions=True, use_vail=False),
    "vail": dict(obs=[(6,)], continuous=2, branches=(), hidden=16, layers=1, normalize=False,
                 use_actions=True, use_vail=True),
}
LENGTHS, BATCH, LEARNING_RATE = (7, 5, 9, 6), 16, 3e-3


def _actions(case: dict, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    cont = rng.uniform(-1, 1, (n, case["continuous"])).astype(np.float32)
    disc = (np.stack([rng.integers(0, b, n) for b in case["branches"]], 1) if case["branches"]
            else np.zeros((n, 0), np.int64))
    return cont, disc


def _write_demo(case: dict, path: Path, rng) -> None:
    episodes = []
    for steps in LENGTHS:
        cont, disc = _actions(case, rng, steps)
        episodes.append(RecordedEpisode(
            observations=[rng.normal(0.5, 1.5, size=(steps + 1, *s)).astype(np.float32)
                          for s in case["obs"]],
            continuous_actions=cont if case["continuous"] else None,
            discrete_actions=disc if case["branches"] else None,
            rewards=rng.normal(size=steps).astype(np.float32), done=True))
    write_demo(str(path), vector_spec(case), episodes, name="gail")


def _policy_batch(case: dict, rng) -> tuple[AgentBuffer, dict]:
    data = {f"obs{i}": rng.normal(size=(BATCH, *s)).astype(np.float32)
            for i, s in enumerate(case["obs"])}
    data["continuous"], data["discrete"] = _actions(case, rng, BATCH)
    data["done"] = (rng.random(BATCH) < 0.25).astype(np.float32)
    buffer = AgentBuffer()
    for i in range(len(case["obs"])):
        for row in data[f"obs{i}"]:
            buffer[ObsUtil.get_name_at(i)].append(row)
    for t in range(BATCH):
        buffer[BufferKey.CONTINUOUS_ACTION].append(data["continuous"][t])
        buffer[BufferKey.DISCRETE_ACTION].append(data["discrete"][t].astype(np.int32))
        buffer[BufferKey.DONE].append(bool(data["done"][t]))
    return buffer, data


def _weights(provider) -> dict[str, np.ndarray]:
    net = provider._discriminator_network
    out = {f"encoder/{k}": p.detach().numpy().copy()
           for k, p in enumerate(net.encoder.parameters())}
    out["estimator.weight"] = net._estimator[0].weight.detach().numpy().copy()
    out["estimator.bias"] = net._estimator[0].bias.detach().numpy().copy()
    if provider._discriminator_network._use_vail:
        out["z_mu.weight"] = net._z_mu_layer.weight.detach().numpy().copy()
        out["z_mu.bias"] = net._z_mu_layer.bias.detach().numpy().copy()
        out["z_sigma"] = net._z_sigma.detach().numpy().copy()
    return out


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    rng = np.random.default_rng(seed)
    demo = HERE / f"gail_{name}.demo"
    _write_demo(case, demo, rng)
    settings = GAILSettings(demo_path=str(demo), learning_rate=LEARNING_RATE,
                            use_actions=case["use_actions"], use_vail=case["use_vail"],
                            network_settings=NetworkSettings(normalize=case["normalize"],
                                                             hidden_units=case["hidden"],
                                                             num_layers=case["layers"]))
    torch.manual_seed(seed)
    provider = GAILRewardProvider(vector_spec(case), settings)
    out = {"weights0": _weights(provider)}
    batches = [_policy_batch(case, rng) for _ in range(2)]
    out["rewards_before"] = {str(b): provider.evaluate(buf) for b, (buf, _) in enumerate(batches)}
    drawn = []
    original = np.random.randint

    def recording_randint(*args, **kwargs):
        result = original(*args, **kwargs)
        drawn.append(np.array(result, copy=True))
        return result

    np.random.randint = recording_randint
    for k in range(2):
        torch.manual_seed(50 + k)
        stats = provider.update(batches[k][0])
        out[f"stats{k + 1}"] = {tag: np.asarray(v, np.float64) for tag, v in stats.items()}
        out[f"weights{k + 1}"] = _weights(provider)
    np.random.randint = original
    out["rewards_after"] = {str(b): provider.evaluate(buf) for b, (buf, _) in enumerate(batches)}
    out["expert_rows"] = {str(k): rows for k, rows in enumerate(drawn)}
    out["data"] = {f"{b}/{key}": v for b, (_, d) in enumerate(batches) for key, v in d.items()}
    path = HERE / f"gail_{name}.npz"
    flat = {f"{group}/{k}": v for group, d in out.items() for k, v in d.items()}
    np.savez_compressed(
        path, **flat,
        **{f"case/{k}": np.asarray(v) for k, v in case.items() if k != "obs"},
        **{f"case/obs_shape{i}": np.asarray(s) for i, s in enumerate(case["obs"])},
        **{"case/learning_rate": np.asarray(LEARNING_RATE)})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
