"""Attention rollout (Abnar & Zuidema, 2020): how much each word's input reaches each word after every layer.

Per layer, not per head: A_l is the layer's head-averaged map; the residual connection is modelled as
0.5 A_l + 0.5 I, its rows renormalised; then R_l = Â_l R_{l-1}, R_0 = I. Rolled out at piece level (the
faithful product: the model mixes pieces, not words), then merged into words by the one merge rule (rows of a
word's pieces averaged, keys summed), so each row still sums to 1. A causal model's maps are lower-triangular,
and so is every product of them: its rollout stays lower-triangular.
"""
from __future__ import annotations

RESIDUAL = 0.5  # the share of the identity: Â = (1 - RESIDUAL) A + RESIDUAL I


def rollout(layer_maps):
    """(B, L, t, t) each layer's head-averaged maps, rows summing to 1 -> (B, L, t, t) R_l after each layer.

    R_l = Â_l R_{l-1}, R_0 = I, Â_l = 0.5 A_l + 0.5 I with rows renormalised. Float64 products, on the maps'
    device where it has float64 (else on the CPU: models.float64_device).
    """
    import torch

    from .models import float64_device

    layer_maps = layer_maps.to(float64_device(layer_maps.device))
    batch, layers, t, _ = layer_maps.shape
    eye = torch.eye(t, dtype=torch.float64, device=layer_maps.device)
    rolled = eye.expand(batch, t, t)  # R_0, (B, t, t)
    out = []
    for layer in range(layers):
        mixed = (1 - RESIDUAL) * layer_maps[:, layer].to(torch.float64) + RESIDUAL * eye  # (B, t, t)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True).clamp(min=1e-30)
        rolled = torch.bmm(mixed, rolled)  # (B, t, t)
        out.append(rolled)
    return torch.stack(out, dim=1)  # (B, L, t, t)


def word_rollout(layer_maps, units, n: int):
    """(B, L, t, t) head-averaged piece maps, (B, t) unit of each piece (-1: pad) -> (B, L, n, n) float32
    rollout at word level: rolled out over pieces, then merged (rows mean, keys sum)."""
    import torch

    from .words import merge_maps

    return merge_maps(rollout(layer_maps).to(layer_maps.device, torch.float32), units, n)
