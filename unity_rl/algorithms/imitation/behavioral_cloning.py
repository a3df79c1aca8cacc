"""Behavioral cloning beside RL: ML-Agents 1.1.0's ``BCModule``
(``torch_entities/components/bc/module.py``) as an ``AuxiliaryUpdate``.

Scheduling (the trainer type's host decides when): PPO runs ``update`` once after the PPO epochs
of each update (``on_policy_trainer._update_policy``); SAC once per SAC update step
(``off_policy_trainer._update_policy``). ``update`` reads top to bottom as ``BCModule.update``::

    lr_next  = decay(policy_lr · strength → 1e-10 over `steps` agent-steps)   (constant if steps 0)
    if lr ≤ 1e-10: stop (BC is over; Losses/Pretraining Loss 0)
    n_seq    = max(min(batch_size, N) // L, 1)                     (fixed at construction)
    batches  = N // n_seq, at most samples_per_update // n_seq when that is > 0
    num_epoch times: shuffle the demo rows by sequences (in place, as ML-Agents' buffer), then
        for i < batches // L: the rows [i·n_seq·L, (i+1)·n_seq·L)
            a ~ π(·|s)  (reparameterised; memories zeros; all actions allowed)
            loss = MSE(a_continuous, expert continuous)
                 + mean over branches and rows of −Σ onehot(expert) · log_softmax(log(p + 1e-7))
            Adam step on the actor's parameters (BC's own Adam)
    lr ← lr_next (the rate of the *next* update, as ML-Agents sets it after the batches)

The policy part comes from the trainer type (``ImitationPolicy``: its actor's parameters, its
observation normaliser, a reparameterised sample and the branch probabilities);
``make_behavioral_cloning`` builds the update from one (the demo read and checked against the
behavior), so a trainer type's ``imitation.py`` holds only its ``ImitationPolicy``. Metric:
``Losses/Pretraining Loss`` (the mean over the update's minibatches). State (checkpoints): the
Adam, the current learning rate, the row order and both random generators.
"""
from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any, Callable, Protocol

import numpy as np
import torch

from unity_rl.algorithms.imitation.config import DEFAULT_NUM_EPOCH, BehavioralCloningConfig
from unity_rl.algorithms.imitation.demo_buffer import DemoBuffer, load_demo_buffer

LR_FLOOR = 1e-10
"""ML-Agents' BC learning-rate floor: once the decayed rate reaches it, BC stops."""
PROB_EPSILON = 1e-7
"""ML-Agents' ``CategoricalDistInstance.all_log_prob``: log(p + 1e-7)."""


class ImitationPolicy(Protocol):
    """What behavioral cloning (and GAIL) need of a trainer type's policy."""

    sequence_length: int
    """L: steps per memory sequence (1 without memory)."""
    continuous_size: int
    discrete_branches: tuple[int, ...]
    device: torch.device

    def actor_parameters(self) -> list:
        """The parameters BC's Adam trains (ML-Agents' ``policy.actor.parameters()``)."""

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """Flat observation rows [n, obs_dim] through the policy's normaliser, as a tensor."""

    def sample(self, obs: torch.Tensor, generator: torch.Generator
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(a reparameterised continuous sample [n, C] or None, the branch probabilities
        [n, sum(branches)] or None) for rows in sequences of L, each from zero memory, with
        every action allowed (ML-Agents' ``get_action_and_stats``)."""


def bc_loss(continuous: torch.Tensor | None, probs: torch.Tensor | None,
            expert_continuous: torch.Tensor, expert_discrete: torch.Tensor,
            branches: tuple[int, ...]) -> torch.Tensor:
    """ML-Agents' ``_behavioral_cloning_loss``: MSE on the continuous sample plus the mean over
    branches and rows of the cross-entropy −Σ onehot · log_softmax(log(p + 1e-7))."""
    loss = torch.zeros((), device=expert_continuous.device)
    if continuous is not None:
        loss = loss + torch.nn.functional.mse_loss(continuous, expert_continuous)
    if probs is not None:
        per_branch = []
        for b, (p, size) in enumerate(zip(probs.split(list(branches), dim=1), branches)):
            log_p = torch.nn.functional.log_softmax(torch.log(p + PROB_EPSILON), dim=1)
            onehot = torch.nn.functional.one_hot(expert_discrete[:, b], size).to(log_p.dtype)
            per_branch.append(torch.sum(-log_p * onehot, dim=1))
        loss = loss + torch.mean(torch.stack(per_branch))
    return loss


class BehavioralCloning:
    """ML-Agents' BC for one behavior (module doc); fits ``AuxiliaryUpdate``.

    ``policy_learning_rate`` and ``default_batch_size`` are the trainer's ``learning_rate`` and
    ``batch_size``; ``current_step()`` the behavior's agent-steps collected (ML-Agents'
    ``policy.get_current_step()``), which drives the decay."""

    name = "behavioral_cloning"

    def __init__(self, cfg: BehavioralCloningConfig, policy: ImitationPolicy, demo: DemoBuffer,
                 *, policy_learning_rate: float, default_batch_size: int,
                 current_step: Callable[[], int], seed: int | None = None):
        self.cfg = cfg
        self.policy = policy
        self.demo = demo
        self.current_step = current_step
        L = policy.sequence_length
        if demo.sequence_length != L:
            raise ValueError(f"the demo buffer is in sequences of {demo.sequence_length}, the "
                             f"policy's of {L}")
        self.initial_lr = float(policy_learning_rate) * float(cfg.strength)
        self.current_lr = self.initial_lr
        self.optimizer = torch.optim.Adam(policy.actor_parameters(), lr=self.current_lr)
        self.batch_size = cfg.batch_size or int(default_batch_size)
        self.num_epoch = cfg.num_epoch or DEFAULT_NUM_EPOCH
        self.n_sequences = max(min(self.batch_size, len(demo)) // L, 1)
        self.order = np.arange(len(demo))
        """Row order of the demo buffer, shuffled in place by sequences (ML-Agents' buffer)."""
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=policy.device)
        self.generator.manual_seed(0 if seed is None else int(seed))
        """Draws the reparameterised samples."""
        self._expert_continuous = torch.as_tensor(demo.continuous_actions, device=policy.device)
        self._expert_discrete = torch.as_tensor(demo.discrete_actions, device=policy.device)

    def next_learning_rate(self, step: int) -> float:
        """ML-Agents' ``DecayedValue``: linear to 1e-10 at ``steps`` (constant when steps is 0)."""
        if self.cfg.steps <= 0:
            return self.initial_lr
        floor = min(LR_FLOOR, self.initial_lr)
        progress = min(step, self.cfg.steps) / self.cfg.steps
        return (self.initial_lr - floor) * (1.0 - progress) + floor

    def shuffle(self) -> None:
        """ML-Agents' ``AgentBuffer.shuffle(sequence_length)``: whole sequences permuted."""
        L = self.policy.sequence_length
        perm = self.rng.permutation(len(self.order) // L)
        self.order = self.order[:len(perm) * L].reshape(-1, L)[perm].reshape(-1)

    def update(self, trajectories=None) -> dict[str, float]:
        """One BC update (module doc); ``trajectories`` (the RL buffer) is not used."""
        decay_lr = self.next_learning_rate(int(self.current_step()))
        if self.current_lr <= LR_FLOOR:
            return {"Losses/Pretraining Loss": 0.0}
        L, n_seq = self.policy.sequence_length, self.n_sequences
        possible_batches = len(self.order) // n_seq
        max_batches = self.cfg.samples_per_update // n_seq
        num_batches = possible_batches if max_batches == 0 else min(possible_batches, max_batches)
        losses = []
        for _epoch in range(self.num_epoch):
            self.shuffle()
            for i in range(num_batches // L):
                rows = self.order[i * n_seq * L:(i + 1) * n_seq * L]
                losses.append(self._update_batch(rows))
        for group in self.optimizer.param_groups:
            group["lr"] = decay_lr
        self.current_lr = decay_lr
        if not losses:  # a demonstration shorter than one sequence: nothing was trained
            return {}
        return {"Losses/Pretraining Loss": float(np.mean(losses))}

    def _update_batch(self, rows: np.ndarray) -> float:
        policy = self.policy
        obs = policy.obs_tensor(self.demo.obs[rows])
        index = torch.as_tensor(rows, device=policy.device)
        continuous, probs = policy.sample(obs, self.generator)
        loss = bc_loss(continuous, probs, self._expert_continuous[index],
                       self._expert_discrete[index], tuple(policy.discrete_branches))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """A deep copy (torch's optimizer state aliases the live tensors)."""
        return copy.deepcopy({"optimizer": self.optimizer.state_dict(),
                              "current_lr": self.current_lr,
                              "order": torch.as_tensor(self.order),
                              "rng": self.rng.bit_generator.state,
                              "generator": self.generator.get_state()})

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.current_lr = float(state["current_lr"])
        order = np.asarray(state["order"])
        if len(order) == len(self.demo):  # another demonstration: keep the fresh order
            self.order = order
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])


def make_behavioral_cloning(cfg: BehavioralCloningConfig, policy: ImitationPolicy,
                            obs_shapes: Any, policy_learning_rate: float,
                            default_batch_size: int, current_step: Callable[[], int], *,
                            seed: int | None, pairing: str = "mlagents",
                            behavior: str = "") -> BehavioralCloning:
    """BC for one behavior: the demo read and checked against ``obs_shapes`` and the policy's
    actions (in its sequences), BC's Adam at ``policy_learning_rate · strength``,
    ``default_batch_size`` when BC sets no ``batch_size``. Errors about the demo name
    ``behaviors.<behavior>.behavioral_cloning.demo_path``."""
    actions = SimpleNamespace(continuous_size=policy.continuous_size,
                              discrete_branches=policy.discrete_branches)
    demo = load_demo_buffer(cfg.demo_path, obs_shapes, actions, policy.sequence_length, pairing,
                            where=f"behaviors.{behavior}.behavioral_cloning.demo_path")
    return BehavioralCloning(cfg, policy, demo, policy_learning_rate=policy_learning_rate,
                             default_batch_size=default_batch_size, current_step=current_step,
                             seed=seed)
