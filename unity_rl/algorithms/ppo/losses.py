"""PPO's schedules and losses (POCA's too): short pure functions, tested on their own."""
from __future__ import annotations

import numpy as np
import torch


def decayed(initial: float, floor: float, schedule: str, step: int, max_steps: int) -> float:
    """ML-Agents' DecayedValue: linear from ``initial`` at step 0 to ``floor`` at ``max_steps``."""
    if schedule == "constant":
        return initial
    floor = min(floor, initial)
    progress = min(step, max_steps) / max_steps
    return (initial - floor) * (1.0 - progress) + floor


def schedules(cfg, step: int) -> tuple[float, float, float]:
    """The on-policy schedules (PPO, POCA: an ``OnPolicyConfig``) at ``step`` agent-steps
    collected: (learning rate → 1e-10, clip range ε → 0.1, entropy coefficient β → 1e-5),
    each linear over ``max_steps`` or constant as its ``*_schedule`` says (ML-Agents)."""
    return (decayed(cfg.learning_rate, 1e-10, cfg.lr_schedule, step, cfg.max_steps),
            decayed(cfg.clip_coef, 0.1, cfg.clip_coef_schedule, step, cfg.max_steps),
            decayed(cfg.ent_coef, 1e-5, cfg.ent_coef_schedule, step, cfg.max_steps))


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``values`` over the rows where ``mask`` (bool [n]) is True, every column of those
    rows counted (ML-Agents' ``ModelUtils.masked_mean``: padded steps of memory sequences count
    0; a 0-d tensor is its own mean); the plain mean when ``mask`` is None."""
    if mask is None:
        return values.mean()
    if values.ndim == 0:
        return values
    weights = mask.to(values.dtype).reshape(-1, *([1] * (values.ndim - 1))).expand_as(values)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def clipped_surrogate_loss(newlogprob: torch.Tensor, oldlogprob: torch.Tensor,
                           advantages: torch.Tensor, clip_coef: float,
                           mask: torch.Tensor | None = None,
                           behaviour_weight: torch.Tensor | None = None) -> torch.Tensor:
    """L^CLIP as a loss: mean of max(−Â·r, −Â·clip(r, 1−ε, 1+ε)), r = π/π_old.

    Log-probs [n] (one joint ratio per sample) or [n, K] (one ratio per action dimension /
    branch, ML-Agents' ``trust_region_policy_loss``: advantages [n] broadcast over the K columns,
    the mean taken over all n·K terms); ``mask`` (bool [n]) leaves padded rows out (``masked_mean``).

    ``behaviour_weight`` (shaped as the log-probs, no gradient): the decoupled objective of
    Hilton et al. 2021 (arXiv:2110.00641), where ``oldlogprob`` is the *proximal* policy the
    trust region is centred on and each term is weighted by π_prox/π_behav, the importance
    weight of the policy that acted (``proximal.py``); None is plain PPO (weights 1)."""
    if newlogprob.ndim == 2:
        advantages = advantages.unsqueeze(-1)
    ratio = (newlogprob - oldlogprob).exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    terms = torch.max(pg_loss1, pg_loss2)
    if behaviour_weight is not None:
        terms = behaviour_weight * terms
    return masked_mean(terms, mask)


def value_loss(newvalue: torch.Tensor, oldvalue: torch.Tensor, returns: torch.Tensor,
               clip_coef: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """ML-Agents' ``trust_region_value_loss``: for each value head k, the mean over samples of
    max((R_k − V_k)², (R_k − V_clip,k)²) with V_clip = V_old + clip(V − V_old, ±ε); then the mean
    over the heads. Tensors [n, K] (one column per head) or [n] (one head); ``mask`` (bool [n])
    leaves padded rows out (``masked_mean``)."""
    if newvalue.ndim == 1:
        newvalue, oldvalue, returns = newvalue[:, None], oldvalue[:, None], returns[:, None]
    v_loss_unclipped = (newvalue - returns) ** 2
    v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    per_head = torch.max(v_loss_unclipped, v_loss_clipped)
    if mask is None:
        return per_head.mean(dim=0).mean()
    return torch.stack([masked_mean(per_head[:, k], mask) for k in range(per_head.shape[1])]).mean()


def minibatch_indices(b_inds: np.ndarray, minibatch_size: int) -> list[np.ndarray]:
    """The minibatches of one epoch over the shuffled indices ``b_inds``: ML-Agents'
    ``make_mini_batch`` loop, ``len // minibatch_size`` slices of exactly ``minibatch_size`` rows,
    the remainder unused (a buffer smaller than one minibatch is one minibatch)."""
    if len(b_inds) < minibatch_size:
        return [b_inds]
    return [b_inds[i * minibatch_size:(i + 1) * minibatch_size]
            for i in range(len(b_inds) // minibatch_size)]
