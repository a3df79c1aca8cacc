"""What reaches PPO's update, here and in mlagents-learn 1.1.0, on one fixed run (issue 17, item 4).

``ppo_input_parity_mlagents.py`` (run in an mlagents-learn venv) drives ML-Agents' own
``AgentProcessor`` + ``PPOTrainer`` + ``TorchPolicy`` through a 3DBall-shaped numpy environment
and records the raw step stream, every trajectory as it reached the trainer and, per update, the
update buffer and normalisers. This script replays that *same* stream through unity-rl's sync
path -- ``TrajectoryCollector`` (the actor's cuts, ``time_horizon`` only), a segment once
``segment_steps`` agent-steps are finished, ``PPOHost.accept`` / ``ready`` / ``train`` and
``PPOLearner.prepare`` -- with ML-Agents' recorded actions and log-probs, and before each update
loads ML-Agents' pre-update weights (so that only the *inputs* can differ). Per update it compares,
field by field: which steps land in it, the normaliser, the normalised observations, value
estimates, returns, (normalised) advantages and log-probs; and, for the acting side, the policy
mean that ML-Agents' acting policy had (normaliser updated at every trajectory) against the one
unity-rl's actors have (the normaliser published with the last update).

    .venv/bin/python benchmarks/ppo_input_parity.py [--preset small|3dball] [--seed 0]
        [--mlagents-venv .mlagents_learn/venv] [--record FILE.npz] [--out FILE.json]

``--record`` reuses a recording instead of running ML-Agents. Writes a JSON of the differences
(``benchmarks/results/ppo_input_parity_<preset>.json`` by default) and prints a table.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from unity_rl.algorithms.network_config import NetworkConfig  # noqa: E402
from unity_rl.algorithms.ppo.config import PPOConfig  # noqa: E402
from unity_rl.algorithms.ppo.host import PPOHost  # noqa: E402
from unity_rl.algorithms.ppo.learner import PPOLearner  # noqa: E402
from unity_rl.algorithms.reward_signals.config import RewardSignalConfig  # noqa: E402
from unity_rl.experience import Segment  # noqa: E402
from unity_rl.runtime.collector import TrajectoryCollector  # noqa: E402


def record(preset: str, seed: int, venv: Path, path: Path) -> None:
    """Runs the ML-Agents half (its own venv, its own process)."""
    subprocess.run([str(venv / "bin" / "python"), str(REPO / "benchmarks" / "ppo_input_parity_mlagents.py"),
                    str(path), "--preset", preset, "--seed", str(seed)], check=True)


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return {k: npz[k] for k in npz.files}


def _mla_normalize(x: np.ndarray, mean: np.ndarray, m2: np.ndarray, steps: float) -> np.ndarray:
    """ML-Agents' ``Normalizer.forward``: its running_variance is a sum of squares."""
    return np.clip((x - mean) / np.sqrt(m2 / steps), -5, 5)


def _our_key(key: str, layers: int) -> str:
    """A reference weight name (``make_reference._our_names``) as ``ActorCritic`` names it."""
    head = 2 * layers
    if key.startswith(f"critic.{head}."):
        return "value_heads.extrinsic." + key[len(f"critic.{head}."):]
    if key.startswith("actor."):  # the actor trunk and its output layer: the mean head
        return "actor_mean." + key[len("actor."):]
    return key


def _load_weights(learner: PPOLearner, rec: dict, prefix: str, layers: int) -> None:
    state = learner.model.state_dict()
    mapped = {}
    for key in rec:
        if key.startswith(prefix):
            name = key[len(prefix):]
            mapped[_our_key(name, layers)] = torch.from_numpy(np.array(rec[key]))
    missing = set(state) - set(mapped)
    if missing:
        raise KeyError(f"no reference weights for {sorted(missing)}")
    learner.model.load_state_dict(mapped)


def _stats(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    scale = float(np.abs(np.asarray(b, np.float64)).mean()) or 1.0
    return {"max_abs": float(d.max()) if d.size else 0.0, "mean_abs": float(d.mean()) if d.size else 0.0,
            "mean_abs_of_reference": scale}


def replay(rec: dict[str, np.ndarray], host_options: dict | None = None) -> dict:
    """Feeds the recorded stream through unity-rl's sync path; returns the comparison."""
    p = {k[len("preset/"):]: rec[k].item() for k in rec if k.startswith("preset/")}
    cfg = PPOConfig(learning_rate=p["learning_rate"], buffer_size=p["buffer_size"],
                    minibatch_size=p["batch_size"], num_epochs=p["num_epoch"],
                    gae_lambda=p["lambd"], clip_coef=0.2, ent_coef=p["beta"],
                    max_steps=p["max_steps"])
    net = NetworkConfig(normalize=True, hidden_units=p["hidden"], num_layers=p["layers"])
    spec = SimpleNamespace(continuous_size=2, discrete_branches=())
    learner = PPOLearner([(8,)], spec, cfg, net, seed=0,
                         reward_signals=(RewardSignalConfig("extrinsic", gamma=p["gamma"]),))
    host = PPOHost(learner, buffer_steps=cfg.buffer_size, drop_lag=None, **(host_options or {}))
    collector = TrajectoryCollector(p["time_horizon"])
    segment_steps = cfg.buffer_size  # one actor: PPO's default segment_steps = buffer_size

    # the stream, split per env step
    dec_at = np.concatenate([[0], np.cumsum(rec["stream/dec_count"])])
    term_at = np.concatenate([[0], np.cumsum(rec["stream/term_count"])])
    ours: list[dict] = []
    acting: list[dict] = []
    frozen = learner.weights()["normalizer"]  # what unity-rl's actors act with
    update_index = 0
    prepare = learner.prepare

    def recording_prepare(trajectories):
        batch = prepare(trajectories)
        n = learner.normalizer
        ours.append({"t": t, "obs_raw": np.concatenate([tr.obs for tr in trajectories]),
                     "obs": batch.obs.numpy().copy(), "values": batch.values[:, 0].copy(),
                     "returns": batch.returns[:, 0].numpy().copy(),
                     "advantages": batch.advantages.numpy().copy(),
                     "logprobs": batch.logprobs.numpy().copy(),
                     "norm_mean": n.mean.copy(), "norm_var": n.var.copy(), "norm_count": n.count})
        return batch
    learner.prepare = recording_prepare

    layers = p["layers"]
    num_updates = int(rec["num_updates"])
    for t in range(int(rec["num_steps"])):
        d, e = slice(dec_at[t], dec_at[t + 1]), slice(term_at[t], term_at[t + 1])
        result = SimpleNamespace(
            terminals=SimpleNamespace(keys=list(rec["stream/term_ids"][e]),
                                      obs=[rec["stream/term_obs"][e]],
                                      reward=rec["stream/term_reward"][e],
                                      interrupted=rec["stream/term_interrupted"][e]),
            decisions=SimpleNamespace(keys=list(rec["stream/dec_ids"][d]),
                                      obs=[rec["stream/dec_obs"][d]],
                                      reward=rec["stream/dec_reward"][d], action_mask=None))
        obs = collector.observe(result)
        if collector.finished_steps >= segment_steps:
            trajectories = collector.take()
            returns, lengths = collector.pop_episodes()
            host.accept(Segment(trajectories, host.version, 0,
                                sum(len(tr.rewards) for tr in trajectories), returns, lengths))
            if host.ready():
                if update_index < num_updates:  # same weights as ML-Agents before its update
                    _load_weights(learner, rec, f"update{update_index}/before/", layers)
                host.train(sync=True)
                update_index += 1
                frozen = learner.weights()["normalizer"]
        # acting: ML-Agents' policy at t (live normaliser) vs unity-rl's (published normaliser)
        u = min(int(np.searchsorted(rec_update_ts(rec), t, side="left")), num_updates - 1)
        acting.append({"t": t, "u": u, "obs": obs, "live_mean": rec["stream/norm/mean"][t],
                       "live_m2": rec["stream/norm/m2"][t], "live_steps": float(rec["stream/norm/steps"][t][0]),
                       "frozen": frozen})
        collector.record(list(rec["stream/dec_ids"][d]), obs, rec["stream/actions"][d],
                         rec["stream/logprobs"][d], np.zeros(d.stop - d.start, np.float32))
    learner.prepare = prepare
    return {"preset": p, "ours": ours, "acting": acting, "learner": learner}


def rec_update_ts(rec: dict) -> np.ndarray:
    return np.array([int(rec[f"update{u}/t"]) for u in range(int(rec["num_updates"]))])


def _acting_gap(rec: dict, acting: list[dict], learner: PPOLearner, layers: int) -> list[dict]:
    """Per buffer: |mean_live - mean_frozen| of the acting policy and the KL between them."""
    out = []
    num_updates = int(rec["num_updates"])
    for u in range(num_updates):
        rows = [a for a in acting if a["u"] == u and (u == 0 or a["t"] > int(rec[f"update{u - 1}/t"]))]
        if not rows:
            continue
        _load_weights(learner, rec, f"update{u}/before/", layers)
        log_std = learner.model.state_dict()["actor_logstd"].numpy()
        d_mu, kl = [], []
        for a in rows:
            live = _mla_normalize(a["obs"], a["live_mean"], a["live_m2"], a["live_steps"])
            f = a["frozen"]
            mean, var = (np.asarray(f[k], np.float64) for k in ("mean", "var"))
            frozen = np.clip((a["obs"] - mean) / np.sqrt(var + 1e-8), -5, 5)
            with torch.no_grad():
                mu_live = learner.model.actor_output(torch.as_tensor(live, dtype=torch.float32)).numpy()
                mu_frozen = learner.model.actor_output(torch.as_tensor(frozen, dtype=torch.float32)).numpy()
            dm = mu_live[:, :2] - mu_frozen[:, :2]
            d_mu.append(np.abs(dm).mean())
            kl.append(float((dm ** 2 / (2 * np.exp(2 * log_std))).sum(axis=1).mean()))
        out.append({"update": u, "env_steps": len(rows), "mean_abs_action_mean_diff": float(np.mean(d_mu)),
                    "max_abs_action_mean_diff_step": float(np.max(d_mu)), "mean_kl": float(np.mean(kl)),
                    "max_kl_step": float(np.max(kl))})
    return out


def compare(rec: dict, result: dict) -> dict:
    p, ours = result["preset"], result["ours"]
    report = {"preset": p, "updates": []}
    for u in range(min(len(ours), int(rec["num_updates"]))):
        ref = {k[len(f"update{u}/"):]: v for k, v in rec.items() if k.startswith(f"update{u}/")}
        o = ours[u]
        same_rows = ref["obs"].shape == o["obs_raw"].shape and np.array_equal(ref["obs"], o["obs_raw"])
        entry = {"update": u, "env_step": {"mlagents": int(ref["t"]), "unity_rl": int(o["t"])},
                 "rows": {"mlagents": int(len(ref["obs"])), "unity_rl": int(len(o["obs_raw"]))},
                 "same_rows_in_same_order": bool(same_rows)}
        mla_var = ref["actor_norm/m2"] / ref["actor_norm/steps"]
        entry["normaliser"] = {"count": {"mlagents": float(ref["actor_norm/steps"]), "unity_rl": float(o["norm_count"])},
                               "mean": _stats(o["norm_mean"], ref["actor_norm/mean"]),
                               "var": _stats(o["norm_var"], mla_var),
                               "critic_equals_actor_in_mlagents": bool(
                                   np.array_equal(ref["actor_norm/m2"], ref["critic_norm/m2"]))}
        if same_rows:
            mla_obs = _mla_normalize(ref["obs"], ref["actor_norm/mean"], ref["actor_norm/m2"],
                                     float(ref["actor_norm/steps"]))
            adv = ref["advantages"]
            adv = (adv - adv.mean()) / (adv.std() + 1e-10)
            entry["normalised_obs"] = _stats(o["obs"], mla_obs)
            entry["values"] = _stats(o["values"], ref["values"])
            # unity-rl's anchor is its returns (PPOLearner.optimise), ML-Agents' what its buffer holds
            entry["value_clip_anchor"] = _stats(o["returns"], ref["value_anchor"])
            entry["mlagents_anchor_equals_its_returns"] = bool(np.array_equal(ref["value_anchor"], ref["returns"]))
            entry["returns"] = _stats(o["returns"], ref["returns"])
            entry["advantages_normalised"] = _stats(o["advantages"], adv)
            entry["logprobs"] = _stats(o["logprobs"], ref["logprobs"])
        report["updates"].append(entry)
    report["acting"] = _acting_gap(rec, result["acting"], result["learner"], p["layers"])
    report["trajectories"] = {"count": int(len(rec["traj/t"])), "terminated": int((rec["traj/done"] & ~rec["traj/interrupted"]).sum()),
                              "interrupted": int(rec["traj/interrupted"].sum()),
                              "cut_at_time_horizon": int((~rec["traj/done"]).sum())}
    return report


def _print(report: dict) -> None:
    t = report["trajectories"]
    print(f"trajectories: {t['count']} ({t['terminated']} terminated, {t['interrupted']} interrupted, "
          f"{t['cut_at_time_horizon']} cut at time_horizon)")
    for e in report["updates"]:
        print(f"update {e['update']}: env step {e['env_step']}, rows {e['rows']}, same rows: "
              f"{e['same_rows_in_same_order']}")
        n = e["normaliser"]
        print(f"  normaliser count {n['count']}; |mean diff| max {n['mean']['max_abs']:.3g}, "
              f"|var diff| max {n['var']['max_abs']:.3g}")
        for field in ("normalised_obs", "values", "value_clip_anchor", "returns",
                      "advantages_normalised", "logprobs"):
            if field in e:
                s = e[field]
                print(f"  {field:22s}: max |diff| {s['max_abs']:.3g}  mean |diff| {s['mean_abs']:.3g}"
                      f"  (mean |ML-Agents| {s['mean_abs_of_reference']:.3g})")
    for a in report["acting"]:
        print(f"acting before update {a['update']} ({a['env_steps']} env steps): |Δ action mean| "
              f"{a['mean_abs_action_mean_diff']:.3g} (worst step {a['max_abs_action_mean_diff_step']:.3g}), "
              f"KL {a['mean_kl']:.3g} (worst step {a['max_kl_step']:.3g})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small", choices=("small", "3dball"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    parser.add_argument("--record", type=Path, help="an existing recording (skips ML-Agents)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    path = args.record
    if path is None:
        path = Path(tempfile.mkdtemp()) / f"mlagents_{args.preset}.npz"
        record(args.preset, args.seed, args.mlagents_venv, path)
    rec = _load(path)
    report = compare(rec, replay(rec))
    _print(report)
    out = args.out or REPO / "benchmarks" / "results" / f"ppo_input_parity_{args.preset}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
