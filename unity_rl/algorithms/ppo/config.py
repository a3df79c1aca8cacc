"""PPO's hyperparameters (``PPOConfig``): ML-Agents 1.1.0's PPO by default, the project's
earlier choices behind explicit keys (see ``unity_rl.algorithms.ppo.learner``), and the YAML keys
(``PPO_KEYS``) with ML-Agents' meaning."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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
    """Weight of the value loss (ML-Agents: 0.5; YAML: vf_coef)."""
    clip_vloss: bool = True
    """Clip the value change to ±ε around the pre-update critic, as ML-Agents (YAML: clip_value_loss)."""
    max_grad_norm: float = 0.0
    """Global gradient-norm clip; 0 (default, ML-Agents) disables (YAML: max_grad_norm; the
    project's earlier default was 0.5)."""
    adam_eps: float = 1e-8
    """Adam's ε (default torch's, as ML-Agents; the project's earlier value 1e-5; YAML: adam_eps)."""
    norm_adv: bool = True
    """Normalise advantages (YAML: normalize_advantage)."""
    adv_norm_scope: Literal["buffer", "minibatch"] = "buffer"
    """'buffer' (ML-Agents): once over the whole buffer before the epochs; 'minibatch': within
    each minibatch (the project's earlier choice; YAML: advantage_normalization)."""
    minibatch_remainder: Literal["drop", "spread"] = "drop"
    """'drop' (ML-Agents): len // batch_size minibatches of exactly batch_size rows, the rest of
    the shuffled buffer unused this epoch; 'spread': every row used, minibatch sizes differing by
    at most one (np.array_split; the earlier choice; YAML: minibatch_remainder)."""
    policy_ratio: Literal["per_action", "joint"] = "per_action"
    """'per_action' (ML-Agents): one probability ratio per action dimension / branch, clipped
    separately, the advantage broadcast; 'joint': one ratio of the joint probabilities (the paper's,
    the earlier choice; YAML: policy_ratio)."""
    gaussian_entropy: Literal["mean", "sum"] = "mean"
    """Entropy of the Gaussian: 'mean' over action dimensions (ML-Agents) or 'sum' (the joint
    entropy, the earlier choice for continuous-only behaviors; YAML: gaussian_entropy)."""
    schedule_steps: Literal["collected", "trained"] = "collected"
    """What drives the linear schedules: agent-steps 'collected' (ML-Agents' trainer step, the
    current buffer included; ``PPOHost`` passes every accepted segment's steps) or 'trained'
    before this update (the earlier choice; YAML: schedule_steps)."""
    activation: Literal["swish", "tanh"] = "swish"
    """Hidden-layer activation: 'swish' (ML-Agents) or 'tanh' (the earlier choice; YAML: activation)."""
    weight_init: Literal["mlagents", "orthogonal"] = "mlagents"
    """'mlagents': Kaiming-normal layers, output gains 0.2 (means) / 0.1 (logits), Xavier value
    head, zero biases; 'orthogonal': CleanRL's (gain √2, 0.01 policy, 1 value; the earlier
    choice; YAML: weight_init)."""
    action_clip: Literal["mlagents", "unit"] = "mlagents"
    """What the environment (and the exported model) gets of a continuous sample a:
    'mlagents' clamp(a, −3, 3) / 3; 'unit' clip(a, −1, 1) (the earlier choice; YAML: action_clip)."""
    target_kl: float | None = None
    """Stop the update's epochs early once approx KL exceeds this; None never (YAML: target_kl)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (ML-Agents: 0; YAML: log_std_init)."""
    reward_scale: float = 1.0
    """Multiplier of the environment reward (YAML: reward_signals.extrinsic.strength)."""
    max_steps: int = 500_000
    """Agent-steps of the whole run; the linear schedules reach their floor here (YAML: max_steps)."""

    @property
    def arch(self) -> dict:
        """The choices an acting copy needs (they travel with ``PPOLearner.weights()``)."""
        return {"activation": self.activation, "weight_init": self.weight_init,
                "action_clip": self.action_clip}

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
        check(self.adam_eps > 0, "adam_eps", "> 0")
        for name, allowed in (("adv_norm_scope", ("buffer", "minibatch")),
                              ("minibatch_remainder", ("drop", "spread")),
                              ("policy_ratio", ("per_action", "joint")),
                              ("gaussian_entropy", ("mean", "sum")),
                              ("schedule_steps", ("collected", "trained")),
                              ("activation", ("swish", "tanh")),
                              ("weight_init", ("mlagents", "orthogonal")),
                              ("action_clip", ("mlagents", "unit"))):
            check(getattr(self, name) in allowed, name, " or ".join(repr(a) for a in allowed))
        check(self.target_kl is None or self.target_kl > 0, "target_kl", "> 0 or null")
        check(-20.0 <= self.log_std_init <= 2.0, "log_std_init", "in [-20, 2]")
        check(self.reward_scale > 0, "reward_scale", "> 0")
        check(is_int(self.max_steps) and self.max_steps >= 1, "max_steps", "an int >= 1")


PPO_KEYS: dict[str, str] = {
    "batch_size": "minibatch_size",
    "buffer_size": "buffer_size",
    "learning_rate": "learning_rate",
    "learning_rate_schedule": "lr_schedule",
    "beta": "ent_coef",
    "beta_schedule": "ent_coef_schedule",
    "epsilon": "clip_coef",
    "epsilon_schedule": "clip_coef_schedule",
    "lambd": "gae_lambda",
    "num_epoch": "num_epochs",
    # ours (ML-Agents has fixed values for these; the defaults reproduce them, see PPOConfig)
    "vf_coef": "vf_coef",
    "max_grad_norm": "max_grad_norm",
    "adam_eps": "adam_eps",
    "clip_value_loss": "clip_vloss",
    "normalize_advantage": "norm_adv",
    "advantage_normalization": "adv_norm_scope",
    "minibatch_remainder": "minibatch_remainder",
    "policy_ratio": "policy_ratio",
    "gaussian_entropy": "gaussian_entropy",
    "schedule_steps": "schedule_steps",
    "activation": "activation",
    "weight_init": "weight_init",
    "action_clip": "action_clip",
    "target_kl": "target_kl",
    "log_std_init": "log_std_init",
}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type ppo) -> PPOConfig field."""

OFF_VALUES = {"shared_critic": (False,)}
"""ML-Agents PPO keys not implemented here, accepted with the value that means "off"."""


def fill_defaults(raw: dict) -> dict:
    """ML-Agents: beta and epsilon schedules follow learning_rate_schedule unless given."""
    raw = dict(raw)
    for key in ("beta_schedule", "epsilon_schedule"):
        if key not in raw and "learning_rate_schedule" in raw:
            raw[key] = raw["learning_rate_schedule"]
    return raw


def default_segment_steps(hp: PPOConfig, num_actors: int) -> int:
    """One buffer per round across the actors: buffer_size / num_actors, rounded up."""
    return -(-hp.buffer_size // num_actors)
