"""Where a model keeps each layer's attention parts: the one routine that finds them.

Extraction hooks the attention modules (the class transformers records "attentions" from), the norm measure hooks
their value projections and reads their output projections, and the mixing re-run copies each layer with its
output projection and the norm after it. All three take the parts from `attention_parts`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Inside the attention module: Llama, Gemma, Mistral (o_proj), BART, OPT (out_proj), GPT-2 (c_proj, a Conv1D).
OUTPUT_NAMES = ("o_proj", "out_proj", "c_proj")
# BERT, RoBERTa, XLM-R keep the output projection beside the attention module: its parent's .output.dense, followed
# by the parent's .output.LayerNorm over residual + attention (a post-LN block).
VALUE_NAMES = ("v_proj", "value", "value_proj", "v")  # Llama-style decoders: .v_proj; BERT: .value


def attention_modules(model) -> list | None:
    """The self-attention module of every layer, in order: the class transformers records "attentions" from;
    None for a model that says none (MPNet, DeBERTa: their maps come only through output_attentions)."""
    spec = (getattr(model, "_can_record_outputs", None) or {}).get("attentions")
    target = getattr(spec, "target_class", spec)
    if not isinstance(target, type):
        return None
    return [module for module in model.modules() if isinstance(module, target)]


@dataclass(frozen=True)
class AttentionParts:
    """One layer's attention module and the projections around it (torch modules; None where not found)."""

    attention: Any  # the module that gives the layer's maps
    value: Any | None  # its value projection, x W_V + b_V (GPT-2: none by name; its fused c_attn gives q, k, v)
    output: Any | None  # its output projection: a Linear (out, in), or GPT-2's Conv1D (in, out)
    beside: Any | None  # BERT-style: the module holding `dense` (the output projection) and `LayerNorm`; else None


def _child(module, name: str):
    child = getattr(module, name, None)
    return child if hasattr(child, "weight") or hasattr(child, "forward") else None


def attention_parts(model) -> list[AttentionParts] | None:
    """Every attention module's parts, in layer order; None for a model that names no attention module."""
    modules = attention_modules(model)
    if modules is None:
        return None
    parents = {id(child): module for module in model.modules() for child in module.children()}
    found = []
    for module in modules:
        value = next((v for v in (_child(module, name) for name in VALUE_NAMES) if v is not None), None)
        output = next((o for o in (_child(module, name) for name in OUTPUT_NAMES) if o is not None), None)
        beside = None
        if output is None:
            holder = getattr(parents.get(id(module)), "output", None)
            dense = _child(holder, "dense")
            if dense is not None:
                beside, output = holder, dense
        found.append(AttentionParts(attention=module, value=value, output=output, beside=beside))
    return found
