"""``EpisodeRecorder``: one agent's play, decision by decision, into ``RecordedEpisode``s, as
Unity's Demonstration Recorder component follows the agent it sits on.

Contract: call ``decide(obs, continuous, discrete, mask)`` at each of the agent's decisions, with
what it observed and the action it took there, then ``outcome(reward, ...)`` with what followed
(the reward after the action, and for an episode end the final observation). ``episodes``
holds the finished episodes; ``write(path, spec)`` writes them with ``write_demo`` (which makes
the records Unity would have made, the pairing shift included). Observations are per sensor in
the spec's shapes, float (cameras in [0, 1]). Torch-free. Users: ``unity-rl record-demo`` (a
trained policy on a build) and ``unity_rl.standin.record`` (a stand-in's heuristic).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from unity_rl.demos.format import DemoError, DemoMeta
from unity_rl.demos.writer import RecordedEpisode, write_demo


class EpisodeRecorder:
    """Builds one agent's episodes from its decisions and their outcomes (module doc)."""

    def __init__(self):
        self.episodes: list[RecordedEpisode] = []
        """Finished episodes, in order."""
        self._obs: list[list[np.ndarray]] = []
        self._cont: list[np.ndarray] = []
        self._disc: list[np.ndarray] = []
        self._rewards: list[float] = []
        self._masks: list[np.ndarray | None] = []

    @property
    def steps(self) -> int:
        """Decisions recorded so far (finished episodes and the one in progress)."""
        return sum(len(e.rewards) for e in self.episodes) + len(self._rewards)

    def decide(self, obs: Sequence[np.ndarray], continuous: np.ndarray | None = None,
               discrete: np.ndarray | None = None, mask: np.ndarray | None = None) -> None:
        """The agent observed ``obs`` (one array per sensor) and took this action (its action
        mask: True where allowed, or None)."""
        if len(self._obs) != len(self._rewards):
            raise DemoError("EpisodeRecorder.decide called twice without outcome() between")
        self._obs.append([np.asarray(o, np.float32) for o in obs])
        self._cont.append(np.asarray(continuous if continuous is not None else [], np.float32))
        self._disc.append(np.asarray(discrete if discrete is not None else [], np.int64))
        self._masks.append(None if mask is None else np.asarray(mask, bool))

    def outcome(self, reward: float, done: bool = False, interrupted: bool = False,
                final_obs: Sequence[np.ndarray] | None = None) -> None:
        """What followed the last decision: its reward, and whether the episode ended there
        (``final_obs``: the final observation; ``interrupted``: by max step)."""
        if len(self._obs) != len(self._rewards) + 1:
            raise DemoError("EpisodeRecorder.outcome called without a decision before it")
        self._rewards.append(float(reward))
        if done:
            if final_obs is None:
                raise DemoError("an episode end needs its final observation")
            self._finish([np.asarray(o, np.float32) for o in final_obs], True, interrupted)

    def close(self, next_obs: Sequence[np.ndarray] | None = None) -> None:
        """Keeps the episode in progress as an unfinished one (its last observation
        ``next_obs``, the decision that was pending), as a recording stopped mid-episode."""
        if self._rewards and next_obs is not None:
            self._finish([np.asarray(o, np.float32) for o in next_obs], False, False)

    def _finish(self, final: list[np.ndarray], done: bool, interrupted: bool) -> None:
        n_obs = len(final)
        masks = None
        if any(m is not None for m in self._masks):
            width = next(m for m in self._masks if m is not None).shape[-1]
            masks = np.stack([np.ones(width, bool) if m is None else m for m in self._masks])
        self.episodes.append(RecordedEpisode(
            observations=[np.stack([o[i] for o in self._obs] + [final[i]]) for i in range(n_obs)],
            continuous_actions=np.stack(self._cont), discrete_actions=np.stack(self._disc),
            rewards=np.asarray(self._rewards, np.float32), done=done, interrupted=interrupted,
            action_masks=masks))
        self._obs, self._cont, self._disc, self._rewards, self._masks = [], [], [], [], []

    def write(self, path: str, spec, name: str | None = None,
              behavior_name: str | None = None) -> DemoMeta:
        """Writes the finished episodes as a Unity ``.demo`` file (``write_demo``)."""
        if not self.episodes:
            raise DemoError(f"nothing to write to {path}: no episode was recorded")
        c, b = spec.action_spec.continuous_size, len(spec.action_spec.discrete_branches)
        episodes = [RecordedEpisode(
            e.observations, e.continuous_actions.reshape(len(e.rewards), c) if c else None,
            e.discrete_actions.reshape(len(e.rewards), b) if b else None, e.rewards, e.done,
            e.interrupted, e.action_masks) for e in self.episodes]
        return write_demo(path, spec, episodes, name, behavior_name=behavior_name)
