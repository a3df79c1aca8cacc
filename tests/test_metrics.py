"""MetricsWriter: progress.csv, TensorBoard scalars (read back), console lines, resume."""
from __future__ import annotations

import io
import math

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from unity_rl.metrics import CSV_COLUMNS, MetricsWriter, read_progress, tensorboard_name


def _scalars(tb_dir) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_csv_and_tensorboard_contents(tmp_path):
    out = io.StringIO()
    with MetricsWriter(tmp_path, summary_freq=1000, max_steps=4000, behavior_name="3DBall",
                       stream=out) as metrics:
        metrics.record_episodes([1.0, 3.0], [10, 30])
        metrics.log(500, {"Losses/Policy Loss": 0.5, "value_loss": 2.0,
                          "learning_rate": 3e-4, "policy_lag": 1})
        metrics.record_episodes([5.0], [50])
        metrics.log(1000, {"Losses/Value Loss": 1.0})

    rows = read_progress(tmp_path / "3DBall" / "progress.csv")
    header = (tmp_path / "3DBall" / "progress.csv").read_text().splitlines()[0].split(",")
    assert tuple(header) == CSV_COLUMNS
    assert [r["agent_steps"] for r in rows] == [500, 1000]
    assert [r["episodes"] for r in rows] == [2, 3]
    assert rows[0]["mean_return"] == pytest.approx(2.0)
    assert rows[1]["mean_return"] == pytest.approx(3.0)
    assert rows[0]["policy_lag"] == 1 and math.isnan(rows[1]["policy_lag"])
    assert rows[0]["agent_steps_per_second"] > 0
    assert rows[1]["wall_seconds"] >= rows[0]["wall_seconds"] >= 0

    tb = _scalars(tmp_path / "3DBall")
    # one point per summary_freq window (ML-Agents): means of its episodes and of its logs
    assert tb["Environment/Cumulative Reward"] == [(1000, 3.0)]
    assert tb["Environment/Episode Length"] == [(1000, 30.0)]
    assert tb["Environment/Cumulative Reward (last 100)"] == [(1000, 3.0)]
    assert tb["Losses/Policy Loss"] == [(1000, 0.5)]
    assert tb["Losses/Value Loss"] == [(1000, 1.5)]            # mean of 2.0 and 1.0
    assert tb["Policy/Learning Rate"] == [(1000, pytest.approx(3e-4))]
    assert tb["Policy/Lag"] == [(1000, 1.0)]
    assert [s for s, _ in tb["Environment/Agent Steps Per Second"]] == [1000]

    text = out.getvalue()
    assert ("[INFO] 3DBall. Step: 1000. Time Elapsed: " in text
            and "Mean Reward: 3.000. Std of Reward: 1.633. Training." in text)
    assert "mean return" in text and "ETA" in text and "\r" not in text


def test_reach_closes_a_window_when_its_steps_arrive_and_the_update_joins_the_next(tmp_path):
    out = io.StringIO()
    with MetricsWriter(tmp_path, summary_freq=1000, max_steps=4000, behavior_name="Worm",
                       stream=out) as metrics:
        metrics.record_episodes([4.0, 6.0], [10, 10])
        metrics.reach(1200)                    # data of 1,200 agent-steps arrived, no update yet
        tb = _scalars(tmp_path / "Worm")
        assert tb["Environment/Cumulative Reward"] == [(1000, 5.0)]
        assert "Losses/Policy Loss" not in tb
        assert "Step: 1000." in out.getvalue()
        metrics.log(1200, {"Losses/Policy Loss": 0.25})   # the update on it: no second window
        assert _scalars(tmp_path / "Worm")["Environment/Cumulative Reward"] == [(1000, 5.0)]
        metrics.record_episodes([8.0], [10])
        metrics.reach(2100)
        metrics.log(2100, {"Losses/Policy Loss": 0.75})
        metrics.record_episodes([9.0], [10])
        metrics.reach(2600)                    # stopped before the update on it
    tb = _scalars(tmp_path / "Worm")
    assert tb["Environment/Cumulative Reward"] == [(1000, 5.0), (2000, 8.0), (2600, 9.0)]
    # each update's scalars are in the window after the one its data closed; close() writes the
    # last, partial one, labelled with the last step that arrived
    assert tb["Losses/Policy Loss"] == [(2000, 0.25), (2600, 0.75)]
    assert out.getvalue().count("Step: 1000.") == 1 and out.getvalue().count("Step: 2000.") == 1
    rows = read_progress(tmp_path / "Worm" / "progress.csv")
    assert [r["agent_steps"] for r in rows] == [1200, 2100]     # rows come from log() only


def test_rolling_window_is_last_100(tmp_path):
    with MetricsWriter(tmp_path, 10, 100, console=False, tensorboard=False) as metrics:
        metrics.record_episodes([0.0] * 50 + [1.0] * 100, [1] * 150)
        row = metrics.log(10)
    assert row["mean_return"] == 1.0 and row["episodes"] == 150


def test_summary_without_episodes_and_tty_redraw(tmp_path):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    with MetricsWriter(tmp_path, summary_freq=100, max_steps=1000, stream=out,
                       tensorboard=False, redraw_interval_s=0.0) as metrics:
        metrics.log(50)
        metrics.log(120)
    text = out.getvalue()
    assert "\r[policy] 50/1,000 steps" in text
    assert "No episode was completed since last summary. Training." in text
    assert text.endswith("\n")


def test_resume_appends_and_drops_lost_rows(tmp_path):
    with MetricsWriter(tmp_path, 100, 1000, console=False) as metrics:
        metrics.record_episodes([1.0], [5])
        for step in (100, 200, 300):
            metrics.log(step)
        saved = metrics.state_dict()  # pretend the checkpoint was taken at step 200
    with open(tmp_path / "policy" / "progress.csv", "a") as f:
        f.write("400,9.0,1")  # a row torn by SIGKILL
    resumed = MetricsWriter(tmp_path, 100, 1000, console=False, start_step=200,
                            start_wall=50.0)
    resumed.load_state_dict(saved)
    resumed.record_episodes([3.0], [5])
    resumed.log(250)
    resumed.close()
    rows = read_progress(tmp_path / "policy" / "progress.csv")
    assert [r["agent_steps"] for r in rows] == [100, 200, 250]
    assert rows[-1]["wall_seconds"] >= 50.0
    assert rows[-1]["episodes"] == 2 and rows[-1]["mean_return"] == 2.0
    steps = [s for s, _ in _scalars(tmp_path / "policy")["Environment/Agent Steps Per Second"]]
    assert steps == [100, 200, 250]  # events past the checkpoint were purged


def test_tensorboard_names():
    assert tensorboard_name("policy_loss") == "Losses/Policy Loss"
    assert tensorboard_name("Policy/Entropy") == "Policy/Entropy"
    assert tensorboard_name("grad_norm") == "Policy/Grad Norm"
