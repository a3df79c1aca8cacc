"""Decoupled PPO for lagged rows (Hilton et al. 2021, "Batch size-invariance for policy
optimization", arXiv:2110.00641), shared by the on-policy learners (PPO, POCA).

In the async wiring a segment may have been acted with weights one or more updates old (its
*lag*). Plain PPO centres its trust region on the policy that acted, π_behav: the ratio
π_θ/π_behav of a lagged row starts the update already away from 1 by the updates since, so the
clip stops its step sooner and PPO learns less per agent-step. The decoupled objective separates
the two roles π_behav plays:

- the trust region is centred on the *proximal* policy π_prox, the learner's weights when the
  update starts: r = π_θ/π_prox, clipped to 1 ± ε;
- each term is weighted by π_prox/π_behav (no gradient), the importance weight that keeps the
  estimate one of the policy that acted.

For a row acted with the current weights (lag 0) π_prox is π_behav: its weight is 1 and its term
is PPO's. Sync runs (lag 0 throughout) never get here, and their update stays ML-Agents'
weight for weight; the proximal log-probs are computed only for a buffer that holds lagged rows.
Opt-in (``unity_rl.lag_correction: decoupled``): measured better on pipelined 3DBall, worse on
pipelined GridWorld (docs/ppo.md, "Lagged rows").

- ``stale_rows(lags, lengths, sequence_length)``: the mask of a buffer's lagged rows, padded as
  the batch is (None when no row is lagged);
- ``proximal_logprobs(model, workspace, batch, unit_batch)``: the behaviour's actions' log-probs
  under the current weights, through the minibatch path of both learners (rows, or memory
  sequences from their stored memories), so the first minibatch's ratio is exactly 1;
- ``anchor(behaviour, proximal, stale)``: the ratio's centre and the behaviour weight.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from unity_rl.algorithms.image_layout import MinibatchWorkspace, converted_once
from unity_rl.algorithms.sequences import pad_sequences, sequence_rows


def stale_rows(lags: Sequence[int] | None, lengths: Sequence[int],
               sequence_length: int = 1) -> np.ndarray | None:
    """[N] bool: True on the rows of trajectories acted with older weights (lag > 0), each
    trajectory padded to whole sequences as the batch's rows (padding False); None when ``lags``
    is None or no trajectory is lagged."""
    if lags is None or not any(lag > 0 for lag in lags):
        return None
    if len(lags) != len(lengths):
        raise ValueError(f"{len(lags)} lags for {len(lengths)} trajectories")
    return np.concatenate([pad_sequences(np.full(n, lag > 0), sequence_length, False)
                           for lag, n in zip(lags, lengths)])


@torch.no_grad()
def proximal_logprobs(model, workspace: MinibatchWorkspace, batch, unit_batch: int) -> torch.Tensor:
    """log π_prox [N, K] of every row of ``batch`` (a ``PPOBatch`` or ``POCABatch``: obs, actions,
    masks, memories, sequence_length) under ``model``'s current weights, ``unit_batch`` units
    (rows, or memory sequences from their stored memories) at a time, in order, as a minibatch
    of the learners computes them."""
    L = batch.sequence_length
    num_units = len(batch.obs) // L
    out = []
    for start in range(0, num_units, unit_batch):
        units = torch.arange(start, min(start + unit_batch, num_units), device=batch.obs.device)
        rows = units if L == 1 else torch.as_tensor(sequence_rows(units.cpu().numpy(), L),
                                                    device=batch.obs.device)
        memory = None if batch.memories is None else batch.memories[units]
        obs = workspace.rows("obs", batch.obs, rows)
        with converted_once(workspace):
            dist = model.distribution(obs, None if batch.masks is None else batch.masks[rows],
                                      memory, L)
        out.append(dist.log_prob(batch.actions[rows]))
    return torch.cat(out)


def anchor(behaviour: torch.Tensor, proximal: torch.Tensor,
           stale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(centre, weight), both shaped as ``behaviour`` ([N, K] log-probs): the centre is
    log π_prox on the ``stale`` rows ([N] bool) and the behaviour's own log-prob elsewhere; the
    weight is π_prox/π_behav there and exactly 1 elsewhere."""
    centre = torch.where(stale.reshape(-1, *([1] * (behaviour.ndim - 1))), proximal, behaviour)
    return centre, (centre - behaviour).exp()
