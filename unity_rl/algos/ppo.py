"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347), pure and single-process.

Two roles share one network class:
- ``PPOPolicy`` lives in an actor: it acts on a batch of observations (any number of agents, in
  any order: rows are independent) and loads the weights the learner publishes.
- ``PPOLearner`` owns the authoritative network, optimiser and observation normaliser; it turns a
  list of ``Trajectory`` into one PPO update and returns metrics named like ML-Agents' TensorBoard
  tags.  It performs no I/O and starts no process or thread of its own.

Choices that differ between implementations, and the one made here:
- separate actor and critic trunks (ML-Agents' default, ``shared_critic: false``);
- Gaussian policy with a state-independent log-std; actions are sampled *unclipped* and the
  environment receives ``clip(a, -1, 1)``, so log-probabilities stay those of the sampled action
  (clipping before the log-prob biases the gradient, Fujita & Maeda 2018, arXiv:1802.07564);
- categorical per discrete branch, with disallowed actions' logits masked out;
- values of ``obs`` and ``last_obs`` are recomputed with the current critic before GAE, which
  also makes the value-clipping anchor the pre-update critic even for stale (async) data;
- advantages are normalised per minibatch (Andrychowicz et al. 2021, arXiv:2006.05990);
- learning rate, clip range ε and entropy coefficient β follow ML-Agents' schedules: linear decay
  over ``max_steps`` agent-steps towards 1e-10, 0.1 and 1e-5 respectively, or constant.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Sequence

import numpy as np
import torch
from torch import nn

from unity_rl.algos.gae import compute_gae
from unity_rl.algos.nets import NetworkConfig, mlp, set_torch_threads
from unity_rl.algos.normalizer import RunningNormalizer
from unity_rl.algos.types import Trajectory

Schedule = Literal["linear", "constant"]


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters, named as in the paper / CleanRL (YAML keys are ML-Agents', see config.py)."""

    learning_rate: float = 3e-4
    """Adam step size α at step 0 (YAML: learning_rate)."""
    lr_schedule: Schedule = "linear"
    """'linear': α decays to 1e-10 at max_steps; 'constant' (YAML: learning_rate_schedule)."""
    buffer_size: int = 10240
    """Agent-steps collected per update (YAML: buffer_size)."""
    minibatch_size: int = 1024
    """Agent-steps per gradient step (YAML: batch_size)."""
    num_epochs: int = 3
    """Passes over the buffer per update (YAML: num_epoch)."""
    gamma: float = 0.99
    """Discount factor γ (YAML: reward_signals.extrinsic.gamma)."""
    gae_lambda: float = 0.95
    """GAE λ (YAML: lambd)."""
    clip_coef: float = 0.2
    """Clip range ε of the probability ratio, and of the value change (YAML: epsilon)."""
    clip_coef_schedule: Schedule = "linear"
    """'linear': ε decays to 0.1 at max_steps; 'constant' (YAML: epsilon_schedule)."""
    ent_coef: float = 5e-3
    """Entropy bonus coefficient β (YAML: beta)."""
    ent_coef_schedule: Schedule = "linear"
    """'linear': β decays to 1e-5 at max_steps; 'constant' (YAML: beta_schedule)."""
    vf_coef: float = 0.5
    """Weight of the value loss (ML-Agents uses 0.5; YAML: vf_coef)."""
    clip_vloss: bool = True
    """Clip the value change to ±ε around the pre-update critic, as ML-Agents (YAML: clip_value_loss)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip; 0 disables (YAML: max_grad_norm)."""
    norm_adv: bool = True
    """Normalise advantages within each minibatch (YAML: normalize_advantage)."""
    target_kl: float | None = None
    """Stop the update's epochs early once approx KL exceeds this; None never (YAML: target_kl)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (YAML: log_std_init)."""
    reward_scale: float = 1.0
    """Multiplier of the environment reward (YAML: reward_signals.extrinsic.strength)."""
    max_steps: int = 500_000
    """Agent-steps of the whole run; the linear schedules reach their floor here (YAML: max_steps)."""

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ValueError(f"ppo.{name} must be {what}, got {getattr(self, name)!r}")

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        check(self.learning_rate > 0, "learning_rate", "> 0")
        for name in ("lr_schedule", "clip_coef_schedule", "ent_coef_schedule"):
            check(getattr(self, name) in ("linear", "constant"), name, "'linear' or 'constant'")
        check(is_int(self.minibatch_size) and self.minibatch_size >= 1, "minibatch_size", "an int >= 1")
        check(is_int(self.buffer_size) and self.buffer_size >= self.minibatch_size,
              "buffer_size", "an int >= batch_size")
        check(is_int(self.num_epochs) and self.num_epochs >= 1, "num_epochs", "an int >= 1")
        check(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]")
        check(0.0 <= self.gae_lambda <= 1.0, "gae_lambda", "in [0, 1]")
        check(0.0 < self.clip_coef < 1.0, "clip_coef", "in (0, 1)")
        check(self.ent_coef >= 0, "ent_coef", ">= 0")
        check(self.vf_coef >= 0, "vf_coef", ">= 0")
        check(self.max_grad_norm >= 0, "max_grad_norm", ">= 0")
        check(self.target_kl is None or self.target_kl > 0, "target_kl", "> 0 or null")
        check(-20.0 <= self.log_std_init <= 2.0, "log_std_init", "in [-20, 2]")
        check(self.reward_scale > 0, "reward_scale", "> 0")
        check(is_int(self.max_steps) and self.max_steps >= 1, "max_steps", "an int >= 1")


class ActionSpecLike(Protocol):
    """What PPO needs of an action spec; mlagents_envs' ``ActionSpec`` fits."""

    continuous_size: int
    discrete_branches: tuple[int, ...]


# ----------------------------------------------------------------------------------------------
# Schedules and losses (short pure functions, tested on their own)
# ----------------------------------------------------------------------------------------------

def decayed(initial: float, floor: float, schedule: str, step: int, max_steps: int) -> float:
    """ML-Agents' DecayedValue: linear from ``initial`` at step 0 to ``floor`` at ``max_steps``."""
    if schedule == "constant":
        return initial
    floor = min(floor, initial)
    progress = min(step, max_steps) / max_steps
    return (initial - floor) * (1.0 - progress) + floor


def clipped_surrogate_loss(newlogprob: torch.Tensor, oldlogprob: torch.Tensor,
                           advantages: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """L^CLIP as a loss: mean over samples of max(−Â·r, −Â·clip(r, 1−ε, 1+ε)), r = π/π_old."""
    ratio = (newlogprob - oldlogprob).exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    return torch.max(pg_loss1, pg_loss2).mean()


def value_loss(newvalue: torch.Tensor, oldvalue: torch.Tensor, returns: torch.Tensor,
               clip_coef: float, clip: bool) -> torch.Tensor:
    """Mean squared error to the returns; with ``clip``, the max of the errors of V and of
    V_old + clip(V − V_old, ±ε) (ML-Agents' trust-region value loss)."""
    v_loss_unclipped = (newvalue - returns) ** 2
    if not clip:
        return v_loss_unclipped.mean()
    v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return torch.max(v_loss_unclipped, v_loss_clipped).mean()


# ----------------------------------------------------------------------------------------------
# Action distributions
# ----------------------------------------------------------------------------------------------

_LOG_2PI = math.log(2.0 * math.pi)
_MASKED_LOGIT = -1e8


class DiagGaussian:
    """Independent Gaussians N(μ, σ²) per action dimension; log-prob and entropy summed."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean = mean
        self.log_std = log_std.expand_as(mean)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype,
                            device=self.mean.device)
        return self.mean + self.log_std.exp() * noise

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z**2 - self.log_std - 0.5 * _LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (0.5 + 0.5 * _LOG_2PI + self.log_std).sum(-1)


class MaskedMultiCategorical:
    """One categorical per discrete branch; disallowed actions get probability 0."""

    def __init__(self, logits: torch.Tensor, branches: Sequence[int], masks: torch.Tensor | None):
        if masks is not None:
            logits = logits.masked_fill(~masks, _MASKED_LOGIT)
        self.log_probs = [branch - branch.logsumexp(-1, keepdim=True)
                          for branch in logits.split(list(branches), dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([torch.multinomial(lp.exp(), 1, generator=generator).squeeze(-1)
                            for lp in self.log_probs], dim=-1)

    def mode(self) -> torch.Tensor:
        return torch.stack([lp.argmax(-1) for lp in self.log_probs], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(lp.gather(-1, actions[:, b:b + 1]).squeeze(-1)
                   for b, lp in enumerate(self.log_probs))

    def entropy(self) -> torch.Tensor:
        return sum(-(lp.exp() * lp).sum(-1) for lp in self.log_probs)


# ----------------------------------------------------------------------------------------------
# Network
# ----------------------------------------------------------------------------------------------

def _action_layout(action_spec: ActionSpecLike) -> tuple[int, tuple[int, ...]]:
    continuous_size = int(action_spec.continuous_size)
    branches = tuple(int(b) for b in action_spec.discrete_branches)
    if continuous_size and branches:
        raise ValueError("PPO supports continuous or discrete actions, not both in one behavior "
                         f"(got {continuous_size} continuous and branches {branches})")
    if not continuous_size and not branches:
        raise ValueError("the action spec has neither continuous actions nor discrete branches")
    return continuous_size, branches


class ActorCritic(nn.Module):
    """Actor and critic MLPs with separate trunks; inputs are already-normalised observations."""

    def __init__(self, obs_dim: int, action_spec: ActionSpecLike, network: NetworkConfig,
                 log_std_init: float = 0.0):
        super().__init__()
        self.continuous_size, self.discrete_branches = _action_layout(action_spec)
        hidden, layers = network.hidden_units, network.num_layers
        self.critic = mlp(obs_dim, hidden, layers, 1, out_std=1.0)
        if self.continuous_size:
            self.actor_mean = mlp(obs_dim, hidden, layers, self.continuous_size, out_std=0.01)
            self.actor_logstd = nn.Parameter(torch.full((self.continuous_size,), float(log_std_init)))
        else:
            self.actor_logits = mlp(obs_dim, hidden, layers, sum(self.discrete_branches), out_std=0.01)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s): [n]."""
        return self.critic(x).squeeze(-1)

    def distribution(self, x: torch.Tensor, action_masks: torch.Tensor | None = None):
        """π(·|s) for each row."""
        if self.continuous_size:
            return DiagGaussian(self.actor_mean(x), self.actor_logstd)
        return MaskedMultiCategorical(self.actor_logits(x), self.discrete_branches, action_masks)


class DeterministicActor(nn.Module):
    """Export module: raw obs [n, obs_dim] -> deterministic action, normalisation folded in.

    Continuous: clip(μ(s), −1, 1) as float32 [n, A].  Discrete: the most likely allowed action per
    branch as int64 [n, B]; ``action_masks`` ([n, sum(branches)], nonzero = allowed) is optional.
    """

    def __init__(self, model: ActorCritic, normalizer: RunningNormalizer | None, obs_dim: int):
        super().__init__()
        self.continuous_size = model.continuous_size
        self.discrete_branches = model.discrete_branches
        if self.continuous_size:
            self.actor = copy.deepcopy(model.actor_mean).cpu()
        else:
            self.actor = copy.deepcopy(model.actor_logits).cpu()
        if normalizer is not None:
            mean = torch.as_tensor(normalizer.mean, dtype=torch.float32)
            std = torch.as_tensor(np.sqrt(normalizer.var + normalizer.epsilon), dtype=torch.float32)
            clip = float(normalizer.clip)
        else:
            mean, std, clip = torch.zeros(obs_dim), torch.ones(obs_dim), math.inf
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_std", std)
        self.obs_clip = clip
        self.eval()

    def forward(self, obs: torch.Tensor, action_masks: torch.Tensor | None = None) -> torch.Tensor:
        x = (obs - self.obs_mean) / self.obs_std
        if math.isfinite(self.obs_clip):
            x = torch.clamp(x, -self.obs_clip, self.obs_clip)
        out = self.actor(x)
        if self.continuous_size:
            return torch.clamp(out, -1.0, 1.0)
        if action_masks is not None:
            out = out.masked_fill(action_masks <= 0, _MASKED_LOGIT)
        return torch.stack([branch.argmax(-1) for branch in out.split(list(self.discrete_branches), -1)], -1)


def _normalizer_state(normalizer: RunningNormalizer | None) -> dict | None:
    """Normaliser state as tensors and floats (loadable with ``torch.load(weights_only=True)``)."""
    if normalizer is None:
        return None
    return {"mean": torch.from_numpy(normalizer.mean.copy()),
            "var": torch.from_numpy(normalizer.var.copy()),
            "count": float(normalizer.count)}


def _load_normalizer(normalizer: RunningNormalizer | None, state: dict | None) -> None:
    if (normalizer is None) != (state is None):
        raise ValueError("observation normalisation differs between these weights and this network "
                         "(network_settings.normalize)")
    if normalizer is not None:
        normalizer.load_state_dict({
            "mean": state["mean"].numpy() if torch.is_tensor(state["mean"]) else state["mean"],
            "var": state["var"].numpy() if torch.is_tensor(state["var"]) else state["var"],
            "count": float(state["count"])})


# ----------------------------------------------------------------------------------------------
# Actor side
# ----------------------------------------------------------------------------------------------

class PPOPolicy:
    """The acting copy of the policy, fed by ``PPOLearner.weights()``.

    ``act`` takes one row per agent that requested a decision; rows are independent, so agent
    order and count may change from call to call.  ``version`` is that of the loaded weights
    (-1 until ``load_weights`` is called).
    """

    def __init__(self, obs_dim: int, action_spec: ActionSpecLike, network_cfg: NetworkConfig,
                 seed: int | None = None, num_threads: int | None = None):
        if num_threads is not None:
            set_torch_threads(num_threads)
        self.obs_dim = obs_dim
        self.model = ActorCritic(obs_dim, action_spec, network_cfg)
        self.model.eval()
        self.normalizer = RunningNormalizer((obs_dim,)) if network_cfg.normalize else None
        self.generator = torch.Generator()
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed()))
        self.version = -1

    def load_weights(self, weights: dict) -> None:
        """Loads a ``PPOLearner.weights()`` dict (network, normaliser state, version)."""
        self.model.load_state_dict(weights["model"])
        _load_normalizer(self.normalizer, weights["normalizer"])
        self.version = int(weights["version"])

    def _input(self, obs: np.ndarray) -> torch.Tensor:
        obs = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        if self.normalizer is not None:
            obs = self.normalizer.normalize(obs)
        return torch.from_numpy(obs)

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """obs [n, obs_dim] -> (actions, logprobs [n] float32, values [n] float32).

        Continuous actions are float32 [n, A] *unclipped* samples (send ``clip(a, -1, 1)`` to the
        environment, store ``a``); discrete actions are int64 [n, branches].  ``action_mask`` is
        bool [n, sum(branches)], True where allowed.  ``deterministic`` takes the mode.
        """
        with torch.no_grad():
            x = self._input(obs)
            masks = None if action_mask is None else torch.from_numpy(np.asarray(action_mask, bool))
            dist = self.model.distribution(x, masks)
            actions = dist.mode() if deterministic else dist.sample(self.generator)
            logprobs = dist.log_prob(actions)
            values = self.model.get_value(x)
        return actions.numpy(), logprobs.numpy().astype(np.float32), values.numpy().astype(np.float32)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """V(s) for each row of obs: [n] float32."""
        with torch.no_grad():
            return self.model.get_value(self._input(obs)).numpy().astype(np.float32)

    def export_module(self) -> DeterministicActor:
        """A deterministic torch module obs -> action with normalisation folded in (for ONNX)."""
        return DeterministicActor(self.model, self.normalizer, self.obs_dim)


# ----------------------------------------------------------------------------------------------
# Learner
# ----------------------------------------------------------------------------------------------

class PPOLearner:
    """Owns the network, Adam optimiser and observation normaliser; one ``update`` per buffer."""

    def __init__(self, obs_dim: int, action_spec: ActionSpecLike, ppo_cfg: PPOConfig,
                 network_cfg: NetworkConfig, device: str = "cpu", num_threads: int | None = None,
                 seed: int | None = None):
        if num_threads is not None:
            set_torch_threads(num_threads)
        if seed is not None:
            torch.manual_seed(seed)
        self.cfg = ppo_cfg
        self.obs_dim = obs_dim
        self.device = torch.device(device)
        self.model = ActorCritic(obs_dim, action_spec, network_cfg, ppo_cfg.log_std_init).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=ppo_cfg.learning_rate, eps=1e-5)
        self.normalizer = RunningNormalizer((obs_dim,)) if network_cfg.normalize else None
        self.rng = np.random.default_rng(seed)
        self.version = 0
        """Incremented by each update; actors report the version they acted with."""
        self.agent_steps_trained = 0
        """Agent-steps consumed by updates so far; drives the linear schedules."""

    # -- weights for actors, checkpoints, export ------------------------------------------------

    def weights(self) -> dict:
        """CPU copy for actors: {'model': state_dict, 'normalizer': state or None, 'version': int}."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
                "normalizer": _normalizer_state(self.normalizer),
                "version": self.version}

    def state_dict(self) -> dict:
        """Everything needed to resume: network, optimiser, normaliser, counters, shuffling RNG.

        A deep copy (torch's state dicts alias the live tensors), made of tensors and plain
        Python values only, so ``torch.load(weights_only=True)`` can read it back.
        """
        return copy.deepcopy({"model": self.model.state_dict(),
                              "optimizer": self.optimizer.state_dict(),
                              "normalizer": _normalizer_state(self.normalizer),
                              "version": self.version,
                              "agent_steps_trained": self.agent_steps_trained,
                              "rng": self.rng.bit_generator.state})

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output (copied: later updates do not write into it)."""
        state = copy.deepcopy(state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        _load_normalizer(self.normalizer, state["normalizer"])
        self.version = int(state["version"])
        self.agent_steps_trained = int(state["agent_steps_trained"])
        self.rng.bit_generator.state = state["rng"]

    def export_module(self) -> DeterministicActor:
        """A deterministic CPU torch module obs -> action with normalisation folded in (for ONNX)."""
        return DeterministicActor(self.model, self.normalizer, self.obs_dim)

    # -- the algorithm --------------------------------------------------------------------------

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        return self.normalizer.normalize(obs) if self.normalizer is not None else obs

    def update(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One PPO update on these trajectories (any lengths; all rows are used)."""
        cfg = self.cfg
        trajectories = [t for t in trajectories if len(t.rewards) > 0]
        if not trajectories:
            raise ValueError("PPOLearner.update needs at least one non-empty trajectory")
        lengths = [len(t.rewards) for t in trajectories]
        b_obs_raw = np.concatenate([np.asarray(t.obs, np.float32).reshape(-1, self.obs_dim)
                                    for t in trajectories])
        last_obs_raw = np.stack([np.asarray(t.last_obs, np.float32).reshape(self.obs_dim)
                                 for t in trajectories])

        # 1. Observation statistics first: values, advantages and ratios all see the same input.
        if self.normalizer is not None:
            self.normalizer.update(b_obs_raw)
        b_obs = self._tensor(self._normalize(b_obs_raw), torch.float32)
        last_obs = self._tensor(self._normalize(last_obs_raw), torch.float32)

        # 2. V(s_t) and V(s_T) under the current critic.
        with torch.no_grad():
            values = self.model.get_value(b_obs).cpu().numpy()
            last_values = self.model.get_value(last_obs).cpu().numpy()

        # 3. GAE(γ, λ) per trajectory: bootstrap from V(s_T) unless the episode terminated.
        advantages, returns = [], []
        starts = np.cumsum([0] + lengths)
        for i, traj in enumerate(trajectories):
            adv, ret = compute_gae(np.asarray(traj.rewards, np.float32) * cfg.reward_scale,
                                   values[starts[i]:starts[i + 1]], float(last_values[i]),
                                   bool(traj.terminated), cfg.gamma, cfg.gae_lambda)
            advantages.append(adv)
            returns.append(ret)

        b_advantages = self._tensor(np.concatenate(advantages), torch.float32)
        b_returns = self._tensor(np.concatenate(returns), torch.float32)
        b_values = self._tensor(values, torch.float32)
        b_logprobs = self._tensor(np.concatenate([t.logprobs for t in trajectories]), torch.float32)
        if self.model.continuous_size:
            b_actions = self._tensor(np.concatenate([t.actions for t in trajectories]), torch.float32)
            b_masks = None
        else:
            b_actions = self._tensor(np.concatenate([t.actions for t in trajectories]), torch.int64)
            b_masks = self._tensor(np.concatenate([
                t.action_masks if t.action_masks is not None
                else np.ones((len(t.rewards), sum(self.model.discrete_branches)), bool)
                for t in trajectories]), torch.bool)
        b_size = len(b_values)

        # 4. Schedules, driven by the agent-steps trained so far.
        step = self.agent_steps_trained
        lrnow = decayed(cfg.learning_rate, 1e-10, cfg.lr_schedule, step, cfg.max_steps)
        clip_coef = decayed(cfg.clip_coef, 0.1, cfg.clip_coef_schedule, step, cfg.max_steps)
        ent_coef = decayed(cfg.ent_coef, 1e-5, cfg.ent_coef_schedule, step, cfg.max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lrnow

        # 5. Optimise the clipped surrogate, value loss and entropy bonus over minibatch epochs.
        num_minibatches = max(1, b_size // cfg.minibatch_size)
        stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": [], "clipfrac": []}
        self.model.train()
        for _epoch in range(cfg.num_epochs):
            b_inds = self.rng.permutation(b_size)
            for mb_inds_np in np.array_split(b_inds, num_minibatches):
                mb_inds = self._tensor(mb_inds_np, torch.int64)
                dist = self.model.distribution(b_obs[mb_inds],
                                               None if b_masks is None else b_masks[mb_inds])
                newlogprob = dist.log_prob(b_actions[mb_inds])
                entropy = dist.entropy()
                newvalue = self.model.get_value(b_obs[mb_inds])

                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()

                mb_advantages = b_advantages[mb_inds]
                if cfg.norm_adv and len(mb_inds_np) > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss = clipped_surrogate_loss(newlogprob, b_logprobs[mb_inds], mb_advantages, clip_coef)
                v_loss = value_loss(newvalue, b_values[mb_inds], b_returns[mb_inds], clip_coef, cfg.clip_vloss)
                entropy_loss = entropy.mean()
                loss = pg_loss - ent_coef * entropy_loss + cfg.vf_coef * v_loss

                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()

                stats["pg"].append(pg_loss.item())
                stats["v"].append(v_loss.item())
                stats["ent"].append(entropy_loss.item())
                stats["kl"].append(approx_kl.item())
                stats["clipfrac"].append(clipfrac.item())
            if cfg.target_kl is not None and stats["kl"][-1] > cfg.target_kl:
                break
        self.model.eval()

        self.agent_steps_trained += b_size
        self.version += 1
        return {
            "Losses/Policy Loss": float(np.mean(stats["pg"])),
            "Losses/Value Loss": float(np.mean(stats["v"])),
            "Policy/Entropy": float(np.mean(stats["ent"])),
            "Policy/Learning Rate": float(lrnow),
            "Policy/Epsilon": float(clip_coef),
            "Policy/Beta": float(ent_coef),
            "Policy/Approx KL": float(np.mean(stats["kl"])),
            "Policy/Clip Fraction": float(np.mean(stats["clipfrac"])),
            "Policy/Extrinsic Value Estimate": float(values.mean()),
        }
