"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347), pure and single-process.

Two roles share one network class:
- ``PPOPolicy`` (``acting.py``) lives in an actor: it acts on a batch of observations (any number
  of agents, in any order: rows are independent) and loads the weights the learner publishes.
- ``PPOLearner`` owns the network, optimiser, observation normaliser and reward signals; it turns a
  list of ``Trajectory`` into one PPO update and returns metrics named like ML-Agents' TensorBoard
  tags.  It performs no I/O, starts no process or thread of its own and sets no process-wide
  torch state (no global seed, no thread count).

Observations: flat float32 rows (every observation flattened, in BehaviorSpec order); both roles
take the observation *shapes* and split rows inside the network (``encoders.py``: images through
the ``vis_encode_type`` encoder, vectors as they are; only vector columns are normalised).

The algorithm is mlagents-learn 1.1.0's PPO (a user's ML-Agents YAML assumes it;
docs/ppo.md), each choice read in its source (``mlagents/trainers/...``):
- separate actor and critic trunks (``shared_critic: false``; ``true``: value heads on the actor
  trunk, ``SharedActorCritic``), each HyperNetwork-conditioned on goal observations under
  ``goal_conditioning_type: hyper`` (``NetworkBody``), Swish activations, ML-Agents'
  initialisation (``torch_entities/layers.py``, see ``ppo_model``), Adam with torch's default eps
  and no gradient clipping (``ppo/optimizer_torch.py``);
- Gaussian policy with a state-independent log-std starting at 0; actions are sampled
  *unclipped*, stored with their log-probability, and the environment receives
  clamp(a, −3, 3) / 3 (``agent_action.py`` ``to_action_tuple(clip=True)``;
  ``PPOPolicy.env_actions``), which the exported model applies too;
- categorical per discrete branch, with disallowed actions' logits masked out; hybrid behaviors
  (continuous + discrete) get both heads on one actor trunk and action rows [n, C + B];
- log-probabilities per action dimension / branch and one ratio per column, advantages
  broadcast (``ActionLogProbs.flatten``, ``ModelUtils.trust_region_policy_loss``); entropy the
  mean over continuous dimensions plus each branch's (``ActionModel.evaluate``);
- one value head per reward signal (``reward_signals``, ML-Agents' ``ValueHeads``); values of
  ``obs`` and ``last_obs`` computed with the current critic before GAE (ML-Agents'
  ``_process_trajectory`` calls ``get_trajectory_value_estimates`` with the critic of the moment,
  which is the pre-update critic of this buffer);
- per signal k: rewards r_k = provider.rewards(trajectory) · strength_k, GAE with that signal's
  γ_k; the policy's advantage is the **mean** of the signals' advantages and each head regresses
  on its own returns (``ppo/trainer.py`` ``_process_trajectory``); the value loss is the mean over
  heads (``trust_region_value_loss``);
- advantages normalised once over the whole buffer (``on_policy_trainer._update_policy``), then
  ``num_epoch`` passes of ``len // batch_size`` minibatches of exactly ``batch_size`` rows, the
  remainder dropped (``buffer.make_mini_batch``);
- learning rate, clip range ε and entropy coefficient β decay linearly over ``max_steps``
  agent-steps *collected* (the trainer's step, this buffer included) towards 1e-10, 0.1 and 1e-5,
  or stay constant; value loss weight 0.5, ML-Agents' ``trust_region_value_loss`` with the
  decayed ε around the anchor ML-Agents 1.1.0 really reads: the *returns*, not the old value
  estimates (``RewardSignalUtil.value_estimates_key`` returns the returns key, so
  ``_process_trajectory`` overwrites its value estimates with the returns before the update
  reads them; Unity-Technologies/ml-agents#6281). Clipped around the returns, the clipped term
  never exceeds the plain one: the value loss is the unclipped squared error (docs/ppo.md,
  "Value clipping"; ``benchmarks/ppo_input_parity.py`` shows it on ML-Agents' own buffer).
There are no project-only variants (docs/ppo.md says which were removed and why).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from unity_rl.algorithms.distributions import DiagGaussian, HybridDistribution, MaskedMultiCategorical
from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.gae import compute_gae
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import seeded_init
from unity_rl.algorithms.ppo.config import PPOConfig
from unity_rl.algorithms.ppo.losses import (clipped_surrogate_loss, decayed, minibatch_indices,
                                       value_loss)
from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.algorithms.ppo.model import (DEFAULT_ARCH, LEGACY_ARCH, ActionSpecLike, ActorCritic,
                                      DeterministicActor, check_obs_shapes, load_normalizer,
                                      normalizer_state)
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.registry import make_reward_signals
from unity_rl.experience import Trajectory

VALUE_LOSS_WEIGHT = 0.5
"""Weight of the value loss in PPO's loss (ML-Agents' fixed 0.5, ``ppo/optimizer_torch.py``)."""

__all__ = ["PPOConfig", "PPOPolicy", "PPOLearner", "PPOBatch", "ActorCritic", "DeterministicActor",
           "ActionSpecLike", "DiagGaussian", "MaskedMultiCategorical", "HybridDistribution",
           "decayed", "clipped_surrogate_loss", "value_loss", "minibatch_indices"]

# ----------------------------------------------------------------------------------------------
# Learner
# ----------------------------------------------------------------------------------------------

class PPOBatch(NamedTuple):
    """What one update optimises on (``PPOLearner.prepare``), row for row."""

    obs: torch.Tensor
    """[N, obs_dim] observations through the normaliser."""
    actions: torch.Tensor
    """[N, C] float32 (hybrid [N, C + B]) or [N, B] int64, as the behaviour took them."""
    logprobs: torch.Tensor
    """[N, K] the behaviour's log-probabilities, one column per action dimension / branch."""
    masks: torch.Tensor | None
    """[N, sum(branches)] bool, True where allowed (None without branches)."""
    values: np.ndarray
    """[N, heads] value estimates (the GAE baselines)."""
    advantages: torch.Tensor
    """[N] mean over signals of GAE, normalised over the buffer."""
    returns: torch.Tensor
    """[N, heads] each head's GAE returns."""


class PPOLearner:
    """Owns the network, Adam optimiser, observation normaliser and reward signals; one ``update``
    per buffer.

    ``obs_shapes`` as ``PPOPolicy``; ``reward_signals``: the behavior's ``RewardSignalConfig``s
    (default: extrinsic only, γ 0.99, strength 1), one provider and one value head each, in that
    order; ``goal_indices``: the BehaviorSpec's GOAL_SIGNAL observations (``ActorCritic``);
    ``seed`` makes the initial weights and the minibatch shuffling reproducible;
    ``num_threads`` is accepted and ignored (the hosting process decides torch's threads).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike, ppo_cfg: PPOConfig,
                 network_cfg: NetworkConfig, device: str = "cpu", num_threads: int | None = None,
                 seed: int | None = None,
                 reward_signals: Sequence[RewardSignalConfig] = EXTRINSIC_ONLY,
                 goal_indices: Sequence[int] = ()):
        del num_threads  # accepted for the runtime's callers; a learner sets no process-wide state
        self.cfg = ppo_cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.device = torch.device(device)
        self.reward_signals = make_reward_signals(reward_signals, self.obs_shapes, action_spec)
        """One provider per reward signal, in value-head order."""
        with seeded_init(seed):  # seed-reproducible init without touching torch's global RNG
            self.model = ActorCritic(self.obs_shapes, action_spec, network_cfg,
                                     value_heads=[s.name for s in self.reward_signals],
                                     goal_indices=goal_indices,
                                     shared_critic=ppo_cfg.shared_critic).to(self.device)
        # One Adam over every parameter: actor and critic, or (shared_critic) the actor with its
        # value heads, ML-Agents' SharedActorCritic (ppo/optimizer_torch.py).
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=ppo_cfg.learning_rate)
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.rng = np.random.default_rng(seed)
        self.version = 0
        """Incremented by each update; actors report the version they acted with."""
        self.agent_steps_trained = 0
        """Agent-steps consumed by updates so far."""
        self.agent_steps_collected = 0
        """Agent-steps collected so far, as of the last update (ML-Agents' trainer step; drives
        the schedules): ``update``'s ``collected_steps``, else the steps trained."""

    # -- weights for actors, checkpoints, export ------------------------------------------------

    def weights(self) -> dict:
        """CPU copy for actors: {'model': state_dict, 'normalizer': state or None, 'version': int,
        'obs_shapes', 'arch', 'value_heads'}."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
                "normalizer": normalizer_state(self.normalizer),
                "version": self.version,
                "obs_shapes": self.obs_shapes,
                "arch": dict(DEFAULT_ARCH),
                "value_heads": self.model.value_head_names,
                **self._structure()}

    def _structure(self) -> dict:
        """What else shapes the network (saved with weights and checkpoints)."""
        return {"goal_indices": self.model.goal_indices, "shared_critic": self.model.shared_critic}

    def state_dict(self) -> dict:
        """Everything needed to resume: network, optimiser, normaliser, counters, shuffling RNG,
        the reward signals' own state.

        A deep copy (torch's state dicts alias the live tensors), made of tensors and plain
        Python values only, so ``torch.load(weights_only=True)`` can read it back.
        """
        return copy.deepcopy({"model": self.model.state_dict(),
                              "optimizer": self.optimizer.state_dict(),
                              "normalizer": normalizer_state(self.normalizer),
                              "obs_shapes": self.obs_shapes,
                              "version": self.version,
                              "agent_steps_trained": self.agent_steps_trained,
                              "agent_steps_collected": self.agent_steps_collected,
                              "arch": dict(DEFAULT_ARCH),
                              "value_heads": self.model.value_head_names,
                              **self._structure(),
                              "reward_signals": {s.name: s.state_dict() for s in self.reward_signals},
                              "rng": self.rng.bit_generator.state})

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output (copied: later updates do not write into it).

        Checkpoints of the one-value-head layout load (their value layer is the extrinsic head);
        those trained with the removed ``activation``/``weight_init``/``action_clip`` variants
        are refused here (they still load for evaluate and export, ``PPOPolicy``)."""
        state = copy.deepcopy(state)
        check_obs_shapes(self.obs_shapes, state)
        arch = {**LEGACY_ARCH, **(state.get("arch") or {})}
        if arch != DEFAULT_ARCH:
            raise ValueError(f"this checkpoint was trained with {arch}, a network variant PPO no "
                             f"longer trains ({DEFAULT_ARCH}); it can be evaluated or exported, "
                             "not resumed")
        heads = list(state.get("value_heads") or ("extrinsic",))
        if heads != self.model.value_head_names:
            raise ValueError(f"this checkpoint has value heads {heads}; the config's reward_signals "
                             f"give {self.model.value_head_names}")
        for key, ours in self._structure().items():
            saved = state.get(key, ours)  # older checkpoints: no goals, a separate critic
            if (tuple(saved) if key == "goal_indices" else bool(saved)) != ours:
                raise ValueError(f"this checkpoint has {key} {saved!r}, this learner {ours!r}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        load_normalizer(self.normalizer, state["normalizer"])
        self.version = int(state["version"])
        self.agent_steps_trained = int(state["agent_steps_trained"])
        self.agent_steps_collected = int(state.get("agent_steps_collected",
                                                   self.agent_steps_trained))
        for signal in self.reward_signals:
            signal.load_state_dict((state.get("reward_signals") or {}).get(signal.name, {}))
        self.rng.bit_generator.state = state["rng"]

    def export_module(self) -> DeterministicActor:
        """A deterministic CPU module observations -> action, normalisation folded in (ONNX)."""
        return DeterministicActor(self.model, self.normalizer, DEFAULT_ARCH["action_clip"])

    # -- the algorithm --------------------------------------------------------------------------

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        return self.layout.normalize(self.normalizer, obs)

    def update(self, trajectories: list[Trajectory],
               collected_steps: int | None = None) -> dict[str, float]:
        """One PPO update on these trajectories (any lengths).

        ``collected_steps``: agent-steps collected so far, these included (what drives the
        schedules); None counts the steps given here.
        """
        return self.optimise(self.prepare(trajectories), collected_steps)

    def prepare(self, trajectories: list[Trajectory]) -> PPOBatch:
        """Steps 1-4 of an update: what reaches the optimisation (normalised observations, value
        estimates, advantages, returns, the behaviour's actions and log-probs)."""
        cfg = self.cfg
        trajectories = [t for t in trajectories if len(t.rewards) > 0]
        if not trajectories:
            raise ValueError("PPOLearner.update needs at least one non-empty trajectory")
        lengths = [len(t.rewards) for t in trajectories]
        b_obs_raw = np.concatenate([np.asarray(t.obs, np.float32).reshape(-1, self.obs_dim)
                                    for t in trajectories])
        last_obs_raw = np.stack([np.asarray(t.last_obs, np.float32).reshape(self.obs_dim)
                                 for t in trajectories])
        b_size = len(b_obs_raw)

        # 1. Observation statistics first: values, advantages and ratios all see the same input.
        self.layout.update(self.normalizer, b_obs_raw)  # vector columns only
        b_obs = self._tensor(self._normalize(b_obs_raw), torch.float32)
        last_obs = self._tensor(self._normalize(last_obs_raw), torch.float32)

        # 2. V_k(s_t) and V_k(s_T) of every value head k under the current (pre-update) critic,
        #    as ML-Agents' get_trajectory_value_estimates (the GAE baselines).
        with torch.no_grad():
            values = self.model.get_value(b_obs).cpu().numpy()            # [N, K]
            last_values = self.model.get_value(last_obs).cpu().numpy()    # [M, K]

        # 3. Per trajectory and reward signal k: r_k · strength_k, GAE(γ_k, λ), bootstrapped from
        #    V_k(s_T) unless the episode terminated (and the signal does not ignore_done). The
        #    policy's advantage is the mean over signals; head k regresses on its own returns.
        advantages, returns = [], []
        starts = np.cumsum([0] + lengths)
        for i, traj in enumerate(trajectories):
            rows = slice(starts[i], starts[i + 1])
            adv_k, ret_k = [], []
            for k, signal in enumerate(self.reward_signals):
                adv, ret = compute_gae(signal.rewards(traj) * signal.strength, values[rows, k],
                                       float(last_values[i, k]),
                                       bool(traj.terminated) and not signal.ignore_done,
                                       signal.gamma, cfg.gae_lambda)
                adv_k.append(adv)
                ret_k.append(ret)
            advantages.append(np.mean(np.array(adv_k, dtype=np.float32), axis=0))
            returns.append(np.stack(ret_k, axis=1))
        b_advantages_np = np.concatenate(advantages)

        # 4. Advantages normalised once over the buffer (ML-Agents' _update_policy).
        b_advantages_np = ((b_advantages_np - b_advantages_np.mean())
                           / (b_advantages_np.std() + 1e-10))

        b_advantages = self._tensor(b_advantages_np, torch.float32)
        b_returns = self._tensor(np.concatenate(returns), torch.float32)   # [N, K]
        # log-probs: one column per action dimension / branch ([T] rows read as one column)
        b_logprobs = self._tensor(np.concatenate([np.asarray(t.logprobs, np.float32).reshape(
            len(t.rewards), -1) for t in trajectories]), torch.float32)
        branches = self.model.discrete_branches
        num_columns = self.model.continuous_size + len(branches)
        if b_logprobs.shape[1] != num_columns:
            raise ValueError(f"per-action ratios need {num_columns} log-prob columns per step "
                             f"(one per action dimension / branch), got {b_logprobs.shape[1]}")
        # actions: float32 rows when there is a continuous part (hybrid: C + B columns), else int64
        b_actions = self._tensor(np.concatenate([t.actions for t in trajectories]),
                                 torch.float32 if self.model.continuous_size else torch.int64)
        b_masks = None
        if branches:
            b_masks = self._tensor(np.concatenate([
                t.action_masks if t.action_masks is not None
                else np.ones((len(t.rewards), sum(branches)), bool)
                for t in trajectories]), torch.bool)
        return PPOBatch(obs=b_obs, actions=b_actions, logprobs=b_logprobs, masks=b_masks,
                        values=values, advantages=b_advantages, returns=b_returns)

    def optimise(self, batch: PPOBatch, collected_steps: int | None = None) -> dict[str, float]:
        """Steps 5-6 of an update: the schedules and the minibatch epochs on ``batch``."""
        cfg = self.cfg
        b_obs, b_actions, b_logprobs, b_masks = batch.obs, batch.actions, batch.logprobs, batch.masks
        b_advantages, b_returns, values = batch.advantages, batch.returns, batch.values
        b_size = len(b_obs)

        # 5. Schedules, driven by the agent-steps collected so far (ML-Agents' trainer step).
        self.agent_steps_collected = (int(collected_steps) if collected_steps is not None
                                      else self.agent_steps_collected + b_size)
        step = self.agent_steps_collected
        lrnow = decayed(cfg.learning_rate, 1e-10, cfg.lr_schedule, step, cfg.max_steps)
        clip_coef = decayed(cfg.clip_coef, 0.1, cfg.clip_coef_schedule, step, cfg.max_steps)
        ent_coef = decayed(cfg.ent_coef, 1e-5, cfg.ent_coef_schedule, step, cfg.max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lrnow

        # 6. Optimise the clipped surrogate, value loss and entropy bonus over minibatch epochs.
        stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": [], "clipfrac": []}
        self.model.train()
        for _epoch in range(cfg.num_epochs):
            b_inds = self.rng.permutation(b_size)
            for mb_inds_np in minibatch_indices(b_inds, cfg.minibatch_size):
                mb_inds = self._tensor(mb_inds_np, torch.int64)
                dist = self.model.distribution(b_obs[mb_inds],
                                               None if b_masks is None else b_masks[mb_inds])
                newlogprob = dist.log_prob(b_actions[mb_inds])  # [mb, K]
                entropy = dist.entropy()
                newvalue = self.model.get_value(b_obs[mb_inds])  # [mb, heads]

                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()

                pg_loss = clipped_surrogate_loss(newlogprob, b_logprobs[mb_inds],
                                                 b_advantages[mb_inds], clip_coef)
                # anchored at the returns, as ML-Agents 1.1.0 reads its buffer (module doc):
                # the squared error, unclipped
                v_loss = value_loss(newvalue, b_returns[mb_inds], b_returns[mb_inds], clip_coef)
                entropy_loss = entropy.mean()
                loss = pg_loss - ent_coef * entropy_loss + VALUE_LOSS_WEIGHT * v_loss

                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()

                stats["pg"].append(pg_loss.item())
                stats["v"].append(v_loss.item())
                stats["ent"].append(entropy_loss.item())
                stats["kl"].append(approx_kl.item())
                stats["clipfrac"].append(clipfrac.item())
        self.model.eval()

        self.agent_steps_trained += b_size
        self.version += 1
        metrics = {
            "Losses/Policy Loss": float(np.mean(stats["pg"])),
            "Losses/Value Loss": float(np.mean(stats["v"])),
            "Policy/Entropy": float(np.mean(stats["ent"])),
            "Policy/Learning Rate": float(lrnow),
            "Policy/Epsilon": float(clip_coef),
            "Policy/Beta": float(ent_coef),
            "Policy/Approx KL": float(np.mean(stats["kl"])),
            "Policy/Clip Fraction": float(np.mean(stats["clipfrac"])),
        }
        for k, signal in enumerate(self.reward_signals):  # ML-Agents' tag per stream
            metrics[f"Policy/{signal.name.capitalize()} Value Estimate"] = float(values[:, k].mean())
        return metrics
