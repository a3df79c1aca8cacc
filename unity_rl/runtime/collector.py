"""From a stream of ``StepResult``s to per-agent ``Trajectory``s (the actor's bookkeeping).

Contract (what ``AgentStream`` guarantees, see ``unity_rl.envs.agent_stream``): rows are keyed by
``AgentKey``; nothing is assumed about order, count or timing of agents.  An agent can be in
``terminals`` and ``decisions`` of the same result (its episode ended, the next began), a result
may hold only terminals, agents may appear late or vanish.

Reward attribution (ML-Agents' convention):
- a decision row's reward is what the agent gathered since its previous decision: it belongs to
  the agent's previous action (the *pending* transition);
- a terminal row's reward belongs to the agent's last action, which then ends the episode;
- the first decision of a new episode has no previous action in that episode: its reward is
  dropped (Unity reports 0 there anyway).

Cuts and bootstrapping (docs/ppo.md; Pardo et al. 2018 "Time Limits in RL"):
- a terminal row with ``interrupted=False`` ends the trajectory with ``terminated=True``
  (no bootstrap);
- a terminal row with ``interrupted=True`` (Unity's max step, or a restarted build) ends it with
  ``terminated=False``: the learner bootstraps from V(final observation);
- ``time_horizon`` completed steps cut the trajectory at the next observation (bootstrap);
- ``take()`` hands over the trajectories finished so far and leaves open ones to grow
  (ML-Agents: a trajectory is cut only at ``time_horizon`` or an episode end, and one still open
  at an update goes into the next buffer); ``flush()`` also cuts every open trajectory at its
  latest observation (bootstrap), so that a segment holds every completed transition (the
  ``unity_rl.trajectory_cuts: segment`` choice). Either way an action still waiting for its
  reward stays in the collector and opens the agent's next trajectory.

Groups (``groups=True``; ``BehaviorPlan.collect_groups``): every completed step also gets its
groupmates' data (``unity_rl.runtime.groups``: ML-Agents' group statuses, in its order), its
group reward, and every cut the other members' latest observations and whether one of them
was still in its episode (``Trajectory.next_group_obs``, ``group_continues``); an agent whose
episode ends together with its group's reports its group return (``pop_group_returns``).

Group rewards without group collection (PPO, SAC, DDPG): a step's reward is the agent's own
reward plus its group reward, as ML-Agents' ``ExtrinsicRewardProvider`` adds ``GROUP_REWARD``
for every trainer; the first nonzero group reward logs ML-Agents' warning once per collector
(``_warn_if_group_reward``: use POCA). Episode returns count the agent's own reward only
(ML-Agents' ``Environment/Cumulative Reward``).

Observations are flat float32 vectors: the concatenation of the behavior's observations, each
flattened (``flat_obs``); a PNG-compressed camera image, which the adapter hands over as uint8,
is scaled back to [0, 1] (the values mlagents-envs decodes and Unity's inference feeds), every
other observation keeps its values.  Costs are per agent-step O(1) list appends; arrays are stacked once
per trajectory.
"""
from __future__ import annotations

import logging
from typing import Hashable, Sequence

import numpy as np

from unity_rl.envs.batches import group_ids, group_rewards
from unity_rl.experience import StepExtras, Trajectory
from unity_rl.runtime.groups import GroupTracker, MatesRow, stack_mates

logger = logging.getLogger(__name__)


def flat_obs(obs: Sequence[np.ndarray]) -> np.ndarray:
    """[n, obs_dim] float32: the behavior's observations, each flattened, side by side."""
    if len(obs) == 1 and obs[0].ndim == 2 and obs[0].dtype != np.uint8:
        return np.asarray(obs[0], dtype=np.float32)
    n = obs[0].shape[0]
    return np.concatenate([_as_float(o).reshape(n, -1) for o in obs], axis=1)


def _as_float(o: np.ndarray) -> np.ndarray:
    if o.dtype == np.uint8:  # a PNG image from the adapter: back to [0, 1]
        return o.astype(np.float32) * np.float32(1.0 / 255.0)
    return np.asarray(o, np.float32)


class _AgentTrack:
    """One agent's open trajectory and episode counters."""

    __slots__ = ("obs", "actions", "logprobs", "values", "rewards", "masks", "extras",
                 "latest_obs", "episode_return", "episode_length", "key", "group", "mates",
                 "group_rewards", "group_return", "last_dones")

    def __init__(self, key: Hashable = None) -> None:
        self.key = key
        self.group: Hashable | None = None
        """(build, group_id) of the agent's latest row; None: no group."""
        self.mates: list[MatesRow] = []
        """Groupmates of each completed step (collectors with groups)."""
        self.group_rewards: list[float] = []
        self.group_return = 0.0
        self.last_dones: list[bool] = []
        """Groupmates' dones at the latest completed step."""
        self.obs: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.logprobs: list[float] = []
        self.values: list[float] = []
        self.rewards: list[float] = []
        self.masks: list[np.ndarray] = []
        self.extras: dict[str, list[np.ndarray]] = {}
        """``StepExtras`` field -> one row per recorded step."""
        self.latest_obs: np.ndarray | None = None
        """Observation of the agent's latest decision (the bootstrap point of a cut)."""
        self.episode_return = 0.0
        self.episode_length = 0

    @property
    def pending(self) -> bool:
        """An action was taken and its reward has not arrived yet."""
        return len(self.obs) > len(self.rewards)


class TrajectoryCollector:
    """Accumulates transitions per agent and emits trajectories cut as the contract says.

    Use per stream step: ``observe(result)`` (closes pending transitions), then
    ``record(keys, obs, actions, logprobs, values, masks, extras)`` for the rows acted on.
    ``take()`` returns the finished trajectories; ``flush()`` also cuts the open ones.
    """

    def __init__(self, time_horizon: int, sequence_length: int = 1, groups: bool = False):
        if time_horizon < 1:
            raise ValueError(f"time_horizon must be >= 1, got {time_horizon}")
        if sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        self.time_horizon = time_horizon
        self.sequence_length = sequence_length
        self._tracks: dict[Hashable, _AgentTrack] = {}
        self._done: list[Trajectory] = []
        self.completed_steps = 0
        """Transitions completed (reward known) since the last ``take``/``flush``."""
        self.finished_steps = 0
        """Transitions in finished trajectories waiting to be taken."""
        self.finished_rows = 0
        """``finished_steps`` with each finished trajectory padded to a multiple of
        ``sequence_length`` (the rows it takes in a memory learner's buffer)."""
        self.episode_returns: list[float] = []
        """Returns of episodes that ended since the last ``pop_episodes``."""
        self.episode_lengths: list[int] = []
        """Lengths (decisions) of episodes that ended since the last ``pop_episodes``."""
        self.groups = GroupTracker() if groups else None
        """Group statuses (None: groups are not collected)."""
        self.group_returns: list[float] = []
        """Group returns of agents whose episode ended with their group's (module doc)."""
        self._warned_group_reward = False

    # -- per step -------------------------------------------------------------------------------
    def observe(self, result) -> np.ndarray:
        """Folds one StepResult in; returns the flat observations of its decision rows."""
        terminals = result.terminals
        groups = self.groups
        if terminals.keys:
            final_obs = flat_obs(terminals.obs)
            rewards = terminals.reward
            interrupted = terminals.interrupted
            t_greward = group_rewards(terminals)
            if groups is not None:
                self._note(terminals.keys, group_ids(terminals), rewards, final_obs, done=True)
            for i, key in enumerate(terminals.keys):
                self._end_episode(key, final_obs[i], float(rewards[i]), bool(interrupted[i]),
                                  float(t_greward[i]))
        decisions = result.decisions
        if not decisions.keys:
            if groups is not None and terminals.keys:
                groups.forget(terminals.keys)
            return np.zeros((0, 0), np.float32)
        obs = flat_obs(decisions.obs)
        rewards = decisions.reward
        horizon = self.time_horizon
        d_groups = None
        d_greward = group_rewards(decisions)
        if groups is not None:
            d_groups = group_ids(decisions)
            self._note(decisions.keys, d_groups, rewards, obs, done=False)
        for i, key in enumerate(decisions.keys):
            track = self._tracks.get(key)
            if track is None:
                track = self._tracks[key] = _AgentTrack(key)
            elif track.pending:
                self._complete(track, float(rewards[i]), float(d_greward[i]))
                if len(track.rewards) >= horizon:
                    self._cut(track, obs[i], terminated=False)
            # else: first decision of a (new) episode: its reward belongs to no action.
            track.latest_obs = obs[i]
            if d_groups is not None:
                track.group = _group_of(key, d_groups[i])
        if groups is not None and terminals.keys:
            groups.forget(terminals.keys)
        return obs

    def _note(self, keys, gids: np.ndarray, rewards: np.ndarray, current_obs: np.ndarray,
              done: bool) -> None:
        """Group statuses of the rows of ``keys`` whose agents have an action waiting."""
        for i, key in enumerate(keys):
            track = self._tracks.get(key)
            if track is None or not track.pending:
                continue
            group = _group_of(key, gids[i])
            track.group = group
            self.groups.note(key, group, track.obs[-1], track.actions[-1], float(rewards[i]),
                             done, current_obs[i])

    def _complete(self, track: "_AgentTrack", reward: float, group_reward: float) -> None:
        """The pending step of ``track`` gets its reward (and, with groups, its group data;
        without, the group reward is added to the reward: module doc)."""
        track.episode_return += reward
        self.completed_steps += 1
        if self.groups is None:
            if group_reward != 0.0 and not self._warned_group_reward:
                self._warned_group_reward = True
                logger.warning("An agent recieved a Group Reward, but you are not using a "
                               "multi-agent trainer. Please use the POCA trainer for best "
                               "results.")  # ML-Agents' words (its spelling), once
            track.rewards.append(reward + group_reward)
            return
        track.rewards.append(reward)
        row = self.groups.mates(track.key, track.group)
        track.mates.append(row)
        track.last_dones = row.dones
        track.group_rewards.append(group_reward)
        track.group_return += group_reward

    def record(self, keys: Sequence[Hashable], obs: np.ndarray, actions: np.ndarray,
               logprobs: np.ndarray, values: np.ndarray,
               masks: np.ndarray | None = None,
               extras: dict[str, np.ndarray] | None = None) -> None:
        """Registers the actions taken for the decision rows just observed (same order);
        ``extras``: ``StepExtras`` field -> one row per decision row (e.g. ``memories``)."""
        tracks = self._tracks
        for i, key in enumerate(keys):
            track = tracks[key]
            if track.pending:
                raise RuntimeError(f"agent {key} acted twice without a reward in between")
            track.obs.append(obs[i])
            track.actions.append(actions[i])
            track.logprobs.append(logprobs[i])
            track.values.append(values[i])
            if masks is not None:
                track.masks.append(masks[i])
            if extras:
                for name, rows in extras.items():
                    track.extras.setdefault(name, []).append(rows[i])
            track.episode_length += 1

    # -- output ---------------------------------------------------------------------------------
    def take(self) -> list[Trajectory]:
        """Finished trajectories (episode ends and time-horizon cuts) since the last call."""
        done, self._done = self._done, []
        self.completed_steps = 0
        self.finished_steps = 0
        self.finished_rows = 0
        return done

    def flush(self) -> list[Trajectory]:
        """Cuts every open trajectory at its latest observation and returns all finished ones.

        A pending action (reward not yet known) stays open: it starts the agent's next piece.
        """
        for track in self._tracks.values():
            k = len(track.rewards)
            if k == 0:
                continue
            bootstrap = track.obs[k] if track.pending else track.latest_obs
            self._cut(track, bootstrap, terminated=False)
        return self.take()

    def pop_group_returns(self) -> list[float]:
        """Group returns (module doc) since the last call."""
        out, self.group_returns = self.group_returns, []
        return out

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """(returns, lengths) of the episodes that ended since the last call."""
        out = (self.episode_returns, self.episode_lengths)
        self.episode_returns, self.episode_lengths = [], []
        return out

    def drop_open(self) -> list[Hashable]:
        """Forgets every agent's open trajectory, pending action and episode counters (a reset
        of the builds cut their episodes: mlagents-learn's ``AgentProcessor.end_episode``);
        finished trajectories stay to be taken. Returns the agents dropped."""
        dropped = list(self._tracks)
        self.completed_steps = max(0, self.completed_steps - sum(
            len(t.rewards) for t in self._tracks.values()))
        self._tracks.clear()
        if self.groups is not None:
            self.groups.clear()
        return dropped

    @property
    def num_agents(self) -> int:
        return len(self._tracks)

    # -- internals ------------------------------------------------------------------------------
    def _end_episode(self, key: Hashable, final_obs: np.ndarray, reward: float,
                     interrupted: bool, group_reward: float = 0.0) -> None:
        track = self._tracks.pop(key, None)
        if track is None:
            return  # an agent never seen acting: nothing to close
        if track.pending:
            self._complete(track, reward, group_reward)
        if track.rewards:
            self._cut(track, final_obs, terminated=not interrupted, interrupted=interrupted)
        if track.episode_length > 0:
            self.episode_returns.append(track.episode_return)
            self.episode_lengths.append(track.episode_length)
            if self.groups is not None and all(track.last_dones):
                self.group_returns.append(track.group_return)

    def _cut(self, track: _AgentTrack, last_obs: np.ndarray, terminated: bool,
             interrupted: bool = False) -> None:
        """Emits the completed steps of ``track``; a pending step (if any) stays in it."""
        k = len(track.rewards)
        self.finished_steps += k
        self.finished_rows += -(-k // self.sequence_length) * self.sequence_length
        extras = {name: np.stack(rows[:k]) for name, rows in track.extras.items()}
        group_end: dict = {}
        if self.groups is not None:
            obs_dim = np.asarray(last_obs).size
            action_dim = np.asarray(track.actions[0]).size
            g_obs, g_actions, g_rewards, g_dones = stack_mates(track.mates, obs_dim, action_dim)
            extras.update(group_obs=g_obs, group_actions=g_actions, groupmate_rewards=g_rewards,
                          group_rewards=np.asarray(track.group_rewards, np.float32),
                          group_dones=g_dones)
            mates = self.groups.next_obs(track.key, track.group)
            group_end = dict(
                next_group_obs=(np.stack(mates).reshape(len(mates), obs_dim).astype(np.float32)
                                if mates else np.zeros((0, obs_dim), np.float32)),
                group_continues=not all(track.last_dones))
            track.mates, track.group_rewards = [], []
        self._done.append(Trajectory(
            obs=np.stack(track.obs[:k]).astype(np.float32, copy=False),
            actions=np.stack(track.actions[:k]),
            logprobs=np.asarray(track.logprobs[:k], np.float32),
            values=np.asarray(track.values[:k], np.float32),
            rewards=np.asarray(track.rewards, np.float32),
            last_obs=np.array(last_obs, np.float32),
            terminated=terminated,
            action_masks=np.stack(track.masks[:k]) if track.masks else None,
            extras=StepExtras(**extras),
            interrupted=interrupted,
            **group_end,
        ))
        for rows in track.extras.values():
            del rows[:k]
        del track.obs[:k], track.actions[:k], track.logprobs[:k], track.values[:k]
        if track.masks:
            del track.masks[:k]
        track.rewards = []


def _group_of(key: Hashable, group_id) -> Hashable | None:
    """A group is (build, group_id) for group_id > 0 (ids are unique per build only)."""
    gid = int(group_id)
    return (getattr(key, "build", 0), gid) if gid > 0 else None
