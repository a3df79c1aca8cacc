"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347), pure and single-process.

Two roles share one network class:
- ``PPOPolicy`` lives in an actor: it acts on a batch of observations (any number of agents, in
  any order: rows are independent) and loads the weights the learner publishes.
- ``PPOLearner`` owns the authoritative network, optimiser and observation normaliser; it turns a
  list of ``Trajectory`` into one PPO update and returns metrics named like ML-Agents' TensorBoard
  tags.  It performs no I/O, starts no process or thread of its own and sets no process-wide
  torch state (no global seed, no thread count).

Observations: flat float32 rows (every observation flattened, in BehaviorSpec order); both roles
take the observation *shapes* and split rows inside the network (``encoders.py``: images through
the ``vis_encode_type`` encoder, vectors as they are; only vector columns are normalised).

Choices that differ between implementations, and the one made here:
- separate actor and critic trunks (ML-Agents' default, ``shared_critic: false``);
- Gaussian policy with a state-independent log-std; actions are sampled *unclipped* and the
  environment receives ``clip(a, -1, 1)``, so log-probabilities stay those of the sampled action
  (clipping before the log-prob biases the gradient, Fujita & Maeda 2018, arXiv:1802.07564);
- categorical per discrete branch, with disallowed actions' logits masked out; hybrid behaviors
  (continuous + discrete) get both heads on one actor trunk, log π = Gaussian + Σ branches,
  and action rows [n, C + B] (``Trajectory.actions``);
- values of ``obs`` and ``last_obs`` are recomputed with the current critic before GAE, which
  also makes the value-clipping anchor the pre-update critic even for stale (async) data;
- advantages are normalised per minibatch (Andrychowicz et al. 2021, arXiv:2006.05990);
- learning rate, clip range ε and entropy coefficient β follow ML-Agents' schedules: linear decay
  over ``max_steps`` agent-steps towards 1e-10, 0.1 and 1e-5 respectively, or constant.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from unity_rl.algos.distributions import DiagGaussian, HybridDistribution, MaskedMultiCategorical
from unity_rl.algos.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algos.gae import compute_gae
from unity_rl.algos.nets import NetworkConfig, seeded_init, set_torch_threads
from unity_rl.algos.ppo_model import (ActionSpecLike, ActorCritic, DeterministicActor,
                                      check_obs_shapes, load_normalizer, normalizer_state)
from unity_rl.algos.types import Trajectory

__all__ = ["PPOConfig", "PPOPolicy", "PPOLearner", "ActorCritic", "DeterministicActor",
           "ActionSpecLike", "DiagGaussian", "MaskedMultiCategorical", "HybridDistribution",
           "decayed", "clipped_surrogate_loss", "value_loss"]

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
# Actor side
# ----------------------------------------------------------------------------------------------

class PPOPolicy:
    """The acting copy of the policy, fed by ``PPOLearner.weights()``.

    ``act`` takes one flat row per agent that requested a decision; rows are independent, so
    agent order and count may change from call to call.  ``version`` is that of the loaded
    weights (-1 until ``load_weights`` is called).  ``obs_shapes``: the BehaviorSpec's
    observation shapes (an int ``d`` means one vector observation of size ``d``).
    ``num_threads``, when given, sets torch's intra-op threads of the *acting process* (the
    runtime's choice for its actor processes; learners never do this).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike,
                 network_cfg: NetworkConfig, seed: int | None = None,
                 num_threads: int | None = None):
        if num_threads is not None:
            set_torch_threads(num_threads)
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        with seeded_init(0 if seed is None else seed):  # weights arrive later: leave global RNG be
            self.model = ActorCritic(self.obs_shapes, action_spec, network_cfg)
        self.model.eval()
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.generator = torch.Generator()
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed()))
        self.version = -1

    def load_weights(self, weights: dict) -> None:
        """Loads a ``PPOLearner.weights()`` dict (network, normaliser state, version)."""
        check_obs_shapes(self.obs_shapes, weights)
        self.model.load_state_dict(weights["model"])
        load_normalizer(self.normalizer, weights["normalizer"])
        self.version = int(weights["version"])

    def _input(self, obs: np.ndarray) -> torch.Tensor:
        obs = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        return torch.from_numpy(self.layout.normalize(self.normalizer, obs))

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """obs [n, obs_dim] -> (actions, logprobs [n] float32, values [n] float32).

        Actions as ``Trajectory.actions``: continuous float32 [n, C] *unclipped* samples (send
        ``clip(a, -1, 1)`` to the environment, store ``a``); discrete int64 [n, B]; hybrid float32
        [n, C + B] (C unclipped continuous values, then B branch indices as floats).
        ``action_mask`` is bool [n, sum(branches)], True where allowed.  ``deterministic``
        takes the mode.
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
        """A deterministic torch module observations -> action, normalisation folded in (ONNX)."""
        return DeterministicActor(self.model, self.normalizer)


# ----------------------------------------------------------------------------------------------
# Learner
# ----------------------------------------------------------------------------------------------

class PPOLearner:
    """Owns the network, Adam optimiser and observation normaliser; one ``update`` per buffer.

    ``obs_shapes`` as ``PPOPolicy``; ``seed`` makes the initial weights and the minibatch
    shuffling reproducible; ``num_threads`` is accepted and ignored (the hosting process decides
    torch's threads).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike, ppo_cfg: PPOConfig,
                 network_cfg: NetworkConfig, device: str = "cpu", num_threads: int | None = None,
                 seed: int | None = None):
        del num_threads  # accepted for the runtime's callers; a learner sets no process-wide state
        self.cfg = ppo_cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.device = torch.device(device)
        with seeded_init(seed):  # seed-reproducible init without touching torch's global RNG
            self.model = ActorCritic(self.obs_shapes, action_spec, network_cfg,
                                     ppo_cfg.log_std_init).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=ppo_cfg.learning_rate, eps=1e-5)
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.rng = np.random.default_rng(seed)
        self.version = 0
        """Incremented by each update; actors report the version they acted with."""
        self.agent_steps_trained = 0
        """Agent-steps consumed by updates so far; drives the linear schedules."""

    # -- weights for actors, checkpoints, export ------------------------------------------------

    def weights(self) -> dict:
        """CPU copy for actors: {'model': state_dict, 'normalizer': state or None, 'version': int}."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
                "normalizer": normalizer_state(self.normalizer),
                "version": self.version,
                "obs_shapes": self.obs_shapes}

    def state_dict(self) -> dict:
        """Everything needed to resume: network, optimiser, normaliser, counters, shuffling RNG.

        A deep copy (torch's state dicts alias the live tensors), made of tensors and plain
        Python values only, so ``torch.load(weights_only=True)`` can read it back.
        """
        return copy.deepcopy({"model": self.model.state_dict(),
                              "optimizer": self.optimizer.state_dict(),
                              "normalizer": normalizer_state(self.normalizer),
                              "obs_shapes": self.obs_shapes,
                              "version": self.version,
                              "agent_steps_trained": self.agent_steps_trained,
                              "rng": self.rng.bit_generator.state})

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output (copied: later updates do not write into it)."""
        state = copy.deepcopy(state)
        check_obs_shapes(self.obs_shapes, state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        load_normalizer(self.normalizer, state["normalizer"])
        self.version = int(state["version"])
        self.agent_steps_trained = int(state["agent_steps_trained"])
        self.rng.bit_generator.state = state["rng"]

    def export_module(self) -> DeterministicActor:
        """A deterministic CPU module observations -> action, normalisation folded in (ONNX)."""
        return DeterministicActor(self.model, self.normalizer)

    # -- the algorithm --------------------------------------------------------------------------

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _normalize(self, obs: np.ndarray) -> np.ndarray:
        return self.layout.normalize(self.normalizer, obs)

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
        self.layout.update(self.normalizer, b_obs_raw)  # vector columns only
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
        # actions: float32 rows when there is a continuous part (hybrid: C + B columns), else int64
        branches = self.model.discrete_branches
        b_actions = self._tensor(np.concatenate([t.actions for t in trajectories]),
                                 torch.float32 if self.model.continuous_size else torch.int64)
        b_masks = None
        if branches:
            b_masks = self._tensor(np.concatenate([
                t.action_masks if t.action_masks is not None
                else np.ones((len(t.rewards), sum(branches)), bool)
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
