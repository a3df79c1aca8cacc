"""``unity_rl.demos`` against ML-Agents 1.1.0's own ``demo_loader``.

The fixtures (``tests/fixtures/demos/``, made by ``make_fixtures.py`` in an mlagents-learn venv):
``theirs_*`` files built the way Unity's recorder builds them and written by ML-Agents'
``write_demo``; ``ours_*`` files written by ``write_demo`` here; ``<case>.npz`` the episodes both
hold and what ML-Agents' ``load_demonstration`` / ``demo_to_buffer`` read in each file.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec,
                                    ObservationType)

from unity_rl.demos import (DemoError, DemoFileError, DemoSpecError, RecordedEpisode, load_demo,
                            write_demo)
from unity_rl.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures" / "demos"
CASES = ["vector_discrete", "visual_continuous", "hybrid_dir"]


def fixture(case: str):
    return np.load(FIXTURES / f"{case}.npz")


def path_of(who: str, case: str) -> Path:
    directory = FIXTURES / f"{who}_{case}"
    return directory if directory.is_dir() else FIXTURES / f"{who}_{case}.demo"


def spec_of(data, shapes=None) -> BehaviorSpec:
    shapes = shapes or [ast.literal_eval(s) for s in data["theirs_obs_shapes"]]
    return BehaviorSpec(
        [ObservationSpec(shape=s, dimension_property=(DimensionProperty.UNSPECIFIED,) * len(s),
                         observation_type=ObservationType.DEFAULT, name=f"sensor{i}")
         for i, s in enumerate(shapes)],
        ActionSpec(int(data["theirs_continuous_size"]),
                   tuple(int(b) for b in data["theirs_branches"])))


def episodes_of(data, spec) -> list[RecordedEpisode]:
    episodes, i = [], 0
    while f"in{i}_rewards" in data:
        done, interrupted = (bool(x) for x in data[f"in{i}_flags"])
        episodes.append(RecordedEpisode(
            [data[f"in{i}_obs_{j}"] for j in range(len(spec.observation_specs))],
            data[f"in{i}_cont"] if spec.action_spec.continuous_size else None,
            data[f"in{i}_disc"] if spec.action_spec.discrete_size else None,
            data[f"in{i}_rewards"], done, interrupted,
            data[f"in{i}_masks"] if f"in{i}_masks" in data else None))
        i += 1
    return episodes


def in_mlagents_order(demo, data, prefix: str):
    """The demonstration with its files in the order ML-Agents listed the directory."""
    names = [Path(f).name for f in demo.files]
    order = [names.index(str(n)) for n in data[f"{prefix}files"]]
    return dataclasses.replace(demo, records=tuple(demo.records[k] for k in order))


def assert_rows(rows: dict, data, prefix: str, spec) -> None:
    """``Demonstration.mlagents_rows()`` equal to what ML-Agents' ``demo_to_buffer`` built."""
    for i in range(len(spec.observation_specs)):
        np.testing.assert_array_equal(rows[f"obs_{i}"], data[f"{prefix}rows_obs_{i}"])
    if spec.action_spec.continuous_size:
        np.testing.assert_array_equal(rows["continuous_action"], data[f"{prefix}rows_continuous"])
    if spec.action_spec.discrete_size:
        np.testing.assert_array_equal(rows["discrete_action"], data[f"{prefix}rows_discrete"])
    np.testing.assert_array_equal(rows["reward"], data[f"{prefix}rows_reward"])
    np.testing.assert_array_equal(rows["done"], data[f"{prefix}rows_done"])


@pytest.mark.parametrize("case", CASES)
def test_a_file_mlagents_writes_loads_here_as_mlagents_reads_it(case):
    data = fixture(case)
    spec = spec_of(data)
    demo = in_mlagents_order(load_demo(str(path_of("theirs", case)), spec), data, "theirs_")
    assert demo.spec.action_spec == spec.action_spec
    assert ([o.shape for o in demo.spec.observation_specs]
            == [o.shape for o in spec.observation_specs])
    cat = lambda get: np.concatenate([get(r) for r in demo.records])  # noqa: E731
    assert len(cat(lambda r: r.rewards)) == int(data["theirs_expected"])
    for i in range(len(spec.observation_specs)):  # PNG cameras decoded as mlagents-envs does
        np.testing.assert_array_equal(cat(lambda r: r.observations[i]),
                                      data[f"theirs_record_obs_{i}"])
    np.testing.assert_array_equal(cat(lambda r: r.rewards), data["theirs_record_reward"])
    np.testing.assert_array_equal(cat(lambda r: r.dones), data["theirs_record_done"])
    np.testing.assert_array_equal(cat(lambda r: r.max_step_reached), data["theirs_record_max_step"])
    if spec.action_spec.discrete_size:  # decision records: ML-Agents' True = unavailable
        decisions = ~data["theirs_record_done"]
        np.testing.assert_array_equal(cat(lambda r: r.action_masks)[decisions],
                                      ~data["theirs_record_mask"][decisions])
    assert_rows(demo.mlagents_rows(), data, "theirs_", spec)


@pytest.mark.parametrize("case", CASES)
def test_a_file_written_here_loads_in_mlagents_with_the_same_steps(case, tmp_path):
    data = fixture(case)
    spec = spec_of(data)
    ours = path_of("ours", case)
    # the committed file is what write_demo writes today
    files = sorted(ours.glob("*.demo")) if ours.is_dir() else [ours]
    episodes, at = episodes_of(data, spec), 0
    per_file = np.array_split(np.arange(len(episodes)), len(files))
    for file, part in zip(files, per_file):
        out = tmp_path / file.name
        write_demo(str(out), spec, [episodes[k] for k in part], case[:16])
        assert out.read_bytes() == file.read_bytes(), f"write_demo no longer writes {file.name}"
        at += len(part)
    # ML-Agents read our file exactly as it read the one it wrote itself
    for key in data.files:
        if key.startswith("theirs_") and key not in ("theirs_expected", "theirs_files"):
            np.testing.assert_array_equal(data["ours_" + key[len("theirs_"):]], data[key], key)
    assert_rows(in_mlagents_order(load_demo(str(ours)), data, "ours_").mlagents_rows(), data,
                "ours_", spec)


@pytest.mark.parametrize("case", CASES)
def test_episodes_in_both_pairings(case):
    data = fixture(case)
    spec = spec_of(data)
    inputs = episodes_of(data, spec)
    shifted = load_demo(str(path_of("theirs", case)))
    aligned = load_demo(str(path_of("ours", case)), pairing="aligned")
    assert shifted.pairing == "mlagents" and len(shifted.episodes) == len(inputs)
    assert shifted.num_steps == sum(len(e.rewards) for e in inputs)
    cont, disc = spec.action_spec.continuous_size, spec.action_spec.discrete_size
    kept = [e for e in inputs if not e.done or len(e.rewards) > 1]
    assert len(aligned.episodes) == len(kept)
    for ep, got in zip(inputs, shifted.episodes):
        steps = len(ep.rewards)
        for i, obs in enumerate(ep.observations):
            np.testing.assert_allclose(got.observations[i], obs[:steps])
        np.testing.assert_array_equal(got.rewards, ep.rewards)
        np.testing.assert_array_equal(got.dones, [False] * (steps - 1) + [ep.done])
        np.testing.assert_array_equal(got.interrupted, [False] * (steps - 1) + [ep.interrupted])
        if cont:  # obs_t with a_{t-1}, zeros at the first step
            np.testing.assert_array_equal(got.continuous_actions[1:], ep.continuous_actions[:-1])
            assert not got.continuous_actions[0].any()
        if disc:
            np.testing.assert_array_equal(got.discrete_actions[1:], ep.discrete_actions[:-1])
        if ep.action_masks is not None:
            np.testing.assert_array_equal(got.action_masks, ep.action_masks)
    for ep, got in zip(kept, aligned.episodes):
        steps = len(ep.rewards) - (1 if ep.done else 0)  # the last decision's action is lost
        assert len(got) == steps
        np.testing.assert_allclose(got.observations[0], ep.observations[0][:steps])
        if cont:  # obs_t with a_t
            np.testing.assert_array_equal(got.continuous_actions, ep.continuous_actions[:steps])
        if disc:
            np.testing.assert_array_equal(got.discrete_actions, ep.discrete_actions[:steps])
        np.testing.assert_array_equal(got.rewards, ep.rewards[:steps])


def test_a_directory_reads_its_files_in_name_order():
    directory = path_of("theirs", "hybrid_dir")
    whole = load_demo(str(directory))
    parts = [load_demo(str(directory / name)) for name in ("a.demo", "b.demo")]
    assert [Path(f).name for f in whole.files] == ["a.demo", "b.demo"]
    assert len(whole.episodes) == sum(len(p.episodes) for p in parts)
    np.testing.assert_array_equal(whole.episodes[-1].observations[0],
                                  parts[1].episodes[-1].observations[0])


def test_a_spec_mismatch_names_the_file_and_the_difference():
    data = fixture("vector_discrete")
    path = path_of("theirs", "vector_discrete")
    with pytest.raises(DemoSpecError, match=r"theirs_vector_discrete.demo records observation 0 "
                                            r"of shape \(6,\), the behavior has \(7,\)"):
        load_demo(str(path), spec_of(data, [(7,), (3,)]))
    with pytest.raises(DemoSpecError, match="records 2 observations"):
        load_demo(str(path), spec_of(data, [(6,)]))
    other = BehaviorSpec(spec_of(data).observation_specs, ActionSpec(0, (3, 3)))
    with pytest.raises(DemoSpecError, match=r"action spec \(continuous 0, discrete branches "
                                            r"\(3, 2\)\), the behavior has .*\(3, 3\)"):
        load_demo(str(path), other)


def test_a_directory_of_different_behaviors_is_refused(tmp_path):
    for case, name in (("vector_discrete", "a.demo"), ("hybrid_dir", "b.demo")):
        source = path_of("theirs", case)
        source = source / "a.demo" if source.is_dir() else source
        (tmp_path / name).write_bytes(source.read_bytes())
    with pytest.raises(DemoSpecError, match="b.demo records the action spec"):
        load_demo(str(tmp_path))


def test_truncated_and_corrupt_files_name_the_file_and_offset(tmp_path):
    data = path_of("theirs", "visual_continuous").read_bytes()
    bad = tmp_path / "bad.demo"
    demo = load_demo(str(path_of("theirs", "visual_continuous")))
    n_records = sum(len(r) for r in demo.records)

    def error(content: bytes) -> DemoFileError:
        bad.write_bytes(content)
        with pytest.raises(DemoFileError) as caught:
            load_demo(str(bad))
        assert isinstance(caught.value, UserError) and str(bad) in str(caught.value)
        return caught.value

    cut = error(data[:-200])  # inside the last record
    assert cut.offset is not None and "truncated" in str(cut)
    assert f"at byte {cut.offset}" in str(cut)
    # cut exactly after a record: fewer records than the meta announces
    ours = path_of("ours", "visual_continuous").read_bytes()
    short = error(ours[:len(ours) - _last_record_size(ours)])
    assert f"of the {n_records} records" in str(short)
    assert "inside a length prefix" in str(error(ours[:33] + b"\x80"))
    assert error(b"").offset == 0
    assert "before the brain parameters" in str(error(data[:32]))
    assert "past byte 33" in str(error(b"\x2c\x08\x01\x12\x28" + b"x" * 40 + data[33:]))
    garbage = error(data[:40] + b"\xff" * 60 + data[100:])
    assert garbage.offset is not None and "corrupt" in str(garbage)
    version = bytearray(data)
    assert version[1:3] == b"\x08\x01"  # api_version 1
    version[2] = 2
    assert "api_version 2" in str(error(bytes(version)))


def _last_record_size(data: bytes) -> int:
    """Bytes of the final length-delimited record of a file written without trailing bytes."""
    pos = 33
    sizes = []
    while pos < len(data):
        value, shift, start = 0, 0, pos
        while True:
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            pos += 1
            if not byte & 0x80:
                break
            shift += 7
        pos += value
        sizes.append(pos - start)
    return sizes[-1]


def test_bad_paths_are_user_errors(tmp_path):
    with pytest.raises(DemoError, match="does not exist"):
        load_demo(str(tmp_path / "missing.demo"))
    with pytest.raises(DemoError, match="holds no .demo files"):
        load_demo(str(tmp_path))
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(DemoError, match="is not a .demo file"):
        load_demo(str(tmp_path / "x.txt"))
    with pytest.raises(DemoError, match="pairing"):
        load_demo(str(path_of("ours", "vector_discrete")), pairing="next")


def test_the_writer_checks_its_input(tmp_path):
    data = fixture("vector_discrete")
    spec = spec_of(data)
    episodes = episodes_of(data, spec)
    with pytest.raises(DemoError, match="use a shorter name"):
        write_demo(str(tmp_path / "a.demo"), spec, episodes[:1], "a" * 30)
    with pytest.raises(DemoError, match="observation 1 has shape"):
        write_demo(str(tmp_path / "a.demo"), spec, [dataclasses.replace(
            episodes[0], observations=[episodes[0].observations[0],
                                       episodes[0].observations[1][:-1]])])
    with pytest.raises(DemoError, match="only the last episode may be unfinished"):
        write_demo(str(tmp_path / "a.demo"), spec, [episodes[-1], episodes[0]])
    with pytest.raises(DemoError, match="must end in .demo"):
        write_demo(str(tmp_path / "a.bin"), spec, episodes)
    meta = write_demo(str(tmp_path / "a.demo"), spec, episodes)
    assert meta.name == "a" and meta.number_episodes == 4  # 3 done, and one more at close
    assert meta.number_steps == sum(len(e.rewards) + 1 for e in episodes)
