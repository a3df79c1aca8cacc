"""``ThreadTrial``: the learner's thread count chosen from its own update times."""
from __future__ import annotations

import logging

import pytest

from tests.runtime.test_wirings import counting_host, rollout
from tests.runtime.fakes import BEHAVIOR
from tests.runtime.test_flow_control import RecordingBackend
from unity_rl.runtime.runners import BehaviorRound, Round, SyncRunner
from unity_rl.training.thread_trial import ThreadTrial


def run_trial(seconds_at: dict[int, float], **kwargs) -> tuple[ThreadTrial, list[int]]:
    """A trial whose updates take ``seconds_at[threads]``; returns it and the counts it set."""
    settings: list[int] = []
    trial = ThreadTrial(tuple(seconds_at), set_threads=settings.append, **kwargs)
    for _ in range(10):
        trial.observe(seconds_at[trial.current])
    return trial, settings


@pytest.mark.parametrize("seconds_at, kept", [({2: 0.28, 1: 0.45}, 2), ({2: 0.86, 1: 0.80}, 1)])
def test_the_trial_alternates_after_the_warmup_and_keeps_the_faster_count(seconds_at, kept,
                                                                          caplog):
    with caplog.at_level(logging.INFO, logger="unity_rl.training.thread_trial"):
        trial, settings = run_trial(seconds_at)
    # set at start (2), unchanged over the warm-up; measured at 2, 1, 2, 1; then the kept one
    assert settings == [2, 1, 2, 1, kept]
    assert trial.seconds == {n: [s, s] for n, s in seconds_at.items()}
    assert trial.chosen == kept and trial.current == kept
    assert f"keeps {kept} core(s)" in caplog.text
    assert f"{seconds_at[2]:.3f} s on 2, {seconds_at[1]:.3f} s on 1" in caplog.text


def test_the_median_decides_not_one_slow_update():
    settings: list[int] = []
    trial = ThreadTrial((2, 1), updates_each=3, warmup=0, set_threads=settings.append)
    for seconds in (9.0, 0.5, 0.3, 0.5, 0.3, 0.5):  # 2 threads: 9.0 (an outlier), 0.3, 0.3
        trial.observe(seconds)
    assert trial.chosen == 2


def test_a_trial_needs_two_counts():
    with pytest.raises(ValueError, match="two thread counts"):
        ThreadTrial((2, 2))


def test_rounds_without_an_update_are_not_measured():
    trial = ThreadTrial((2, 1), warmup=0, set_threads=lambda n: None)
    idle = Round({BEHAVIOR: BehaviorRound(10, [], [], None)}, 1, 0)
    trial.observe_round(idle)
    assert trial.seconds == {2: [], 1: []} and trial.current == 2
    # a real sync round: its update seconds are observed at the count it ran with
    host = counting_host(buffer_steps=10)
    runner = SyncRunner(RecordingBackend([rollout(0, 0, 10)], num_actors=1), {BEHAVIOR: host})
    runner.start()
    trial.observe_round(runner.next_update())
    assert len(trial.seconds[2]) == 1 and trial.seconds[2][0] >= 0 and trial.current == 1
