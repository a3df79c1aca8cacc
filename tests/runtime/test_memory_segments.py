"""With memory (``network_settings.memory``), PPO's update trigger counts the rows trajectories
take once padded to whole ``sequence_length`` sequences (ML-Agents' ``_is_ready_update`` on its
resequenced buffer, TRAINERS.md §1): an actor's segment, and so each update, holds
``buffer_size`` padded rows, not ``buffer_size`` steps. Short episodes (Hallway: 6 to 30
decisions, sequences of 64) otherwise made each update several times as large and updates as
many times rarer as mlagents-learn's."""
from __future__ import annotations

import functools

import numpy as np

from tests.runtime.fakes import BANDIT, FakeBandit
from unity_rl.algorithms.ppo.host import PPOAlgorithm
from unity_rl.config import parse_config
from unity_rl.envs.agent_stream import StepResult
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.collector import TrajectoryCollector
from unity_rl.runtime.messages import BehaviorInfo, BehaviorWeights, PolicyWeights
from unity_rl.runtime.algorithm import HostContext

L, BUFFER = 8, 64


def _config(memory: bool):
    network = {"hidden_units": 16, "num_layers": 1}
    if memory:
        network["memory"] = {"sequence_length": L, "memory_size": 8}
    return parse_config({"behaviors": {"Bandit": {
        "trainer_type": "ppo", "time_horizon": 64,
        "hyperparameters": {"buffer_size": BUFFER, "batch_size": 16},
        "network_settings": network}}})


def _step(keys, ended, reward=0.0):
    dec = DecisionBatch(list(keys), [np.zeros((len(keys), 1), np.float32)],
                        np.full(len(keys), reward, np.float32), None)
    term = TerminalBatch(list(ended), [np.zeros((len(ended), 1), np.float32)],
                         np.zeros(len(ended), np.float32), np.zeros(len(ended), bool))
    return StepResult(dec, term, {})


def test_collector_counts_finished_trajectories_padded_to_whole_sequences():
    c = TrajectoryCollector(time_horizon=100, sequence_length=L)
    a, b = AgentKey(0, "B", 0), AgentKey(0, "B", 1)
    c.observe(_step([a, b], []))
    for t in range(10):  # a: episodes of 3 decisions; b: one episode of 10
        c.record([a, b], np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int64),
                 np.zeros(2, np.float32), np.zeros(2, np.float32))
        ended = ([a] if t % 3 == 2 else []) + ([b] if t == 9 else [])
        c.observe(_step([a, b], ended))
    assert c.finished_steps == 3 * 3 + 10
    assert c.finished_rows == 3 * L + 2 * L                 # 3 → 8 rows each, 10 → 16 rows
    assert sum(-(-len(t.rewards) // L) * L for t in c.take()) == 5 * L
    assert c.finished_rows == c.finished_steps == 0


def _segment(memory: bool):
    cfg = _config(memory)
    algo = PPOAlgorithm(cfg, "Bandit", cfg.behaviors["Bandit"])
    plan = algo.plan()
    actor = Actor(ActorSpec(actor_id=0, stream=StreamSettings("fake"), plans=(("Bandit", plan),),
                            wait_for_new_weights=True, seed=0,
                            stream_factory=functools.partial(FakeBandit, num_agents=2)))
    info = actor.start()
    host = algo.make_host(BehaviorInfo(BANDIT, info.behaviors[BANDIT].obs_shapes,
                                       info.behaviors[BANDIT].action_spec, 2),
                          HostContext("cpu", 0, 1, "sync", 0))
    actor.set_weights(PolicyWeights(0, {BANDIT: BehaviorWeights(0, host.weights())}))
    try:
        segment = actor.collect().segments[BANDIT]
    finally:
        actor.close()
    host.accept(segment)
    return plan, segment, host


def test_a_memory_segment_holds_buffer_size_padded_rows_and_fills_one_update():
    plan, segment, host = _segment(memory=True)
    assert plan.segment_steps == BUFFER
    # the bandit's episodes are one decision: each trajectory takes one sequence of L rows
    assert all(len(t.rewards) == 1 for t in segment.trajectories)
    rows = sum(-(-len(t.rewards) // L) * L for t in segment.trajectories)
    assert BUFFER <= rows < BUFFER + 2 * L                   # one step of 2 agents past the mark
    assert segment.agent_steps == rows // L < BUFFER         # not BUFFER steps = 8·BUFFER rows
    assert host.ready()                                      # one segment, one update
    batch = host.learner.prepare(host._buffer)
    assert len(batch.obs) == rows and int(batch.loss_mask.sum()) == segment.agent_steps
    assert plan.sequence_length == L


def test_without_memory_a_segment_still_holds_buffer_size_steps():
    plan, segment, host = _segment(memory=False)
    assert BUFFER <= segment.agent_steps < BUFFER + 2
    assert host.ready()
    assert plan.sequence_length == 1
