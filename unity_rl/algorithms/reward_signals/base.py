"""``RewardSignal``: the contract of a reward provider (ML-Agents' ``BaseRewardProvider``), and
``SignalBatch``, the rows every provider reads.

The seam, for fixed and learned signals alike (extrinsic; curiosity, RND; GAIL builds on it):

- **Rewards.** ``rewards(batch: SignalBatch) -> [n] float32``, *before* ``strength`` (the
  learner multiplies). PPO calls it when it prepares an update, once per trajectory
  (``SignalBatch.from_trajectory``; ML-Agents' ``_process_trajectory`` evaluates each trajectory
  as it arrives, with the weights of the last update: the same weights, since signals only
  change inside updates). SAC re-evaluates it on every sampled replay minibatch
  (``SignalBatch.from_transitions``; ML-Agents' off-policy ``_update_policy``). A signal reads
  raw observations (never the policy's normaliser) and applies its own ``network_settings``.
- **Updates** (learned signals: ``update`` is a method, not None). ``update(batch) -> metrics``
  is one optimiser step on ``batch`` with the signal's own optimiser and ``learning_rate``.
  PPO calls it once per minibatch inside its epochs, right after the PPO step, on the same
  shuffled rows (ML-Agents' ``update_reward_signals(minibatch)`` in ``_update_policy``); SAC
  calls it on minibatches of its own, sampled from the replay, at
  ``reward_signal_steps_per_update`` (ML-Agents' ``_update_reward_signals``). The metrics are
  ML-Agents' TensorBoard tags (``Losses/Curiosity Forward Loss``, ``Losses/RND Loss``...); the
  learner reports their mean over the update's calls.
- **Episode statistics.** The learner reports ``Policy/<Name> Reward`` (``name.capitalize()``,
  ML-Agents' ``Policy/Curiosity Reward``, ``Policy/Rnd Reward``) and ``Policy/<Name> Value
  Estimate`` for every signal; nothing is needed from the provider for them.
- **State.** ``state_dict()`` / ``load_state_dict()``: networks, optimiser, counters (tensors
  and plain values only); the learner checkpoints them under ``reward_signals.<name>``, so a
  resumed run continues the signal where it was.
- **Placement.** Providers are built by the learner (``registry.make_reward_signals``) on its
  device and live where it lives: sync or async, local or Ray, they never travel to actors.
- ``ignore_done``: ML-Agents' flag; True (curiosity, RND) bootstraps this signal's value even
  after a real episode end, in PPO's GAE and in SAC's backup.

Learned signals with a torch network derive from ``learned.LearnedRewardSignal``, which holds
the network, the Adam and the state handling.
"""
from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from unity_rl.algorithms.reward_signals.config import RewardSignalConfig


class SignalBatch(NamedTuple):
    """n steps as a reward signal reads them (ML-Agents' ``AgentBuffer`` keys)."""

    obs: np.ndarray
    """[n, obs_dim] float32: raw (not normalised) flat observation rows."""
    continuous_actions: np.ndarray
    """[n, C] float32: the continuous actions as stored (PPO: the unclamped sample, ML-Agents'
    ``CONTINUOUS_ACTION``); [n, 0] without a continuous part."""
    discrete_actions: np.ndarray
    """[n, B] int64: one index per branch; [n, 0] without branches."""
    next_obs: np.ndarray
    """[n, obs_dim] float32: the observation after the step (the next decision's, or the final
    one at an episode end; ML-Agents' ``next_obs``)."""
    done: np.ndarray
    """[n] float32: 1 where the episode ended after the step (ML-Agents' ``DONE``: terminated or,
    from PPO trajectories, interrupted; SAC's replay keeps real ends only)."""
    env_rewards: np.ndarray
    """[n] float32: the environment's reward after the step."""
    mask: np.ndarray
    """[n] float32: 1 on real steps, 0 on rows padding memory sequences (ML-Agents' ``MASKS``)."""

    @property
    def size(self) -> int:
        """Rows in the batch."""
        return int(self.obs.shape[0])

    def rows(self, index: np.ndarray | slice) -> "SignalBatch":
        """The rows ``index`` (a minibatch), every field alike."""
        return SignalBatch(*(np.asarray(field)[index] for field in self))

    @staticmethod
    def concatenate(batches: "list[SignalBatch]") -> "SignalBatch":
        return SignalBatch(*(np.concatenate(fields) for fields in zip(*batches)))

    @staticmethod
    def from_trajectory(trajectory: Any, continuous_size: int,
                        observations: bool = True) -> "SignalBatch":
        """One agent's trajectory (``unity_rl.experience.Trajectory``) as signal rows: next_obs
        is the following step's observation, ``last_obs`` after the last step. Without
        ``observations`` (no signal reads them) obs and next_obs have no columns."""
        n = len(trajectory.rewards)
        if observations:
            obs = np.asarray(trajectory.obs, np.float32).reshape(n, -1)
            next_obs = np.concatenate([obs[1:], np.asarray(trajectory.last_obs, np.float32)
                                       .reshape(1, -1)])
        else:
            obs = next_obs = np.zeros((n, 0), np.float32)
        done = np.zeros(n, np.float32)
        done[-1] = float(bool(trajectory.terminated) or bool(trajectory.interrupted))
        cont, disc = split_actions(trajectory.actions, n, continuous_size)
        return SignalBatch(obs, cont, disc, next_obs, done,
                           np.asarray(trajectory.rewards, np.float32), np.ones(n, np.float32))

    @staticmethod
    def from_transitions(batch: Any, continuous_size: int) -> "SignalBatch":
        """A replay minibatch (``unity_rl.experience.TransitionBatch``) as signal rows."""
        obs = np.asarray(batch.obs, np.float32)
        n = len(obs)
        cont, disc = split_actions(batch.actions, n, continuous_size)
        return SignalBatch(obs, cont, disc, np.asarray(batch.next_obs, np.float32),
                           np.asarray(batch.terminated, np.float32).reshape(n),
                           np.asarray(batch.rewards, np.float32).reshape(n), np.ones(n, np.float32))


def split_actions(actions: Any, n: int, continuous_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The action row convention (``Trajectory.actions``: C continuous values, then the branch
    indices) -> (continuous [n, C] float32, discrete [n, B] int64)."""
    rows = np.asarray(actions).reshape(n, -1)
    cont = rows[:, :continuous_size].astype(np.float32)
    disc = np.rint(rows[:, continuous_size:]).astype(np.int64)
    return cont, disc


class RewardSignal:
    """One reward signal of one behavior. Subclasses implement ``rewards``; learned ones also
    ``update``, ``state_dict`` and ``load_state_dict`` (module doc)."""

    reads_observations: ClassVar[bool] = True
    """False: ``rewards`` reads only the environment's rewards, so the learner may hand it rows
    without observations (``SignalBatch.from_trajectory(..., observations=False)``)."""
    ignore_done: ClassVar[bool] = False
    """ML-Agents' ``ignore_done``: True bootstraps this signal's value even after a real episode
    end (curiosity, RND); False (extrinsic, GAIL) counts V after a real end as 0."""
    update = None
    """``update(batch: SignalBatch) -> metrics``: one optimiser step, defined by learned signals
    only (None: nothing to train)."""

    def __init__(self, config: RewardSignalConfig, obs_shapes: Any = None, action_spec: Any = None,
                 device: str = "cpu"):
        self.config = config
        """The signal's settings (name, gamma, strength, network_settings, its own keys)."""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def gamma(self) -> float:
        return self.config.gamma

    @property
    def strength(self) -> float:
        return self.config.strength

    def rewards(self, batch: SignalBatch) -> np.ndarray:
        """r_t of each row of ``batch``: [n] float32, *before* ``strength``."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this signal (tensors and plain values only)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output."""


def reads_observations(signals: "list[RewardSignal]") -> bool:
    """Whether any of ``signals`` reads observations (else signal rows can go without them)."""
    return any(signal.reads_observations for signal in signals)


def update_learned_signals(signals: "list[RewardSignal]", rows: SignalBatch,
                           stats: dict[str, list[float]]) -> None:
    """ML-Agents' ``update_reward_signals(minibatch)``: one step of each learned signal's own
    optimiser on these rows (a minibatch, right after the learner's own step), each metric
    appended to ``stats[tag]`` (the learner reports their mean)."""
    for signal in signals:
        if signal.update is not None:
            for tag, value in signal.update(rows).items():
                stats.setdefault(tag, []).append(float(value))


def episode_reward_metrics(signals: "list[RewardSignal]", reward_sums: Any, steps: int,
                           trajectories: Any, episode_length: float | None) -> dict[str, float]:
    """``Policy/<Signal> Reward``: each signal's strength-scaled reward per episode (ML-Agents
    sums each agent's episode and reports the sum at its end). Estimated as the buffer's mean
    reward per step (``reward_sums[k] / steps``) times ``episode_length`` (the mean length of the
    episodes that ended meanwhile; None: the buffer's steps per episode end). Absent when no
    episode ended (``episode_length`` 0)."""
    if episode_length is None:
        ends = sum(bool(t.terminated) or bool(t.interrupted) for t in trajectories)
        episode_length = steps / ends if ends else None
    if not episode_length:
        return {}
    return {f"Policy/{signal.name.capitalize()} Reward":
            float(reward_sums[k] / steps * episode_length) for k, signal in enumerate(signals)}
