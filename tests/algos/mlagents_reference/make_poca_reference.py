"""Writes ``poca_<case>.npz``: one MA-POCA update as mlagents-learn 1.1.0's own trainer code
performs it (``POCATrainer._process_trajectory`` + ``_update_policy``).

Run with the Python of an mlagents-learn venv, from the repository root::

    DIR/venv/bin/python tests/algos/mlagents_reference/make_poca_reference.py

Groups of three agents act with ML-Agents' own policy; every agent's trajectory carries its
groupmates' statuses (observation, action, reward, done) per step as ML-Agents' agent processor
builds them, its group reward, and at its end the groupmates' next observations. Four kinds of
group exercise the rules that matter: (A) all three cut at the time horizon (bootstrap); (B) all
three terminate together (all group dones: no bootstrap); (C) one member dies early (its last
step: done while its mates go on, so it bootstraps from the group value; the mates' later steps
have one member fewer, NaN-padded and masked) and the others then terminate together; (D) all
three interrupted (bootstrap). One minibatch per epoch (``batch_size`` = the buffer). The file
holds the initial weights of actor and critic under this project's names, the data and the
weights after the update; ``test_poca_mlagents_reference.py`` replays it with ``POCALearner``.

Cases with ``signal`` add a learned reward signal beside the extrinsic one (``reward_signals:
{extrinsic, curiosity}`` or ``{extrinsic, rnd}``; ML-Agents' POCA warns, then uses it): its own
value and baseline heads in the critic, its rewards per trajectory in ``_process_trajectory``,
and its update after each minibatch's POCA step (``update_reward_signals``). Curiosity's reward
is 0 before its first update, so its provider is first updated once on a random batch (saved
under ``pre/``, the test repeats it). The file adds the signal's weights before and after
(``signal_before/``, ``signal_after/``, ML-Agents' names) and the rewards stored per step
(``data/signal_rewards``).

The case with ``bc`` adds ``behavioral_cloning`` on a demonstration written here
(``poca_bc.demo``): ML-Agents' ``TorchOptimizer`` gives POCA a ``BCModule`` as it gives PPO one,
and ``OnPolicyTrainer._update_policy`` runs ``bc_module.update()`` once after the POCA epochs.
To replay it, every ``np.random.shuffle`` of ``_update_policy`` is recorded (``shuffle/<i>``:
the POCA epochs' first, then BC's), torch is seeded (``BC_SEED``) right before it (the noise of
BC's reparameterised continuous samples), and discrete samples are argmax (they draw nothing).

The case with ``memory`` gives the actor and the centralised critic an LSTM
(``network_settings.memory``): each step carries a rollout actor memory (``data/memories``,
random: the update reads them as stored), ML-Agents evaluates values and baselines sequence by
sequence from one value and one baseline memory carried across trajectories
(``_evaluate_by_sequence_team``, ``value_memory_dict`` / ``baseline_memory_dict`` under agent id
""), pads every trajectory to whole sequences in its update buffer, and ``batch_size`` is the
padded buffer (one minibatch of whole sequences per epoch).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_bc_reference  # noqa: E402
import make_reward_signal_reference as signals  # noqa: E402
from reference_common import actor_output, signal_settings  # noqa: E402
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers
from mlagents.trainers.poca.optimizer_torch import POCASettings
from mlagents.trainers.poca.trainer import POCATrainer
from mlagents.trainers.buffer import RewardSignalUtil  # noqa: E402
from mlagents.trainers.settings import (BehavioralCloningSettings, NetworkSettings,  # noqa: E402
                                        RewardSignalSettings, RewardSignalType, TrainerSettings)
from mlagents.trainers.torch_entities import distributions  # noqa: E402
from mlagents.trainers.torch_entities.action_log_probs import LogProbsTuple
from mlagents.trainers.trajectory import AgentExperience, AgentStatus, Trajectory
from mlagents_envs.base_env import (ActionSpec, ActionTuple, BehaviorSpec, DimensionProperty,
                                    ObservationSpec, ObservationType)

HERE = Path(__file__).resolve().parent

CASES = {
    "discrete": dict(obs=6, continuous=0, branches=(3, 2), hidden=16, layers=2, gamma=0.99,
                     lambd=0.95, beta=5e-3, epochs=3),
    "hybrid": dict(obs=5, continuous=2, branches=(3,), hidden=12, layers=1, gamma=0.9,
                   lambd=0.9, beta=1e-2, epochs=3),
    "curiosity": dict(obs=6, continuous=0, branches=(3, 2), hidden=16, layers=2, gamma=0.99,
                      lambd=0.95, beta=5e-3, epochs=3, signal="curiosity", signal_gamma=0.8,
                      strength=0.5, signal_hidden=12, signal_layers=2, signal_lr=1e-3),
    "rnd": dict(obs=5, continuous=2, branches=(3,), hidden=12, layers=1, gamma=0.9, lambd=0.9,
                beta=1e-2, epochs=3, signal="rnd", signal_gamma=0.9, strength=0.3,
                signal_hidden=8, signal_layers=2, signal_lr=1e-3),
    "memory": dict(obs=6, continuous=1, branches=(3,), hidden=16, layers=2, gamma=0.95,
                   lambd=0.9, beta=5e-3, epochs=3, sequence_length=4, memory_size=16),
    "bc": dict(obs=5, continuous=2, branches=(3,), hidden=12, layers=1, gamma=0.9, lambd=0.9,
               beta=1e-2, epochs=3, bc=dict(steps=1000, strength=0.5, batch_size=8,
                                            num_epoch=2, lengths=(7, 5, 9))),
}
BC_SEED = 100
KINDS = "ABCDACBD"  # one group of each kind per letter; the first is A (three members at once)
LENGTH, MEMBERS, DIES_AT = 6, 3, 2
LEARNING_RATE, EPSILON, MAX_STEPS = 3e-4, 0.2, 500_000


def _lengths(kind: str) -> list[int]:
    return [LENGTH, LENGTH, DIES_AT + 1] if kind == "C" else [LENGTH] * MEMBERS


def _trainer(case: dict, demo: Path | None = None) -> POCATrainer:
    spec = BehaviorSpec([ObservationSpec((case["obs"],), (DimensionProperty.NONE,),
                                         ObservationType.DEFAULT, "obs0")],
                        ActionSpec(case["continuous"], tuple(case["branches"])))
    seq = case.get("sequence_length", 1)
    n = sum(-(-length // seq) * seq for k in KINDS for length in _lengths(k))  # padded rows
    settings = TrainerSettings(
        trainer_type="poca",
        hyperparameters=POCASettings(batch_size=n, buffer_size=n - 1,
                                     learning_rate=LEARNING_RATE, beta=case["beta"],
                                     epsilon=EPSILON, lambd=case["lambd"],
                                     num_epoch=case["epochs"]),
        network_settings=NetworkSettings(
            normalize=False, hidden_units=case["hidden"], num_layers=case["layers"],
            memory=NetworkSettings.MemorySettings(sequence_length=case["sequence_length"],
                                                  memory_size=case["memory_size"])
            if "memory_size" in case else None),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=case["gamma"]),
                        **signal_settings(case)},
        behavioral_cloning=None if demo is None else BehavioralCloningSettings(
            demo_path=str(demo), steps=case["bc"]["steps"], strength=case["bc"]["strength"],
            batch_size=case["bc"]["batch_size"], num_epoch=case["bc"]["num_epoch"]),
        max_steps=MAX_STEPS)
    trainer = POCATrainer("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, spec))
    return trainer


def _weights(trainer: POCATrainer, case: dict) -> dict[str, np.ndarray]:
    """Actor under ``actor.*`` (``actor.<k>``: the k-th module of the body's Sequential,
    ``actor.<2·layers>``: the output rows, continuous means then branches; ``actor_logstd``) and
    the critic under ``critic/<its name without network_body.>``."""
    actor = trainer.policy.actor.state_dict()
    out = {}
    body = "network_body._body_endoder.seq_layers."
    for key, value in actor.items():
        if key.startswith(body):
            out[f"actor.{key[len(body):]}"] = value.numpy()
        elif key.startswith("network_body.lstm.lstm."):  # the LSTM after the body (memory)
            out[f"actor_lstm.{key[len('network_body.lstm.lstm.'):]}"] = value.numpy()
    out.update(actor_output(actor, case))
    for key, value in trainer.optimizer.critic.state_dict().items():
        name = key.replace("network_body.", "", 1).replace("value_heads.value_heads.",
                                                            "value_heads.")
        out[f"critic/{name}"] = value.numpy()
    return {k: np.array(v, np.float32, copy=True) for k, v in out.items()}


def _sample(trainer: POCATrainer, case: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every member's steps (group g, member i, step t at row ((g·3 + i)·LENGTH + t); rows past a
    dead member's end are acted but unused), acted by ML-Agents' policy."""
    n = len(KINDS) * MEMBERS * LENGTH
    obs = rng.normal(size=(n, case["obs"])).astype(np.float32)
    branches = case["branches"]
    allowed = rng.random((n, sum(branches))) > 0.25
    start = 0
    for size in branches:
        allowed[:, start] = True
        start += size
    memory_size = case.get("memory_size", 0)
    memories = (0.3 * rng.normal(size=(n, memory_size))).astype(np.float32)
    with torch.no_grad():
        mask = torch.from_numpy(allowed.astype(np.float32)) if branches else None
        action, run_out, _ = trainer.policy.actor.get_action_and_stats(
            [torch.from_numpy(obs)], masks=mask,
            memories=torch.from_numpy(memories).unsqueeze(0) if memory_size else None)
    groups = len(KINDS) * MEMBERS
    extra = {"memories": memories} if memory_size else {}
    return {**extra,"obs": obs, "allowed": allowed,
            "continuous": (action.continuous_tensor.numpy() if case["continuous"]
                           else np.zeros((n, 0), np.float32)),
            "discrete": (action.discrete_tensor.numpy().reshape(n, -1).astype(np.int64)
                         if branches else np.zeros((n, 0), np.int64)),
            "logprobs": run_out["log_probs"].flatten().numpy(),
            "rewards": (0.3 * rng.normal(size=n)).astype(np.float32),
            "group_rewards": rng.normal(size=n).astype(np.float32),
            "next_obs": rng.normal(size=(groups, case["obs"])).astype(np.float32),
            "kinds": np.array([ord(k) for k in KINDS])}


def _done(kind: str, length: int, t: int) -> bool:
    """A member's step t ends its episode: every kind but A ends each member's last step."""
    return kind != "A" and t == length - 1


def _row(g: int, i: int, t: int) -> int:
    return (g * MEMBERS + i) * LENGTH + t


def _feed(trainer: POCATrainer, case: dict, data: dict) -> None:
    """Each member's trajectory with its groupmates' statuses, in group order."""
    for g, kind in enumerate(KINDS):
        lengths = _lengths(kind)
        for i in range(MEMBERS):
            steps = []
            for t in range(lengths[i]):
                r = _row(g, i, t)
                mates = []
                for j in range(MEMBERS):
                    if j == i or t >= lengths[j]:
                        continue  # itself, or a member that died (left the group)
                    m = _row(g, j, t)
                    mates.append(AgentStatus(
                        obs=[data["obs"][m]], reward=float(data["rewards"][m]),
                        action=ActionTuple(continuous=data["continuous"][m],
                                           discrete=data["discrete"][m].astype(np.int32)),
                        done=_done(kind, lengths[j], t)))
                last = t == lengths[i] - 1
                steps.append(_experience(case, data, r, mates, done=_done(kind, lengths[i], t),
                                         interrupted=last and kind == "D"))
            next_group = [[data["next_obs"][g * MEMBERS + j]] for j in range(MEMBERS)
                          if j != i and (lengths[j] > lengths[i] - 1)]
            if kind == "C" and i == 2:  # died first: the mates' current observations
                next_group = [[data["obs"][_row(g, j, lengths[i])]] for j in range(MEMBERS) if j != i]
            trainer._process_trajectory(Trajectory(
                steps=steps, next_obs=[data["next_obs"][g * MEMBERS + i]],
                next_group_obs=next_group, agent_id=f"agent-{g}-{i}", behavior_id="B"))


def _experience(case, data, r, mates, done, interrupted):
    c = case["continuous"]
    mask = [~data["allowed"][r, s:s + size] for s, size in
            zip(np.cumsum((0,) + case["branches"][:-1]), case["branches"])]
    return AgentExperience(
        obs=[data["obs"][r]], reward=float(data["rewards"][r]), done=done,
        action=ActionTuple(continuous=data["continuous"][r],
                           discrete=data["discrete"][r].astype(np.int32)),
        action_probs=LogProbsTuple(continuous=data["logprobs"][r, :c],
                                   discrete=data["logprobs"][r, c:]),
        action_mask=mask if case["branches"] else None,
        prev_action=np.zeros(len(case["branches"]), np.int32), interrupted=interrupted,
        memory=data["memories"][r] if "memories" in data else None, group_status=mates, group_reward=float(data["group_rewards"][r]))


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    demo = None
    if "bc" in case:
        demo = HERE / f"poca_{name}.demo"
        make_bc_reference._write_demo(dict(obs=[(case["obs"],)], continuous=case["continuous"],
                                           branches=case["branches"],
                                           lengths=case["bc"]["lengths"]),
                                      demo, np.random.default_rng(seed + 2))
    trainer = _trainer(case, demo)
    assert (trainer.optimizer.bc_module is not None) == (demo is not None)
    before = _weights(trainer, case)
    extra: dict[str, np.ndarray] = {}
    provider = trainer.optimizer.reward_signals.get(case.get("signal", ""))
    if provider is not None:
        extra.update({f"signal_before/{k}": v for k, v in signals.weights(provider).items()})
        if case["signal"] == "curiosity":  # one update first: its rewards are 0 before one
            pre_case = dict(obs=[(case["obs"],)], continuous=case["continuous"],
                            branches=case["branches"], padded=0)
            buffer, pre = signals.batch(pre_case, np.random.default_rng(seed + 1))
            provider.update(buffer)
            extra.update({f"pre/{k}": v for k, v in pre.items()})
    data = _sample(trainer, case, rng)
    _feed(trainer, case, data)
    if provider is not None:  # what _process_trajectory stored per step
        extra["data/signal_rewards"] = np.asarray(trainer.update_buffer[
            RewardSignalUtil.rewards_key(case["signal"])].get_batch(), np.float32)
    assert trainer._is_ready_update(), "the buffer must trigger exactly one update"
    shuffles = []
    original = np.random.shuffle
    if demo is not None:
        def recording_shuffle(array):
            original(array)
            shuffles.append(np.array(array, copy=True))

        np.random.shuffle = recording_shuffle
        distributions.CategoricalDistInstance.sample = (
            lambda self: torch.argmax(self.probs, dim=1, keepdim=True))
        torch.manual_seed(BC_SEED)
    trainer._update_policy()
    np.random.shuffle = original
    extra.update({f"shuffle/{i}": v for i, v in enumerate(shuffles)})
    after = _weights(trainer, case)
    if provider is not None:
        extra.update({f"signal_after/{k}": v for k, v in signals.weights(provider).items()})
    path = HERE / f"poca_{name}.npz"
    np.savez_compressed(
        path, **extra, **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in after.items()},
        **{f"data/{k}": v for k, v in data.items()},
        **{f"case/{k}": np.asarray(v) for k, v in case.items() if k != "bc"},
        **{f"case/bc_{k}": np.asarray(v) for k, v in case.get("bc", {}).items()},
        **{"case/learning_rate": np.asarray(LEARNING_RATE), "case/epsilon": np.asarray(EPSILON),
           "case/max_steps": np.asarray(MAX_STEPS), "case/length": np.asarray(LENGTH),
           "case/dies_at": np.asarray(DIES_AT)})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
