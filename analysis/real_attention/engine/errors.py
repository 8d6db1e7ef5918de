"""The library's one small exception hierarchy: callers catch these, and only these, as the user's problem.

The command line turns each into one `Error:` line: an InputError exits 2, the others exit 1. Any other
exception is a bug and keeps its traceback.
"""
from __future__ import annotations


class RealAttentionError(Exception):
    """Base of every error the library raises on purpose; the message says what to do."""

    exit_code = 1


class InputError(RealAttentionError, ValueError):
    """Bad input: a config, a sentence, a corpus, an option value, stored results."""

    exit_code = 2


class ModelUnavailable(RealAttentionError):
    """The model cannot be had (no network, not cached, unknown id, not a model folder)."""


class MissingPackage(RealAttentionError):
    """An optional package the asked-for work needs is not installed; the message names what to install. Not
    the input's fault, so exit 1, as for a model that cannot be had."""


class OutputError(RealAttentionError, OSError):
    """An output folder cannot be written; the message names it."""


class RealAttentionWarning(UserWarning):
    """A warning the library gives on purpose (a wait for another run's lock, words a tokenizer lacks, sentences
    left out): the command line shows each as one `Warning:` line; in Python, warnings' filters apply as usual."""
