"""Self-play over Ray actors: opponent swaps and the team change travel on the control channel
to Ray actors as to local processes (``docs/self-play.md``)."""
from __future__ import annotations

import pytest

from tests.runtime.test_ray_backend import assert_no_builds_left
from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import apply_overrides
from unity_rl.training import trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_soccer_twos_self_play_over_ray(mode, ray_cluster, tmp_path, free_base_port):
    from tests.selfplay.test_selfplay_training import scalars, small

    port = free_base_port(1)
    cfg = apply_overrides(small(port, mode), backend="ray", ray_address=ray_cluster.address)
    result = trainer.train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted and result.policy_path.exists()
    assert "Self-play/ELO" in scalars(tmp_path / "run", "SoccerTwos")
    ghost = CheckpointManager(tmp_path / "run").load()["behaviors"]["SoccerTwos"]["learner"]["ghost"]
    assert ghost["last_team_change"] > 0 and ghost["ghost_step"] > 0
    assert_no_builds_left([port])
