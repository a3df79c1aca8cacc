"""Recording a stand-in's built-in heuristic as a Unity ``.demo`` (what Unity's Demonstration
Recorder writes for an agent under Behavior Type "Heuristic Only").

``record_heuristic_demo(scene, path, episodes)`` runs the scene's ``Academy`` in this process
(no build, no gRPC: the same lifecycle, decision periods, MaxStep and rewards as the build),
every agent of the behavior acting by the scene's heuristic
(``unity_rl.standin.scenes.heuristics``), and records one agent (``agent``, by index) with
``unity_rl.demos.EpisodeRecorder`` until it has finished ``episodes`` episodes. Command line::

    python -m unity_rl.standin.record PushBlock --episodes 20 --output Demos/ExpertPushBlock.demo

Stand-in code: no product module imports it.
"""
from __future__ import annotations

import argparse
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unity_rl.demos.format import DemoMeta
from unity_rl.demos.recorder import EpisodeRecorder
from unity_rl.standin.academy import Academy
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes import SCENES
from unity_rl.standin.scenes.heuristics import heuristic_for
from unity_rl.standin.wire_input import ActionBatch

MAX_ACADEMY_STEPS = 5_000_000
"""Safety stop of a recording (an agent that never finishes its episodes)."""


@dataclass(frozen=True)
class Recording:
    """What ``record_heuristic_demo`` wrote."""

    meta: DemoMeta
    returns: tuple[float, ...]
    """The recorded agent's return per finished episode."""


def behavior_spec(model) -> object:
    """The mlagents_envs ``BehaviorSpec`` a stand-in model announces."""
    from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty,
                                        ObservationSpec, ObservationType)

    obs = [ObservationSpec(tuple(s.shape), tuple(DimensionProperty(p) for p in
                                                 (s.dimension_properties or (1,) * len(s.shape))),
                           ObservationType(s.observation_type), s.name)
           for s in model.spec.obs]
    return BehaviorSpec(obs, ActionSpec(model.spec.continuous, tuple(model.spec.branches)))


def _row(observation, r: int) -> np.ndarray:
    """Agent row ``r`` of one sensor's batch (PNG bytes decoded to [0, 1] channel-first)."""
    if isinstance(observation, np.ndarray):
        return observation[r]
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(observation[r])), np.float32) / 255.0
    return image.reshape(*image.shape[:2], -1).transpose(2, 0, 1)


def record_heuristic_demo(scene: str, path: str | Path, episodes: int, *, seed: int = 0,
                          behavior: str | None = None, agent: int = 0,
                          name: str | None = None, opts: PlayerOptions | None = None
                          ) -> Recording:
    """Plays ``scene`` with its heuristic and writes agent ``agent``'s first ``episodes``
    episodes to ``path`` (module doc)."""
    defs = SCENES[scene]
    opts = opts or PlayerOptions()
    defs = defs(opts) if callable(defs) else defs
    academy = Academy(defs, opts, seed=seed)
    group = academy.by_name[behavior] if behavior else academy.groups[0]
    heuristic = heuristic_for(group.model)
    if heuristic is None:
        raise ValueError(f"the stand-in scene {scene} has no heuristic for {group.name} "
                         "(unity_rl/standin/scenes/heuristics.py)")
    target = group.ids[agent]
    recorder, pending, returns, ret = EpisodeRecorder(), False, [], 0.0
    for _ in range(MAX_ACADEMY_STEPS):
        if len(recorder.episodes) >= episodes:
            break
        message = academy.begin_step()
        if message is not None:
            for batch in message.batches.get(group.name, ()):
                rows = np.flatnonzero(batch.ids == target)
                if not len(rows):
                    continue
                r, obs = rows[0], [_row(o, rows[0]) for o in batch.obs]
                if pending:
                    recorder.outcome(float(batch.rewards[r]), bool(batch.done),
                                     bool(batch.done and batch.max_step_reached[r]), obs)
                    ret += float(batch.rewards[r])
                    pending = False
                    if batch.done:
                        returns.append(ret)
                        ret = 0.0
                if not batch.done:
                    decision_obs, mask = obs, batch.action_mask
                    pending = True
            actions = {}
            for g in academy.groups:
                if not len(g.deciding):
                    continue
                act = heuristic_for(g.model)
                if act is None:
                    continue  # other behaviors: zeros (the academy's default)
                cont, disc = act(g.model, g.deciding)
                actions[g.name] = ActionBatch(np.asarray(cont, np.float32),
                                              np.asarray(disc, np.int32))
                if g is group and pending and target in g.ids[g.deciding]:
                    k = int(np.flatnonzero(g.ids[g.deciding] == target)[0])
                    allowed = None if mask is None else ~np.asarray(mask[k], bool)
                    recorder.decide(decision_obs, cont[k], disc[k], allowed)
            academy.apply_actions(actions)
        academy.end_step()
    else:
        raise RuntimeError(f"{scene}: {len(recorder.episodes)} of {episodes} episodes after "
                           f"{MAX_ACADEMY_STEPS} academy steps")
    meta = recorder.write(str(path), behavior_spec(group.model),
                          name=name or Path(path).stem[:16],
                          behavior_name=group.name.split("?", 1)[0])
    return Recording(meta, tuple(returns[:episodes]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m unity_rl.standin.record",
        description="Record a stand-in scene's heuristic as a Unity .demo file.")
    parser.add_argument("scene", help="stand-in build name (PushBlock, Crawler, Hallway, ...)")
    parser.add_argument("--output", required=True, help=".demo file to write")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--behavior", help="behavior name as sent (default: the scene's first)")
    args = parser.parse_args(argv)
    done = record_heuristic_demo(args.scene, args.output, args.episodes, seed=args.seed,
                                 behavior=args.behavior)
    mean = float(np.mean(done.returns)) if done.returns else float("nan")
    print(f"wrote {args.output}: {done.meta.number_steps} records, "
          f"{len(done.returns)} episodes, mean return {mean:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
