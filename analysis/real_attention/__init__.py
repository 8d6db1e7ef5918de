"""real-attention: per-head, word-level attention of real transformer models.

The Python API (`import real_attention as ra`)::

    model = ra.load("minilm")                   # or a Hub id with revision=, or a folder; device=
    att = ra.attend(model, ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."],
                    focus="banco", sense=["jardín", "dinero"])
    att[0].words, att[0].weights                # units as written; float32 (layers, heads, n, n)
    att.frame()                                 # the tidy table of attention.csv
    ra.classify(att)                            # the table of heads.csv
    ra.heatmap(att[0], layer=1, head=4)         # a matplotlib Figure
    ra.corpus_stats(model, lines)               # the table of a corpus's heads.csv
    att                                         # in Jupyter: the interactive report, inline and offline

and the `real-attention` command line (real_attention.cli), a thin layer over the same functions. Importing this
package loads no torch, transformers, matplotlib or pandas (only click, for `ra.cli`) and changes no global state:
each other public name is imported from its stage on first use (PEP 562). The block under TYPE_CHECKING names the same objects for
editors and type checkers; tests/test_layout.py checks that it and `_API` agree.

The stage folders import one way (engine < statistics < outputs < api, lesson < syntax_probe, live, other jobs <
cli.py, __init__.py): docs/layout.md says what each holds and why, tests/test_layout.py keeps every import to it.
"""
from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

from .engine import VERSION

__version__: str = VERSION  # a plain assignment: a type checker sees it exported (as `import ... as` it did not)

# The command group is bound now, not lazily: importing the submodule real_attention.cli (as `python -m
# real_attention` and the `real-attention` script do) would otherwise leave the module, not the group, as `ra.cli`.
# It costs click's import (about 15 ms), none of torch, transformers, matplotlib or pandas.
from .cli import cli as cli, main as main  # noqa: E402

if TYPE_CHECKING:  # what editors and mypy read; at run time __getattr__ imports each name on first use
    from .engine.errors import InputError as InputError, ModelUnavailable as ModelUnavailable
    from .engine.errors import OutputError as OutputError, RealAttentionError as RealAttentionError
    from .engine.errors import MissingPackage as MissingPackage, RealAttentionWarning as RealAttentionWarning
    from .engine.mixing.result import Mixing as Mixing
    from .engine.models import LoadedModel as LoadedModel
    from .engine.words import WordAttention as WordAttention, WordMaps as WordMaps
    from .api.api import attend as attend, classify as classify, corpus_stats as corpus_stats, heatmap as heatmap
    from .api.api import load as load, mixing as mixing
    from .api.attention import Attention as Attention
    from .api.corpus import CorpusOutput as CorpusOutput, corpus as corpus, merge as merge
    from .api.run import MeasureRun as MeasureRun, RunOutput as RunOutput, run as run
    from .live.server import app as app, serve as serve
    from .outputs.readback import read_attention as read_attention
    from .head_importance.run import ImportanceResult as ImportanceResult, importance as importance
    from .head_importance.run import objective as objective, write_importance as write_importance
    from .syntax_probe.probe import SyntaxResult as SyntaxResult, syntax as syntax, write_syntax as write_syntax
    from .comparison.compare import CompareResult as CompareResult, compare as compare
    from .comparison.compare import write_compare as write_compare
    from .comparison.detect import DetectResult as DetectResult, detect as detect, write_detect as write_detect
    from .statistics.labels import Thresholds as Thresholds
    from .outputs.readback import ResultsError as ResultsError
    from .outputs.table_checks import DamagedTable as DamagedTable

# Each public name and the module (relative to this package) that defines it.
_API = {
    "load": ".api.api", "attend": ".api.api", "classify": ".api.api", "heatmap": ".api.api",
    "corpus_stats": ".api.api", "mixing": ".api.api", "Attention": ".api.attention",
    "Mixing": ".engine.mixing.result",
    "read_attention": ".outputs.readback",
    "run": ".api.run", "RunOutput": ".api.run", "MeasureRun": ".api.run",
    "corpus": ".api.corpus", "merge": ".api.corpus", "CorpusOutput": ".api.corpus",
    "syntax": ".syntax_probe.probe", "write_syntax": ".syntax_probe.probe", "SyntaxResult": ".syntax_probe.probe",
    "compare": ".comparison.compare", "write_compare": ".comparison.compare", "CompareResult": ".comparison.compare",
    "detect": ".comparison.detect", "write_detect": ".comparison.detect", "DetectResult": ".comparison.detect",
    "importance": ".head_importance.run", "objective": ".head_importance.run",
    "write_importance": ".head_importance.run", "ImportanceResult": ".head_importance.run",
    "LoadedModel": ".engine.models", "WordAttention": ".engine.words", "WordMaps": ".engine.words",
    "Thresholds": ".statistics.labels",
    "RealAttentionError": ".engine.errors", "InputError": ".engine.errors",
    "ModelUnavailable": ".engine.errors", "OutputError": ".engine.errors", "MissingPackage": ".engine.errors",
    "RealAttentionWarning": ".engine.errors",
    "ResultsError": ".outputs.readback", "DamagedTable": ".outputs.table_checks",
    "app": ".live.server", "serve": ".live.server",
}
__all__ = sorted([*_API, "cli", "main", "__version__"])


if not TYPE_CHECKING:  # hidden from type checkers: they would read any name, a misspelt one too, as Any
    def __getattr__(name: str) -> Any:
        if name in _API:
            value = getattr(importlib.import_module(_API[name], __name__), name)
            globals()[name] = value  # later lookups skip __getattr__
            return value
        raise AttributeError(f"module 'real_attention' has no attribute {name!r}")


def __dir__() -> list[str]:  # the public names and the submodules, not this module's own helpers
    return sorted({*__all__, *(name for name, value in globals().items()
                               if isinstance(value, types.ModuleType) and value.__name__.startswith(__name__ + "."))})
