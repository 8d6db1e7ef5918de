"""real-attention: the command line. It parses options, calls `analysis`, writes files and prints.

torch and transformers are imported inside the command bodies, so `--help` stays instant.
"""
from __future__ import annotations

import click

__version__ = "0.1.0"

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="real-attention")
def cli() -> None:
    """Per-head, word-level attention of real BERT models."""


if __name__ == "__main__":
    cli()
