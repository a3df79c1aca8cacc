"""Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1801.01290 and arXiv:1812.05905) as ML-Agents
1.1.0's ``TorchSACOptimizer.update`` runs it, one replay minibatch per call.

A pure learner (no processes, no I/O, no replay): ``SACLearner`` fits
``offpolicy.learner.OffPolicyLearner``. ``update(batch)`` reads top to bottom in ML-Agents' order:

    r_k      = strength_k · reward_k(batch)                    every reward signal k
    ã, log π = a fresh reparameterised sample from π(·|s)      (tanh-squashed; masked branches)
    V(s), Q1(s, ã), Q2(s, ã), Q1(s, a), Q2(s, a), V'(s')
    Q loss   = ½ mean (r_k + γ_k (1 − d) V'_k(s') − Q_i(s, a))²         i = 1, 2
    V loss   = ½ mean (V_k(s) − [min_i Q_i(s, ã) − α log π(ã|s)])²
    π loss   = mean α log π(ã|s) − Q1(s, ã)
    α loss   = −mean log α · (log π(ã|s) + H̄)                   (α = exp(log α))
    steps:     Adam on the policy, Q1 + Q2 + V and the α's (ML-Agents: three Adams, the same
               steps), then V' ← τV + (1 − τ)V'

For discrete branches every expectation over actions is exact (ML-Agents' sums of π·Q and
π·log π per branch, Q of a taken action the mean over branches of its one-hot pick), one α per
branch with target entropy 0.2·ln(branch size); the continuous part has one α with target −C.
ML-Agents' quirks are kept by default (``SACConfig``: its hybrid V-target sign); the fixes are
``unity_rl.fix_quirks`` entries (docs/sac.md).

Memory (``network_settings.memory``; ML-Agents' ``update`` with ``policy.sequence_length`` L): the
batch is ``batch_size // L`` whole sequences sampled from the replay; π runs each sequence from the
actor memory stored with its first step (the rollout-time memory), V from the stored critic
memory, Q1 and Q2 from zeros ("Q and V network memories are 0'ed out"), and V' over the next
observations from the critic's memory after one step on each sequence's first observation. The
policy and entropy losses leave the padded rows out; the Q and V losses, as ML-Agents', average
over them too (``SACConfig.padded_value_loss``).

Observations: flat rows, one normaliser (``observe`` folds new rows in as they arrive, as
ML-Agents' ``_process_trajectory`` does; Q1, Q2, V and V' share it, as its ``copy_normalization``
makes them). No process-wide torch state is set.

Files: the four losses are ``losses.py``'s (ML-Agents' ``sac_q_loss``, ``sac_value_loss``,
``sac_policy_loss``, ``sac_entropy_loss``, pure functions); what stays here is the update that
builds their inputs and steps the networks, in the order above, with its memory-sequence path.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.image_layout import MinibatchWorkspace, converted_once
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import optimised_parameter_count, seeded_init
from unity_rl.algorithms.offpolicy.learner import UpdateResult
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.registry import make_reward_signals
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.export import SACExportModule
from unity_rl.algorithms.sac.losses import (sac_entropy_loss, sac_policy_loss, sac_q_loss,
                                            sac_value_loss, taken_q)
from unity_rl.algorithms.sac.nets import SACActor, ValueNetwork, soft_update

DISCRETE_TARGET_ENTROPY_SCALE = 0.2
"""ML-Agents: target entropy of a branch of size b is 0.2·ln(b) ("roughly e-greedy 0.05")."""
CONTINUOUS_TARGET_ENTROPY_SCALE = 1.0
"""ML-Agents: target entropy of the continuous part is −1.0·C."""


def action_parts(action_spec: Any) -> tuple[int, tuple[int, ...]]:
    """(continuous size, discrete branches); ValueError for a spec with no action."""
    continuous = int(getattr(action_spec, "continuous_size", 0))
    branches = tuple(int(b) for b in (getattr(action_spec, "discrete_branches", ()) or ()))
    if not continuous and not branches:
        raise ValueError("the action spec has neither continuous actions nor discrete branches")
    return continuous, branches


def cpu_state(module: nn.Module) -> dict:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


class SACLearner:
    """Owns π, V, V', Q1, Q2, the log α's, their Adam and the authoritative normaliser."""

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: Any, cfg: SACConfig,
                 network: NetworkConfig,
                 reward_signals: Sequence[RewardSignalConfig] = EXTRINSIC_ONLY,
                 device: str = "cpu", seed: int | None = None, goal_indices: Sequence[int] = ()):
        self.cfg = cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.continuous_size, self.discrete_branches = action_parts(action_spec)
        self.device = torch.device(device)
        self.goal_indices = tuple(int(i) for i in goal_indices)
        streams = [c.name for c in reward_signals]
        c, branches = self.continuous_size, self.discrete_branches
        goals = {"goal_indices": self.goal_indices}
        with seeded_init(seed):
            self.policy = SACActor(self.obs_shapes, c, branches, network, **goals).to(self.device)
            self.critic = ValueNetwork(self.obs_shapes, network, streams, **goals).to(self.device)
            q_args = (self.obs_shapes, network, streams, c, max(sum(branches), 1))
            self.q1 = ValueNetwork(*q_args, **goals).to(self.device)
            self.q2 = ValueNetwork(*q_args, **goals).to(self.device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        with seeded_init(None if seed is None else seed + 1):  # the SAC networks' init unchanged
            self.reward_signals = make_reward_signals(reward_signals, self.obs_shapes,
                                                      action_spec, device)
        """One provider per reward signal (one Q/V head each); the learned ones train in
        ``update_reward_signals`` at ``reward_signal_steps_per_update``."""
        self.reward_signal_updates = 0
        """Reward-signal updates done (ML-Agents' ``reward_signal_update_steps`` − 1)."""
        log_init = float(np.log(cfg.init_entcoef))
        self.log_alpha_discrete = nn.Parameter(torch.full((len(branches),), log_init, device=self.device))
        self.log_alpha_continuous = nn.Parameter(torch.full((1,), log_init, device=self.device))
        self.target_entropy_continuous = -CONTINUOUS_TARGET_ENTROPY_SCALE * float(c)
        self.target_entropy_discrete = [DISCRETE_TARGET_ENTROPY_SCALE * float(np.log(b))
                                        for b in branches]
        self.policy_params = list(self.policy.parameters())
        self.value_params = [*self.q1.parameters(), *self.q2.parameters(), *self.critic.parameters()]
        self.alpha_params = [self.log_alpha_discrete, self.log_alpha_continuous]
        # ML-Agents' three Adams (policy; Q1 + Q2 + V; the α's) share every setting, and Adam is
        # elementwise, so one Adam with the three as parameter groups takes the same steps.
        self.optimizer = torch.optim.Adam(
            [{"params": self.policy_params}, {"params": self.value_params},
             {"params": self.alpha_params}], lr=cfg.learning_rate,
            fused=self.device.type in ("cpu", "cuda"))  # one kernel: 2x foreach on CPU
        self.normalizer = self.layout.make_normalizer(network.normalize)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else int(seed))
        """Draws the reparameterised action samples of the updates."""
        self.memory_size = network.memory_size
        """Size of every network's memory [h | c] (0: no memory)."""
        self.sequence_length = network.sequence_length
        """L: rows per training sequence (1 without memory)."""
        self.updates = 0
        self.workspace = MinibatchWorkspace()
        """Camera buffers kept from one minibatch to the next (``image_layout``)."""
        """Gradient updates done; also the weights' version."""
        self.agent_steps = 0
        """The behavior's collected agent-steps (set by the host: the learning-rate schedule)."""

    # -- data --------------------------------------------------------------------------------
    def observe(self, obs: np.ndarray) -> None:
        """Folds newly collected observations into the normaliser (as they arrive)."""
        self.layout.update(self.normalizer, obs)

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, np.float32), device=self.device)

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return self._tensor(self.layout.normalize(self.normalizer, obs))

    # -- the algorithm -----------------------------------------------------------------------
    def update(self, batch: Any, importance_weights: np.ndarray | None = None) -> UpdateResult:
        """One SAC update on a replay minibatch (``TransitionBatch``; PER weights unused)."""
        del importance_weights
        cfg, c = self.cfg, self.continuous_size
        signal_batch = SignalBatch.from_transitions(batch, c)  # re-evaluated on every sample
        rewards = {s.name: self._tensor(s.strength * s.rewards(signal_batch))
                   for s in self.reward_signals}
        obs, next_obs = self._obs_tensor(batch.obs), self._obs_tensor(batch.next_obs)
        actions = self._tensor(batch.actions)
        masks = None if batch.action_masks is None else self._tensor(batch.action_masks)
        dones = self._tensor(batch.terminated)
        # Memory: each sequence's first stored actor and critic memory; zeros for Q1 and Q2.
        L = self.sequence_length
        actor_memory = critic_memory = q_memory = loss_mask = None
        if self.memory_size:
            actor_memory = self._tensor(batch.memories[::L])
            critic_memory = self._tensor(batch.critic_memories[::L])
            q_memory = torch.zeros_like(critic_memory)
            loss_mask = self._tensor(batch.loss_mask)

        # A fresh action ã ~ π(·|s) and its log-probabilities; the four networks read one
        # channels-last copy of the minibatch's cameras.
        with converted_once(self.workspace):
            gaussian, categorical = self.policy(obs, masks, actor_memory, L)
            sampled, cont_log_probs = (gaussian.rsample(self.generator) if gaussian is not None
                                       else (None, None))
            values = {k: v.squeeze(-1) for k, v in self.critic(obs, None, critic_memory, L).items()}
            q1p = {k: v.squeeze(-1) for k, v in self.q1(obs, sampled, q_memory, L).items()}
            with torch.no_grad():
                q2p = {k: v.squeeze(-1) for k, v in self.q2(obs, sampled, q_memory, L).items()}
            cont_actions = actions[:, :c] if c else None
            q1 = {k: v.squeeze(-1) for k, v in self.q1(obs, cont_actions, q_memory, L).items()}
            q2 = {k: v.squeeze(-1) for k, v in self.q2(obs, cont_actions, q_memory, L).items()}
        if categorical is not None:
            taken = actions[:, c:].long()
            q1 = {k: taken_q(v, taken, categorical) for k, v in q1.items()}
            q2 = {k: taken_q(v, taken, categorical) for k, v in q2.items()}
        with torch.no_grad():
            # V'(s') runs each sequence from the critic's memory one step into it (ML-Agents:
            # "we didn't record the next value memories").
            next_memory = None
            if self.memory_size:
                next_memory = self.critic.run(obs[::L], None, critic_memory, 1)[1]
            target_values = {k: v.squeeze(-1) for k, v in
                             self.target_critic(next_obs, None, next_memory, L).items()}

        log_alphas = (self.log_alpha_continuous, self.log_alpha_discrete)
        q1_loss, q2_loss, td_error = sac_q_loss(q1, q2, target_values, dones, rewards,
                                                self.reward_signals, loss_mask, cfg)
        value_loss = sac_value_loss(values, q1p, q2p, cont_log_probs, categorical, *log_alphas,
                                    loss_mask, cfg)
        policy_loss = sac_policy_loss(q1p, cont_log_probs, categorical, *log_alphas, loss_mask)
        entropy_loss = sac_entropy_loss(cont_log_probs, categorical, *log_alphas,
                                        self.target_entropy_continuous,
                                        self.target_entropy_discrete, loss_mask)

        # ML-Agents steps the policy, then Q1 + Q2 + V, then the α's, each Adam on its own loss
        # alone. The value and entropy losses do not reach the policy, so the same gradients
        # come from: the policy loss's gradient w.r.t. the policy only (not the Q1 and α
        # gradients ML-Agents discards), one backward of the other two, one Adam step.
        lr = cfg.learning_rate_at(self.agent_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad()
        policy_grads = torch.autograd.grad(policy_loss, self.policy_params)
        (q1_loss + q2_loss + value_loss + entropy_loss).backward()
        for param, grad in zip(self.policy_params, policy_grads):
            # autograd.grad skips backward()'s layout contract: a conv weight trained on
            # channels-last images gets a channels-last gradient, which fused Adam on CUDA
            # refuses; lay it out as its parameter
            param.grad = grad if grad.stride() == param.stride() else \
                torch.empty_like(param).copy_(grad)
        self.optimizer.step()
        soft_update(self.critic, self.target_critic, cfg.tau)
        self.updates += 1

        td_errors = td_error.abs().cpu().numpy()
        return UpdateResult({
            "Losses/Policy Loss": policy_loss.item(),
            "Losses/Value Loss": value_loss.item(),
            "Losses/Q1 Loss": q1_loss.item(),
            "Losses/Q2 Loss": q2_loss.item(),
            "Policy/Discrete Entropy Coeff": self.log_alpha_discrete.exp().mean().item()
            if self.discrete_branches else 0.0,
            "Policy/Continuous Entropy Coeff": self.log_alpha_continuous.exp().mean().item(),
            "Policy/Learning Rate": lr,
        }, td_errors.astype(np.float32))

    # -- the learned reward signals (ML-Agents' _update_reward_signals) -------------------------
    def reward_signal_updates_owed(self) -> int:
        """Reward-signal updates due at ``agent_steps``: ML-Agents' loop ``while (step −
        buffer_init_steps) / reward_signal_update_steps > reward_signal_steps_per_update`` with
        the count starting at 1, less those done; 0 without a learned signal."""
        if not any(s.update is not None for s in self.reward_signals):
            return 0
        if self.agent_steps < self.cfg.warmup_steps:
            return 0
        due = math.ceil((self.agent_steps - self.cfg.warmup_steps)
                        / self.cfg.reward_signal_steps_per_update) - 1
        return max(0, due - self.reward_signal_updates)

    def update_reward_signals(self, batch: Any) -> dict[str, float]:
        """One update of every learned signal on a replay minibatch of its own -> metrics."""
        signal_batch = SignalBatch.from_transitions(batch, self.continuous_size)
        metrics: dict[str, float] = {}
        for signal in self.reward_signals:
            if signal.update is not None:
                metrics.update(signal.update(signal_batch))
        self.reward_signal_updates += 1
        return metrics

    # -- shipping and checkpoints ------------------------------------------------------------
    def weights(self, include_critic: bool = False) -> dict:
        """CPU copies for actors: the policy, normaliser state and version; with memory also
        V (``critic``: the actors compute each trajectory's critic memories with it)."""
        del include_critic  # no actor-side priorities: SAC samples uniformly
        return {
            "version": self.updates,
            "obs_shapes": self.obs_shapes,
            "goal_indices": self.goal_indices,
            "policy": cpu_state(self.policy),
            "critic": cpu_state(self.critic) if self.memory_size else None,
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "squash_deterministic": self.cfg.deterministic_squash,
        }

    def parameter_count(self) -> int:
        """Elements of π's, the Q's, V's and the α's parameters (what one update's Adam steps)."""
        return optimised_parameter_count(self.optimizer)

    def export_module(self) -> nn.Module:
        """The deterministic policy on CPU, normalisation folded in (evaluate, ONNX)."""
        return SACExportModule(copy.deepcopy(self.policy).cpu().eval(), self.layout,
                               self.normalizer, self.cfg.deterministic_squash)

    def state_dict(self) -> dict:
        """Everything to resume (a deep copy: later updates leave it be)."""
        return copy.deepcopy({
            "policy": self.policy.state_dict(), "critic": self.critic.state_dict(),
            "target_critic": self.target_critic.state_dict(),
            "q1": self.q1.state_dict(), "q2": self.q2.state_dict(),
            "log_alpha_discrete": self.log_alpha_discrete.detach(),
            "log_alpha_continuous": self.log_alpha_continuous.detach(),
            "optimizer": self.optimizer.state_dict(),
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates, "agent_steps": self.agent_steps,
            "obs_shapes": self.obs_shapes, "goal_indices": self.goal_indices,
            "squash_deterministic": self.cfg.deterministic_squash,
            "reward_signals": {s.name: s.state_dict() for s in self.reward_signals},
            "reward_signal_updates": self.reward_signal_updates,
        })

    def load_state_dict(self, state: dict) -> None:
        for name in ("policy", "critic", "target_critic", "q1", "q2"):
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha_discrete.copy_(state["log_alpha_discrete"])
            self.log_alpha_continuous.copy_(state["log_alpha_continuous"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.normalizer is not None:
            if state["normalizer"] is None:
                raise ValueError("checkpoint has no normaliser but this learner normalises")
            self.normalizer.load_state_dict(state["normalizer"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
        self.agent_steps = int(state["agent_steps"])
        for signal in self.reward_signals:
            signal.load_state_dict(state["reward_signals"].get(signal.name, {}))
        self.reward_signal_updates = int(state.get("reward_signal_updates", 0))
