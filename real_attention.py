"""real-attention: the command line. It parses options, calls `analysis`, writes files and prints.

torch and transformers are imported inside the command bodies, so `--help` stays instant.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import click

__version__ = "0.1.0"

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class CommandError(click.ClickException):
    """One `Error:` line with the library error's own exit code (2 for bad input, 1 otherwise)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def friendly_errors():
    """Turn the library's own errors, and only those, into one `Error:` line; a bug keeps its traceback."""
    from analysis.errors import RealAttentionError

    try:
        yield
    except RealAttentionError as error:
        raise CommandError(str(error), error.exit_code) from None


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
@click.option("--no-figures", is_flag=True, help="Skip the figures.")
@click.option("--format", "formats", type=click.Choice(["png", "svg", "pdf"]), multiple=True, default=("png",),
              show_default=True, help="Figure format; give it more than once for several.")
@click.option("--all-figures", is_flag=True,
              help="Draw the per-sentence heatmaps and focus bars of every sentence, not only the first 10 "
                   "(the report always holds every sentence).")
@click.option("--quiet", is_flag=True, help="No progress bar on stderr.")
def run_command(lang, config_path, model_name, revision, offline, device, out_dir, no_report, no_figures,
                formats, all_figures, quiet) -> None:
    """Extract every head's word-level attention and classify all heads.

    Writes OUT/results/LANG/ with attention.csv, focus.csv, heads.csv and summary.json,
    and OUT/figures/LANG/report.html, one self-contained page that opens offline.
    Figures in OUT/figures/LANG/: a heatmap per sentence of the best sense-word, previous-word,
    next-word and marker heads (e.g. sense_L1H4_s1.png), overview.png and focus_bars_s1.png, ...,
    for the first 10 sentences unless --all-figures.
    """
    from analysis.atomic import staged_outputs
    from analysis.models import choose_model, short_revision
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
            if not (no_report and no_figures):  # one staged folder per target, shared by figures and report
                figures_folder = staging.folder(out_dir / "figures" / lang)
            if not no_report:
                write_report(figures_folder / REPORT_NAME, result, summary)
            if not no_figures:
                from analysis.plots import FIGURE_SENTENCES, run_font_note, sense_head_note, write_run_figures

                figures = write_run_figures(figures_folder, result, formats, quiet=quiet,
                                            max_sentences=None if all_figures else FIGURE_SENTENCES)
    click.echo(f"{result.model} @ {short_revision(result.revision)}, {len(sentence_set.sentences)} sentence(s), "
               f"focus {sentence_set.focus!r}")
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / lang}")
    if not no_figures:
        click.echo(f"wrote {len(figures)} figure(s) to {out_dir / 'figures' / lang}")
        note = sense_head_note(result)
        if note:
            click.echo(note)
        note = run_font_note(result)
        if note:
            click.echo(note, err=True)
    if not no_report:
        click.echo(f"wrote {out_dir / 'figures' / lang / REPORT_NAME}")


@cli.command("show")
@click.option("--lang", default="es", show_default=True, help="Language of the run to draw from.")
@click.option("--layer", type=int, required=True, help="Layer, counted from 1.")
@click.option("--head", type=int, required=True, help="Head within the layer, counted from 1.")
@click.option("--sentence", type=int, help="Sentence number, counted from 1. Default: every sentence.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The --out folder of `real-attention run`; figures go to OUT/figures/LANG/.")
@click.option("--format", "formats", type=click.Choice(["png", "svg", "pdf"]), multiple=True, default=("png",),
              show_default=True, help="Figure format; give it more than once for several.")
def show_command(lang, layer, head, sentence, out_dir, formats) -> None:
    """Draw the word x word heatmap of any one head from a finished run (no model is loaded).

    Reads OUT/results/LANG/attention.csv and summary.json, writes OUT/figures/LANG/head_L<l>H<h>_s<k>.png
    and prints its path.
    """
    from analysis.plots import font_note, write_head_figures
    from analysis.readback import load_run

    with friendly_errors():
        run = load_run(out_dir, lang)
        paths = write_head_figures(out_dir / "figures" / lang, run, layer, head, sentence, formats)
    for path in paths:
        click.echo(str(path))
    note = font_note([str(word) for word in run.attention["query"].unique()])
    if note:
        click.echo(note, err=True)


@cli.command("heads")
@click.option("--corpus", "corpus_path", required=True, metavar="FILE",
              help="UTF-8 text with one sentence per line, or .jsonl with a \"text\" field; '-' reads stdin.")
@click.option("--format", "corpus_format", type=click.Choice(["auto", "text", "jsonl"]), default="auto",
              show_default=True, help="How to read FILE; auto: jsonl for a .jsonl name, else text.")
@click.option("--name", "corpus_name", metavar="NAME",
              help="Corpus name, the folder under results/corpus/. Default: FILE's stem ('stdin' for -).")
@click.option("--lang", default="en", show_default=True, help="Language whose pinned model is the default model.")
@model_options
@click.option("--batch-size", type=int, default=32, show_default=True,
              help="Sentences per forward pass, fewer for long ones; sorted by length first, so little padding is run.")
@click.option("--truncate", is_flag=True, help="Cut lines over the model's maximum length instead of skipping them.")
@click.option("--shard", "shard_text", metavar="i/N",
              help="Process lines i, i+N, i+2N, ... (counted from 1) into NAME-shard-i-of-N; see `merge`.")
@click.option("--threshold", "threshold_settings", metavar="NAME=VALUE", multiple=True,
              help="Change a labelling threshold: position (0.5), marker (0.5) or broad (0.8); repeatable.")
@out_option
@click.option("--quiet", is_flag=True, help="No progress bar on stderr.")
def heads_command(corpus_path, corpus_format, corpus_name, lang, model_name, revision, offline, device,
                  batch_size, truncate, shard_text, threshold_settings, out_dir, quiet) -> None:
    """Pool every head's attention statistics over a corpus and label each head.

    Per head, at word level: the mean weight on the previous, next and same word, on [CLS], [SEP] and
    punctuation, and the mean row entropy, pooled over every word of every sentence. Writes
    OUT/results/corpus/NAME/ (heads.csv, summary.json, sums.json) and OUT/figures/corpus/NAME/ (labels.png,
    statistics.png).
    """
    import contextlib
    import sys

    from analysis.atomic import staged_outputs
    from analysis.corpus import (CorpusError, CorpusReader, CorpusRun, Shard, Thresholds, count_lines,
                                 corpus_sums, describe, folder_name, write_corpus)
    from analysis.corpus import corpus_format as resolve_format
    from analysis.models import choose_model

    with friendly_errors():
        shard = Shard.parse(shard_text) if shard_text is not None else None
        thresholds = Thresholds.parse(threshold_settings)
        if batch_size < 1:
            raise CorpusError(f"--batch-size must be at least 1, not {batch_size}")
        stdin = corpus_path == "-"
        path = None if stdin else Path(corpus_path)
        if path is not None and not path.is_file():
            raise CorpusError(f"--corpus {corpus_path}: no such file")
        name = corpus_name or ("stdin" if stdin else path.stem)
        folder = folder_name(name, shard)
        fmt = resolve_format(corpus_path, corpus_format)
        choice = choose_model(lang, model_name, revision)
        with staged_outputs() as staging:
            results_folder = staging.folder(out_dir / "results" / "corpus" / folder)
            figures_folder = staging.folder(out_dir / "figures" / "corpus" / folder)
            from tqdm.auto import tqdm

            from analysis.models import load_model
            from analysis.pipeline import versions

            from transformers.utils import logging as hf_logging

            bars = hf_logging.is_progress_bar_enabled()
            if quiet:  # transformers' own "Loading weights" bar too
                hf_logging.disable_progress_bar()
            try:
                loaded = load_model(choice, device=device, offline=offline)
            finally:
                if quiet and bars:
                    hf_logging.enable_progress_bar()
            total = None if stdin else (shard or Shard()).lines_of(count_lines(path))
            try:
                stream = contextlib.nullcontext(click.get_binary_stream("stdin")) if stdin else path.open("rb")
            except OSError as error:
                raise CorpusError(f"cannot read --corpus {corpus_path}: {error.strerror or error}") from None
            with stream as handle, tqdm(total=total, unit="sent", desc=folder, disable=quiet, file=sys.stderr,
                                        dynamic_ncols=True) as bar:
                reader = CorpusReader(handle, fmt, shard or Shard(), source=corpus_path)
                sums = corpus_sums(loaded, reader, batch_size=batch_size, truncate=truncate, progress=bar)
            run = CorpusRun(model=loaded.choice.name, revision=loaded.revision, name=name, sha256=reader.sha256,
                            format=fmt, truncate=truncate, versions=versions(), shard=shard, thresholds=thresholds)
            summary = write_corpus(results_folder, figures_folder, run, sums)
    click.echo(f"{run.model} @ {run.revision[:12]}, corpus {name!r} (sha256 {run.sha256[:12]})"
               + ("" if shard is None else f", shard {shard.index}/{shard.count}"))
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / 'corpus' / folder} and {out_dir / 'figures' / 'corpus' / folder}")


@cli.command("merge")
@click.argument("shard_dirs", nargs=-1, required=True, metavar="SHARD_DIR...",
                type=click.Path(file_okay=False, path_type=Path))
@out_option
def merge_command(shard_dirs, out_dir) -> None:
    """Add up the shards of one `heads --shard i/N` run into the result of the unsharded run.

    Each SHARD_DIR is a results/corpus/NAME-shard-i-of-N/ folder; all N shards are needed. Writes
    OUT/results/corpus/NAME/ and OUT/figures/corpus/NAME/ in the same form as `heads` without --shard.
    """
    from analysis.atomic import staged_outputs
    from analysis.corpus import describe, merge_shards, write_corpus

    with friendly_errors():
        run, sums = merge_shards(shard_dirs)
        with staged_outputs() as staging:
            results_folder = staging.folder(out_dir / "results" / "corpus" / run.folder_name)
            figures_folder = staging.folder(out_dir / "figures" / "corpus" / run.folder_name)
            summary = write_corpus(results_folder, figures_folder, run, sums)
    click.echo(f"{run.model} @ {run.revision[:12]}, corpus {run.name!r} (sha256 {run.sha256[:12]}), "
               f"{len(shard_dirs)} shard(s) merged")
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / 'corpus' / run.folder_name} and "
               f"{out_dir / 'figures' / 'corpus' / run.folder_name}")


if __name__ == "__main__":
    cli()
