"""MA-POCA (Cohen et al. 2021, arXiv:2111.05992) as mlagents-learn 1.1.0 runs it, pure and
single-process (``poca/trainer.py``, ``poca/optimizer_torch.py``; TRAINERS.md §3).

- Decentralised actor: PPO's ``ActorCritic`` on the agent's own observations, in its
  ``shared_critic`` layout (value heads on the actor trunk that nothing here trains), so that
  acting, evaluate and ONNX export are PPO's own and export the actor only, as ML-Agents does.
- Centralised critic ``POCACritic`` (``model.py``) over the agent and its groupmates
  (``Trajectory.extras.group_obs``, absent members NaN): V(s_group) and the counterfactual
  baseline Q(s, a_−i) per agent.
- Reward signals: one value head and one baseline head per signal (``POCAValueNetwork``'s
  ``ValueHeads``). Signal k's rewards are ``rewards(trajectory) · strength`` on the agent's own
  rows; the extrinsic signal also adds the groupmates' individual rewards and the group reward
  (``ExtrinsicRewardProvider`` with ``add_groupmate_rewards``). Learned signals (curiosity, RND,
  GAIL) are accepted with ML-Agents' warning ("not supported with the POCA trainer; results may
  be unexpected") and then used as ML-Agents uses them: evaluated per trajectory with the
  weights of the last update, and updated once per minibatch right after the POCA step, on the
  same rows (``on_policy_trainer._update_policy``: ``update_reward_signals(minibatch)``).
- Returns: TD(λ) per trajectory and signal (``lambda_return``: G_T = r_T + γ·V_next,
  G_t = r_t + (1−λ)·γ·V(s_{t+1}) + λ·γ·G_{t+1}), V_next = V(last_obs with the other members'
  latest observations), zero only when the agent terminated **and** no groupmate was still in
  its episode (``Trajectory.group_continues``): an agent that dies for its group bootstraps from
  the group's value. Advantage A = G − baseline, its mean over signals; normalised over the buffer.
- Loss per minibatch: clipped surrogate (per action column) + 0.5·(value loss + 0.5·baseline
  loss) − β·entropy, one Adam over actor and critic (the learned signals' own Adams after it), ML-Agents' linear schedules. The value loss
  is anchored where ML-Agents 1.1.0 anchors it, at the returns (its ``value_estimates_key`` is
  the returns key, Unity-Technologies/ml-agents#6281: the unclipped squared error); the baseline
  loss is clipped around the baselines of the rollout.
- Values, baselines and V_next are computed for the whole buffer at once with the pre-update
  critic; the member count's maximum (``POCACritic.max_agents``) is raised to the buffer's
  largest group before them (ML-Agents raises it trajectory by trajectory: the two differ only
  while the largest group seen so far still grows).

Memory (``network_settings.memory``; ML-Agents' POCA with ``use_recurrent``): the actor is PPO's
recurrent actor (its sequence k starts from the rollout memory stored with its first step,
``StepExtras.memories``), the critic ``POCACritic`` with its LSTM. Values and baselines are
computed sequence by sequence (``critic_rows.values_by_sequence``) from a value memory and a
baseline memory carried from trajectory to trajectory and, unlike PPO's critic memory, never
dropped at an episode end (``value_memory``, ``baseline_memory``). Every row field is padded to whole sequences (own observations
0, groupmates absent, advantages 0 before the normalisation, ML-Agents' quirk §10.10), padded
rows are masked out of every loss, and minibatches are whole sequences (``batch_size`` rounded
down to a multiple of L). The learned signals update on the same padded rows (masked).

No process or I/O; metrics named as ML-Agents' TensorBoard tags (``Losses/Baseline Loss``,
``Policy/Extrinsic Baseline Estimate``, ...).

Files: ``critic_rows.py`` holds what the critic reads (the groupmates' rows), its evaluation
sequence by sequence with memory, and ``lambda_return`` (re-exported here); the rows POCA shares
with PPO (observations, the behaviour's actions and log-probs, stored memories, the advantage
normalisation) are ``ppo/batch.py``'s. What stays here is the one update, ``prepare`` then
``optimise``, beside the state they share (normaliser, the two critic-memory carries,
schedules).

Lagged rows (``update(lags=...)``, async under ``lag_correction: decoupled``) train with decoupled
PPO, as PPO's (``ppo/proximal.py``).

Size (about 475 lines): ``update()`` (prepare then optimise, in the paper's order) and the
critic's group rows stay here; the row building shared with PPO is in ``ppo/batch.py`` and the
group-critic helpers in ``critic_rows.py``, so what is left reads as one algorithm.
"""
from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.image_layout import MinibatchWorkspace, converted_once
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import optimised_parameter_count, seeded_init
from unity_rl.algorithms.poca.config import POCAConfig
from unity_rl.algorithms.poca.critic_rows import group_rows, lambda_return, values_by_sequence
from unity_rl.algorithms.poca.model import POCACritic
from unity_rl.algorithms.ppo.batch import behaviour, normalized, stored_memories, trajectory_obs
from unity_rl.algorithms.ppo.losses import (clipped_surrogate_loss, masked_mean,
                                            minibatch_indices, schedules, value_loss)
from unity_rl.algorithms.ppo.proximal import anchor, proximal_logprobs, stale_rows
from unity_rl.algorithms.ppo.model import (DEFAULT_ARCH, ActionSpecLike, ActorCritic,
                                           DeterministicActor, check_obs_shapes, load_normalizer,
                                           normalizer_state)
from unity_rl.algorithms.reward_signals.base import (SignalBatch, episode_reward_metrics,
                                                     reads_observations, update_learned_signals)
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.registry import make_reward_signals
from unity_rl.algorithms.sequences import pad_sequences, pad_trajectories, sequence_rows
from unity_rl.algorithms.update_halves import run_halves
from unity_rl.experience import Trajectory

logger = logging.getLogger(__name__)

VALUE_LOSS_WEIGHT = 0.5
BASELINE_LOSS_WEIGHT = 0.5
"""loss = policy + 0.5·(value_loss + 0.5·baseline_loss) − β·entropy (ML-Agents' fixed weights)."""


class POCABatch(NamedTuple):
    """What one update optimises on (``POCALearner.prepare``), row for row."""

    obs: torch.Tensor
    """[N, obs_dim] own observations, normalised."""
    mates_obs: torch.Tensor
    """[N, M, obs_dim] groupmates' observations, normalised, NaN rows where no member."""
    mates_actions: torch.Tensor
    """[N, M, C + B] groupmates' action rows (0 where no member)."""
    actions: torch.Tensor
    logprobs: torch.Tensor
    masks: torch.Tensor | None
    advantages: torch.Tensor
    """[N] mean over signals of G − baseline, normalised over the buffer."""
    returns: torch.Tensor
    """[N, K] each signal's λ-returns (the targets of V and of the baseline)."""
    baselines: torch.Tensor
    """[N, K] the rollout's baselines (the baseline loss's clip anchor)."""
    values: np.ndarray
    """[N, K] V(s_group) of the rollout (for the metrics; real steps only)."""
    signal_batch: SignalBatch
    """The same rows as the reward signals read them (the agent's own raw observations, next
    observations, actions, dones): each learned signal's update takes the minibatch's rows."""
    reward_metrics: dict
    """``Policy/<Signal> Reward`` of this buffer (``episode_reward_metrics``)."""
    loss_mask: torch.Tensor | None = None
    """[N] bool, False on the rows that pad memory sequences (None: no memory, no padding)."""
    memories: torch.Tensor | None = None
    """[N / L, memory_size]: the actor memory each sequence starts from (None: no memory)."""
    value_memories: torch.Tensor | None = None
    """[N / L, memory_size]: the critic's value memory each sequence starts from."""
    baseline_memories: torch.Tensor | None = None
    """[N / L, memory_size]: the critic's baseline memory each sequence starts from."""
    sequence_length: int = 1
    """L: rows per sequence (1 without memory); every row field is padded to whole sequences."""
    stale: torch.Tensor | None = None
    """[N] bool, True on the rows acted with older weights (async lag > 0): the decoupled
    objective (``ppo/proximal.py``); None: every row on-policy."""


class POCALearner:
    """Owns the actor, the centralised critic, one Adam, the normaliser and the reward signals."""

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike, cfg: POCAConfig,
                 network_cfg: NetworkConfig, device: str = "cpu", seed: int | None = None,
                 reward_signals: Sequence[RewardSignalConfig] = EXTRINSIC_ONLY,
                 goal_indices: Sequence[int] = ()):
        self.cfg = cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.device = torch.device(device)
        for config in reward_signals:
            if config.name != "extrinsic":  # ML-Agents' create_reward_signals warns, then uses it
                logger.warning("Reward signal %s is not supported with the POCA trainer; results "
                               "may be unexpected.", config.name.capitalize())
        heads = [c.name for c in reward_signals]
        # one seeded stream in mlagents-learn's order: the policy's actor, then the reward
        # signals (TorchOptimizer.__init__'s create_reward_signals), then POCAValueNetwork
        with seeded_init(seed):
            self.model = ActorCritic(self.obs_shapes, action_spec, network_cfg, value_heads=heads,
                                     goal_indices=goal_indices, shared_critic=True).to(self.device)
            self.reward_signals = make_reward_signals(reward_signals, self.obs_shapes,
                                                      action_spec, device)
            """One provider per reward signal, in value-head order; the learned ones (curiosity,
            RND, GAIL) train inside ``optimise``, once per minibatch
            (``reward_signals/base.py``)."""
            self.critic = POCACritic(self.obs_shapes, action_spec, network_cfg,
                                     value_heads=heads).to(self.device)
        self.continuous_size = int(getattr(action_spec, "continuous_size", 0))
        # One Adam over actor + critic (ML-Agents: policy.actor.parameters() + critic.parameters())
        self.optimizer = torch.optim.Adam(
            list(self.model.parameters()) + list(self.critic.parameters()), lr=cfg.learning_rate)
        self.sequence_length = network_cfg.sequence_length
        """L: steps per training sequence (1 without memory)."""
        self.workspace = MinibatchWorkspace()
        """Minibatch buffers kept from one minibatch to the next (``image_layout``)."""
        self.value_memory: torch.Tensor | None = None
        self.baseline_memory: torch.Tensor | None = None
        """The value / baseline memories the last trajectory left ([1, memory_size]; None:
        zeros): ML-Agents' ``value_memory_dict[""]`` / ``baseline_memory_dict[""]`` (module doc)."""
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.rng = np.random.default_rng(seed)
        self.version = 0
        self.agent_steps_trained = 0
        self.agent_steps_collected = 0

    # -- weights for actors, checkpoints, export ------------------------------------------------

    def weights(self, include_critic: bool = False) -> dict:
        """What the actors' PPO policy copies load: the actor only (module doc), whatever
        ``include_critic`` says (the centralised critic is a network of its own)."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
                "normalizer": normalizer_state(self.normalizer), "version": self.version,
                "obs_shapes": self.obs_shapes, "arch": dict(DEFAULT_ARCH),
                "value_heads": self.model.value_head_names,
                "goal_indices": self.model.goal_indices, "shared_critic": True}

    def state_dict(self) -> dict:
        """Everything to resume (a deep copy of tensors and plain values); ``model`` and
        ``normalizer`` are what ``ppo.export.load_policy_module`` reads."""
        return copy.deepcopy({"model": self.model.state_dict(),
                              "critic": self.critic.state_dict(),
                              "optimizer": self.optimizer.state_dict(),
                              "normalizer": normalizer_state(self.normalizer),
                              "obs_shapes": self.obs_shapes, "version": self.version,
                              "agent_steps_trained": self.agent_steps_trained,
                              "agent_steps_collected": self.agent_steps_collected,
                              "arch": dict(DEFAULT_ARCH),
                              "value_heads": self.model.value_head_names,
                              "goal_indices": self.model.goal_indices, "shared_critic": True,
                              "reward_signals": {s.name: s.state_dict() for s in self.reward_signals},
                              "rng": self.rng.bit_generator.state})

    def load_state_dict(self, state: dict) -> None:
        state = copy.deepcopy(state)
        check_obs_shapes(self.obs_shapes, state)
        heads = list(state.get("value_heads") or ())
        if heads != self.model.value_head_names:
            raise ValueError(f"this checkpoint has value heads {heads}; the config's reward_signals "
                             f"give {self.model.value_head_names}")
        self.model.load_state_dict(state["model"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        load_normalizer(self.normalizer, state["normalizer"])
        self.version = int(state["version"])
        self.agent_steps_trained = int(state["agent_steps_trained"])
        self.agent_steps_collected = int(state["agent_steps_collected"])
        for signal in self.reward_signals:
            signal.load_state_dict((state.get("reward_signals") or {}).get(signal.name, {}))
        self.rng.bit_generator.state = state["rng"]

    def export_module(self) -> DeterministicActor:
        """The actor as a deterministic CPU module, normalisation folded in (ONNX)."""
        return DeterministicActor(self.model, self.normalizer, DEFAULT_ARCH["action_clip"])

    def parameter_count(self) -> int:
        """Elements of the actor's and the critic's parameters (what one update's Adam steps)."""
        return optimised_parameter_count(self.optimizer)

    def splits_update(self) -> bool:
        """True: ``optimise`` runs the actor's half and the critic's (value and baseline) half
        of each minibatch step through ``update_halves.run_halves``."""
        return True

    # -- the algorithm --------------------------------------------------------------------------

    def update(self, trajectories: list[Trajectory],
               collected_steps: int | None = None,
               episode_length: float | None = None,
               lags: Sequence[int] | None = None) -> dict[str, float]:
        """One POCA update on these trajectories (``collected_steps``: the schedules' step;
        ``episode_length``: the mean length of the episodes that ended while this buffer was
        collected, for ``Policy/<Signal> Reward``; ``lags``: as ``PPOLearner.update``)."""
        return self.optimise(self.prepare(trajectories, episode_length, lags), collected_steps)

    def prepare(self, trajectories: list[Trajectory],
                episode_length: float | None = None,
                lags: Sequence[int] | None = None) -> POCABatch:
        """Steps 1-4: normalised observations, values, baselines, λ-returns, advantages, the
        lagged rows."""
        if lags is not None:
            lags = [lag for t, lag in zip(trajectories, lags, strict=True) if len(t.rewards) > 0]
        trajectories = [t for t in trajectories if len(t.rewards) > 0]
        if not trajectories:
            raise ValueError("POCALearner.update needs at least one non-empty trajectory")
        lengths = [len(t.rewards) for t in trajectories]
        obs_raw, last_raw = trajectory_obs(trajectories, self.obs_dim)
        mates_raw, next_raw, mates_actions = group_rows(trajectories, self.obs_dim)

        # 1. Observation statistics from the agents' own observations (ML-Agents'
        #    update_normalization reads the obs fields, not the group ones).
        self.layout.update(self.normalizer, obs_raw)
        obs_np, mates_np = self._normalize(obs_raw), self._normalize_rows(mates_raw)
        obs, mates = self._tensor(obs_np), self._tensor(mates_np)
        last_obs = self._tensor(self._normalize(last_raw))
        next_mates = self._tensor(self._normalize_rows(next_raw))
        b_mates_actions = self._tensor(mates_actions)

        # 2. V(s_group), Q(s, a_-i) of every step and V(s_next) of every trajectory's end under
        #    the pre-update critic; the member-count maximum raised to the buffer's first.
        with torch.no_grad():
            present = max(int((~torch.isnan(mates[:, :, 0])).sum(1).max()) if mates.shape[1] else 0,
                          int((~torch.isnan(next_mates[:, :, 0])).sum(1).max())
                          if next_mates.shape[1] else 0) + 1
            self.critic.max_agents.fill_(max(float(self.critic.max_agents), float(present)))
            if self.critic.memory_size:  # sequence by sequence, carrying the two memories
                (values, baselines, next_values, value_starts, baseline_starts,
                 self.value_memory, self.baseline_memory) = values_by_sequence(
                    self.critic, obs, mates, b_mates_actions, last_obs, next_mates, lengths,
                    self.sequence_length, self.value_memory, self.baseline_memory)
            else:
                values = self.critic.value(obs, mates).cpu().numpy()                   # [N, K]
                baselines = self.critic.baseline(obs, mates, b_mates_actions).cpu().numpy()
                next_values = self.critic.value(last_obs, next_mates).cpu().numpy()    # [M, K]

        # 3. Per trajectory and signal k: rewards (extrinsic: + groupmates' + group reward;
        #    learned signals from the agent's own rows, as ML-Agents' _process_trajectory),
        #    λ-returns bootstrapped from V(s_next) unless the agent and its whole group ended.
        starts = np.cumsum([0] + lengths)
        with_obs = reads_observations(self.reward_signals)
        signal_rows = [SignalBatch.from_trajectory(t, self.continuous_size, with_obs)
                       for t in trajectories]
        reward_sums = np.zeros(len(self.reward_signals))
        returns, advantages = [], []
        for i, traj in enumerate(trajectories):
            rows = slice(starts[i], starts[i + 1])
            done = bool(traj.terminated) and not traj.group_continues
            ret_k, adv_k = [], []
            for k, signal in enumerate(self.reward_signals):
                r = self._rewards(signal, traj, signal_rows[i]) * np.float32(signal.strength)
                reward_sums[k] += float(np.sum(r))
                v_next = 0.0 if done and not signal.ignore_done else float(next_values[i, k])
                g = lambda_return(r, values[rows, k], signal.gamma, self.cfg.gae_lambda, v_next)
                ret_k.append(g)
                adv_k.append(g - baselines[rows, k])
            returns.append(np.stack(ret_k, axis=1))
            advantages.append(np.mean(np.array(adv_k, dtype=np.float32), axis=0))

        # 4. Advantages normalised once over the buffer (ML-Agents' _update_policy); with
        #    memory every row field padded to whole sequences first, padded advantages
        #    counting as 0 in the normalisation (ML-Agents' quirk, TRAINERS.md §10.10).
        L = self.sequence_length
        pad = functools.partial(pad_trajectories, lengths=lengths, sequence_length=L)
        b_adv = normalized(pad(np.concatenate(advantages)))
        b_actions, b_logprobs, b_masks = behaviour(trajectories, self.model.continuous_size,
                                                   self.model.discrete_branches, self.device, L)
        batch = POCABatch(
            obs=self._tensor(pad(obs_np)), mates_obs=self._tensor(pad(mates_np, value=np.nan)),
            mates_actions=self._tensor(pad(mates_actions)), actions=b_actions,
            logprobs=b_logprobs, masks=b_masks, advantages=self._tensor(b_adv),
            returns=self._tensor(pad(np.concatenate(returns))),
            baselines=self._tensor(pad(baselines)), values=values,
            signal_batch=SignalBatch.concatenate([SignalBatch(*(pad_sequences(f, L) for f in b))
                                                  for b in signal_rows]),
            reward_metrics=episode_reward_metrics(self.reward_signals, reward_sums,
                                                  len(obs_raw), trajectories, episode_length),
            sequence_length=L)
        stale = stale_rows(lags, lengths, L)
        if stale is not None:
            batch = batch._replace(stale=self._tensor(stale, torch.bool))
        if not self.critic.memory_size:
            return batch
        return batch._replace(
            loss_mask=self._tensor(pad(np.ones(len(obs_raw), bool), value=False), torch.bool),
            memories=self._tensor(stored_memories(trajectories, L, self.model.memory_size)),
            value_memories=value_starts, baseline_memories=baseline_starts)

    def optimise(self, batch: POCABatch, collected_steps: int | None = None) -> dict[str, float]:
        """Steps 5-6: the schedules, then the minibatch epochs."""
        cfg = self.cfg
        L, loss_mask = batch.sequence_length, batch.loss_mask
        n = len(batch.obs) if loss_mask is None else int(loss_mask.sum())  # real steps
        # 5. Schedules, driven by the agent-steps collected so far (ML-Agents' trainer step).
        self.agent_steps_collected = (int(collected_steps) if collected_steps is not None
                                      else self.agent_steps_collected + n)
        lrnow, epsilon, beta = schedules(cfg, self.agent_steps_collected)
        for group in self.optimizer.param_groups:
            group["lr"] = lrnow

        # 6. Clipped surrogate + 0.5·(value loss + 0.5·baseline loss) − β·entropy.
        stats: dict[str, list[float]] = {"pg": [], "v": [], "b": [], "ent": []}
        signal_stats: dict[str, list[float]] = {}
        self.model.train()
        self.critic.train()
        # Minibatches of whole sequences with memory: batch_size rounded down to a multiple of L
        # (at least L), as ML-Agents' _update_policy; without memory, L = 1 and rows.
        num_units = len(batch.obs) // L
        unit_batch = max(cfg.minibatch_size - cfg.minibatch_size % L, L) // L
        # The ratio's centre: the behaviour's log-probs, or on lagged rows (async) the policy at
        # the start of this update with π_prox/π_behav on each term (ppo/proximal.py).
        ratio_centre, behaviour_weight = batch.logprobs, None
        if batch.stale is not None:
            ratio_centre, behaviour_weight = anchor(batch.logprobs, proximal_logprobs(
                self.model, self.workspace, batch, unit_batch), batch.stale)
        for _epoch in range(cfg.num_epochs):
            for units in minibatch_indices(self.rng.permutation(num_units), unit_batch):
                mb = units if L == 1 else sequence_rows(units, L)
                idx = self._tensor(mb, torch.int64)
                mask = None if loss_mask is None else loss_mask[idx]
                actor_mem = value_mem = baseline_mem = None
                if batch.memories is not None:
                    u = self._tensor(units, torch.int64)
                    actor_mem = batch.memories[u]
                    value_mem, baseline_mem = batch.value_memories[u], batch.baseline_memories[u]
                # gathered once each (camera rows are large), cameras copied channels-last once
                obs = self.workspace.rows("obs", batch.obs, idx)
                mates_obs = self.workspace.rows("mates_obs", batch.mates_obs, idx)
                returns = batch.returns[idx]

                def actor_half():  # the clipped surrogate and entropy bonus, and their gradients
                    dist = self.model.distribution(
                        obs, None if batch.masks is None else batch.masks[idx], actor_mem, L)
                    pg_loss = clipped_surrogate_loss(
                        dist.log_prob(batch.actions[idx]), ratio_centre[idx],
                        batch.advantages[idx], epsilon, mask,
                        None if behaviour_weight is None else behaviour_weight[idx])
                    entropy_loss = masked_mean(dist.entropy(), mask)
                    (pg_loss - beta * entropy_loss).backward()
                    return pg_loss, entropy_loss

                def critic_half():  # the value and baseline losses, and their gradients
                    values = self.critic.value(obs, mates_obs, value_mem, L)
                    baselines = self.critic.baseline(obs, mates_obs, batch.mates_actions[idx],
                                                     baseline_mem, L)
                    # the value loss anchored at the returns (module doc)
                    v_loss = value_loss(values, returns, returns, epsilon, mask)
                    b_loss = value_loss(baselines, batch.baselines[idx], returns, epsilon, mask)
                    (VALUE_LOSS_WEIGHT * (v_loss + BASELINE_LOSS_WEIGHT * b_loss)).backward()
                    return v_loss, b_loss

                # loss = pg_loss + VALUE_LOSS_WEIGHT * (v_loss + BASELINE_LOSS_WEIGHT * b_loss)
                # - beta * entropy_loss; the actor and the critic are separate networks, so
                # their halves may run side by side (update_halves.py)
                self.optimizer.zero_grad(set_to_none=True)
                with converted_once(self.workspace):
                    (pg_loss, entropy_loss), (v_loss, b_loss) = run_halves(actor_half,
                                                                           critic_half)
                self.optimizer.step()
                # 7. The learned reward signals train on the same minibatch, once each
                #    (ML-Agents' on_policy_trainer: update_reward_signals(minibatch) after each
                #    POCA step).
                update_learned_signals(self.reward_signals, batch.signal_batch.rows(mb),
                                       signal_stats)
                stats["pg"].append(pg_loss.item())
                stats["v"].append(v_loss.item())
                stats["b"].append(b_loss.item())
                stats["ent"].append(entropy_loss.item())
        self.model.eval()
        self.critic.eval()
        self.agent_steps_trained += n
        self.version += 1
        metrics = {
            "Losses/Policy Loss": float(np.mean(np.abs(stats["pg"]))),
            "Losses/Value Loss": float(np.mean(stats["v"])),
            "Losses/Baseline Loss": float(np.mean(stats["b"])),
            "Policy/Entropy": float(np.mean(stats["ent"])),
            "Policy/Learning Rate": float(lrnow),
            "Policy/Epsilon": float(epsilon),
            "Policy/Beta": float(beta),
        }
        baselines = batch.baselines.cpu().numpy()
        for k, signal in enumerate(self.reward_signals):
            name = signal.name.capitalize()
            metrics[f"Policy/{name} Value Estimate"] = float(batch.values[:, k].mean())
            metrics[f"Policy/{name} Baseline Estimate"] = float(baselines[:, k].mean())
        metrics.update({tag: float(np.mean(v)) for tag, v in signal_stats.items()})
        metrics.update(batch.reward_metrics)
        return metrics

    # -- helpers --------------------------------------------------------------------------------

    def _rewards(self, signal, traj: Trajectory, rows: SignalBatch) -> np.ndarray:
        r = np.asarray(signal.rewards(rows), np.float32)
        if signal.name == "extrinsic":  # ML-Agents' add_groupmate_rewards, and group_reward
            extras = traj.extras
            for extra in (extras.groupmate_rewards, extras.group_rewards):
                if extra is not None:
                    r = r + np.asarray(extra, np.float32)
        return r

    def _tensor(self, array, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        return self.layout.normalize(self.normalizer, obs)

    def _normalize_rows(self, rows: np.ndarray) -> np.ndarray:
        """[N, M, obs_dim] through the normaliser (NaN rows stay NaN)."""
        n, m, d = rows.shape
        if m == 0:
            return rows
        return self._normalize(rows.reshape(n * m, d)).reshape(n, m, d)

