"""The stand-in scenes, by build name (``unity_builds/<name>.x86_64`` runs ``SCENES[name]``).

=============  ===============================================  ======  ========  ========
build          behaviors (name as sent)                         agents  decision  MaxStep
                                                                        period
=============  ===============================================  ======  ========  ========
3DBall         ``3DBall?team=0``: 8 obs, 2 continuous actions   12      5         5000
Basic          ``Basic?team=0``: one-hot 20, 1 branch of 3,     1       1         100
               action masks
VisualBall     ``VisualBall?team=0``: camera 3x84x84 (PNG) +    4       5         5000
               2 vector obs, 2 continuous actions
TwoBehaviors   ``3DBall?team=0`` (continuous) and               4 + 2   5 and 1   5000/100
               ``Basic?team=0`` (discrete) in one build
GridWorld      ``GridWorld?team=0``: camera 3x64x84 (PNG) +     9       1         100
               goal signal 2 (GOAL_SIGNAL), 1 branch of 5,
               action masks; ``--standin-gridworld-tinted``:
               camera 3x40x40 only, period 5, MaxStep 500
FoodCollector  ``FoodCollector?team=0``: 8 obs, 3 continuous +   8       5         1000
               1 branch of 2 (hybrid)
FloatGrid      ``FloatGrid?team=0``: float grid 2x6x6           4       1         100
               (uncompressed) + 2 obs, 1 branch of 5
3DBallHard     ``3DBallHard?team=0``: stacked 27 + 18 obs       12      5         5000
               (9 stacks), 2 continuous actions
Visual3DBall   ``Visual3DBall?team=0``: stacked camera          8       5         5000
               12x84x84 (PNG, 4 stacks), 2 continuous
GridFood-      ``GridFoodCollector?team=0``: grid sensor        20      5         5000
Collector      5x40x40 (PNG), 3 continuous + 1 branch of 2
VisualFood-    ``VisualFoodCollector?team=0``: camera 3x84x84   8       5         5000
Collector      (PNG) + frozen flag 1, 3 continuous + [2]
Hallway        ``Hallway?team=0``: stacked rays 105 (3 stacks) +   17      6         3000
               stacked StepCount/MaxStep 3, 1 branch of 5;
               the cue is seen only at the first decision
Pyramids       ``Pyramids?team=0``: 3 ray sensors 56 each + switch    16      5         5000
               state and velocity 4, 1 branch of 5; sparse: +2
               at the gold brick (``--standin-heuristic``)
Sorter         ``Sorter?team=0``: buffer sensor (20, 23) +       8       5         5000
               RB 10 + stacked vector 8, branches [3,3,3];
               reads ``num_tiles``
PushBlock-     ``PushBlockCollab?team=0``: grid 6x20x20 (PNG) +   12      5         0 (group
Collab         RB 10, 1 branch of 7; 4 groups of 3              (4x3)             5000)
DungeonEscape  ``DungeonEscape?team=0``: RB 10 + stacked rays   36      5         0 (group
               360 + key 1, 1 branch of 7; 12 groups of 3       (12x3)            15000)
SoccerTwos     ``SoccerTwos?team=0`` / ``?team=1``: rays 264 + 72,   32      5         0 (group
               [3,3,3]; 2 v 2 per field, one group per team     (8x4)             5000)
StrikersVs-    ``Striker?team=0``: rays 231 + 63; ``Goalie?team=1``: 16 + 8  5         0 (group
Goalie         rays 738; [3,3,3] both                           (8x3)             5000)
Mock           from ``--standin-spec JSON_OR_PATH`` (unity_rl.testing, docs/testing.md)
=============  ===============================================  ======  ========  ========

A value may also be a callable ``(PlayerOptions) -> tuple[BehaviorDef, ...]`` for a scene whose
behaviors come from its options (Mock, GridWorld); it raises OptionError for bad options.
"""
from __future__ import annotations

from typing import Callable, Union

from unity_rl.standin.scenes.ball3d import Ball3DModel
from unity_rl.standin.scenes.base import BehaviorDef
from unity_rl.standin.scenes.basic import BasicModel
from unity_rl.standin.scenes.float_grid import FloatGridModel
from unity_rl.standin.scenes.food_collector import FoodCollectorModel
from unity_rl.standin.scenes.gridworld import gridworld_scene
from unity_rl.standin.scenes.mock import mock_scene
from unity_rl.standin.scenes.visual_ball import VisualBallModel
# Unity's example scenes , part A
from unity_rl.standin.scenes.ball3d_hard import Ball3DHardModel
from unity_rl.standin.scenes.food_areas import GridFoodCollectorModel, VisualFoodCollectorModel
from unity_rl.standin.scenes.visual_3dball import Visual3DBallModel

# zoo (part B): Unity's Crawler, Walker, Worm, PushBlock, WallJump, Match3 (docs/zoo.md)
from unity_rl.standin.scenes.blocks import PushBlockModel, WallJumpModel  # noqa: E402
from unity_rl.standin.scenes.hallway import HallwayModel  # noqa: E402
from unity_rl.standin.scenes.pyramids import PyramidsModel  # noqa: E402
from unity_rl.standin.scenes.sorter import SorterModel  # noqa: E402
from unity_rl.standin.scenes.collab import PushBlockCollabModel  # noqa: E402
from unity_rl.standin.scenes.dungeon_escape import DungeonEscapeModel  # noqa: E402
from unity_rl.standin.scenes.soccer import SoccerTwosModel, StrikersVsGoalieModel  # noqa: E402
from unity_rl.standin.scenes.locomotion import CrawlerModel, WalkerModel, WormModel  # noqa: E402
from unity_rl.standin.scenes.match3 import (  # noqa: E402
    Match3Model,
    Match3SimpleModel,
    Match3SmartModel,
    Match3VisualModel,
)

SCENES: dict[str, Union[tuple[BehaviorDef, ...], Callable[..., tuple[BehaviorDef, ...]]]] = {
    "3DBall": (BehaviorDef("3DBall?team=0", Ball3DModel, 12, 5, 5000),),
    "Basic": (BehaviorDef("Basic?team=0", BasicModel, 1, 1, 100),),
    "VisualBall": (BehaviorDef("VisualBall?team=0", VisualBallModel, 4, 5, 5000),),
    "TwoBehaviors": (
        BehaviorDef("3DBall?team=0", Ball3DModel, 4, 5, 5000),
        BehaviorDef("Basic?team=0", BasicModel, 2, 1, 100),
    ),
    "GridWorld": gridworld_scene,  # Unity's shape; --standin-gridworld-tinted: the earlier one
    "FoodCollector": (BehaviorDef("FoodCollector?team=0", FoodCollectorModel, 8, 5, 1000),),
    "FloatGrid": (BehaviorDef("FloatGrid?team=0", FloatGridModel, 4, 1, 100),),
    "Mock": mock_scene,
    # Unity's example scenes , part A
    "3DBallHard": (BehaviorDef("3DBallHard?team=0", Ball3DHardModel, 12, 5, 5000),),
    "Visual3DBall": (BehaviorDef("Visual3DBall?team=0", Visual3DBallModel, 8, 5, 5000),),
    "GridFoodCollector": (
        BehaviorDef("GridFoodCollector?team=0", GridFoodCollectorModel, 20, 5, 5000),),
    "VisualFoodCollector": (
        BehaviorDef("VisualFoodCollector?team=0", VisualFoodCollectorModel, 8, 5, 5000),),
}

# zoo (part B): shaped like Unity's example scenes (behavior names, sensors, actions, decision
# periods and MaxStep as unity_builds/README.md and docs/zoo.md list them).
SCENES.update({
    "Crawler": (BehaviorDef("Crawler?team=0", CrawlerModel, 10, 5, 5000),),
    "Walker": (BehaviorDef("Walker?team=0", WalkerModel, 10, 5, 5000),),
    "Worm": (BehaviorDef("Worm?team=0", WormModel, 10, 5, 5000),),
    "PushBlock": (BehaviorDef("PushBlock?team=0", PushBlockModel, 32, 5, 5000),),
    "WallJump": (  # one set of 24 agents, switching behavior by wall height (Unity's SetModel)
        BehaviorDef("SmallWallJump?team=0", WallJumpModel, 24, 5, 2000, pool="WallJump"),
        BehaviorDef("BigWallJump?team=0", WallJumpModel, 24, 5, 2000, pool="WallJump"),
    ),
    "Match3": (  # 12 boards; MaxStep 500 = Unity's EpisodeInterrupted after 500 moves
        BehaviorDef("Match3VectorObs?team=0", Match3Model, 4, 1, 500),
        BehaviorDef("Match3VisualObs?team=0", Match3VisualModel, 4, 1, 500),
        BehaviorDef("Match3SmartHeuristic?team=0", Match3SmartModel, 2, 1, 500),
        BehaviorDef("Match3SimpleHeuristic?team=0", Match3SimpleModel, 2, 1, 500),
    ),
    # a T-maze whose cue is seen only at the first decision: the task needs memory (hallway.py)
    "Hallway": (BehaviorDef("Hallway?team=0", HallwayModel, 17, 6, 3000),),
    # press a switch, knock the pyramid it raises, touch the gold brick: sparse (pyramids.py)
    "Pyramids": (BehaviorDef("Pyramids?team=0", PyramidsModel, 16, 5, 5000),),
    # numbered tiles seen through a buffer sensor (20, 23); reads num_tiles (sorter.py)
    "Sorter": (BehaviorDef("Sorter?team=0", SorterModel, 8, 5, 5000),),
    # cooperative: one SimpleMultiAgentGroup per area, group rewards (collab.py, dungeon_escape.py)
    "PushBlockCollab": (BehaviorDef("PushBlockCollab?team=0", PushBlockCollabModel, 12, 5, 0),),
    "DungeonEscape": (BehaviorDef("DungeonEscape?team=0", DungeonEscapeModel, 36, 5, 0),),
    # competitive: two teams in one pool of agents, one group per team and field (soccer.py)
    "SoccerTwos": (BehaviorDef("SoccerTwos?team=0", SoccerTwosModel, 32, 5, 0, pool="Soccer"),
                   BehaviorDef("SoccerTwos?team=1", SoccerTwosModel, 32, 5, 0, pool="Soccer")),
    "StrikersVsGoalie": (
        BehaviorDef("Striker?team=0", StrikersVsGoalieModel, 24, 5, 0, pool="Soccer"),
        BehaviorDef("Goalie?team=1", StrikersVsGoalieModel, 24, 5, 0, pool="Soccer")),
})

__all__ = ["SCENES", "BehaviorDef"]
