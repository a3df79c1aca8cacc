"""The acting side of off-policy training: transitions, warm-up, initial priorities, Ape-X writes.

Kept light (numpy, the experience types, ``unity_rl.replay``; never torch or a learner) because
it is imported inside every actor process when the actor unpickles its policy factory.

Experience: the actor keeps its ``TrajectoryCollector`` (one per-agent bookkeeping for every
algorithm); ``trajectories_to_transitions`` turns its trajectories into one-step transitions:

    row t of a trajectory:  (obs[t], actions[t], rewards[t], next_obs, terminated)
    next_obs   = obs[t + 1], or ``last_obs`` on the last row
    terminated = 1 only on the last row of a trajectory whose episode really ended

so the three kinds of cut come out right without a second collector: an episode end
(``terminated=True``: no bootstrap), Unity's truncation (``interrupted``: ``last_obs`` is the
final observation, bootstrap from it) and a time-horizon or segment cut (``last_obs`` is the next
decision's observation, bootstrap from it).

Memory policies (``sequence_length`` L > 1): each trajectory's rows are padded at the end to
whole sequences of L (mlagents-learn 1.1.0's ``resequence_and_append``: padding is zeros, the
action masks repeat the last real row's), with the actor and critic memories of every step
(``StepExtras.memories``, ``critic_memories``) and ``loss_mask`` 0 on the padding; the replay
keeps them in whole sequences (``unity_rl.replay.sequences``). A type fills the critic memories
in ``prepare_trajectories`` (SAC: sequence by sequence with the critic shipped with the weights).

``OffPolicyActingPolicy`` is the ``ActingPolicy`` of every off-policy trainer type; a type
supplies only how it acts (``policy_actions``, ``random_actions``), what its weights are
(``load_policy_weights``) and, for prioritised replay, ``td_errors``. The base does the rest:

- **warm-up**: uniform random actions while the run's estimated agent-steps are below
  ``warmup_steps`` — the count published with the weights plus K times this actor's own steps
  since (every actor sees the end of warm-up at about the same time; a resumed run does not
  warm up again);
- **initial priorities** (``prioritized: true``): |TD error| of each new transition under the
  critic shipped with the weights, computed by the actor (Ape-X) rather than the learner;
- **shared replay** (the weights carry a replay handle: async wiring, local backend): the
  transitions are written straight into the ``SharedReplayBuffer`` and the segment goes to the
  learner without its trajectories, as a receipt (steps, episode returns, policy version);
- otherwise (sync wiring, or Ray, where shared memory does not span nodes) the trajectories
  travel to the learner, the priorities in ``Trajectory.extras.priorities``.

Weights arrive as ``OffPolicyHost.weights()``: ``{"policy": learner.weights(...),
"agent_steps": collected steps of the run when published, "num_actors": K, "replay": handle or
None}``.
"""
from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from unity_rl.algorithms.offpolicy.config import ReplayConfig
from unity_rl.algorithms.sequences import padded_length
from unity_rl.experience import Segment, Trajectory, TransitionBatch
from unity_rl.replay import SharedReplayBuffer
from unity_rl.runtime.acting import ActingPolicy, AgentKeys


# ----------------------------------------------------------------------------------------------
# Trajectories -> transitions
# ----------------------------------------------------------------------------------------------

def trajectories_to_transitions(trajectories: Sequence[Trajectory], mask_size: int = 0,
                                interrupted_next_obs: str = "final", sequence_length: int = 1,
                                memory_size: int = 0) -> TransitionBatch:
    """One transition per trajectory row (see the module doc for next_obs and terminated).

    ``mask_size`` > 0 (discrete branches): the rows carry the action masks (all-allowed where a
    trajectory has none). ``interrupted_next_obs='own'``: the last row of an interrupted
    trajectory gets its own observation as next_obs (ML-Agents' SAC); 'final': Unity's final one.
    ``memory_size`` > 0: every trajectory padded to whole ``sequence_length`` sequences, with
    memories, critic memories and the loss mask (module doc).
    """
    if not trajectories:
        raise ValueError("no trajectories to convert")
    if memory_size:
        return _concat([_sequence_rows(t, mask_size, interrupted_next_obs, sequence_length,
                                       memory_size) for t in trajectories])
    obs = np.concatenate([t.obs for t in trajectories]).astype(np.float32, copy=False)
    next_obs = np.concatenate([np.concatenate([t.obs[1:], _bootstrap_obs(t, interrupted_next_obs)])
                               for t in trajectories]).astype(np.float32, copy=False)
    terminated = np.concatenate([_terminated_column(t) for t in trajectories])
    actions = np.concatenate([np.asarray(t.actions, np.float32).reshape(len(t.rewards), -1)
                              for t in trajectories])
    rewards = np.concatenate([t.rewards for t in trajectories]).astype(np.float32, copy=False)
    masks = None
    if mask_size:
        masks = np.concatenate([np.ones((len(t.rewards), mask_size), np.uint8)
                                if t.action_masks is None else np.asarray(t.action_masks, np.uint8)
                                for t in trajectories])
    return TransitionBatch(obs, actions, rewards, next_obs, terminated, masks)


def _sequence_rows(t: Trajectory, mask_size: int, interrupted_next_obs: str, L: int,
                   memory_size: int) -> TransitionBatch:
    """One trajectory's transitions padded at the end to whole sequences of ``L``."""
    rows = trajectories_to_transitions([t], mask_size, interrupted_next_obs)
    n = len(rows.rewards)
    extras = t.extras
    for name in ("memories", "critic_memories"):
        column = getattr(extras, name)
        if column is None or np.shape(column) != (n, memory_size):
            raise ValueError(f"a memory policy's trajectory needs {name} [{n}, {memory_size}], "
                             f"got {None if column is None else np.shape(column)}")
    rows = rows._replace(memories=np.asarray(extras.memories, np.float32),
                         critic_memories=np.asarray(extras.critic_memories, np.float32),
                         loss_mask=np.ones(n, np.uint8))
    pad = padded_length(n, L) - n
    if not pad:
        return rows
    padded = {}
    for name, value in rows._asdict().items():
        if value is None:
            padded[name] = None
            continue
        # ML-Agents pads with last_element · padding_value: 0 for every field, 1 for masks
        fill = value[-1:] if name == "action_masks" else np.zeros_like(value[-1:])
        padded[name] = np.concatenate([value, np.repeat(fill, pad, axis=0)])
    return TransitionBatch(**padded)


def _concat(batches: list[TransitionBatch]) -> TransitionBatch:
    return TransitionBatch(**{name: None if getattr(batches[0], name) is None else
                              np.concatenate([getattr(b, name) for b in batches])
                              for name in TransitionBatch._fields})


def _bootstrap_obs(t: Trajectory, interrupted_next_obs: str) -> np.ndarray:
    if interrupted_next_obs == "own" and getattr(t, "interrupted", False):
        return t.obs[-1:]
    return t.last_obs[None]


def _terminated_column(t: Trajectory) -> np.ndarray:
    column = np.zeros(len(t.rewards), np.float32)
    column[-1] = float(t.terminated)
    return column


def carried_priorities(trajectories: Sequence[Trajectory]) -> np.ndarray | None:
    """The actors' initial priorities (``extras.priorities``) of every row, in transition order;
    None unless every trajectory carries them."""
    columns = [t.extras.priorities for t in trajectories]
    if not columns or any(c is None for c in columns):
        return None
    return np.concatenate([np.asarray(c, np.float64) for c in columns])


def with_priorities(trajectories: Sequence[Trajectory],
                    priorities: np.ndarray) -> list[Trajectory]:
    """The trajectories with ``priorities`` (one per row, in transition order) in their extras."""
    out, start = [], 0
    for t in trajectories:
        end = start + len(t.rewards)
        extras = t.extras._replace(priorities=priorities[start:end].astype(np.float32))
        out.append(t._replace(extras=extras))
        start = end
    return out


# ----------------------------------------------------------------------------------------------
# The acting policy
# ----------------------------------------------------------------------------------------------

class OffPolicyActingPolicy(ActingPolicy):
    """Warm-up, actor-side priorities and shared-replay writes over a type's own acting policy."""

    def __init__(self, cfg: ReplayConfig):
        self.cfg = cfg
        self.replay: SharedReplayBuffer | None = None
        """The learner's shared buffer, attached on the first weights that name it (Ape-X)."""
        self.published_steps = 0
        self.num_actors = 1
        self.acted = 0
        """Rows acted on since the last weights."""
        self.mask_size = 0
        """Action-mask columns the transitions carry (a type with discrete branches sets it)."""
        self.memory_size = 0
        """Columns of a memory policy's memories (a type with memory sets it; 0: none)."""
        self.sequence_length = 1
        """Rows per memory sequence (1 without memory)."""

    # -- what a trainer type supplies ----------------------------------------------------------
    @abc.abstractmethod
    def load_policy_weights(self, weights: dict) -> None:
        """Loads the learner's ``weights(include_critic)``; sets ``version``."""

    @abc.abstractmethod
    def policy_actions(self, obs: np.ndarray, deterministic: bool,
                       agent_keys: AgentKeys | None,
                       action_mask: np.ndarray | None = None) -> np.ndarray:
        """[n, act_dim] actions of the loaded policy: exploring (per-agent state by key), or
        the deterministic policy; ``action_mask`` bool [n, sum(branches)] for discrete parts."""

    @abc.abstractmethod
    def random_actions(self, n: int) -> np.ndarray:
        """[n, act_dim] uniform random actions in the bounds (warm-up)."""

    def prepare_trajectories(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        """The segment's trajectories with what the learner needs beyond the collected fields
        (a memory policy: ``extras.critic_memories``); default: as they are."""
        return trajectories

    def td_errors(self, batch: TransitionBatch) -> np.ndarray | None:
        """[n] |TD error| under the shipped critic (initial priorities); None when the loaded
        weights hold no critic."""
        return None

    # -- ActingPolicy ----------------------------------------------------------------------------
    def load_weights(self, weights: dict) -> None:
        self.load_policy_weights(weights["policy"])
        self.published_steps = int(weights["agent_steps"])
        self.num_actors = max(1, int(weights["num_actors"]))
        self.acted = 0
        handle = weights.get("replay")
        if handle is not None and self.replay is None:  # the learner's shared buffer (Ape-X)
            self.replay = SharedReplayBuffer.attach(handle)

    def run_steps(self) -> int:
        """This actor's estimate of the run's collected agent-steps (for warm-up)."""
        return self.published_steps + self.num_actors * self.acted

    def is_warming_up(self) -> bool:
        """Random actions now: a type with ``RANDOM_WARMUP`` before ``warmup_steps``."""
        return self.cfg.RANDOM_WARMUP and self.run_steps() < self.cfg.warmup_steps

    def act(self, obs: np.ndarray, action_mask: np.ndarray | None = None,
            deterministic: bool = False, agent_keys: AgentKeys | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions [n, act_dim], logprobs 0, values NaN): behaviour actions (uniform random
        during warm-up), or the deterministic policy's."""
        n = len(obs)
        if deterministic:
            actions = self.policy_actions(obs, True, agent_keys, action_mask)
        elif self.is_warming_up():
            actions = self.random_actions(n)
        else:
            actions = self.policy_actions(obs, False, agent_keys, action_mask)
        self.acted += n
        return actions, np.zeros(n, np.float32), np.full(n, np.nan, np.float32)

    def finish_segment(self, segment: Segment) -> Segment:
        """Initial priorities, shared-replay writes (module doc); returns what to send."""
        if not segment.trajectories:
            return segment
        segment = segment._replace(trajectories=self.prepare_trajectories(segment.trajectories))
        prioritized = self.cfg.prioritized
        if self.replay is None and not prioritized:
            return segment
        batch = trajectories_to_transitions(segment.trajectories, self.mask_size,
                                            self.cfg.interrupted_next_obs, self.sequence_length,
                                            self.memory_size)
        priorities = self.td_errors(batch) if prioritized else None
        if self.replay is not None:
            self.replay.add(batch, priorities)
            return segment._replace(trajectories=[])
        if priorities is None:
            return segment
        return segment._replace(trajectories=with_priorities(segment.trajectories, priorities))

    def close(self) -> None:
        if self.replay is not None:
            self.replay.close()
            self.replay = None
