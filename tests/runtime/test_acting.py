"""The acting-policy seam: the actor reaches a policy only through ``ActingPolicy`` (agent keys
always given), and every field of a ``Trajectory`` survives Ray's writable copy."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.runtime.fakes import BEHAVIOR, FakeStream
from unity_rl.experience import Segment, StepExtras, Trajectory, owned_copy
from unity_rl.runtime.acting import ActingPolicy
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.messages import BehaviorWeights, PolicyWeights, Rollout


class RecordingPolicy(ActingPolicy):
    """Zero actions; records every call the actor makes."""

    def __init__(self, obs_shapes, action_spec, seed):
        self.act_dim = action_spec.continuous_size
        self.calls: list[tuple] = []

    def load_weights(self, weights: dict) -> None:
        self.version = int(weights["version"])
        self.calls.append(("load_weights",))

    def act(self, obs, action_mask=None, deterministic=False, agent_keys=None):
        self.calls.append(("act", tuple(agent_keys)))
        assert agent_keys is not None and len(agent_keys) == len(obs)
        n = len(obs)
        self.last_keys = list(agent_keys)
        return (np.full((n, self.act_dim), 5.0, np.float32), np.zeros(n, np.float32),
                np.zeros(n, np.float32))

    def step_extras(self):
        self.calls.append(("step_extras",))
        return {"memories": np.array([[float(k[-1]), 7.0] for k in self.last_keys], np.float32)}

    def env_actions(self, actions):
        self.calls.append(("env_actions",))
        return actions / 5.0

    def episodes_ended(self, agent_keys) -> None:
        self.calls.append(("episodes_ended", tuple(agent_keys)))

    def finish_segment(self, segment: Segment) -> Segment:
        self.calls.append(("finish_segment",))
        return segment._replace(episode_returns=[*segment.episode_returns, 123.0])

    def close(self) -> None:
        self.calls.append(("close",))


class NotAPolicy:
    def __init__(self, *args):
        pass


def actor_with(factory) -> Actor:
    plan = BehaviorPlan(factory, 32, 8)
    return Actor(ActorSpec(actor_id=0, stream=StreamSettings("fake"), plans=(("Fake", plan),),
                           wait_for_new_weights=True, seed=0,
                           stream_factory=functools.partial(FakeStream, max_step=5)))


def test_actor_calls_every_hook_of_the_base_class_with_agent_keys():
    actor = actor_with(RecordingPolicy)
    actor.start()
    actor.set_weights(PolicyWeights(1, {BEHAVIOR: BehaviorWeights(1, {"version": 1})}))
    segment = actor.collect().segments[BEHAVIOR]
    actor.close()
    calls = actor.lanes[BEHAVIOR].policy.calls
    kinds = {c[0] for c in calls}
    assert kinds == {"load_weights", "act", "step_extras", "env_actions", "episodes_ended",
                     "finish_segment", "close"}
    assert all(len(c[1]) > 0 for c in calls if c[0] in ("act", "episodes_ended"))
    assert segment.episode_returns[-1] == 123.0            # finish_segment's result is sent
    stored = np.concatenate([t.actions for t in segment.trajectories])
    assert (stored == 5.0).all()                           # trajectories keep act's actions
    for t in segment.trajectories:                         # and step_extras' rows, per agent
        assert t.extras.memories.shape == (len(t.rewards), 2)
        assert (t.extras.memories[:, 1] == 7.0).all()
        assert len(set(t.extras.memories[:, 0])) == 1      # one agent's rows in its trajectory
    assert calls[-1] == ("close",)


def test_a_factory_that_makes_no_acting_policy_is_refused_by_name():
    actor = actor_with(NotAPolicy)
    with pytest.raises(TypeError, match="NotAPolicy.*ActingPolicy"):
        actor.start()
    actor.close()


def test_base_class_defaults_do_nothing():
    class Minimal(ActingPolicy):
        def load_weights(self, weights):
            pass

        def act(self, obs, action_mask=None, deterministic=False, agent_keys=None):
            return obs, obs, obs

    p, a = Minimal(), np.ones((2, 3), np.float32)
    segment = Segment([], 0, 0, 0, [], [])
    assert p.env_actions(a) is a and p.finish_segment(segment) is segment
    assert p.episodes_ended([1]) is None and p.close() is None and p.version == -1
    assert p.step_extras() == {}
    with pytest.raises(TypeError):
        ActingPolicy()


# ----------------------------------------------------------------------------------------------
# Ray's writable copy keeps every field
# ----------------------------------------------------------------------------------------------

def _read_only(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def _field_value(name: str, i: int):
    """A distinct, read-only value for each Trajectory / StepExtras field (arrays unless the
    field is a flag or a nested NamedTuple)."""
    if name == "terminated":
        return True
    if name == "extras":
        return StepExtras(*(_read_only(np.full(3, 100.0 + j, np.float32))
                            for j in range(len(StepExtras._fields))))
    return _read_only(np.full((3, 2), float(i), np.float32))


def every_field_trajectory() -> Trajectory:
    return Trajectory(*(_field_value(name, i) for i, name in enumerate(Trajectory._fields)))


def _assert_same_writable(a, b, where: str) -> None:
    if isinstance(a, tuple) and hasattr(a, "_fields"):
        assert type(b) is type(a), where
        for name in a._fields:
            _assert_same_writable(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(b) == list(a), where
        for k in a:
            _assert_same_writable(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(b) == len(a), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_writable(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and b.flags.writeable, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert b == a, where


def test_no_field_of_the_fixture_holds_its_default():
    """So a copy that rebuilt a Trajectory and left a field out (its default) would differ."""
    t = every_field_trajectory()
    for name, default in {**Trajectory._field_defaults, **StepExtras._field_defaults}.items():
        value = getattr(t.extras if name in StepExtras._fields else t, name)
        assert value is not default, name


def test_owned_copy_keeps_every_trajectory_field_and_makes_arrays_writable():
    t = every_field_trajectory()
    rollout = Rollout(0, 3, {BEHAVIOR: Segment([t, t], 2, 0, 6, [1.0], [3])}, 1)
    out = owned_copy(rollout)
    _assert_same_writable(rollout, out, "rollout")
    writable = np.zeros(2)
    assert owned_copy(writable) is writable          # already writable: not copied


def test_ray_backend_copy_keeps_every_field():
    ray_backend = pytest.importorskip("unity_rl.runtime.ray_backend")
    t = every_field_trajectory()
    rollout = Rollout(0, 3, {BEHAVIOR: Segment([t], 2, 0, 3, [1.0], [3])}, 0)
    _assert_same_writable(rollout, ray_backend._writable(rollout), "rollout")
