"""PPO's memory half (``network_settings.memory``; ML-Agents 1.1.0,
``../shared/mlagents_learn/TRAINERS.md`` §1): what ``PPOLearner.prepare`` does differently when
the network has LSTMs.

- each trajectory is split into ``sequence_length`` (L) sequences, the last one padded at the end
  (``algorithms/sequences.py``); padded rows are masked out of the policy, value and entropy terms
  (``losses.masked_mean``), and minibatches are made of whole sequences (``batch_size`` rounded
  down to a multiple of L, at least L; ``PPOLearner.optimise``);
- the actor's sequence k starts from the memory stored with its first step (the rollout-time
  memory the actor had when it took that action, ``StepExtras.memories``; never recomputed);
- the critic's memories are computed sequence by sequence with the current critic
  (``values_by_sequence``): sequence k starts from the memory after sequence k − 1, the first
  from the memory the previous trajectory left. ML-Agents keeps that carry under the key ""
  (its ``_process_trajectory`` passes no agent id, quirk §10.7): one carry for all agents, reset
  after a terminated trajectory only; the learner keeps the same single carry
  (``PPOLearner.critic_memory``, not checkpointed, as ML-Agents'), so its values equal
  ML-Agents' on the same buffer;
- the advantages are normalised over the padded buffer, padded rows counting as 0 (ML-Agents'
  quirk §10.10; it changes the scale of the advantages a little, weight for weight as ML-Agents)
  (``sequence_batch``).

Functions of their arguments: the carry goes in and comes back out; the learner keeps it.
"""
from __future__ import annotations

import numpy as np
import torch

from unity_rl.algorithms.ppo.batch import PPOBatch, behaviour, normalized, stored_memories
from unity_rl.algorithms.ppo.model import ActorCritic
from unity_rl.algorithms.sequences import pad_sequences
from unity_rl.experience import Trajectory


def values_by_sequence(model: ActorCritic, b_obs: torch.Tensor, last_obs: torch.Tensor,
                       trajectories: list[Trajectory], sequence_length: int,
                       carry: torch.Tensor | None):
    """ML-Agents' ``get_trajectory_value_estimates`` with memory, trajectory after trajectory:
    the critic runs ``sequence_length`` steps at a time (the leftover last), each sequence from
    the memory the previous one left, the first from ``carry`` (None: zeros); V(s_T) from the
    memory after the last step. Returns (values [N, K], last values [M, K], the critic memory
    each sequence starts from [sum of ceil(T / L), memory_size], the carry the last trajectory
    leaves: None after a terminated one)."""
    L = sequence_length
    hidden = model.critic_body(b_obs)  # rows are independent before the LSTM
    last_hidden = model.critic_body(last_obs)
    values, last_values, starts = [], [], []
    offset = 0
    for i, traj in enumerate(trajectories):
        memory = carry
        if memory is None:
            memory = b_obs.new_zeros(1, model.critic_memory_size)
        length = len(traj.rewards)
        for begin in range(0, length, L):
            chunk = hidden[offset + begin:offset + min(begin + L, length)]
            starts.append(memory)
            v, memory = model.value_from_body(chunk, memory, len(chunk))
            values.append(v)
        offset += length
        last_values.append(model.value_from_body(last_hidden[i:i + 1], memory, 1)[0])
        carry = None if traj.terminated else memory
    return (torch.cat(values).cpu().numpy(), torch.cat(last_values).cpu().numpy(),
            torch.cat(starts), carry)


def sequence_batch(model: ActorCritic, trajectories: list[Trajectory], b_obs: torch.Tensor,
                   values: np.ndarray, advantages: list[np.ndarray], returns: list[np.ndarray],
                   critic_starts: torch.Tensor, sequence_length: int,
                   device: torch.device) -> PPOBatch:
    """Step 4 of ``PPOLearner.prepare`` with memory: every field padded to whole sequences
    (module doc), the advantages normalised over the padded buffer (ML-Agents), the memories
    each sequence starts from."""
    L = sequence_length

    def tensor(array, dtype):
        return torch.as_tensor(array, dtype=dtype, device=device)

    lengths = [len(t.rewards) for t in trajectories]
    starts = np.cumsum([0] + lengths)
    obs_rows = [b_obs[starts[i]:starts[i + 1]] for i in range(len(trajectories))]
    padded_obs = torch.cat([torch.cat([o, o.new_zeros(
        (-len(o)) % L, o.shape[1])]) for o in obs_rows])
    loss_mask = np.concatenate([pad_sequences(np.ones(n, bool), L, False) for n in lengths])
    b_advantages_np = normalized(np.concatenate([pad_sequences(a, L) for a in advantages]))
    b_returns = np.concatenate([pad_sequences(r, L) for r in returns])
    memories = stored_memories(trajectories, L, model.memory_size)
    b_actions, b_logprobs, b_masks = behaviour(trajectories, model.continuous_size,
                                               model.discrete_branches, device, L)
    return PPOBatch(obs=padded_obs, actions=b_actions, logprobs=b_logprobs, masks=b_masks,
                    values=values,
                    advantages=tensor(b_advantages_np, torch.float32),
                    returns=tensor(b_returns, torch.float32),
                    loss_mask=tensor(loss_mask, torch.bool),
                    memories=tensor(memories, torch.float32),
                    critic_memories=critic_starts.to(device), sequence_length=L)
