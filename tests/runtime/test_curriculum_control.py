"""A lesson change reaches the actors as a ``Control``: sampler specs as values, and
``reset_episodes`` (a finished lesson with ``require_reset``) resetting the builds and dropping
every open trajectory, as mlagents-learn's reset does (over a fake stream: fast)."""
from __future__ import annotations

from tests.runtime.fakes import BEHAVIOR
from tests.runtime.test_wirings import host_for, spec, weights_of
from unity_rl.config import EnvironmentParameter
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.messages import Control


def test_control_state_keeps_parameters_but_not_a_reset():
    wall = EnvironmentParameter(sampler_type="uniform", min_value=4.0, max_value=7.0, seed=3)
    state = Control(env_parameters={"height": 1.0}).updated(
        Control(env_parameters={"wall": wall}, reset_episodes=True))
    assert state == Control(env_parameters={"height": 1.0, "wall": wall}, reset_episodes=False)


def test_reset_episodes_resets_the_builds_and_drops_open_trajectories():
    actor = Actor(spec(0, sync=True, segment_steps=50, max_step=1000))  # no episode ends
    try:
        info = actor.start()
        actor.set_weights(weights_of(host_for(info.behaviors[BEHAVIOR]), 1))
        actor.collect()
        lane = actor.lanes[BEHAVIOR]
        tracks = lane.collector._tracks  # noqa: SLF001 - the open trajectories
        assert len(tracks) == 4 and any(track.obs for track in tracks.values())
        wall = EnvironmentParameter(sampler_type="uniform", min_value=4.0, max_value=7.0, seed=3)
        actor.apply_control(Control(env_parameters={"wall": wall}, reset_episodes=True))
        assert actor.stream.parameters == {"wall": wall}
        # every open trajectory dropped (its episode neither ends nor counts); the agents
        # start afresh from the reset's observations
        tracks = lane.collector._tracks  # noqa: SLF001
        assert len(tracks) == 4 and not any(track.obs for track in tracks.values())
        assert lane.collector.completed_steps == 0 and lane.collector.pop_episodes() == ([], [])
        rollout = actor.collect()
        assert sum(len(t.rewards) for t in rollout.segments[BEHAVIOR].trajectories) >= 50
    finally:
        actor.close()
