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


@cli.command("lesson")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=str),
    default=".",
    show_default=True,
    help="Folder that receives results/lesson/ (CSV, JSON) and figures/lesson/ (PNG).",
)
def lesson_command(out: str) -> None:
    """Regenerate the lesson's model-free numbers and figures (numpy only, no model)."""
    from pathlib import Path

    from analysis.lesson import compute_lesson
    from analysis.lesson_io import format_report, write_lesson

    results = compute_lesson()
    try:
        results_dir, figures_dir = write_lesson(results, Path(out))
    except OSError as error:
        raise click.ClickException(
            f"cannot write to {out}: {error.strerror or error}. Choose a writable folder with --out."
        ) from None
    click.echo(format_report(results))
    click.echo(f"Wrote {results_dir}/ and {figures_dir}/")


if __name__ == "__main__":
    cli()
