"""A sentence's whole path: model -> pieces -> words -> located focus -> head labels, as one RunResult."""
from __future__ import annotations

import platform
from dataclasses import dataclass

from analysis.heads import FocusedSentence, HeadReport, classify, focus_sentences
from analysis.sentences import SentenceSet


@dataclass(frozen=True)
class RunResult:
    """Everything `run` computed; tables, figures and the report are drawn from this."""

    sentence_set: SentenceSet
    sentences: tuple[FocusedSentence, ...]  # (S,) word-level maps with focus and sense located
    report: HeadReport
    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    versions: dict[str, str]  # python, torch, transformers


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}


def analyse(loaded, sentence_set: SentenceSet) -> RunResult:
    """Run the model on every sentence and classify every head."""
    from analysis.extract import extract
    from analysis.words import merge

    texts = [sentence.text for sentence in sentence_set.sentences]
    attentions = [merge(tokens) for tokens in extract(loaded, texts)]
    located = focus_sentences(attentions, sentence_set)
    return RunResult(
        sentence_set=sentence_set,
        sentences=tuple(located),
        report=classify(located),
        model=loaded.choice.name,
        revision=loaded.revision,
        versions=versions(),
    )
