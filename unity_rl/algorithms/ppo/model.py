"""PPO's actor-critic network and its deterministic export module.

Contract: ``ActorCritic(obs_shapes, action_spec, network_cfg, value_heads=...)`` takes flat rows
[n, obs_dim] whose vector columns are already normalised (``ObservationLayout.normalize``); each
of actor and critic has its own ``ObservationEncoder`` (images through their visual encoder,
vectors as they are) followed by its own MLP trunk (ML-Agents' default ``shared_critic: false``).
The actor trunk ends in one linear head of C + sum(branches) outputs: the Gaussian means, then the
logits of each discrete branch; its attribute name keeps the state-dict keys of earlier versions:
``actor_mean`` (continuous), ``actor_logits`` (discrete), ``actor_hybrid`` (both). The critic
trunk ends in one value head per reward signal, ``value_heads.<signal>`` (ML-Agents' ``ValueHeads``).
With goal (GOAL_SIGNAL) observations and ``goal_conditioning_type: hyper`` each trunk is ML-Agents'
``ConditionalEncoder``; with ``shared_critic`` the value heads sit on the actor trunk.

Memory (``network_settings.memory``, ML-Agents' ``NetworkBody`` with ``use_lstm``): each trunk
is followed by its own one-layer LSTM (``actor_lstm``, ``critic_lstm``; hidden size
``memory_size // 2``, ML-Agents' ``lstm_layer`` initialisation) and the heads read its output
(``memory_size // 2`` wide). A memory is one row [h | c] of ``memory_size`` per sequence;
a forward pass with memory takes rows [n·L, obs_dim] ordered sequence after sequence
(``sequence_length`` L), the memories [n, memory_size] the n sequences start from (None: zeros),
and returns the memories after each sequence. With ``shared_critic`` the value heads read the
actor's LSTM (one memory, the actor's).

Architecture (``arch``, which travels with the weights): ML-Agents 1.1.0's network, "swish" with
"mlagents" initialisation and the clamp(a, −3, 3) / 3 action map (``torch_entities/layers.py``
``LinearEncoder``: Kaiming-normal layers, Swish; ``distributions.py``: Gaussian means with gain
0.2, branch logits with gain 0.1, zero biases; ``decoders.py`` ``ValueHeads``: Xavier uniform).
Learners always build it (``DEFAULT_ARCH``). The "tanh"/"orthogonal"/"unit" network of the
project's earlier versions is kept only so that weights saved by them (``LEGACY_ARCH`` when no
``arch`` is recorded, or the ``arch`` they record) still load for acting, evaluate and export.

Size (about 420 lines): the network, its LSTM variant and the export module share one state-dict
layout; they change together.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Callable, Protocol

import torch
from torch import nn

from unity_rl.algorithms.distributions import (MASKED_LOGIT, DiagGaussian, HybridDistribution,
                                          MaskedMultiCategorical)
from unity_rl.algorithms.conditioning import ConditionalEncoder, ConditionalMLP
from unity_rl.algorithms.encoders import (FoldedNormalizer, ObservationEncoder, ObsShapesLike, Swish,
                                     concat_inputs)
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import layer_init, lstm_layer, mlagents_init, mlp, run_lstm
from unity_rl.algorithms.normalizer import RunningNormalizer

ACTIVATIONS: dict[str, type[nn.Module]] = {"swish": Swish, "tanh": nn.Tanh}
DEFAULT_ARCH = {"activation": "swish", "weight_init": "mlagents", "action_clip": "mlagents"}
"""ML-Agents' network and action clamp (what a plain ML-Agents config gets)."""
LEGACY_ARCH = {"activation": "tanh", "weight_init": "orthogonal", "action_clip": "unit"}
"""What weights saved before ``arch`` was recorded were trained with."""


def env_action_clamp(actions: torch.Tensor, action_clip: str) -> torch.Tensor:
    """Continuous actions as the environment gets them: ``"mlagents"``: clamp(a, −3, 3) / 3
    (ML-Agents 1.1.0 ``AgentAction.to_action_tuple(clip=True)`` and ``ActionModel.get_action_out``);
    ``"unit"``: clamp(a, −1, 1)."""
    if action_clip == "mlagents":
        return torch.clamp(actions, -3.0, 3.0) / 3.0
    if action_clip == "unit":
        return torch.clamp(actions, -1.0, 1.0)
    raise ValueError(f"action_clip must be 'mlagents' or 'unit', got {action_clip!r}")


class ActionSpecLike(Protocol):
    """What PPO needs of an action spec; mlagents_envs' ``ActionSpec`` fits."""

    continuous_size: int
    discrete_branches: tuple[int, ...]


def action_layout(action_spec: ActionSpecLike) -> tuple[int, tuple[int, ...]]:
    """(continuous size, discrete branches); ValueError when the spec has no action at all."""
    continuous_size = int(action_spec.continuous_size)
    branches = tuple(int(b) for b in (action_spec.discrete_branches or ()))
    if not continuous_size and not branches:
        raise ValueError("the action spec has neither continuous actions nor discrete branches")
    return continuous_size, branches


def critic_trunk(in_dim: int, hidden: int, num_layers: int, activation: type[nn.Module],
                 init: str) -> nn.Sequential:
    """The critic's hidden layers (``mlp`` without its output layer): ML-Agents' ``LinearEncoder``."""
    layers: list[nn.Module] = []
    for i in range(num_layers):
        linear = nn.Linear(in_dim if i == 0 else hidden, hidden)
        layers += [layer_init(linear) if init == "orthogonal" else mlagents_init(linear), activation()]
    return nn.Sequential(*layers)


def value_head(hidden: int, init: str) -> nn.Linear:
    """One value head: ML-Agents' ``ValueHeads`` layer (Xavier uniform, zero bias), or CleanRL's
    orthogonal gain 1 (``weight_init: orthogonal`` weights saved by earlier versions)."""
    linear = nn.Linear(hidden, 1)
    return layer_init(linear, std=1.0) if init == "orthogonal" else mlagents_init(linear, xavier_uniform=True)


def action_heads(in_dim: int, continuous_size: int, branches: Sequence[int]) -> nn.Linear:
    """The actor's output layer: ML-Agents' action heads drawn in its order (the Gaussian mean,
    Kaiming normal times 0.2, then one layer per branch, times 0.1; zero biases) and joined into
    one ``Linear`` whose rows keep that order (means, then each branch's logits)."""
    parts = ([mlagents_init(nn.Linear(in_dim, continuous_size), 0.2)] if continuous_size else []) \
        + [mlagents_init(nn.Linear(in_dim, size), 0.1) for size in branches]
    if len(parts) == 1:
        return parts[0]
    with torch.random.fork_rng(devices=[]):  # the joined layer's own draws leave the RNG be
        joined = nn.Linear(in_dim, sum(p.out_features for p in parts))
    with torch.no_grad():
        joined.weight.copy_(torch.cat([p.weight for p in parts]))
        joined.bias.copy_(torch.cat([p.bias for p in parts]))
    return joined


def actor_hidden(encoder: ObservationEncoder, head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The actor trunk's encoding (its head without the output layer)."""
    encoding, goal = encoder.encode(x)
    return head.hidden(encoding, goal) if goal is not None else head[:-1](encoding)


def actor_forward(encoder: ObservationEncoder, head: nn.Module, lstm: nn.LSTM | None,
                  x: torch.Tensor, memory: torch.Tensor | None = None, sequence_length: int = 1
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(the actor's head outputs, memories after; None without an LSTM): encoder, trunk, LSTM
    (when there is one), output layer."""
    if lstm is None:
        return trunk_output(encoder, head, x), None
    hidden, memory_out = run_lstm(lstm, actor_hidden(encoder, head, x), memory, sequence_length)
    out_layer = head.out if isinstance(head, ConditionalMLP) else head[-1]
    return out_layer(hidden), memory_out


class ActorCritic(nn.Module):
    """Encoders + actor MLP, and a critic trunk with one value head per reward signal.

    ``value_heads``: the reward signals' names in ``reward_signals`` order (ML-Agents'
    ``ValueHeads``: one ``Linear(hidden, 1)`` per stream, named by the signal, in the order of the
    trainer's ``reward_signals``). State dicts of the one-head layout (``critic.<2·layers>``, the
    earlier value layer) load as the ``extrinsic`` head.

    ``goal_indices``: the GOAL_SIGNAL observations. With ``network.goal_conditioning_type``
    'hyper' and at least one, each trunk (actor and critic) is ML-Agents' ``ConditionalEncoder``
    (its last layer a HyperNetwork fed by the goal encoding; ``conditioning.py``): the critic
    trunk ``critic`` is that encoder, the actor module a ``ConditionalMLP`` (``body``, ``out``).
    ``shared_critic`` (ML-Agents' ``SharedActorCritic``): no critic encoder or trunk; the value
    heads read the actor trunk's encoding.

    ``between()``, when given, runs where mlagents-learn's optimizer builds its reward-signal
    networks in the draw order: after the actor (with ``shared_critic``, after its value heads
    too), before the critic (``TorchOptimizer.__init__`` calls ``create_reward_signals`` before
    ``TorchPPOOptimizer`` builds its ``ValueNetwork``).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike,
                 network: NetworkConfig, log_std_init: float = 0.0, activation: str = "swish",
                 weight_init: str = "mlagents", value_heads: Sequence[str] = ("extrinsic",),
                 goal_indices: Sequence[int] = (), shared_critic: bool = False,
                 between: Callable[[], None] | None = None):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not value_heads or len(set(value_heads)) != len(value_heads):
            raise ValueError(f"value_heads must be distinct names, at least one, got {value_heads!r}")
        self.activation, self.weight_init = activation, weight_init
        self.continuous_size, self.discrete_branches = action_layout(action_spec)
        hidden, layers = network.hidden_units, network.num_layers
        self.num_layers = layers
        self.goal_indices = tuple(int(i) for i in goal_indices)
        self.shared_critic = bool(shared_critic)
        goals = network.conditioning_goals(self.goal_indices)
        self.goal_conditioned = bool(goals)
        """True when the trunks are HyperNetwork-conditioned on the goal observations."""
        if self.goal_conditioned and (activation, weight_init) != ("swish", "mlagents"):
            raise ValueError("goal conditioning exists only in ML-Agents' network (swish, mlagents)")
        act = ACTIVATIONS[activation]
        self.memory_size = network.memory_size
        """Size of the memory vector [h | c] of the actor (and of the critic); 0: no LSTM."""
        if self.memory_size and (activation, weight_init) != ("swish", "mlagents"):
            raise ValueError("memory exists only in ML-Agents' network (swish, mlagents)")
        half = self.memory_size // 2
        head_in = half if self.memory_size else hidden  # what the heads read
        # Built in mlagents-learn's draw order, the actor (encoder, body, LSTM, action heads)
        # before the critic (encoder, body, LSTM, value heads), so that a seed draws ML-Agents'
        # initial network (tests/algos/test_mlagents_init.py); registered in this class's own
        # order (critic first), which the state dicts and optimiser states of checkpoints keep.
        actor_encoder = ObservationEncoder(obs_shapes, network, goals)
        if goals:
            actor_body: nn.Module = ConditionalEncoder(actor_encoder.output_size,
                                                       actor_encoder.goal_size, hidden, layers)
        elif weight_init == "mlagents":
            actor_body = critic_trunk(actor_encoder.output_size, hidden, layers, act, weight_init)
        actor_lstm = lstm_layer(hidden, half) if self.memory_size else None
        if goals:
            head: nn.Module = ConditionalMLP(actor_body, action_heads(head_in, self.continuous_size,
                                                                      self.discrete_branches))
        elif weight_init == "mlagents":  # the body, then the output layer (on the LSTM's output)
            head = nn.Sequential(*actor_body, action_heads(head_in, self.continuous_size,
                                                           self.discrete_branches))
        else:  # the earlier versions' network (loading their weights only)
            head = mlp(actor_encoder.output_size, hidden, layers,
                       self.continuous_size + sum(self.discrete_branches), out_std=0.01,
                       activation=act, init=weight_init)
        if between is not None and not self.shared_critic:
            between()
        if not self.shared_critic:
            self.critic_encoder = ObservationEncoder(obs_shapes, network, goals)
            enc = self.critic_encoder.output_size
            self.critic = (ConditionalEncoder(enc, self.critic_encoder.goal_size, hidden, layers)
                           if goals else critic_trunk(enc, hidden, layers, act, weight_init))
            if self.memory_size:
                self.critic_lstm = lstm_layer(hidden, half)
        self.value_heads = nn.ModuleDict({name: value_head(head_in, weight_init)
                                          for name in value_heads})
        if between is not None and self.shared_critic:
            between()
        self.actor_encoder = actor_encoder
        self.head_name = ("actor_logits" if not self.continuous_size else
                          "actor_mean" if not self.discrete_branches else "actor_hybrid")
        self.add_module(self.head_name, head)
        if actor_lstm is not None:
            self.actor_lstm = actor_lstm
        if self.continuous_size:
            self.actor_logstd = nn.Parameter(torch.full((self.continuous_size,), float(log_std_init)))

    CRITIC_MODULES = ("critic_encoder", "critic", "critic_lstm", "value_heads")
    """Submodules only values are computed with (actors never do; ``PPOLearner.weights``)."""

    @classmethod
    def is_critic_key(cls, key: str) -> bool:
        """Whether a state-dict entry belongs to a ``CRITIC_MODULES`` submodule."""
        return key.split(".", 1)[0] in cls.CRITIC_MODULES

    @property
    def actor_head(self) -> nn.Module:
        return getattr(self, self.head_name)

    @property
    def obs_dim(self) -> int:
        return self.actor_encoder.layout.obs_dim

    @property
    def value_head_names(self) -> list[str]:
        return list(self.value_heads)

    @property
    def critic_memory_size(self) -> int:
        """Size of the critic's memory (0: none; with ``shared_critic`` the actor's)."""
        return self.memory_size

    def actor_output(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                     sequence_length: int = 1) -> torch.Tensor:
        """The actor's head outputs [n, C + sum(branches)] (Gaussian means, branch logits)."""
        return self.actor_forward(x, memory, sequence_length)[0]

    def actor_forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                      sequence_length: int = 1) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the actor's head outputs, the actor memories after each sequence; None without memory)."""
        return actor_forward(self.actor_encoder, self.actor_head,
                             getattr(self, "actor_lstm", None), x, memory, sequence_length)

    def get_value(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                  sequence_length: int = 1) -> torch.Tensor:
        """V_k(s) of every value head k: [n, K], columns in ``value_head_names`` order (with
        memory: rows in sequences of ``sequence_length``, each from its critic ``memory``)."""
        return self.value_forward(x, memory, sequence_length)[0]

    def value_forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                      sequence_length: int = 1) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(``get_value``, the critic memories after each sequence; None without memory)."""
        return self.value_from_body(self.critic_body(x), memory, sequence_length)

    def critic_body(self, x: torch.Tensor) -> torch.Tensor:
        """The critic's encoding before its LSTM (with ``shared_critic``: the actor trunk's,
        without the actor's output layer); rows are independent here."""
        if self.shared_critic:
            return actor_hidden(self.actor_encoder, self.actor_head, x)
        return trunk_output(self.critic_encoder, self.critic, x)

    def value_from_body(self, hidden: torch.Tensor, memory: torch.Tensor | None = None,
                        sequence_length: int = 1) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``critic_body``'s encoding through the critic's LSTM (if any) and the value heads."""
        lstm = getattr(self, "actor_lstm" if self.shared_critic else "critic_lstm", None)
        memory_out = None
        if lstm is not None:
            hidden, memory_out = run_lstm(lstm, hidden, memory, sequence_length)
        return torch.cat([head(hidden) for head in self.value_heads.values()], dim=-1), memory_out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As ``nn.Module``'s, reading the one-head layout's value layer as the ``extrinsic`` head."""
        return super().load_state_dict(one_head_to_value_heads(state_dict, self.num_layers),
                                       strict=strict, assign=assign)

    def distribution(self, x: torch.Tensor, action_masks: torch.Tensor | None = None,
                     memory: torch.Tensor | None = None, sequence_length: int = 1):
        """π(·|s) for each row (``action_masks`` bool [n, sum(branches)], True = allowed); the
        Gaussian's entropy is the mean over its dimensions (ML-Agents). With memory: rows in
        sequences of ``sequence_length``, each from its actor ``memory`` (None: zeros)."""
        return self.distribution_and_memory(x, action_masks, memory, sequence_length)[0]

    def distribution_and_memory(self, x: torch.Tensor, action_masks: torch.Tensor | None = None,
                                memory: torch.Tensor | None = None, sequence_length: int = 1):
        """(``distribution``, the actor memories after each sequence; None without memory)."""
        out, memory_out = self.actor_forward(x, memory, sequence_length)
        return self._distribution(out, action_masks), memory_out

    def _distribution(self, out: torch.Tensor, action_masks: torch.Tensor | None):
        c = self.continuous_size
        if not self.discrete_branches:
            return DiagGaussian(out, self.actor_logstd)
        categorical = MaskedMultiCategorical(out[:, c:], self.discrete_branches, action_masks)
        if not c:
            return categorical
        return HybridDistribution(DiagGaussian(out[:, :c], self.actor_logstd),
                                  categorical)


def trunk_output(encoder: ObservationEncoder, trunk: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``trunk(encoder(x))``, the goal encoding passed along to a goal-conditioned trunk."""
    encoding, goal = encoder.encode(x)
    return trunk(encoding) if goal is None else trunk(encoding, goal)


class DeterministicActor(nn.Module):
    """Export module: observations -> deterministic action, normalisation folded in (CPU, eval).

    ``forward(obs_0, .., obs_{k-1}[, action_masks])`` with one tensor per observation (images
    NCHW), or ``forward(flat[, action_masks])`` with flat rows [n, obs_dim]: the inputs are
    flattened and concatenated inside (``concat_inputs``), then the same network as training.
    Returns μ(s) clamped as the environment gets it (``env_action_clamp``: clamp(μ, −3, 3) / 3
    for ML-Agents' ``action_clip``, as its exported model) float32 [n, C] (continuous), the
    most likely allowed action per branch int64 [n, B] (discrete; ``action_masks`` [n,
    sum(branches)], nonzero = allowed, is optional), or the tuple (continuous, discrete) for
    hybrid behaviors.

    With memory (``memory_size`` > 0) the last input is ``recurrent_in`` [n, 1, memory_size]
    (after ``action_masks`` for discrete behaviors, which is then required) and the outputs
    end with ``recurrent_out`` [n, 1, memory_size]: ML-Agents' recurrent ONNX contract.
    """

    def __init__(self, model: ActorCritic, normalizer: RunningNormalizer | None,
                 action_clip: str = "mlagents"):
        super().__init__()
        env_action_clamp(torch.zeros(1), action_clip)  # validates
        self.action_clip = action_clip
        self.continuous_size = model.continuous_size
        self.discrete_branches = model.discrete_branches
        self.obs_dim = model.obs_dim
        self.normalizer = FoldedNormalizer(model.actor_encoder.layout, normalizer)
        self.encoder = copy.deepcopy(model.actor_encoder).cpu()
        self.actor = copy.deepcopy(model.actor_head).cpu()
        self.memory_size = model.memory_size
        """Size of ``recurrent_in`` / ``recurrent_out`` (0: no memory, no such tensors)."""
        self.lstm = copy.deepcopy(model.actor_lstm).cpu() if self.memory_size else None
        self.eval()

    def forward(self, *inputs: torch.Tensor):
        flat, rest = concat_inputs(inputs, self.obs_dim)
        memory = None
        if self.memory_size:
            if not rest:
                raise ValueError("a memory policy needs recurrent_in [n, 1, memory_size]")
            memory, rest = rest[-1].reshape(-1, self.memory_size), rest[:-1]
        out, memory_out = actor_forward(self.encoder, self.actor, self.lstm,
                                        self.normalizer(flat), memory)
        c = self.continuous_size
        continuous = env_action_clamp(out[:, :c], self.action_clip) if c else None
        actions: tuple = (continuous,)
        if self.discrete_branches:
            logits = out[:, c:]
            if rest:
                logits = logits.masked_fill(rest[0] <= 0, MASKED_LOGIT)
            discrete = torch.stack([branch.argmax(-1) for branch in
                                    logits.split(list(self.discrete_branches), -1)], -1)
            actions = (discrete,) if continuous is None else (continuous, discrete)
        if memory_out is not None:
            return (*actions, memory_out.unsqueeze(1))
        return actions[0] if len(actions) == 1 else actions


def one_head_to_value_heads(state_dict: Mapping, num_layers: int) -> Mapping:
    """A state dict of the one-head layout (the value layer was ``critic.<2·num_layers>``) with
    that layer renamed ``value_heads.extrinsic``; any other state dict as it is."""
    old = f"critic.{2 * num_layers}."
    if not any(k.startswith(old) for k in state_dict):
        return state_dict
    return {("value_heads.extrinsic." + k[len(old):] if k.startswith(old) else k): v
            for k, v in state_dict.items()}


def normalizer_state(normalizer: RunningNormalizer | None) -> dict | None:
    """Normaliser state as tensors and floats (loadable with ``torch.load(weights_only=True)``)."""
    if normalizer is None:
        return None
    return {"mean": torch.from_numpy(normalizer.mean.copy()),
            "var": torch.from_numpy(normalizer.var.copy()),
            "count": float(normalizer.count)}


def load_normalizer(normalizer: RunningNormalizer | None, state: dict | None) -> None:
    """Loads ``normalizer_state``'s output; ValueError when normalisation is on for one only."""
    if (normalizer is None) != (state is None):
        raise ValueError("observation normalisation differs between these weights and this network "
                         "(network_settings.normalize)")
    if normalizer is not None:
        normalizer.load_state_dict({
            "mean": state["mean"].numpy() if torch.is_tensor(state["mean"]) else state["mean"],
            "var": state["var"].numpy() if torch.is_tensor(state["var"]) else state["var"],
            "count": float(state["count"])})


def check_obs_shapes(expected, weights: dict) -> None:
    """ValueError when ``weights`` record observation shapes other than ``expected``."""
    got = weights.get("obs_shapes")
    if got is not None and tuple(tuple(int(d) for d in s) for s in got) != tuple(expected):
        raise ValueError(f"these weights are for observation shapes {tuple(got)}, this network "
                         f"was built for {tuple(expected)}")
