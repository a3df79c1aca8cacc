"""Deep Deterministic Policy Gradient (Lillicrap et al. 2015, arXiv:1509.02971).

A pure learner: no processes, no I/O, no replay.  ``DDPGLearner`` fits
``offpolicy.learner.OffPolicyLearner``: ``update(batch, importance_weights)`` takes one gradient
step in the paper's order — critic on the TD target, actor on −Q(s, μ(s)), then Polyak-averaged
targets — and returns its metrics and |TD errors|.  ``DDPGPolicy`` is the copy that acts from
shipped weights (inside ``acting.DDPGActorPolicy`` in actors; evaluate and export load it too).

Truncation: the target is y = r + γ(1 − terminated)·Q'(s', μ'(s')).  When Unity interrupts an
episode (max step reached) ``terminated`` is 0 and s' is the final observation, so the target
still bootstraps (CleanRL's DDPG drops this bootstrap; see Pardo et al. 2018, arXiv:1712.00378).

Observations: flat float32 rows (every observation flattened, in BehaviorSpec order, as the replay
buffer stores them); actor and critic each split rows with their own ``ObservationEncoder``
(images through the ``vis_encode_type`` encoder, vectors as they are); only vector columns are
normalised.  No process-wide torch state is set (no global seed, no thread count).

Actions: continuous only, in Unity's bounds [-1, 1]: the actor ends in tanh.  Exploration adds
Gaussian or per-agent Ornstein–Uhlenbeck noise and clips to the bounds; during warm-up the actor
side plays uniform random actions (``DDPGPolicy.explore``).

The networks are in ``nets.py``; the replay, replay ratio, PER and Ape-X plumbing around the
learner in ``unity_rl.algorithms.offpolicy``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.ddpg.nets import (ACTION_HIGH, ACTION_LOW, Actor, ExportedActor, QNetwork,
                                      cpu_state, soft_update, td_target)
from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import optimised_parameter_count, seeded_init
from unity_rl.algorithms.noise import ActionNoise, make_noise
from unity_rl.algorithms.ddpg.config import DDPGConfig, updates_owed
from unity_rl.algorithms.offpolicy.learner import UpdateResult
from unity_rl.experience import TransitionBatch

__all__ = ["DDPGConfig", "DDPGPolicy", "DDPGLearner", "Actor", "QNetwork", "ExportedActor",
           "td_target", "soft_update", "updates_owed", "continuous_action_size",
           "ACTION_LOW", "ACTION_HIGH"]


def continuous_action_size(action_spec: Any) -> int:
    """The number of continuous actions; raises ValueError for discrete or hybrid specs."""
    branches = tuple(getattr(action_spec, "discrete_branches", ()) or ())
    size = int(getattr(action_spec, "continuous_size", 0))
    if branches:
        raise ValueError(
            f"DDPG supports continuous actions only, but this behavior has discrete branches "
            f"{branches} (and {size} continuous actions); train it with PPO (trainer: ppo).")
    if size < 1:
        raise ValueError("DDPG needs at least one continuous action; this action spec has none")
    return size


# -- actor side --------------------------------------------------------------------------------
class DDPGPolicy:
    """The acting copy of μ: normalises, adds exploration noise, clips to the action bounds.

    Holds no optimiser; ``load_weights(learner.weights())`` refreshes it.  With weights that
    include the critic (``weights(include_critic=True)``) it can also compute |TD errors| for
    actor-side initial priorities (Ape-X).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: Any, ddpg_cfg: DDPGConfig,
                 hidden_units: int, num_layers: int, normalize: bool, seed: int | None = None,
                 device: str = "cpu", vis_encode_type: str = "simple",
                 goal_conditioning_type: str = "hyper", goal_indices: Sequence[int] = ()):
        self.cfg = ddpg_cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.act_dim = continuous_action_size(action_spec)
        self.device = torch.device(device)
        self.version = -1
        """Version of the loaded weights (-1: none loaded yet)."""
        network = NetworkConfig(normalize, hidden_units, num_layers, vis_encode_type,
                                goal_conditioning_type)
        self.goal_indices = tuple(int(i) for i in goal_indices)
        """The BehaviorSpec's GOAL_SIGNAL observations."""
        self._net_args = (self.obs_shapes, self.act_dim, network)
        self._goals = {"goal_indices": self.goal_indices}
        with seeded_init(0 if seed is None else seed):  # weights arrive later: leave global RNG be
            self.actor = Actor(*self._net_args, **self._goals).to(self.device).eval()
        self.critic: QNetwork | None = None
        self.actor_target: Actor | None = None
        self.critic_target: QNetwork | None = None
        self.normalizer = self.layout.make_normalizer(normalize)
        self.rng = np.random.default_rng(seed)
        self.noise: ActionNoise = make_noise(ddpg_cfg.exploration_noise, self.act_dim,
                                             ddpg_cfg.noise_sigma * (ACTION_HIGH - ACTION_LOW) / 2,
                                             ddpg_cfg.ou_theta, seed=self.rng.integers(2**63))

    def load_weights(self, weights: dict) -> None:
        """Loads ``DDPGLearner.weights()`` (actor, normaliser, version; critic if present)."""
        got = weights.get("obs_shapes")
        if got is not None and tuple(tuple(s) for s in got) != self.obs_shapes:
            raise ValueError(f"these weights are for observation shapes {tuple(got)}, this "
                             f"policy was built for {self.obs_shapes}")
        goals = tuple(int(i) for i in weights.get("goal_indices", ()))
        if goals != self.goal_indices:
            raise ValueError(f"these weights are for goal observations {goals}, this policy was "
                             f"built for {self.goal_indices}")
        self.actor.load_state_dict(weights["actor"])
        if self.normalizer is not None:
            self.normalizer.load_state_dict(weights["normalizer"])
        if "critic" in weights:
            if self.critic is None:
                self.critic = QNetwork(*self._net_args, **self._goals).to(self.device).eval()
                self.actor_target = Actor(*self._net_args, **self._goals).to(self.device).eval()
                self.critic_target = QNetwork(*self._net_args, **self._goals).to(self.device).eval()
            self.critic.load_state_dict(weights["critic"])
            self.actor_target.load_state_dict(weights["actor_target"])
            self.critic_target.load_state_dict(weights["critic_target"])
        self.version = int(weights["version"])

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(self.layout.normalize(self.normalizer, obs), device=self.device)

    @torch.no_grad()
    def act(self, obs: np.ndarray, noise: bool = True,
            agent_keys: Sequence[Hashable] | None = None) -> np.ndarray:
        """[n, obs_dim] raw observations -> [n, act_dim] float32 actions in [-1, 1].

        ``agent_keys[i]`` names row i's agent, which keeps Ornstein–Uhlenbeck noise per agent.
        """
        actions = self.actor(self._obs_tensor(obs)).cpu().numpy()
        if noise:
            actions = actions + self.noise(len(actions), agent_keys)
        return np.clip(actions, ACTION_LOW, ACTION_HIGH).astype(np.float32)

    def is_warming_up(self, agent_steps: int) -> bool:
        """True while the run's collected agent-steps are below ``warmup_steps``."""
        return agent_steps < self.cfg.warmup_steps

    def random_actions(self, n: int) -> np.ndarray:
        """[n, act_dim] uniform random actions in the bounds (warm-up)."""
        return self.rng.uniform(ACTION_LOW, ACTION_HIGH, (n, self.act_dim)).astype(np.float32)

    def explore(self, obs: np.ndarray, agent_steps: int,
                agent_keys: Sequence[Hashable] | None = None) -> np.ndarray:
        """Behaviour actions: uniform random during warm-up, then μ(s) plus noise."""
        if self.is_warming_up(agent_steps):
            return self.random_actions(len(obs))
        return self.act(obs, noise=True, agent_keys=agent_keys)

    def reset_noise(self, agent_keys: Sequence[Hashable] | None = None) -> None:
        """Resets the noise state of agents whose episode ended (all when None)."""
        self.noise.reset(agent_keys)

    @torch.no_grad()
    def td_errors(self, batch: TransitionBatch) -> np.ndarray:
        """[n] |y − Q(s, a)| under the loaded weights: initial priorities for replay."""
        if self.critic is None:
            raise RuntimeError("td_errors needs weights with the critic: "
                               "use learner.weights(include_critic=True)")
        def tensor(x: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.asarray(x, np.float32), device=self.device)

        b_obs, b_next_obs = self._obs_tensor(batch.obs), self._obs_tensor(batch.next_obs)
        b_actions, b_rewards = tensor(batch.actions), tensor(batch.rewards)
        b_terminated = tensor(batch.terminated)
        y = td_target(b_rewards, b_terminated, b_next_obs, self.actor_target,
                      self.critic_target, self.cfg.gamma)
        return (y - self.critic(b_obs, b_actions)).abs().cpu().numpy()


# -- learner -----------------------------------------------------------------------------------
class DDPGLearner:
    """Owns μ, Q, their targets, the optimisers and the authoritative observation normaliser."""

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: Any, ddpg_cfg: DDPGConfig,
                 hidden_units: int, num_layers: int, normalize: bool, device: str = "cpu",
                 num_threads: int | None = None, seed: int | None = None,
                 vis_encode_type: str = "simple", goal_conditioning_type: str = "hyper",
                 goal_indices: Sequence[int] = ()):
        del num_threads  # accepted for the runtime's callers; a learner sets no process-wide state
        self.cfg = ddpg_cfg
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.act_dim = continuous_action_size(action_spec)
        self.hidden_units = hidden_units
        self.num_layers = num_layers
        self.vis_encode_type = vis_encode_type
        self.device = torch.device(device)
        self.goal_conditioning_type = goal_conditioning_type
        self.goal_indices = tuple(int(i) for i in goal_indices)
        """The BehaviorSpec's GOAL_SIGNAL observations (HyperNetwork bodies under 'hyper')."""
        network = NetworkConfig(normalize, hidden_units, num_layers, vis_encode_type,
                                goal_conditioning_type)
        goals = {"goal_indices": self.goal_indices}
        with seeded_init(seed):  # seed-reproducible init without touching torch's global RNG
            self.actor = Actor(self.obs_shapes, self.act_dim, network, **goals).to(self.device)
            self.critic = QNetwork(self.obs_shapes, self.act_dim, network, **goals).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=ddpg_cfg.actor_lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=ddpg_cfg.critic_lr,
                                                 weight_decay=ddpg_cfg.critic_weight_decay)
        self.normalizer = self.layout.make_normalizer(normalize)
        self.updates = 0
        """Gradient updates done (critic steps); also the weights' version."""
        self.agent_steps = 0
        """Collected agent-steps (set by the host; DDPG has no schedule that reads it)."""
        self.last_policy_loss = 0.0

    # -- data to tensors ---------------------------------------------------------------------
    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, np.float32), device=self.device)

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return self._tensor(self.layout.normalize(self.normalizer, obs))

    def td_target(self, batch: TransitionBatch) -> np.ndarray:
        """[n] TD targets y of ``batch`` under the current target networks (no update)."""
        y = td_target(self._tensor(batch.rewards), self._tensor(batch.terminated),
                      self._obs_tensor(batch.next_obs), self.actor_target, self.critic_target,
                      self.cfg.gamma)
        return y.cpu().numpy()

    def observe(self, obs: np.ndarray) -> None:
        """Nothing: DDPG folds each sampled batch into its normaliser instead (``update``)."""

    # -- the algorithm -----------------------------------------------------------------------
    def update(self, batch: TransitionBatch,
               importance_weights: np.ndarray | None = None) -> UpdateResult:
        """One gradient step on a replay batch; ``importance_weights``: [n] PER weights.

        Folds the batch's observations into the normaliser first (with uniform replay this
        tracks the replay distribution).  Returns the metrics and the batch's |TD errors|
        (before the step: the rows' new priorities).
        """
        cfg = self.cfg
        self.layout.update(self.normalizer, batch.obs)  # vector columns only
        b_obs = self._obs_tensor(batch.obs)
        b_next_obs = self._obs_tensor(batch.next_obs)
        b_actions = self._tensor(batch.actions)
        b_rewards = self._tensor(batch.rewards)
        b_terminated = self._tensor(batch.terminated)
        b_weights = None if importance_weights is None else self._tensor(importance_weights)

        # 1. Critic: minimise (y − Q(s, a))², y = r + γ(1 − terminated)·Q'(s', μ'(s')).
        y = td_target(b_rewards, b_terminated, b_next_obs, self.actor_target,
                      self.critic_target, cfg.gamma)
        q = self.critic(b_obs, b_actions)
        td_error = y - q
        q_loss = (td_error**2 if b_weights is None else b_weights * td_error**2).mean()
        self.critic_optimizer.zero_grad()
        q_loss.backward()
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.max_grad_norm)
        self.critic_optimizer.step()
        self.updates += 1

        if self.updates % cfg.policy_delay == 0:
            # 2. Actor: deterministic policy gradient, maximise Q(s, μ(s)).
            policy_loss = -self.critic(b_obs, self.actor(b_obs)).mean()
            self.actor_optimizer.zero_grad()
            policy_loss.backward()
            if cfg.max_grad_norm > 0:
                nn.utils.clip_grad_norm_(self.actor.parameters(), cfg.max_grad_norm)
            self.actor_optimizer.step()
            self.last_policy_loss = policy_loss.item()

            # 3. Targets: θ' ← τθ + (1 − τ)θ'.
            soft_update(self.actor_target, self.actor, cfg.tau)
            soft_update(self.critic_target, self.critic, cfg.tau)

        td_errors = td_error.detach().abs().cpu().numpy()
        return UpdateResult({
            "Losses/Q Loss": q_loss.item(),
            "Losses/Policy Loss": self.last_policy_loss,
            "Policy/Q Mean": q.detach().mean().item(),
            "Policy/TD Error Mean": float(td_errors.mean()),
        }, td_errors)

    # -- shipping and checkpoints ------------------------------------------------------------
    def weights(self, include_critic: bool = False) -> dict:
        """CPU copies for actors: actor, normaliser state, version (and critic + targets)."""
        weights: dict[str, Any] = {
            "version": self.updates,
            "obs_shapes": self.obs_shapes,
            "goal_indices": self.goal_indices,
            "actor": cpu_state(self.actor),
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
        }
        if include_critic:
            weights["critic"] = cpu_state(self.critic)
            weights["actor_target"] = cpu_state(self.actor_target)
            weights["critic_target"] = cpu_state(self.critic_target)
        return weights

    def make_policy(self, seed: int | None = None) -> DDPGPolicy:
        """An actor-side policy of the same shape, loaded with the current weights."""
        policy = DDPGPolicy(self.obs_shapes, _ContinuousSpec(self.act_dim), self.cfg,
                            self.hidden_units, self.num_layers, self.normalizer is not None,
                            seed=seed, vis_encode_type=self.vis_encode_type,
                            goal_conditioning_type=self.goal_conditioning_type,
                            goal_indices=self.goal_indices)
        policy.load_weights(self.weights())
        return policy

    def export_module(self) -> nn.Module:
        """Deterministic observations -> action module on CPU, normalisation folded in (ONNX)."""
        return ExportedActor(self.actor, self.normalizer)

    def parameter_count(self) -> int:
        """Elements of the actor's and the critic's parameters (what one update steps)."""
        return optimised_parameter_count(self.actor_optimizer, self.critic_optimizer)

    def state_dict(self) -> dict:
        """Everything to resume: networks, targets, optimisers, normaliser, counters.

        A deep copy: torch's state dicts alias the live tensors (and ``Optimizer.load_state_dict``
        keeps that aliasing), so a copy keeps a saved state from changing with later updates.
        """
        return copy.deepcopy({
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "updates": self.updates,
            "last_policy_loss": self.last_policy_loss,
            "obs_shapes": self.obs_shapes,
            "goal_indices": self.goal_indices,
        })

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        if self.normalizer is not None:
            if state["normalizer"] is None:
                raise ValueError("checkpoint has no normaliser but this learner normalises")
            self.normalizer.load_state_dict(state["normalizer"])
        self.updates = int(state["updates"])
        self.last_policy_loss = float(state["last_policy_loss"])



@dataclass(frozen=True)
class _ContinuousSpec:
    """Minimal action spec (continuous_size, discrete_branches) for policies built from a learner."""

    continuous_size: int
    discrete_branches: tuple[int, ...] = ()
