"""The supervisor's rules over a scripted in-process transport (no processes, no Ray).

What the transport delivers and launches is recorded; what it "sees" is queued by the test.
Checked: the sync-round handoff of a replacement, the control state a replacement is launched
with and gets again when it changed while it started, reports of a replaced incarnation
ignored, and the spent budget's error.
"""
from __future__ import annotations

import pytest

from tests.runtime.test_wirings import spec
from unity_rl.runtime.messages import (
    ActorFailedError,
    ActorInfo,
    Control,
    FromActor,
    PolicyWeights,
    Report,
    Rollout,
    ToActor,
)
from unity_rl.runtime.supervisor import ActorSupervisor, Event, Phase


class Scripted(ActorSupervisor):
    """A transport whose incarnations are whatever the test says they do."""

    def __init__(self, specs, **options):
        super().__init__(specs, **options)
        self.launched: list[tuple[int, int, Control | None]] = []
        self.delivered: list[tuple[int, int, ToActor, object]] = []
        self.queued: list[Event] = []
        self.on_launch = "ready"
        """What every new incarnation does at once: 'ready', 'die' or nothing (None)."""

    def ready(self, k: int) -> None:
        slot = self._slots[k]
        info = ActorInfo(k, {}, 1000 * slot.generation + k, ())
        self.queued.append(Event(slot, slot.generation, Report(FromActor.READY, k, info)))

    def rollout(self, k: int, publication: int, generation: int | None = None) -> None:
        slot = self._slots[k]
        report = Report(FromActor.SEGMENT, k, Rollout(k, publication, {}))
        self.queued.append(Event(slot, generation or slot.generation, report))

    def die(self, k: int) -> None:
        slot = self._slots[k]
        self.queued.append(Event(slot, slot.generation, lost="it died (scripted)"))

    def _liveness_slice_s(self) -> float:
        return 0.0

    def _launch(self, slot, spec) -> None:
        self.launched.append((slot.actor_id, slot.generation, spec.control))
        slot.link = slot.generation
        if self.on_launch == "ready":
            self.ready(slot.actor_id)
        elif self.on_launch == "die":
            self.die(slot.actor_id)

    def _deliver(self, slot, command) -> None:
        payload = command.weights.version if command.kind is ToActor.WEIGHTS else command.control
        self.delivered.append((slot.actor_id, slot.generation, command.kind, payload))

    def _wait(self, timeout: float) -> list[Event]:
        events, self.queued = self.queued, []
        return events

    def _ready(self, slot, info):
        return info.pid

    def _beat_ages(self, slots):
        return {slot: 0.0 for slot in slots}

    def _hang_reason(self, slot, age):
        return "scripted"

    def _not_started_reason(self) -> str:
        return "scripted"

    def _discard(self, slot) -> str:
        return f"generation {slot.generation}"

    def _stop_actors(self) -> None:
        pass


def started(max_restarts: int = 3) -> Scripted:
    sup = Scripted([spec(0, sync=True), spec(1, sync=True)], max_restarts=max_restarts)
    sup.start()
    sup.on_launch = None  # replacements: the test says when they are ready
    return sup


def test_sync_replacement_waits_for_the_next_round_if_its_predecessor_delivered():
    sup = started()
    sup.broadcast(PolicyWeights(1, {}))
    sup.rollout(1, 1)
    sup.die(1)                                  # delivered round 1, then died
    sup.die(0)                                  # died while collecting round 1
    assert sup.receive(timeout=0).actor_id == 1
    assert sup.actor_restarts() == [1, 1] and sup.dropped_rollouts == 1
    sup.delivered.clear()
    sup.ready(0)
    sup.ready(1)
    assert sup.receive(timeout=0) is None
    assert sup.delivered == [(0, 2, ToActor.WEIGHTS, 1)]   # actor 1 waits for publication 2
    sup.broadcast(PolicyWeights(2, {}))
    assert sup.delivered[1:] == [(0, 2, ToActor.WEIGHTS, 2), (1, 2, ToActor.WEIGHTS, 2)]


def test_a_replacement_starts_with_the_control_state_and_gets_what_changed_meanwhile():
    sup = started()
    sup.control(Control(env_parameters={"gravity": 1.0}))
    assert [d[2:] for d in sup.delivered] == [(ToActor.CONTROL,
                                               Control(env_parameters={"gravity": 1.0}))] * 2
    sup.die(0)
    sup.receive(timeout=0)
    assert sup.launched[-1] == (0, 2, Control(env_parameters={"gravity": 1.0}))
    sup.delivered.clear()
    sup.control(Control(env_parameters={"mass": 2.0}))     # actor 0 is starting: not sent
    assert sup.delivered == [(1, 1, ToActor.CONTROL, Control(env_parameters={"mass": 2.0}))]
    sup.ready(0)
    sup.receive(timeout=0)
    assert sup.delivered[-1] == (0, 2, ToActor.CONTROL,
                                 Control(env_parameters={"gravity": 1.0, "mass": 2.0}))


def test_reports_of_a_replaced_incarnation_are_ignored():
    sup = started()
    sup.broadcast(PolicyWeights(1, {}))
    sup.die(0)
    sup.rollout(0, 1, generation=1)             # after its death, in the same wait
    assert sup.receive(timeout=0) is None
    assert sup._slots[0].phase is Phase.STARTING and sup.incarnation_rollouts()[0] == [0, 0]


def test_a_spent_budget_names_the_actor_and_a_start_failure_is_not_retried():
    sup = started(max_restarts=0)
    sup.die(1)
    with pytest.raises(ActorFailedError, match=r"actor 1 failed: it died \(scripted\); not "
                                               r"restarted: all 0 lifetime restarts are used"):
        sup.receive(timeout=0)
    starting = Scripted([spec(0, sync=True)], max_restarts=5)
    starting.on_launch = "die"
    with pytest.raises(ActorFailedError, match=r"^actor 0 failed: it died \(scripted\)$"):
        starting.start()
    assert starting.restarts == 0
