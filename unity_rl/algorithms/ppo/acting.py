"""PPO's acting side: ``PPOPolicy`` (the policy copy in an actor) and the actors' picklable
factory ``ppo_policy(obs_shapes, action_spec, seed) -> PPOPolicy``.

An actor unpickling its plan imports only this module and the network (``model.py``), never the
learner, trainer, checkpoints or metrics.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from unity_rl.algorithms.encoders import ObservationLayout, ObsShapesLike
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import seeded_init, set_torch_threads
from unity_rl.algorithms.ppo.model import (DEFAULT_ARCH, LEGACY_ARCH, ActionSpecLike, ActorCritic,
                                           DeterministicActor, check_obs_shapes, env_action_clamp,
                                           load_normalizer)
from unity_rl.runtime.acting import ActingPolicy, AgentKeys, stored_memories


def ppo_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, *,
               network_cfg: NetworkConfig, arch: dict | None = None,
               goal_indices: Sequence[int] = (), shared_critic: bool = False):
    """A ``PPOPolicy`` (weights arrive later with ``load_weights``, which bring their ``arch``)."""
    return PPOPolicy(obs_shapes, action_spec, network_cfg, seed=seed, arch=arch,
                     goal_indices=goal_indices, shared_critic=shared_critic)


class PPOPolicy(ActingPolicy):
    """The acting copy of the policy, fed by ``PPOLearner.weights()``.

    ``act`` takes one flat row per agent that requested a decision; rows are independent, so
    agent order and count may change from call to call.  ``version`` is that of the loaded
    weights (-1 until ``load_weights`` is called).  ``obs_shapes``: the BehaviorSpec's
    observation shapes (an int ``d`` means one vector observation of size ``d``).
    ``num_threads``, when given, sets torch's intra-op threads of the *acting process* (the
    runtime's choice for its actor processes; learners never do this).  ``arch`` (activation,
    weight_init, action_clip) defaults to ML-Agents'; the weights' own ``arch`` and value heads
    replace them on ``load_weights`` (weights without an ``arch``: ``LEGACY_ARCH``, the network
    of the project's earlier versions, kept so that their files still load). ``goal_indices``
    (the GOAL_SIGNAL observations) and ``shared_critic`` shape the network as the learner's;
    weights that record others rebuild it.

    Memory (``network_cfg.memory``): the policy keeps one actor memory [h | c] per agent key
    (``memories``), zeros for an agent it has not seen, replaced by the LSTM's output at each
    ``act``; ``episodes_ended`` drops the memories of agents whose episode ended (terminal or
    interrupted), so their next episode starts from zeros, as ML-Agents' ``remove_memories``
    and Unity's inference do. ``step_extras`` hands the memories each row acted from to the
    trajectories (``StepExtras.memories``). Rows without keys (``agent_keys=None``) start from
    zeros and keep nothing. A re-created policy (a restarted actor) starts every agent from zeros.
    ``act``'s values are NaN: the learner recomputes every value when it prepares an update
    (``PPOLearner.prepare``; with memory the critic's memories live there too), as ML-Agents'
    trainer does in ``_process_trajectory``, so an actor spends no critic pass per decision
    (with a camera the critic's own encoder is half of the acting cost).
    """

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike,
                 network_cfg: NetworkConfig, seed: int | None = None,
                 num_threads: int | None = None, arch: dict | None = None,
                 goal_indices: Sequence[int] = (), shared_critic: bool = False):
        if num_threads is not None:
            set_torch_threads(num_threads)
        self.layout = ObservationLayout(obs_shapes)
        self.obs_shapes = self.layout.obs_shapes
        self.obs_dim = self.layout.obs_dim
        self.action_spec, self.network_cfg = action_spec, network_cfg
        self.seed = 0 if seed is None else seed
        self.structure = {"goal_indices": tuple(int(i) for i in goal_indices),
                          "shared_critic": bool(shared_critic)}
        self._build({**DEFAULT_ARCH, **(arch or {})}, ("extrinsic",))
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.generator = torch.Generator()
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed()))
        self.version = -1
        self.memories: dict = {}
        """Agent key -> the actor memory [memory_size] float32 its next action starts from."""
        self._step_memories: np.ndarray | None = None

    def _build(self, arch: dict, value_heads: Sequence[str]) -> None:
        self.arch = dict(arch)
        env_action_clamp(torch.zeros(1), arch["action_clip"])  # validates
        with seeded_init(self.seed):  # weights arrive later: leave the global RNG be
            self.model = ActorCritic(self.obs_shapes, self.action_spec, self.network_cfg,
                                     activation=arch["activation"], weight_init=arch["weight_init"],
                                     value_heads=value_heads, **self.structure)
        self.model.eval()

    def load_weights(self, weights: dict) -> None:
        """Loads a ``PPOLearner.weights()`` dict (network, normaliser state, version, arch, value
        heads, goal indices, shared critic); the network is rebuilt when its shape differs."""
        check_obs_shapes(self.obs_shapes, weights)
        arch = {**LEGACY_ARCH, **(weights.get("arch") or {})}
        heads = list(weights.get("value_heads") or ("extrinsic",))
        structure = {"goal_indices": tuple(int(i) for i in weights.get("goal_indices", ())),
                     "shared_critic": bool(weights.get("shared_critic", False))}
        if arch != self.arch or heads != self.model.value_head_names or structure != self.structure:
            self.structure = structure
            self._build(arch, heads)
        # publications carry no critic (PPOLearner.weights); every other entry must be there
        missing, unexpected = self.model.load_state_dict(weights["model"], strict=False)
        missing = [k for k in missing if not ActorCritic.is_critic_key(k)]
        if missing or unexpected:
            raise RuntimeError(f"PPO policy weights do not fit the network: missing {missing}, "
                               f"unexpected {unexpected}")
        load_normalizer(self.normalizer, weights["normalizer"])
        self.version = int(weights["version"])

    def _input(self, obs: np.ndarray) -> torch.Tensor:
        obs = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        return torch.from_numpy(self.layout.normalize(self.normalizer, obs))

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False, agent_keys: AgentKeys | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """obs [n, obs_dim] -> (actions, logprobs [n, K] float32, values [n] float32: NaN, the
        learner computes values itself; see the class doc).

        Actions as ``Trajectory.actions``: continuous float32 [n, C] *unclipped* samples (send
        ``env_actions(a)`` to the environment, store ``a``); discrete int64 [n, B]; hybrid float32
        [n, C + B] (C unclipped continuous values, then B branch indices as floats).  Log-probs
        per action dimension / branch: K = C, B or C + B.
        ``action_mask`` is bool [n, sum(branches)], True where allowed.  ``deterministic``
        takes the mode.  ``agent_keys`` (one per row) pick each row's memory (memory policies).
        """
        with torch.no_grad():
            x = self._input(obs)
            masks = None if action_mask is None else torch.from_numpy(np.asarray(action_mask, bool))
            if self.model.memory_size:
                memory = self._memories_of(agent_keys, len(x))
                dist, memory_out = self.model.distribution_and_memory(
                    x, masks, torch.from_numpy(memory))
                self._step_memories = memory
                if agent_keys is not None:
                    for key, row in zip(agent_keys, memory_out.numpy()):
                        self.memories[key] = row
            else:
                dist = self.model.distribution(x, masks)
            values = torch.full((len(x),), float("nan"))
            actions = dist.mode() if deterministic else dist.sample(self.generator)
            logprobs = dist.log_prob(actions)
        return actions.numpy(), logprobs.numpy().astype(np.float32), values.numpy().astype(np.float32)

    def _memories_of(self, agent_keys: AgentKeys | None, n: int) -> np.ndarray:
        """[n, memory_size]: each row's agent memory (zeros for new agents or without keys)."""
        return stored_memories(self.memories, agent_keys, n, self.model.memory_size)

    def step_extras(self) -> dict[str, np.ndarray]:
        """With memory: ``{"memories": [n, memory_size]}``, the memory each row of the last
        ``act`` started from (ML-Agents' stored ``memory``); without: nothing."""
        if not self.model.memory_size or self._step_memories is None:
            return {}
        return {"memories": self._step_memories}

    def episodes_ended(self, agent_keys: AgentKeys) -> None:
        """Forgets these agents' memories: their next episode starts from zeros."""
        for key in agent_keys:
            self.memories.pop(key, None)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """What the environment receives for ``act``'s actions: the continuous columns (the first
        C) clamped by ``action_clip`` (ML-Agents: clamp(a, −3, 3) / 3), branch indices untouched."""
        c = self.model.continuous_size
        if not c:
            return actions
        out = np.array(actions, dtype=np.float32, copy=True)
        out[:, :c] = env_action_clamp(torch.from_numpy(out[:, :c]), self.arch["action_clip"]).numpy()
        return out

    def value(self, obs: np.ndarray) -> np.ndarray:
        """V(s) of the first value head for each row of obs: [n] float32 (with memory: each row
        from a zero critic memory)."""
        with torch.no_grad():
            return self.model.get_value(self._input(obs))[:, 0].numpy().astype(np.float32)

    def export_module(self) -> DeterministicActor:
        """A deterministic torch module observations -> action, normalisation folded in (ONNX)."""
        return DeterministicActor(self.model, self.normalizer, self.arch["action_clip"])
