"""Match3: Unity's Match3 example — a real (small) match-3 game, with Unity's Match3 sensors and
actuator as Python sees them.

The build has 12 boards, one agent each, in four behaviors (Unity's Match3.unity):
``Match3VectorObs?team=0`` (4), ``Match3VisualObs?team=0`` (4), ``Match3SmartHeuristic?team=0``
(2) and ``Match3SimpleHeuristic?team=0`` (2). All four talk to the trainer; the two heuristic
behaviors (Unity's ``ForceHeuristic``) ignore the action they receive and play their own move:
Smart the greedy one (most points now), Simple a random valid one.

* Board: up to 9 rows x 8 columns (the sensors' size); each episode draws its current size,
  rows 6..9 and columns 6..8 (Unity's MinRows..MaxRows, MinColumns..MaxColumns); 6 cell types,
  special types 0 (none), 1 and 2. Row 0 is the bottom; cleared cells are refilled from above.
* Move: one discrete branch of 127 = 9 x 7 horizontal swaps (index r * 7 + c swaps (r, c) and
  (r, c + 1)) then 8 x 8 vertical swaps (index 63 + r * 8 + c swaps (r, c) and (r + 1, c)),
  Unity's ``Move.FromMoveIndex`` order. Action mask (True = unavailable): moves outside the
  current board and swaps that make no line of 3 (Unity masks invalid moves).
* Resolution (Unity's FastUpdate): clear every line of 3 or more of one type, let cells fall,
  refill from above, repeat while lines form. Points per cleared cell: 1 (basic), 2 (special 1),
  3 (special 2); a move clearing 4 cells at once leaves a special-1 cell of its type where the
  moved cell landed, 5 or more a special-2 one. Reward 0.01 x points (AddReward). A board with
  no valid move is dealt again.
* A decision every academy step (Unity's agent calls RequestDecision every FixedUpdate when
  training); the episode is interrupted after 500 moves (Unity: MaxStep 0 and
  EpisodeInterrupted after MaxMoves 500: the same ``interrupted`` terminal at the 500th move).
* Observations, sensor names as Unity's: ``Match3 Sensor (cells)``: one-hot of the cell type per
  cell (6), ``Match3 Sensor (special)``: one-hot of the special type (3); zeros outside the
  current board. Vector behaviors: flat, row by row: (432,) and (216,). Visual behavior: PNG
  planes (6, 9, 8) (two RGB PNGs back to back, as Unity compresses 6 channels) and (3, 9, 8).
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import onehot_planes_png
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

ROWS, COLS, TYPES, SPECIALS = 9, 8, 6, 3
OUTSIDE = -2
N_MOVES = ROWS * (COLS - 1) + (ROWS - 1) * COLS  # 127
_H = np.arange(ROWS * (COLS - 1))
_V = np.arange((ROWS - 1) * COLS)
R1 = np.concatenate([_H // (COLS - 1), _V // COLS])
C1 = np.concatenate([_H % (COLS - 1), _V % COLS])
R2 = R1 + np.concatenate([np.zeros_like(_H), np.ones_like(_V)])
C2 = C1 + np.concatenate([np.ones_like(_H), np.zeros_like(_V)])
POINTS = np.array([1, 2, 3])
REWARD_PER_POINT = 0.01


def matches(cells: np.ndarray) -> np.ndarray:
    """Cells [..., ROWS, COLS] that belong to a horizontal or vertical line of 3+ of one type."""
    ok = cells >= 0
    m = np.zeros(cells.shape, bool)
    h = ok[..., :, :-2] & (cells[..., :, :-2] == cells[..., :, 1:-1]) \
        & (cells[..., :, 1:-1] == cells[..., :, 2:])
    m[..., :, :-2] |= h
    m[..., :, 1:-1] |= h
    m[..., :, 2:] |= h
    v = ok[..., :-2, :] & (cells[..., :-2, :] == cells[..., 1:-1, :]) \
        & (cells[..., 1:-1, :] == cells[..., 2:, :])
    m[..., :-2, :] |= v
    m[..., 1:-1, :] |= v
    m[..., 2:, :] |= v
    return m


def swapped(cells: np.ndarray) -> np.ndarray:
    """Every move applied to one board: [N_MOVES, ROWS, COLS]."""
    boards = np.repeat(cells[None], N_MOVES, 0)
    m = np.arange(N_MOVES)
    boards[m, R1, C1], boards[m, R2, C2] = cells[R2, C2], cells[R1, C1]
    return boards


class Match3Model:
    VISUAL = False
    HEURISTIC = ""  # "", "smart" or "simple"
    spec = BehaviorSpecDef(
        obs=(ObsSpec("Match3 Sensor (cells)", (ROWS * COLS * TYPES,), dimension_properties=(1,)),
             ObsSpec("Match3 Sensor (special)", (ROWS * COLS * SPECIALS,),
                     dimension_properties=(1,))),
        branches=(N_MOVES,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng = rng
        self.cells = np.full((n, ROWS, COLS), OUTSIDE, np.int64)
        self.special = np.zeros((n, ROWS, COLS), np.int64)
        self.size = np.zeros((n, 2), np.int64)
        self.valid = np.zeros((n, N_MOVES), bool)
        """Per board, the moves that make a line (kept up to date after every change)."""

    # -- the game -----------------------------------------------------------------------------

    def _deal(self, i: int) -> None:
        """Unity's InitSettled: random cells without lines, and at least one valid move."""
        rows, cols = self.size[i]
        while True:
            cells = np.full((ROWS, COLS), OUTSIDE, np.int64)
            cells[:rows, :cols] = self.rng.integers(0, TYPES, (rows, cols))
            while True:
                m = matches(cells)
                if not m.any():
                    break
                cells[m] = self.rng.integers(0, TYPES, int(m.sum()))
            self.cells[i], self.special[i] = cells, 0
            self.valid[i] = self._valid(i)
            if self.valid[i].any():
                return

    def _valid(self, i: int) -> np.ndarray:
        """[N_MOVES] bool: inside the board and making a line."""
        cells = self.cells[i]
        inside = (cells[R1, C1] >= 0) & (cells[R2, C2] >= 0)
        m = matches(swapped(cells))
        k = np.arange(N_MOVES)
        return inside & (m[k, R1, C1] | m[k, R2, C2])

    def _greedy(self, i: int) -> int:
        valid = self.valid[i]
        boards = swapped(self.cells[i])
        specials = swapped(self.special[i])
        gain = (matches(boards) * POINTS[specials]).sum((1, 2))
        gain = np.where(valid, gain + self.rng.uniform(0, 0.5, N_MOVES), -1)
        return int(gain.argmax())

    def _play(self, i: int, move: int) -> int:
        """Makes a move and resolves the board; returns the points earned (0 if invalid)."""
        cells, special = self.cells[i], self.special[i]
        r1, c1, r2, c2 = R1[move], C1[move], R2[move], C2[move]
        if cells[r1, c1] < 0 or cells[r2, c2] < 0:
            return 0
        cells[[r1, r2], [c1, c2]] = cells[[r2, r1], [c2, c1]]
        special[[r1, r2], [c1, c2]] = special[[r2, r1], [c2, c1]]
        points, first = 0, True
        rows, cols = self.size[i]
        while True:
            m = matches(cells)
            if not m.any():
                break
            points += int(POINTS[special[m]].sum())
            keep = None
            if first and m.sum() >= 4:  # a big match leaves a special cell behind
                keep = (r2, c2) if m[r2, c2] else (r1, c1)
                kind, kept_type = (1 if m.sum() == 4 else 2), cells[keep]
            cells[m] = -1
            special[m] = 0
            if keep is not None:
                cells[keep], special[keep] = kept_type, kind
            first = False
            for c in range(cols):  # fall and refill from above
                col, spc = cells[:rows, c], special[:rows, c]
                stay = col >= 0
                n_stay = int(stay.sum())
                new_col = np.concatenate([col[stay], self.rng.integers(0, TYPES, rows - n_stay)])
                new_spc = np.concatenate([spc[stay], np.zeros(rows - n_stay, np.int64)])
                cells[:rows, c], special[:rows, c] = new_col, new_spc
        self.valid[i] = self._valid(i)
        if not self.valid[i].any():
            self._deal(i)
        return points

    # -- Unity's agent ------------------------------------------------------------------------

    def reset(self, idx: np.ndarray) -> None:
        for i in idx.tolist():
            self.size[i] = self.rng.integers(6, ROWS + 1), self.rng.integers(6, COLS + 1)
            self._deal(i)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        reward = np.zeros(len(idx))
        for j, i in enumerate(idx.tolist()):
            if self.HEURISTIC == "smart":
                move = self._greedy(i)
            elif self.HEURISTIC == "simple":
                move = int(self.rng.choice(np.flatnonzero(self.valid[i])))
            else:
                move = int(discrete[j, 0])
            if not 0 <= move < N_MOVES:
                continue
            reward[j] = REWARD_PER_POINT * self._play(i, move)
        return reward, np.zeros(len(idx), bool)

    def physics_step(self) -> None:
        pass

    def planes(self, idx: np.ndarray):
        """One-hot planes [k, 6, ROWS, COLS] and [k, 3, ROWS, COLS] (zeros outside the board)."""
        cells, special = self.cells[idx], self.special[idx]
        inside = cells >= 0
        cell_planes = (cells[:, None] == np.arange(TYPES)[None, :, None, None]) & inside[:, None]
        spec_planes = (special[:, None] == np.arange(SPECIALS)[None, :, None, None]) \
            & inside[:, None]
        return cell_planes.astype(np.float32), spec_planes.astype(np.float32)

    def observe(self, idx: np.ndarray) -> list:
        cell_planes, spec_planes = self.planes(idx)
        if self.VISUAL:
            return [[onehot_planes_png(p) for p in cell_planes],
                    [onehot_planes_png(p) for p in spec_planes]]
        k = len(idx)  # Unity's vector layout: row by row, cell by cell, one-hot last
        return [cell_planes.transpose(0, 2, 3, 1).reshape(k, -1),
                spec_planes.transpose(0, 2, 3, 1).reshape(k, -1)]

    def action_mask(self, idx: np.ndarray) -> np.ndarray:
        return ~self.valid[idx]


class Match3VisualModel(Match3Model):
    VISUAL = True
    spec = BehaviorSpecDef(
        obs=(ObsSpec("Match3 Sensor (cells)", (TYPES, ROWS, COLS), png=True,
                     dimension_properties=(1, 2, 2)),
             ObsSpec("Match3 Sensor (special)", (SPECIALS, ROWS, COLS), png=True,
                     dimension_properties=(1, 2, 2))),
        branches=(N_MOVES,),
    )


class Match3SmartModel(Match3Model):
    HEURISTIC = "smart"


class Match3SimpleModel(Match3Model):
    HEURISTIC = "simple"
