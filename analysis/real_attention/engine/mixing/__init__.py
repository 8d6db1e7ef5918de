"""Context mixing beyond attention: ALTI (Ferrando, Gállego and Costa-jussà, 2022) and value zeroing (Mohebbi,
Zuidema, Chrupała and Alishahi, 2023), one map per layer, and value zeroing per head.

Every map is computed at piece level in float64 from the model's own layers, re-run on their true inputs. The
modules, in the order they build on each other:

- `layers`: each layer's input as the model gave it, and its float64 CPU copy re-run through `mixing_attention`;
- `alti`: ALTI's decomposition of each attention block, its queries in chunks that bound the memory;
- `value_zeroing`: the one owner of the value-zeroing measure (its name, texts and maps, per layer and per head);
- `pieces`: each sentence's piece-level maps, layer by layer;
- `result`: `Mixing`, what `ra.mixing` returns, and its tables (mixing.csv, mixing_agreement.csv);
- `compute`: attention, norm, ALTI and value zeroing, rolled and merged into units (`compute_mixing`).

Nothing here imports another stage; real_attention.outputs.mixing writes the files and draws the figures.
"""
from __future__ import annotations

from .alti import Decomposition, NormPart, alti_contributions, alti_raw, alti_rows, decompose, norm_part
from .compute import LONG_PIECES, compute_mixing, long_note, rolled, run_mixing
from .layers import (ATTENTION_FUNCTION, Block, Layer64, LayerInput, blocks, check_supported, layer_inputs,
                     mixing_device)
from .layers import mixing_attention, scale_rows
from .pieces import PieceMixing, piece_mixing
from .result import ALTI, ATTENTION, DEFINITIONS, MIXING_MEASURES, NORM, SOURCES, VALUE_ZEROING_KEY, Mixing
from .result import SentenceMixing, agreement_frame, mixing_frame, spearman
from .value_zeroing import MEMORY_BUDGET, NEAR_ZERO, head_value_zeroing, token_keep, zeroed_scores

__all__ = [
    "ALTI", "ATTENTION", "ATTENTION_FUNCTION", "Block", "DEFINITIONS", "Decomposition", "LONG_PIECES",
    "Layer64", "LayerInput", "MEMORY_BUDGET", "MIXING_MEASURES", "Mixing", "NEAR_ZERO", "NORM", "NormPart",
    "PieceMixing", "SOURCES", "SentenceMixing", "VALUE_ZEROING_KEY", "agreement_frame", "alti_contributions",
    "alti_raw", "alti_rows", "blocks", "check_supported", "compute_mixing", "decompose",
    "head_value_zeroing", "layer_inputs", "long_note", "mixing_attention", "mixing_device", "mixing_frame", "norm_part",
    "piece_mixing", "rolled", "run_mixing", "scale_rows", "spearman", "token_keep", "zeroed_scores",
]
