"""What a head's map measures, and the maps of each measure as the layers run: the one place that knows every
measure by name; each measure's maths has one owner.

`weights`: alpha_ij, the head's attention after the softmax.
`norm`: ||alpha_ij f_h(x_j)||, rows summing to 1 (Kobayashi et al., 2020): real_attention.engine.norm.
`value-zeroing`: C^h_ij = max(0, 1 - cos(x~_i, x_i)), x~_i the layer's output for token i when only head h's view
of token j's value vector is zeroed (Mohebbi et al., 2023, per head), rows divided by their sum; computed in
float64 by real_attention.engine.mixing.value_zeroing, which re-runs each layer.
"""
from __future__ import annotations

from collections.abc import Callable

from . import norm
from .errors import InputError
from .extract import forward_layers, out_of_memory_as_error
from .mixing import layers as rerun
from .mixing import value_zeroing
from .norm import NORM, norm_maps  # noqa: F401  (norm_maps re-exported)

from .measure_names import MEASURES, VALUE_ZEROING, WEIGHTS  # noqa: E402, F401  (re-exported)
COMPARED = (WEIGHTS, NORM)  # the two measures --compare-measures puts side by side
MEASURE_TEXT = {
    WEIGHTS: "Weights: each head's attention after the softmax (how much of each word's vector the head mixes in).",
    NORM: norm.TEXT,
    VALUE_ZEROING: value_zeroing.TEXT,
}
MEASURE_TITLE = {WEIGHTS: "attention weight", NORM: norm.TITLE, VALUE_ZEROING: value_zeroing.TITLE}


def check_measure(measure: str) -> str:
    """The measure if known; InputError otherwise."""
    if measure not in MEASURES:
        raise InputError(f"unknown measure {measure!r}; use one of {', '.join(MEASURES)}")
    return measure


def folder_suffix(measure: str) -> str:
    """What a measure adds to an output folder's name: nothing for weights, '-norm' for norm."""
    return "" if check_measure(measure) == WEIGHTS else f"-{measure}"


def check_own_folder(name: str, what: str) -> str:
    """`name` unless it ends like the folder of another measure (`es-norm` is where `--lang es --measure norm`
    writes), which would mix two runs in one folder; InputError otherwise."""
    for measure in MEASURES:
        suffix = folder_suffix(measure)
        if suffix and name.endswith(suffix):
            hint = (f"for that measure's results pass {name[:-len(suffix)]!r} with measure (--measure) {measure}, or "
                    if name != suffix else "")
            raise InputError(f"{what} {name!r} ends in {suffix!r}, the ending of the folders of measure (--measure) "
                             f"{measure}; {hint}choose another name")
    return name


def check_supported(loaded, measure: str) -> None:
    """ModelUnavailable (or InputError) now, before any work, if the model cannot give the maps of `measure`."""
    if check_measure(measure) == NORM:
        norm.projections(loaded.model, loaded.heads)
    elif measure == VALUE_ZEROING:
        rerun.check_supported(loaded)


class Measurer:
    """The maps of one measure as each layer ends: use it as a context manager around the forward pass.

    For `norm` it hooks every layer's value projection (real_attention.engine.norm.NormHooks); `maps(layer,
    weights)` then turns that layer's (B, H, t, t) post-softmax weights into norm-based maps. For `weights` it
    hooks nothing and hands the weights back unchanged.
    """

    def __init__(self, loaded, measure: str = WEIGHTS):
        self.measure = check_measure(measure)
        assert measure != VALUE_ZEROING, "value zeroing re-runs the layers: forward_measured computes it"
        self.hooks = norm.NormHooks(loaded) if measure == NORM else None

    def __enter__(self) -> Measurer:
        if self.hooks is not None:
            self.hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.hooks is not None:
            self.hooks.__exit__(*exc)

    def maps(self, layer: int, weights):
        """(B, H, t, t) post-softmax weights of `layer` -> the (B, H, t, t) maps of this measure."""
        return weights if self.hooks is None else self.hooks.maps(layer, weights)


def forward_measured(loaded, batch, on_layer: Callable, measure: str = WEIGHTS, *, batch_size: int | None = None) -> None:
    """extract.forward_layers, with on_layer(layer, maps) getting the maps of `measure` instead of the weights.

    batch_size: the run's --batch-size; when given, the device running out of memory is one OutOfDeviceMemory that
    says to lower it, instead of torch's error."""
    if batch_size is None:
        return _forward_measured(loaded, batch, on_layer, measure)
    with out_of_memory_as_error(loaded.device, batch_size, batch):  # CUDA/MPS: one line that says what to change
        _forward_measured(loaded, batch, on_layer, measure)


def _forward_measured(loaded, batch, on_layer: Callable, measure: str) -> None:
    if check_measure(measure) == VALUE_ZEROING:  # every layer re-run in float64
        maps = value_zeroing.head_value_zeroing(loaded, batch)  # (B, layers, H, t, t)
        for layer in range(loaded.layers):
            on_layer(layer, maps[:, layer])
        return
    with Measurer(loaded, measure) as measurer:
        forward_layers(loaded, batch, lambda layer, weights: on_layer(layer, measurer.maps(layer, weights)))
