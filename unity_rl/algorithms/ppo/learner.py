"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347), pure and single-process.

Two roles share one network class:
- ``PPOPolicy`` (``acting.py``) lives in an actor: it acts on a batch of observations (any number
  of agents, in any order: rows are independent) and loads the weights the learner publishes.
- ``PPOLearner`` owns the network, optimiser, observation normaliser and reward signals; it turns a
  list of ``Trajectory`` into one PPO update and returns metrics named like ML-Agents' TensorBoard
  tags.  It performs no I/O, starts no process or thread of its own and sets no process-wide
  torch state (no global seed, no thread count); where the trainer gave the learner two cores,
  ``update_halves.run_halves`` runs the critic's half of each minibatch step on its thread.

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
- per signal k: rewards r_k = provider.rewards(trajectory's rows) · strength_k, GAE with that
  signal's γ_k; the policy's advantage is the **mean** of the signals' advantages and each head
  regresses on its own returns (``ppo/trainer.py`` ``_process_trajectory``); the value loss is the
  mean over heads (``trust_region_value_loss``); learned signals (curiosity, RND) take one step
  of their own optimiser on each minibatch right after its PPO step (``update_reward_signals``;
  ``reward_signals/base.py``);
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
Memory (``network_settings.memory``): sequences of ``sequence_length``, the actor from its stored
rollout memories, the critic's memories recomputed sequence by sequence from one carry
(``critic_memory``), padded rows masked out; the contract is ``memory.py``'s docstring.
There are no project-only variants (docs/ppo.md says which were removed and why).

Files: ``batch.py`` holds ``PPOBatch`` and the rows both on-policy learners (PPO, POCA) build
from trajectories (observations, the behaviour's actions and log-probs, stored memories, the
advantage normalisation); ``memory.py`` the memory half of ``prepare``. What stays here is the
one update, ``prepare`` (values, GAE) then ``optimise`` (the epochs), beside the state they
share (normaliser, critic-memory carry, schedules).

Lagged rows (``update(lags=...)``: the async host under ``lag_correction: decoupled``) train with
decoupled PPO (``proximal.py``): the ratio centred on the policy at the update's start, each term
weighted by π_prox/π_behav; without lags, rows of lag 0 and sync runs keep ML-Agents' update.

Size (about 475 lines): ``prepare`` and ``optimise`` are the paper's update top to bottom;
the memory half is in ``memory.py``, the shared rows in ``batch.py`` and the losses in
``losses.py``; what stays is the update itself, its checkpoints and its weights.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from unity_rl.algorithms.distributions import DiagGaussian, HybridDistribution, MaskedMultiCategorical
from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.gae import compute_gae
from unity_rl.algorithms.image_layout import MinibatchWorkspace, converted_once
from unity_rl.algorithms.update_halves import run_halves
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import optimised_parameter_count, seeded_init
from unity_rl.algorithms.ppo.config import PPOConfig
from unity_rl.algorithms.ppo.losses import (clipped_surrogate_loss, decayed, masked_mean,
                                            minibatch_indices, schedules, value_loss)
from unity_rl.algorithms.sequences import pad_sequences, sequence_rows
from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.algorithms.ppo.batch import PPOBatch, behaviour, normalized, trajectory_obs
from unity_rl.algorithms.ppo.memory import sequence_batch, values_by_sequence
from unity_rl.algorithms.ppo.proximal import anchor, proximal_logprobs, stale_rows
from unity_rl.algorithms.ppo.model import (DEFAULT_ARCH, LEGACY_ARCH, ActionSpecLike, ActorCritic,
                                      DeterministicActor, check_obs_shapes, load_normalizer,
                                      normalizer_state)
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.base import (SignalBatch, episode_reward_metrics,
                                                     reads_observations, update_learned_signals)
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
        signals: list = []

        def build_signals() -> None:
            signals.extend(make_reward_signals(reward_signals, self.obs_shapes, action_spec,
                                               device))

        # One seeded stream in mlagents-learn's order (actor, reward-signal networks, critic),
        # so a seed draws its initial networks; torch's global RNG is left as it was.
        with seeded_init(seed):
            self.model = ActorCritic(self.obs_shapes, action_spec, network_cfg,
                                     value_heads=[c.name for c in reward_signals],
                                     goal_indices=goal_indices,
                                     shared_critic=ppo_cfg.shared_critic,
                                     between=build_signals).to(self.device)
        self.reward_signals = signals
        """One provider per reward signal, in value-head order; the learned ones train inside
        ``optimise`` (``reward_signals/base.py``)."""
        self.continuous_size = int(getattr(action_spec, "continuous_size", 0))
        # One Adam over every parameter: actor and critic, or (shared_critic) the actor with its
        # value heads, ML-Agents' SharedActorCritic (ppo/optimizer_torch.py).
        # fused: one kernel per step (CPU and CUDA), the same Adam (the reference test holds)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=ppo_cfg.learning_rate,
                                          fused=self.device.type in ("cpu", "cuda"))
        self.sequence_length = network_cfg.sequence_length
        """L: steps per training sequence (1 without memory)."""
        self.workspace = MinibatchWorkspace()
        """Minibatch buffers kept from one minibatch to the next (``image_layout``)."""
        self.critic_memory: torch.Tensor | None = None
        """The critic memory the last non-terminated trajectory left ([1, memory_size]; None:
        zeros), ML-Agents' ``critic_memory_dict[""]`` (module doc)."""
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

    def weights(self, include_critic: bool = False) -> dict:
        """CPU copy for actors: {'model': state_dict, 'normalizer': state or None, 'version': int,
        'obs_shapes', 'arch', 'value_heads'}. Actors never run the critic (``PPOPolicy``), so
        its entries (``ActorCritic.is_critic_key``) stay here unless ``include_critic``: on
        GridWorld's goal-conditioned networks that halves every publication (19 -> 9.6 MB)."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()
                          if include_critic or not ActorCritic.is_critic_key(k)},
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

    def parameter_count(self) -> int:
        """Elements of the actor-critic's parameters (what one update's Adam steps)."""
        return optimised_parameter_count(self.optimizer)

    def splits_update(self) -> bool:
        """True: ``optimise`` runs the actor's and the critic's halves of each minibatch step
        through ``update_halves.run_halves``; False with ``shared_critic`` (one trunk takes both
        gradients)."""
        return not self.model.shared_critic

    # -- the algorithm --------------------------------------------------------------------------

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        return self.layout.normalize(self.normalizer, obs)

    def update(self, trajectories: list[Trajectory],
               collected_steps: int | None = None,
               episode_length: float | None = None,
               lags: Sequence[int] | None = None) -> dict[str, float]:
        """One PPO update on these trajectories (any lengths).

        ``collected_steps``: agent-steps collected so far, these included (what drives the
        schedules); None counts the steps given here. ``episode_length``: the mean length of
        the episodes that ended while this buffer was collected (``Policy/<Signal> Reward``).
        ``lags``: per trajectory, the updates since the weights that acted (async); the lagged
        ones train with the decoupled objective (``proximal.py``); None: all on-policy.
        """
        return self.optimise(self.prepare(trajectories, episode_length, lags), collected_steps)

    def prepare(self, trajectories: list[Trajectory],
                episode_length: float | None = None,
                lags: Sequence[int] | None = None) -> PPOBatch:
        """Steps 1-4 of an update: what reaches the optimisation (normalised observations, value
        estimates, advantages, returns, the behaviour's actions and log-probs, the lagged rows)."""
        cfg = self.cfg
        if lags is not None:
            lags = [lag for t, lag in zip(trajectories, lags, strict=True) if len(t.rewards) > 0]
        trajectories = [t for t in trajectories if len(t.rewards) > 0]
        if not trajectories:
            raise ValueError("PPOLearner.update needs at least one non-empty trajectory")
        lengths = [len(t.rewards) for t in trajectories]
        b_obs_raw, last_obs_raw = trajectory_obs(trajectories, self.obs_dim)
        b_size = len(b_obs_raw)

        # 1. Observation statistics first: values, advantages and ratios all see the same input.
        self.layout.update(self.normalizer, b_obs_raw)  # vector columns only
        b_obs = self._tensor(self._normalize(b_obs_raw), torch.float32)
        last_obs = self._tensor(self._normalize(last_obs_raw), torch.float32)

        # 2. V_k(s_t) and V_k(s_T) of every value head k under the current (pre-update) critic,
        #    as ML-Agents' get_trajectory_value_estimates (the GAE baselines).
        critic_starts = None
        with torch.no_grad():
            if self.model.memory_size:  # sequence by sequence, carrying the critic memory
                values, last_values, critic_starts, self.critic_memory = values_by_sequence(
                    self.model, b_obs, last_obs, trajectories, self.sequence_length,
                    self.critic_memory)
            else:
                values = self.model.get_value(b_obs).cpu().numpy()            # [N, K]
                last_values = self.model.get_value(last_obs).cpu().numpy()    # [M, K]

        # 3. Per trajectory and reward signal k: r_k · strength_k, GAE(γ_k, λ), bootstrapped from
        #    V_k(s_T) unless the episode terminated (and the signal does not ignore_done). The
        #    policy's advantage is the mean over signals; head k regresses on its own returns.
        #    Each signal evaluates each trajectory as ML-Agents' _process_trajectory does.
        advantages, returns = [], []
        starts = np.cumsum([0] + lengths)
        with_obs = reads_observations(self.reward_signals)
        signal_rows = [SignalBatch.from_trajectory(t, self.continuous_size, with_obs)
                       for t in trajectories]
        reward_sums = np.zeros(len(self.reward_signals))
        for i, traj in enumerate(trajectories):
            rows = slice(starts[i], starts[i + 1])
            adv_k, ret_k = [], []
            for k, signal in enumerate(self.reward_signals):
                rewards_k = signal.rewards(signal_rows[i]) * signal.strength
                reward_sums[k] += float(np.sum(rewards_k))
                adv, ret = compute_gae(rewards_k, values[rows, k],
                                       float(last_values[i, k]),
                                       bool(traj.terminated) and not signal.ignore_done,
                                       signal.gamma, cfg.gae_lambda)
                adv_k.append(adv)
                ret_k.append(ret)
            advantages.append(np.mean(np.array(adv_k, dtype=np.float32), axis=0))
            returns.append(np.stack(ret_k, axis=1))
        reward_metrics = episode_reward_metrics(self.reward_signals, reward_sums, b_size,
                                                trajectories, episode_length)
        stale = stale_rows(lags, lengths, self.sequence_length)
        stale = None if stale is None else self._tensor(stale, torch.bool)
        if self.model.memory_size:
            L = self.sequence_length
            signal_batch = SignalBatch.concatenate([SignalBatch(*(pad_sequences(f, L) for f in b))
                                                    for b in signal_rows])
            return sequence_batch(self.model, trajectories, b_obs, values, advantages, returns,
                                  critic_starts, L, self.device)._replace(
                signal_batch=signal_batch, reward_metrics=reward_metrics, stale=stale)

        # 4. Advantages normalised once over the buffer (ML-Agents' _update_policy).
        b_advantages = self._tensor(normalized(np.concatenate(advantages)), torch.float32)
        b_returns = self._tensor(np.concatenate(returns), torch.float32)   # [N, K]
        b_actions, b_logprobs, b_masks = behaviour(trajectories, self.model.continuous_size,
                                                   self.model.discrete_branches, self.device)
        return PPOBatch(obs=b_obs, actions=b_actions, logprobs=b_logprobs, masks=b_masks,
                        values=values, advantages=b_advantages, returns=b_returns,
                        signal_batch=SignalBatch.concatenate(signal_rows),
                        reward_metrics=reward_metrics, stale=stale)

    def optimise(self, batch: PPOBatch, collected_steps: int | None = None) -> dict[str, float]:
        """Steps 5-6 of an update: the schedules and the minibatch epochs on ``batch``."""
        cfg = self.cfg
        b_obs, b_actions, b_logprobs, b_masks = batch.obs, batch.actions, batch.logprobs, batch.masks
        b_advantages, b_returns, values = batch.advantages, batch.returns, batch.values
        loss_mask, L = batch.loss_mask, batch.sequence_length
        b_size = len(b_obs) if loss_mask is None else int(loss_mask.sum())  # real steps

        # 5. Schedules, driven by the agent-steps collected so far (ML-Agents' trainer step).
        self.agent_steps_collected = (int(collected_steps) if collected_steps is not None
                                      else self.agent_steps_collected + b_size)
        lrnow, clip_coef, ent_coef = schedules(cfg, self.agent_steps_collected)
        for group in self.optimizer.param_groups:
            group["lr"] = lrnow

        # 6. Optimise the clipped surrogate, value loss and entropy bonus over minibatch epochs.
        stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": [], "clipfrac": []}
        learned = [signal for signal in self.reward_signals if signal.update is not None]
        signal_stats: dict[str, list[float]] = {}
        self.model.train()
        # Minibatches of whole sequences with memory: batch_size rounded down to a multiple of L
        # (at least L), as ML-Agents' _update_policy; without memory, L = 1 and rows.
        num_units = len(b_obs) // L
        unit_batch = max(cfg.minibatch_size - cfg.minibatch_size % L, L) // L
        # The ratio's centre: the behaviour's log-probs, or on lagged rows (async) the policy at
        # the start of this update, each term then weighted by π_prox/π_behav (proximal.py).
        ratio_centre, behaviour_weight = b_logprobs, None
        if batch.stale is not None:
            ratio_centre, behaviour_weight = anchor(b_logprobs, proximal_logprobs(
                self.model, self.workspace, batch, unit_batch), batch.stale)
        for _epoch in range(cfg.num_epochs):
            b_inds = self.rng.permutation(num_units)
            for mb_units in minibatch_indices(b_inds, unit_batch):
                mb_inds_np = mb_units if loss_mask is None else sequence_rows(mb_units, L)
                mb_inds = self._tensor(mb_inds_np, torch.int64)
                mb_mask = None if loss_mask is None else loss_mask[mb_inds]
                actor_memory = critic_memory = None
                if batch.memories is not None:
                    units = self._tensor(mb_units, torch.int64)
                    actor_memory, critic_memory = batch.memories[units], batch.critic_memories[units]
                # gathered once (camera rows are large), cameras copied channels-last once
                mb_obs = self.workspace.rows("obs", b_obs, mb_inds)

                def actor_half():  # the clipped surrogate and entropy bonus, and their gradients
                    dist = self.model.distribution(mb_obs,
                                                   None if b_masks is None else b_masks[mb_inds],
                                                   actor_memory, L)
                    newlogprob = dist.log_prob(b_actions[mb_inds])  # [mb, K]
                    entropy = dist.entropy()

                    logratio = newlogprob - ratio_centre[mb_inds]
                    ratio = logratio.exp()
                    with torch.no_grad():
                        # http://joschu.net/blog/kl-approx.html
                        approx_kl = masked_mean((ratio - 1) - logratio, mb_mask)
                        clipfrac = masked_mean(((ratio - 1.0).abs() > clip_coef).float(), mb_mask)

                    pg_loss = clipped_surrogate_loss(
                        newlogprob, ratio_centre[mb_inds], b_advantages[mb_inds], clip_coef,
                        mb_mask, None if behaviour_weight is None else behaviour_weight[mb_inds])
                    entropy_loss = masked_mean(entropy, mb_mask)
                    (pg_loss - ent_coef * entropy_loss).backward()
                    return pg_loss, entropy_loss, approx_kl, clipfrac

                def critic_half():  # the value loss and its gradients
                    newvalue = self.model.get_value(mb_obs, critic_memory, L)  # [mb, heads]
                    # anchored at the returns, as ML-Agents 1.1.0 reads its buffer (module doc):
                    # the squared error, unclipped
                    v_loss = value_loss(newvalue, b_returns[mb_inds], b_returns[mb_inds],
                                        clip_coef, mb_mask)
                    (VALUE_LOSS_WEIGHT * v_loss).backward()
                    return v_loss

                # loss = pg_loss - ent_coef * entropy_loss + VALUE_LOSS_WEIGHT * v_loss: separate
                # actor and critic networks take their gradients from their own half, so the
                # halves may run side by side (update_halves.py); a shared critic's trunk sums both
                self.optimizer.zero_grad(set_to_none=True)
                with converted_once(self.workspace):
                    if self.model.shared_critic:
                        halves = actor_half(), critic_half()
                    else:
                        halves = run_halves(actor_half, critic_half)
                (pg_loss, entropy_loss, approx_kl, clipfrac), v_loss = halves
                self.optimizer.step()

                # The learned reward signals train on the same minibatch, once each (ML-Agents'
                # update_reward_signals(minibatch) after each PPO step).
                if learned:
                    update_learned_signals(learned, batch.signal_batch.rows(mb_inds_np),
                                           signal_stats)

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
        metrics.update({tag: float(np.mean(v)) for tag, v in signal_stats.items()})
        metrics.update(batch.reward_metrics or {})
        return metrics
