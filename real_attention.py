"""real-attention: the command line. It parses options, calls `analysis`, writes files and prints.

torch and transformers are imported inside the command bodies, so `--help` stays instant.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import click

__version__ = "0.1.0"

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class InputError(click.ClickException):
    """Bad input (config, sentence, option value): one `Error:` line and exit 2."""

    exit_code = 2


@contextmanager
def friendly_errors():
    """Turn the analysis package's errors into one `Error:` line: exit 2 for bad input, 1 for run-time."""
    from analysis.atomic import OutputError
    from analysis.models import ModelUnavailable

    try:
        yield
    except (ModelUnavailable, OutputError) as error:
        raise click.ClickException(str(error)) from None
    except ValueError as error:  # ConfigError, SentenceError, SentenceTooLong, an unpinned --lang
        raise InputError(str(error)) from None


def out_option(function):
    return click.option(
        "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
        show_default=True, help="Folder that receives results/ and figures/.",
    )(function)


def model_options(function):
    """--model, --revision, --offline and --device, shared by the commands that load a model."""
    options = [
        click.option("--model", "model_name", metavar="ID_OR_PATH",
                     help="Hub id or local folder of a BERT-style encoder; 'minilm' is the packaged offline "
                          "demo. Default: the pinned model of --lang."),
        click.option("--revision", metavar="REV", help="Hub revision (commit, tag or branch) for --model."),
        click.option("--offline", is_flag=True, help="Use local files only; never touch the network."),
        click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cpu, cuda, cuda:1, mps."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


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
    with friendly_errors():
        results_dir, figures_dir = write_lesson(results, Path(out))
    click.echo(format_report(results))
    click.echo(f"Wrote {results_dir}/ and {figures_dir}/")


@cli.command("run")
@click.option("--lang", default="es", show_default=True, help="Language table of the config (es, en, ...).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML file of sentences; replaces the lesson's packaged config.")
@model_options
@out_option
@click.option("--no-report", is_flag=True, help="Skip the interactive HTML report.")
def run_command(lang, config_path, model_name, revision, offline, device, out_dir, no_report) -> None:
    """Extract every head's word-level attention and classify all heads.

    Writes OUT/results/LANG/ with attention.csv, focus.csv, heads.csv and summary.json,
    and OUT/figures/LANG/report.html, one self-contained page that opens offline.
    """
    from analysis.atomic import staged_outputs
    from analysis.models import choose_model
    from analysis.report import REPORT_NAME, write_report
    from analysis.sentences import load_sentences
    from analysis.tables import describe, write_results

    with friendly_errors():
        sentence_set = load_sentences(config_path, lang)
        choice = choose_model(lang, model_name, revision)
        with staged_outputs() as staging:
            results_folder = staging.folder(out_dir / "results" / lang)
            from analysis.models import load_model
            from analysis.pipeline import analyse

            loaded = load_model(choice, device=device, offline=offline)
            result = analyse(loaded, sentence_set)
            summary = write_results(results_folder, result)
            if not no_report:  # one staged folder per target, shared with the figures
                figures_folder = staging.folder(out_dir / "figures" / lang)
                write_report(figures_folder / REPORT_NAME, result, summary)
    click.echo(f"{result.model} @ {result.revision[:12]}, {len(sentence_set.sentences)} sentence(s), "
               f"focus {sentence_set.focus!r}")
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / lang}")
    if not no_report:
        click.echo(f"wrote {out_dir / 'figures' / lang / REPORT_NAME}")


if __name__ == "__main__":
    cli()
