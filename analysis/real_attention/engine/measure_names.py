"""The measures' names, defined once: --measure's choices, the folders' suffixes and the maps' keys.

Kept apart from the measures' maths (engine/measures.py, engine/norm.py, engine/mixing/value_zeroing.py) so that the
command line builds its options without importing numpy or pandas.
"""
from __future__ import annotations

WEIGHTS = "weights"  # the head's attention after the softmax
NORM = "norm"  # ||alpha_ij f_h(x_j)|| (Kobayashi et al., 2020): engine/norm.py
VALUE_ZEROING = "value-zeroing"  # Mohebbi et al. (2023) per head: engine/mixing/value_zeroing.py
MEASURES = (WEIGHTS, NORM, VALUE_ZEROING)
