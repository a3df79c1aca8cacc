"""SAC's acting policy in actors: samples of the tanh-squashed Gaussian and the masked branch
categoricals from shipped weights, over the generic off-policy acting side
(``offpolicy.acting.OffPolicyActingPolicy``: transitions, shared-replay writes).

No random warm-up: during ``buffer_init_steps`` the policy itself acts, as in ML-Agents
(``SACConfig.RANDOM_WARMUP`` is False). The builds get the squashed samples in (−1, 1) unclipped
(ML-Agents' ``clip_action = not tanh_squash``). Action rows follow ``Trajectory.actions``:
continuous [n, C] float32, discrete [n, B] int64, hybrid [n, C + B] float32.

Memory (``network_cfg.memory``): one actor memory [h | c] per agent key, zeros for an agent not
seen yet, replaced by the LSTM's output at every ``act``, dropped when the agent's episode ends
(terminal or interrupted: ML-Agents' ``remove_memories``); ``step_extras`` stores the memory each
row acted from with its step. ``prepare_trajectories`` adds each trajectory's critic memories,
computed as ML-Agents' ``_evaluate_by_sequence`` with the critic V shipped with the weights:
sequence by sequence, the first from the memory the previous trajectory left (ML-Agents keeps that
carry under one key for all agents; here one per actor), reset after a trajectory whose episode
ended. A re-created actor starts every agent (and the carry) from zeros.

Imported inside every actor process: numpy, torch, the SAC networks, never the learner.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from unity_rl.algorithms.encoders import ObservationLayout
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import run_lstm, seeded_init
from unity_rl.algorithms.offpolicy.acting import OffPolicyActingPolicy
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.body import Body
from unity_rl.algorithms.sac.nets import SACActor
from unity_rl.experience import Trajectory
from unity_rl.runtime.acting import AgentKeys, stored_memories


class SACActingPolicy(OffPolicyActingPolicy):
    """π's copy in an actor (loads ``SACLearner.weights()``)."""

    def __init__(self, obs_shapes: Any, action_spec: Any, seed: int, *, network_cfg: NetworkConfig,
                 sac_cfg: SACConfig, goal_indices: Sequence[int] = ()):
        super().__init__(sac_cfg)
        self.layout = ObservationLayout(obs_shapes)
        self.continuous_size = int(getattr(action_spec, "continuous_size", 0))
        self.discrete_branches = tuple(int(b) for b in (getattr(action_spec, "discrete_branches", ())
                                                        or ()))
        self.mask_size = sum(self.discrete_branches)
        self.goal_indices = tuple(int(i) for i in goal_indices)
        self.memory_size = network_cfg.memory_size
        self.sequence_length = network_cfg.sequence_length
        with seeded_init(seed):  # weights arrive later
            self.actor = SACActor(self.layout.obs_shapes, self.continuous_size,
                                  self.discrete_branches, network_cfg,
                                  goal_indices=self.goal_indices).eval()
            # V's body (encoder, layers, LSTM): the critic memories of the trajectories
            self.critic_body = (Body(self.layout.obs_shapes, network_cfg, 0, self.goal_indices).eval()
                                if self.memory_size else None)
        self.memories: dict = {}
        """Agent key -> the actor memory [memory_size] float32 its next action starts from."""
        self._step_memories: np.ndarray | None = None
        self.critic_memory: torch.Tensor | None = None
        """The critic memory the last trajectory left ([1, memory_size]; None: zeros)."""
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.rng = np.random.default_rng(seed)
        self.version = -1

    def load_policy_weights(self, weights: dict) -> None:
        goals = tuple(int(i) for i in weights.get("goal_indices", ()))
        if goals != self.goal_indices:
            raise ValueError(f"these weights are for goal observations {goals}, this policy was "
                             f"built for {self.goal_indices}")
        self.actor.load_state_dict(weights["policy"])
        if self.critic_body is not None:
            if weights.get("critic") is None:
                raise ValueError("a memory policy's weights need the critic (its memories)")
            self.critic_body.load_state_dict({k[len("body."):]: v for k, v in weights["critic"].items()
                                              if k.startswith("body.")})
        if self.normalizer is not None:
            self.normalizer.load_state_dict(weights["normalizer"])
        self.version = int(weights["version"])

    @torch.no_grad()
    def policy_actions(self, obs: np.ndarray, deterministic: bool, agent_keys: AgentKeys | None,
                       action_mask: np.ndarray | None = None) -> np.ndarray:
        x = torch.as_tensor(self.layout.normalize(self.normalizer, obs))
        masks = None if action_mask is None else torch.as_tensor(np.asarray(action_mask, bool))
        memory = None
        if self.memory_size:
            memory = self._memories_of(agent_keys, len(x))
            self._step_memories = memory
            memory = torch.from_numpy(memory)
        gaussian, categorical, memory_out = self.actor.run(x, masks, memory)
        if memory_out is not None and agent_keys is not None:
            for key, row in zip(agent_keys, memory_out.numpy()):
                self.memories[key] = row
        parts = []
        if gaussian is not None:
            continuous = (torch.tanh(gaussian.mean) if deterministic
                          else gaussian.rsample(self.generator)[0])
            parts.append(continuous.numpy().astype(np.float32))
        if categorical is not None:
            discrete = categorical.mode() if deterministic else categorical.sample(self.generator)
            parts.append(discrete.numpy().astype(np.int64))
        return self._join(parts)

    # -- memory ------------------------------------------------------------------------------
    def _memories_of(self, agent_keys: AgentKeys | None, n: int) -> np.ndarray:
        """[n, memory_size]: each row's agent memory (zeros for new agents or without keys)."""
        return stored_memories(self.memories, agent_keys, n, self.memory_size)

    def step_extras(self) -> dict[str, np.ndarray]:
        """With memory: ``{"memories": [n, memory_size]}``, the memory each row of the last
        ``act`` started from (ML-Agents' stored ``memory``); without: nothing."""
        if not self.memory_size or self._step_memories is None:
            return {}
        return {"memories": self._step_memories}

    def episodes_ended(self, agent_keys: AgentKeys) -> None:
        """Forgets these agents' memories: their next episode starts from zeros."""
        for key in agent_keys:
            self.memories.pop(key, None)

    @torch.no_grad()
    def prepare_trajectories(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        """With memory: every trajectory with ``extras.critic_memories`` (module doc)."""
        if not self.memory_size:
            return trajectories
        return [t._replace(extras=t.extras._replace(critic_memories=self._critic_memories(t)))
                for t in trajectories]

    def _critic_memories(self, t: Trajectory) -> np.ndarray:
        """[T, memory_size]: the critic memory each step's sequence starts from (ML-Agents'
        ``_evaluate_by_sequence``: whole sequences of L, then the leftover)."""
        L, body = self.sequence_length, self.critic_body
        x = torch.as_tensor(self.layout.normalize(self.normalizer, np.asarray(t.obs, np.float32)))
        encoding, goal = body.encoder.encode(x)
        hidden = body.layers(encoding, goal) if body.conditioned else body.layers(encoding)
        memory = self.critic_memory
        if memory is None:
            memory = hidden.new_zeros(1, self.memory_size)
        out = np.empty((len(x), self.memory_size), np.float32)
        for start in range(0, len(x), L):
            chunk = hidden[start:start + L]
            out[start:start + len(chunk)] = memory.numpy()
            memory = run_lstm(body.lstm, chunk, memory, len(chunk))[1]
        ended = bool(t.terminated or getattr(t, "interrupted", False))
        self.critic_memory = None if ended else memory
        return out

    def random_actions(self, n: int) -> np.ndarray:
        parts = []
        if self.continuous_size:
            parts.append(self.rng.uniform(-1.0, 1.0, (n, self.continuous_size)).astype(np.float32))
        if self.discrete_branches:
            parts.append(np.stack([self.rng.integers(0, b, n) for b in self.discrete_branches],
                                  axis=1).astype(np.int64))
        return self._join(parts)

    @staticmethod
    def _join(parts: list[np.ndarray]) -> np.ndarray:
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([parts[0], parts[1].astype(np.float32)], axis=1)


def sac_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, **options):
    """The actors' picklable factory: a ``SACActingPolicy`` (options: network_cfg, sac_cfg,
    goal_indices)."""
    return SACActingPolicy(obs_shapes, action_spec, seed, **options)
