"""SAC's four losses as ML-Agents 1.1.0's ``TorchSACOptimizer`` computes them (``sac_q_loss``,
``sac_value_loss``, ``sac_policy_loss``, ``sac_entropy_loss``), pure functions of the update's
tensors; ``SACLearner.update`` (``learner.py``) calls them in that order and steps the networks.

Arguments, as the update builds them: per reward signal k (dicts by signal name) Q1(s, a),
Q2(s, a) of the taken action, Q1(s, ã), Q2(s, ã) of the fresh sample, V(s), V'(s'); the fresh
sample's continuous log-probabilities [n, C] (None without a continuous part) and its
``categorical`` (the branches' distribution, None without branches); the log α's (continuous [1],
discrete [branches]); ``mask`` [n] (False on the rows that pad memory sequences; None without
memory). For discrete branches every expectation over actions is exact (sums of π·Q and
π·log π per branch, Q of a taken action the mean over branches of its one-hot pick). The quirks
``SACConfig`` keeps or fixes are read from ``cfg`` (``padded_value_loss``,
``hybrid_entropy_sign``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from unity_rl.algorithms.sac.config import SACConfig


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the real rows (ML-Agents' ``masked_mean``; all rows without memory)."""
    if mask is None:
        return x.mean()
    return (x * mask).sum() / torch.clamp(mask.sum(), min=1.0)


def squared_error(target: torch.Tensor, x: torch.Tensor, mask: torch.Tensor | None,
                  cfg: SACConfig) -> torch.Tensor:
    """½-less mean squared error of the Q and V losses: over every row, padding included
    (ML-Agents), or over the real rows (``padded_value_loss: masked``)."""
    if mask is None or cfg.padded_value_loss == "mlagents":
        return nn.functional.mse_loss(target, x)
    return masked_mean((target - x) ** 2, mask)


def taken_q(q: torch.Tensor, taken: torch.Tensor, categorical) -> torch.Tensor:
    """Q of the taken discrete actions: the mean over branches of each branch's pick."""
    picks = [branch_q.gather(1, taken[:, i:i + 1])
             for i, branch_q in enumerate(categorical.split(q))]
    return torch.stack(picks).mean(dim=0).squeeze(-1)


def expected_q(q: torch.Tensor, categorical) -> torch.Tensor:
    """[n, 1]: mean over branches of Σ_a π(a)·Q(s, a)."""
    branched = categorical.split(q * categorical.probs)
    return torch.stack([b.sum(dim=1, keepdim=True) for b in branched]).mean(dim=0)


def backup(signal, target_value: torch.Tensor, dones: torch.Tensor,
           reward: torch.Tensor) -> torch.Tensor:
    """The Q target of one reward signal: r + γ (1 − d) V'(s'), the episode end ``d`` ignored by
    a signal with ``ignore_done`` (ML-Agents' ``use_dones_in_backup``: curiosity, RND, GAIL)."""
    use_done = 0.0 if signal.ignore_done else 1.0
    return reward + (1.0 - use_done * dones) * signal.gamma * target_value


def sac_q_loss(q1: dict, q2: dict, target_values: dict, dones: torch.Tensor, rewards: dict,
               reward_signals: Sequence, mask: torch.Tensor | None, cfg: SACConfig
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Q1 loss, Q2 loss, [n] TD error of Q1 averaged over the reward signals): ½ mean
    (r_k + γ_k (1 − d) V'_k(s') − Q_i(s, a))², d ignored by a signal with ``ignore_done``."""
    signals = {s.name: s for s in reward_signals}
    q1_losses, q2_losses, td = [], [], []
    for name in q1:
        with torch.no_grad():
            y = backup(signals[name], target_values[name], dones, rewards[name])
            td.append(y - q1[name])
        q1_losses.append(0.5 * squared_error(y, q1[name], mask, cfg))
        q2_losses.append(0.5 * squared_error(y, q2[name], mask, cfg))
    return (torch.stack(q1_losses).mean(), torch.stack(q2_losses).mean(),
            torch.stack(td).mean(dim=0))


def sac_value_loss(values: dict, q1p: dict, q2p: dict, cont_log_probs, categorical,
                   log_alpha_continuous: torch.Tensor, log_alpha_discrete: torch.Tensor,
                   mask: torch.Tensor | None, cfg: SACConfig) -> torch.Tensor:
    """½ mean (V_k(s) − [min_i Q_i(s, ã) − α log π(ã|s)])²; FloatingPointError when not finite."""
    with torch.no_grad():
        alpha_c = log_alpha_continuous.exp()
        alpha_d = log_alpha_discrete.exp()
        if categorical is None:
            min_q = {k: torch.min(q1p[k], q2p[k]) for k in values}
        else:
            min_q = {k: torch.min(expected_q(q1p[k], categorical),
                                  expected_q(q2p[k], categorical)) for k in values}
    losses = []
    for name, v in values.items():
        with torch.no_grad():
            if categorical is None:
                target = min_q[name] - torch.sum(alpha_c * cont_log_probs, dim=1)
            else:
                entropy_bonus = torch.stack([
                    torch.sum(alpha_d[i] * b, dim=1, keepdim=True) for i, b in
                    enumerate(categorical.split(categorical.all_log_probs * categorical.probs))])
                target = min_q[name] - entropy_bonus.mean(dim=0)
                if cont_log_probs is not None:
                    # ML-Agents adds the continuous term here (the sign opposite to the
                    # continuous-only case); "fixed" subtracts it.
                    sign = 1.0 if cfg.hybrid_entropy_sign == "mlagents" else -1.0
                    target = target + sign * torch.sum(alpha_c * cont_log_probs, dim=1,
                                                       keepdim=True)
                target = target.squeeze(-1)
        losses.append(0.5 * squared_error(v, target, mask, cfg))
    value_loss = torch.stack(losses).mean()
    if not torch.isfinite(value_loss):
        raise FloatingPointError("SAC value loss is not finite (NaN or inf in the networks "
                                 "or the batch): check the build's observations and rewards")
    return value_loss


def sac_policy_loss(q1p: dict, cont_log_probs, categorical, log_alpha_continuous: torch.Tensor,
                    log_alpha_discrete: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """mean α log π(ã|s) − Q1(s, ã), Q1 averaged over the reward signals."""
    alpha_c = log_alpha_continuous.exp()
    alpha_d = log_alpha_discrete.exp()
    mean_q1 = torch.stack(list(q1p.values())).mean(dim=0)
    loss = 0
    if categorical is not None:
        probs = categorical.probs
        per_branch = [torch.sum(alpha_d[i] * lp - qt, dim=1) for i, (lp, qt) in enumerate(
            zip(categorical.split(categorical.all_log_probs * probs),
                categorical.split(mean_q1 * probs)))]
        loss = loss + torch.stack(per_branch, dim=1).sum(dim=1)
        all_mean_q1 = torch.sum(probs * mean_q1, dim=1)
    else:
        all_mean_q1 = mean_q1
    if cont_log_probs is not None:
        loss = loss + alpha_c * torch.sum(cont_log_probs, dim=1) - all_mean_q1
    return masked_mean(loss, mask)


def sac_entropy_loss(cont_log_probs, categorical, log_alpha_continuous: torch.Tensor,
                     log_alpha_discrete: torch.Tensor, target_entropy_continuous: float,
                     target_entropy_discrete: Sequence[float],
                     mask: torch.Tensor | None) -> torch.Tensor:
    """−mean log α · (log π(ã|s) + H̄), per branch and for the continuous part."""
    loss = 0
    if categorical is not None:
        with torch.no_grad():
            diff = torch.stack([
                torch.sum(b, dim=1, keepdim=True) + target for b, target in zip(
                    categorical.split(categorical.all_log_probs * categorical.probs),
                    target_entropy_discrete)], dim=1).squeeze(2)
        loss = loss - masked_mean(torch.mean(log_alpha_discrete.exp() * diff, dim=1), mask)
    if cont_log_probs is not None:
        with torch.no_grad():
            diff = torch.sum(cont_log_probs, dim=1) + target_entropy_continuous
        loss = loss - masked_mean(log_alpha_continuous.exp() * diff, mask)
    return loss
