"""``reward_signals.gail``: Generative Adversarial Imitation Learning (Ho & Ermon 2016,
arXiv:1606.03476) with the optional Variational Discriminator Bottleneck (VAIL, Peng et al. 2018,
arXiv:1810.00821), as ML-Agents 1.1.0's ``GAILRewardProvider`` computes and trains it
(``torch_entities/components/reward_providers/gail_reward_provider.py``)::

    h        = NetworkBody(s [, cat(flat a, done)])       (use_actions: action one-hot + done)
    VAIL:      μ = Linear(h → 128, Kaiming ·0.1)(h);  z = μ + ε·σ  (σ a learned vector, init 1)
    D(s, a)  = sigmoid(Linear(h or 128 → 1, Xavier ·0.2))   the probability "expert"
    r        = −log(1 − D·(1 − 1e-7))                     (no VAIL noise: z = μ)
    update:    expert rows drawn uniformly from the demo (as many as the policy rows),
               the discriminator's normaliser folded with the expert observations first,
    L_D      = −mean[log(D(expert) + 1e-7) + log(1 − D(policy) + 1e-7)]
    VAIL:      KL = mean −Σ[1 + log σ² − ½μ_E² − ½μ_π² − σ²];  L += β·(KL − 0.5);
               β ← max(0, β + 0.0005·(KL − 0.5))           (β from 0, never trained;
               ML-Agents sets β's ``.data`` after building the loss and before its backward
               pass, so the gradient uses the updated β: kept)
    penalty  = 10 · mean((‖∇_x D(x̂)‖ − 1)²),  x̂ = ε·policy + (1 − ε)·expert per element
               (obs; use_actions: actions and dones too), the gradient with respect to the
               **first observation only** (ML-Agents' ``autograd.grad(...)[0]``), its norm over
               that tensor's dimension 1
    one Adam step on L_D (+ VAIL) + penalty, lr ``learning_rate``

Metrics: ML-Agents' ``Losses/GAIL Loss``, ``Policy/GAIL Policy Estimate``, ``Policy/GAIL Expert
Estimate``, ``Policy/GAIL Grad Mag Loss``, and with VAIL ``Policy/GAIL Beta``, ``Losses/GAIL KL
Loss``. ``ignore_done``: False. The demonstration is read once, with the behavior's spec checked,
in the ``"mlagents"`` pairing unless ``unity_rl.demo_pairing`` says ``aligned``
(``imitation.demo_buffer``). Random draws (interpolation ε, VAIL noise, expert rows) come from
the signal's own generators, seeded from the learner's seeded init.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.imitation.demo_buffer import load_demo_buffer
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import mlagents_init
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import GAILConfig
from unity_rl.algorithms.reward_signals.learned import LearnedRewardSignal, body

GRADIENT_PENALTY_WEIGHT = 10.0
Z_SIZE = 128
"""VAIL's code size."""
BETA_STEP = 0.0005
"""VAIL: β's step size (ML-Agents' ``alpha``)."""
MUTUAL_INFORMATION = 0.5
"""VAIL: the KL target (ML-Agents' ``mutual_information``)."""
EPSILON = 1e-7


class GAILReward(LearnedRewardSignal):
    """The discriminator's reward: −log(1 − D(s, a)) (module doc)."""

    config: GAILConfig
    ignore_done = False

    def __init__(self, config: GAILConfig, obs_shapes: Any, action_spec: Any,
                 device: str = "cpu"):
        super().__init__(config, obs_shapes, action_spec, device)
        self.demo = load_demo_buffer(config.demo_path, self.layout.obs_shapes, action_spec, 1,
                                     config.demo_pairing,
                                     where=f"reward_signals.{config.name}.demo_path")
        self.beta = 0.0
        """VAIL's β (not trained: moved by the KL's distance to its target)."""

    def build(self, obs_shapes: Any, network: NetworkConfig) -> dict[str, nn.Module]:
        action_size = (self.continuous_size + sum(self.discrete_branches) + 1
                       if self.config.use_actions else 0)  # + 1: the done flag
        modules: dict[str, nn.Module] = {"encoder": body(obs_shapes, network, action_size)}
        estimator_in = network.hidden_units
        if self.config.use_vail:
            estimator_in = Z_SIZE
            modules["z_mu"] = mlagents_init(nn.Linear(network.hidden_units, Z_SIZE), 0.1)
            modules["z_sigma"] = _Vector(torch.ones(Z_SIZE))
        modules["estimator"] = mlagents_init(nn.Linear(estimator_in, 1), 0.2, xavier_uniform=True)
        seeds = torch.randint(0, 2**31 - 1, (2,))  # from the learner's seeded init
        self.rng = np.random.default_rng(int(seeds[0]))
        """Draws the expert rows of each update."""
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seeds[1]))
        """Draws the interpolation ε and VAIL's noise."""
        return modules

    # -- the discriminator ---------------------------------------------------------------------
    def _normalized(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw rows through the normaliser inside the graph (the penalty's gradient is taken
        with respect to the raw input, as ML-Agents' normaliser sits inside its encoder)."""
        if self.normalizer is None or not self.layout.vector_size:
            return obs
        columns = torch.as_tensor(self.layout.vector_columns, device=self.device)
        mean = torch.as_tensor(self.normalizer.mean, dtype=obs.dtype, device=self.device)
        std = torch.as_tensor(np.sqrt(self.normalizer.var + self.normalizer.epsilon),
                              dtype=obs.dtype, device=self.device)
        vectors = torch.clamp((obs[:, columns] - mean) / std, -self.normalizer.clip,
                              self.normalizer.clip)
        return obs.index_copy(1, columns, vectors)

    def _action_inputs(self, batch: SignalBatch) -> torch.Tensor:
        """[flat action | done] (``use_actions``)."""
        return torch.cat([self.flat_actions(batch), self.tensor(batch.done).reshape(-1, 1)], 1)

    def _estimate(self, obs: torch.Tensor, actions: torch.Tensor | None, noise: bool
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(D [n, 1], VAIL's μ or None) for raw observation rows (and action inputs)."""
        hidden = self.modules["encoder"](self._normalized(obs), actions)
        z_mu = None
        if self.config.use_vail:
            z_mu = self.modules["z_mu"](hidden)
            hidden = z_mu
            if noise:
                eps = torch.randn(z_mu.shape, generator=self.generator, device=self.device)
                hidden = z_mu + eps * self.modules["z_sigma"].value
        return torch.sigmoid(self.modules["estimator"](hidden)), z_mu

    def _inputs(self, batch: SignalBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        actions = self._action_inputs(batch) if self.config.use_actions else None
        return self.tensor(batch.obs), actions

    # -- the seam --------------------------------------------------------------------------------
    def rewards(self, batch: SignalBatch) -> np.ndarray:
        with torch.no_grad():
            estimate, _ = self._estimate(*self._inputs(batch), noise=False)
            rewards = -torch.log(1.0 - estimate.squeeze(1) * (1.0 - EPSILON))
        return rewards.cpu().numpy().astype(np.float32)

    def expert_batch(self, n: int) -> SignalBatch:
        """n demo rows drawn uniformly with replacement (ML-Agents' ``sample_mini_batch``)."""
        rows = self.rng.integers(0, len(self.demo), n)
        demo = self.demo
        return SignalBatch(demo.obs[rows], demo.continuous_actions[rows],
                           demo.discrete_actions[rows], demo.obs[rows],
                           demo.dones[rows].astype(np.float32), demo.rewards[rows],
                           np.ones(n, np.float32))

    def update(self, batch: SignalBatch) -> dict[str, float]:
        expert = self.expert_batch(batch.size)
        self.layout.update(self.normalizer, expert.obs)  # ML-Agents: on the expert rows
        policy_obs, policy_actions = self._inputs(batch)
        expert_obs, expert_actions = self._inputs(expert)
        policy_estimate, policy_mu = self._estimate(policy_obs, policy_actions, noise=True)
        expert_estimate, expert_mu = self._estimate(expert_obs, expert_actions, noise=True)
        stats = {"Policy/GAIL Policy Estimate": policy_estimate.mean().item(),
                 "Policy/GAIL Expert Estimate": expert_estimate.mean().item()}
        discriminator_loss = -(torch.log(expert_estimate + EPSILON)
                               + torch.log(1.0 - policy_estimate + EPSILON)).mean()
        stats["Losses/GAIL Loss"] = discriminator_loss.item()
        total_loss = discriminator_loss
        if self.config.use_vail:
            sigma_sq = self.modules["z_sigma"].value ** 2
            kl_loss = torch.mean(-torch.sum(1 + sigma_sq.log() - 0.5 * expert_mu ** 2
                                            - 0.5 * policy_mu ** 2 - sigma_sq, dim=1))
            # ML-Agents multiplies by its β tensor, then moves β with ``.data =`` before the
            # backward pass: the gradient sees the *updated* β (quirk kept, see module doc)
            self.beta = max(0.0, self.beta + BETA_STEP * (kl_loss.item() - MUTUAL_INFORMATION))
            total_loss = total_loss + self.beta * (kl_loss - MUTUAL_INFORMATION)
            stats["Policy/GAIL Beta"] = self.beta
            stats["Losses/GAIL KL Loss"] = kl_loss.item()
        penalty = GRADIENT_PENALTY_WEIGHT * self._gradient_magnitude(
            policy_obs, policy_actions, expert_obs, expert_actions)
        stats["Policy/GAIL Grad Mag Loss"] = penalty.item()
        self.step(total_loss + penalty)
        return stats

    def _gradient_magnitude(self, policy_obs, policy_actions, expert_obs, expert_actions
                            ) -> torch.Tensor:
        """WGAN-GP's penalty (Gulrajani et al. 2017) as ML-Agents computes it (module doc)."""
        parts = []
        for shape, columns in zip(self.layout.obs_shapes, self.layout.slices):
            n = len(policy_obs)
            eps = torch.rand((n, *shape), generator=self.generator, device=self.device)
            eps = eps.reshape(n, -1)
            parts.append(eps * policy_obs[:, columns] + (1 - eps) * expert_obs[:, columns])
        first = parts[0].detach().requires_grad_(True)
        interpolated = torch.cat([first] + parts[1:], dim=1)
        actions = None
        if self.config.use_actions:
            a_eps = torch.rand(policy_actions[:, :-1].shape, generator=self.generator,
                               device=self.device)
            d_eps = torch.rand(policy_actions[:, -1:].shape, generator=self.generator,
                               device=self.device)
            actions = torch.cat([a_eps * policy_actions[:, :-1] + (1 - a_eps) * expert_actions[:, :-1],
                                 d_eps * policy_actions[:, -1:] + (1 - d_eps) * expert_actions[:, -1:]],
                                dim=1)
        estimate = self._estimate(interpolated, actions, noise=True)[0].squeeze(1).sum()
        gradient = torch.autograd.grad(estimate, first, create_graph=True)[0]
        gradient = gradient.reshape(len(first), *self.layout.obs_shapes[0])
        safe_norm = (torch.sum(gradient ** 2, dim=1) + EPSILON).sqrt()
        return torch.mean((safe_norm - 1) ** 2)

    def extra_state(self) -> dict:
        return {"beta": self.beta, "rng": self.rng.bit_generator.state,
                "generator": self.generator.get_state()}

    def load_extra_state(self, state: dict) -> None:
        self.beta = float(state.get("beta", 0.0))
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
            self.generator.set_state(state["generator"])


class _Vector(nn.Module):
    """One learned vector (VAIL's σ) as a module, so ``modules`` holds every parameter."""

    def __init__(self, init: torch.Tensor):
        super().__init__()
        self.value = nn.Parameter(init.clone())


PROVIDER = GAILReward
