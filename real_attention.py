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

and below it the `real-attention` command line, a thin layer over the same functions. Importing this module
loads no torch, transformers, matplotlib or pandas and changes no global state: each is imported when a
function first needs it.
"""
from __future__ import annotations

import sys
import traceback
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click

__version__ = "0.1.0"

# The engine lives in analysis/ beside this file (a checkout) or in real_attention/ beside it (an installed wheel,
# a folder without __init__.py, so this module wins the name). Giving the module a __path__ makes it the package
# of those stage folders: the engine is real_attention.engine, .outputs, .corpus, .jobs, ... and the
# distribution installs no other import name, so a user's own `analysis.py` cannot shadow it.
_HERE = Path(__file__).resolve().parent
__path__ = [str(folder) for folder in (_HERE / "analysis", _HERE / "real_attention") if folder.is_dir()]

# The public API, imported from analysis on first use (PEP 562), so `import real_attention` stays light.
_API = {
    "load": "real_attention.jobs.api", "attend": "real_attention.jobs.api", "classify": "real_attention.jobs.api", "heatmap": "real_attention.jobs.api",
    "corpus_stats": "real_attention.jobs.api", "Attention": "real_attention.jobs.api",
    "read_attention": "real_attention.outputs.readback",
    "LoadedModel": "real_attention.engine.models", "WordAttention": "real_attention.engine.words", "Thresholds": "real_attention.corpus.sums",
    "RealAttentionError": "real_attention.engine.errors", "InputError": "real_attention.engine.errors",
    "ModelUnavailable": "real_attention.engine.errors", "OutputError": "real_attention.engine.errors",
}
__all__ = sorted(_API) + ["cli", "__version__"]


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'real_attention' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
FIGURE_FORMATS = ("png", "svg", "pdf")
DEFAULT_LANG = "es"  # the lesson's


class CommandError(click.ClickException):
    """One `Error:` line with the library error's own exit code (2 for bad input, 1 otherwise)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def friendly_errors():
    """Turn the library's own errors, and only those, into one `Error:` line; a bug keeps its traceback."""
    from real_attention.engine.errors import RealAttentionError

    try:
        yield
    except RealAttentionError as error:
        raise CommandError(str(error), error.exit_code) from None


class Group(click.Group):
    """The command group: an unexpected exception is a bug; show its traceback, ask for a report, exit 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None
        except Exception:  # noqa: BLE001 - a bug, not bad input
            traceback.print_exc()
            click.echo(f"real-attention {__version__} hit a bug, not a problem with your input. Please report it "
                       "with the command you ran and the traceback above.", err=True)
            ctx.exit(1)


def warn(message: str) -> None:
    click.echo(f"Warning: {message}", err=True)


def report_leftovers(staging) -> None:
    for leftover in staging.leftovers:
        warn(leftover)


def out_option(function):
    return click.option(
        "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
        show_default=True, help="Folder that receives results/ and figures/.",
    )(function)


def format_option(function):
    return click.option(
        "--format", "formats", type=click.Choice(FIGURE_FORMATS), multiple=True, default=("png",),
        show_default=True, help="Figure format; give it more than once for several.",
        callback=lambda _ctx, _param, formats: tuple(dict.fromkeys(formats)),  # each once, in the order given
    )(function)


def quiet_option(function):
    return click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors and warnings: no summary, "
                        "no progress bar.")(function)


def lang_folder(lang: str) -> str:
    """--lang names a folder under results/ and figures/: one plain name, checked before anything loads."""
    from real_attention.outputs.staging import plain_folder_name
    from real_attention.engine.measures import check_own_folder

    return check_own_folder(plain_folder_name(lang, "--lang"), "--lang")


def units_option(function):
    return click.option(
        "--units", type=click.Choice(["text", "tokenizer"]), default="text", show_default=True,
        help="What a word is. text: words as the reader sees them, by one rule for every tokenizer (whitespace "
             "separates words; punctuation at a word's edge is a unit, inside it stays: don't, 3.14; each CJK "
             "ideograph is a unit; the focus and sense words always are). tokenizer: the tokenizer's own words.",
    )(function)


def model_options(function):
    """--model, --revision, --offline and --device, shared by the commands that load a model."""
    options = [
        click.option("--model", "model_name", metavar="ID_OR_PATH",
                     help="Hub id or local folder of an encoder with a fast tokenizer (BERT, RoBERTa, XLM-R, MPNet, "
                          "DeBERTa, ...) or a decoder (Llama-, GPT-2- or Gemma-style); 'minilm' and 'smollm2' are the "
                          "packaged offline encoder and decoder. Default: the pinned model of --lang."),
        click.option("--revision", metavar="REV", help="Hub revision (commit, tag or branch) for a Hub id --model."),
        click.option("--offline", is_flag=True, help="Use local files only; never touch the network."),
        click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cpu, cuda, cuda:1, mps."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group(cls=Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="real-attention")
def cli() -> None:
    """Per-head, word-level attention of real BERT models and decoders."""


@cli.command("lesson")
@out_option
@format_option
@quiet_option
def lesson_command(out_dir: Path, formats: tuple[str, ...], quiet: bool) -> None:
    """Regenerate the lesson's model-free numbers and figures (numpy only, no model).

    Writes OUT/results/lesson/ (CSV, JSON) and OUT/figures/lesson/ and prints each number next to the lesson's.
    """
    from real_attention.lesson.numbers import compute_lesson
    from real_attention.lesson.files import format_report, write_lesson

    results = compute_lesson()
    with friendly_errors():
        results_dir, figures_dir = write_lesson(results, out_dir, formats)
    if not quiet:
        click.echo(format_report(results))
        click.echo(f"Wrote {results_dir}/ and {figures_dir}/")


def measure_option(function):
    from real_attention.engine.measures import MEASURES, WEIGHTS

    return click.option(
        "--measure", type=click.Choice(MEASURES), default=WEIGHTS, show_default=True,
        help="What each head's map shows: weights (post-softmax attention) or norm (||alpha f(x)||, Kobayashi et "
             "al. 2020, rows rescaled to sum to 1); norm results go to folders named LANG-norm.",
    )(function)


@cli.command("run")
@click.option("--lang", default=DEFAULT_LANG, show_default=True,
              help="Language table of the config (es, en, ...); also the results folder's name.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML file of sentences; replaces the lesson's packaged config.")
@model_options
@units_option
@out_option
@measure_option
@click.option("--compare-measures", is_flag=True,
              help="Run both measures (results/LANG/ and results/LANG-norm/) and put them side by side per head: "
                   "results/LANG/measures.csv and figures/LANG/measures.png.")
@click.option("--no-report", is_flag=True, help="Skip the interactive HTML report.")
@click.option("--no-figures", is_flag=True, help="Skip the figures.")
@click.option("--all-figures", is_flag=True,
              help="Draw the per-sentence heatmaps and focus bars of every sentence, not only the first 10 "
                   "(keeps every sentence's maps in memory).")
@click.option("--table-format", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True,
              help="How attention and rollout are stored: csv, or parquet (typed columns, about a tenth of the "
                   "size; needs the parquet extra). ra.read_attention reads either.")
@click.option("--report-sentences", type=click.IntRange(min=1), default=200, show_default=True, metavar="N",
              help="The report holds the first N sentences (the tables hold all of them).")
@format_option
@quiet_option
def run_command(lang, config_path, model_name, revision, offline, device, units, out_dir, measure, compare_measures,
                no_report, no_figures, formats, all_figures, table_format, report_sentences, quiet) -> None:
    """Extract every head's word-level attention and classify all heads.

    Writes OUT/results/LANG/ with attention.csv, focus.csv, heads.csv, rollout.csv and summary.json
    (attention.parquet and rollout.parquet with --table-format parquet), and OUT/figures/LANG/report.html,
    one self-contained page that opens offline, of the first 200 sentences (--report-sentences).
    Figures in OUT/figures/LANG/: a heatmap per sentence of the best sense-word, previous-word,
    next-word and marker heads (e.g. sense_L1H4_s1.png), overview.png, focus_bars_s1.png, ... and
    rollout_s1.png, ..., for the first 10 sentences unless --all-figures.
    With --measure norm the folders are LANG-norm instead of LANG.
    OUT/figures/LANG/ always holds exactly what this run drew: with --no-figures --no-report it is removed.
    """
    from real_attention.outputs.staging import staged_outputs
    from real_attention.engine.measures import MEASURES, check_supported, folder_suffix
    from real_attention.engine.models import choose_model
    from real_attention.engine.naming import short_revision
    from real_attention.outputs.report import REPORT_NAME, write_report
    from real_attention.engine.sentences import load_sentences
    from real_attention.outputs.tables import SentenceTables, check_table_format, describe, sense_head_note, write_results

    measures = MEASURES if compare_measures else (measure,)
    with friendly_errors():
        if compare_measures and measure != MEASURES[0]:
            from real_attention.engine.errors import InputError

            raise InputError(f"--compare-measures runs both measures; leave out --measure {measure}")
        lang = lang_folder(lang)
        check_table_format(table_format)
        sentence_set = load_sentences(config_path, lang)
        choice = choose_model(lang, model_name, revision)
        runs = {}  # measure -> (folder name, result, summary, figures drawn)
        font_note = None  # the line about missing glyphs, worked out by a drawing worker
        with staged_outputs() as staging, ExitStack() as drawing_processes:
            results_folders = {m: staging.folder(out_dir / "results" / (lang + folder_suffix(m))) for m in measures}
            from real_attention.outputs.drawing import FIGURE_SENTENCES, Drawing, DrawingPool, run_jobs, run_texts

            # Started now, the drawing processes import matplotlib while this one loads the model.
            pool = None if no_figures else DrawingPool.start()
            if pool is not None:
                drawing_processes.enter_context(pool)
            from real_attention.engine.models import check_encodes, load_model
            from real_attention.engine.pipeline import analyse

            loaded = load_model(choice, device=device, offline=offline)
            unknown_note = check_encodes(loaded, [sentence.text for sentence in sentence_set.sentences])
            if unknown_note:  # the words run as [UNK]
                warn(unknown_note)
            for m in measures:  # before any measure is computed or drawn
                check_supported(loaded, m)
            for m in measures:
                folder = lang + folder_suffix(m)
                # The tables are written as each batch of sentences is done; only the maps the report and the
                # figures show stay in memory.
                keep_maps = None if all_figures and not no_figures else max(
                    0 if no_report else report_sentences, 0 if no_figures else FIGURE_SENTENCES)
                with SentenceTables(results_folders[m], table_format) as tables:
                    result = analyse(loaded, sentence_set, units=units, measure=m, keep_maps=keep_maps,
                                     on_sentence=tables.add)
                figures, figures_folder, drawing = [], None, None
                if no_report and no_figures:  # the folder holds what this run drew: nothing
                    staging.remove(out_dir / "figures" / folder)
                else:  # one staged folder per target, shared by figures and report
                    figures_folder = staging.folder(out_dir / "figures" / folder)
                if not no_figures:  # the workers draw while this process writes the tables and the report
                    drawing = Drawing(run_jobs(figures_folder, result, formats,
                                               None if all_figures else FIGURE_SENTENCES), pool=pool)
                    if font_note is None and pool is not None:
                        font_note = pool.font_note(run_texts(result))
                summary = write_results(results_folders[m], result, tables_written=True)
                report = None
                if not no_report and pool is not None:
                    report = pool.write_report(figures_folder / REPORT_NAME, result, summary, report_sentences)
                elif not no_report:
                    write_report(figures_folder / REPORT_NAME, result, summary, report_sentences)
                if drawing is not None:
                    figures = drawing.wait(quiet=quiet)
                if report is not None:
                    pool.get(report)
                runs[m] = (folder, result, summary, figures, figures_folder)
            if compare_measures:
                from real_attention.outputs.compare import compare_line, write_compare

                weights_run, norm_run = (runs[m] for m in MEASURES)
                write_compare(results_folders[MEASURES[0]], None if no_figures else weights_run[4],
                              weights_run[1], norm_run[1], formats)
    report_leftovers(staging)
    if not no_figures:
        from real_attention.outputs.drawing import font_note as missing_glyphs

        note = font_note.get() if font_note is not None else missing_glyphs(run_texts(result))  # ready: pool joined
        if note:
            warn(note)
    if quiet:
        return
    for m, (folder, result, summary, figures, _) in runs.items():
        measured = "" if len(runs) == 1 and m == MEASURES[0] else f", measure {m}"
        click.echo(f"{result.model} @ {short_revision(result.revision)}, {len(sentence_set.sentences)} sentence(s), "
                   f"focus {sentence_set.focus!r}{measured}")
        click.echo(describe(summary))
        click.echo(f"wrote {out_dir / 'results' / folder}")
        if not no_figures:
            click.echo(f"wrote {len(figures)} figure(s) to {out_dir / 'figures' / folder}")
            note = sense_head_note(result)
            if note:
                click.echo(note)
        if not no_report:
            click.echo(f"wrote {out_dir / 'figures' / folder / REPORT_NAME}")
    if compare_measures:
        click.echo(compare_line(runs[MEASURES[0]][1], runs[MEASURES[1]][1]))
        from real_attention.outputs.compare import COMPARE_NAME

        folder = runs[MEASURES[0]][0]
        click.echo(f"wrote {out_dir / 'results' / folder / COMPARE_NAME}.csv"
                   + ("" if no_figures else f" and {out_dir / 'figures' / folder / COMPARE_NAME}.{formats[0]}"))


@cli.command("show")
@click.option("--lang", default=DEFAULT_LANG, show_default=True, help="Language of the run to draw from.")
@click.option("--layer", type=int, required=True, help="Layer, counted from 1.")
@click.option("--head", type=int, required=True, help="Head within the layer, counted from 1.")
@click.option("--sentence", type=int, help="Sentence number, counted from 1. Default: every sentence.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The --out folder of `real-attention run`; figures go to OUT/figures/LANG/.")
@measure_option
@format_option
@quiet_option
def show_command(lang, layer, head, sentence, out_dir, measure, formats, quiet) -> None:
    """Draw the word x word heatmap of any one head from a finished run (no model is loaded).

    Reads OUT/results/LANG/attention.csv and summary.json, writes OUT/figures/LANG/head_L<l>H<h>_s<k>.png
    and prints its path. With --measure norm: the LANG-norm folders of `run --measure norm`.
    """
    from real_attention.engine.errors import OutputError
    from real_attention.outputs.drawing import font_note, write_head_figures
    from real_attention.outputs.readback import load_run

    with friendly_errors():
        lang = lang_folder(lang)
        from real_attention.engine.measures import folder_suffix

        run = load_run(out_dir, lang, measure)
        folder = out_dir / "figures" / (lang + folder_suffix(measure))
        try:
            paths = write_head_figures(folder, run, layer, head, sentence, formats, quiet=quiet)
        except OSError as error:  # the figures folder exists but cannot be written
            raise OutputError(f"cannot write to {folder}: {error.strerror or error}. "
                              "Choose a writable folder with --out.") from None
    note = font_note([str(word) for word in run.attention["query"].unique()])
    if note:
        warn(note)
    if not quiet:
        for path in paths:
            click.echo(str(path))


@cli.command("heads")
@click.option("--corpus", "corpus_specs", required=True, multiple=True, metavar="FILE",
              help="UTF-8 text with one sentence per line, or .jsonl with a \"text\" field; '-' reads stdin. "
                   "Repeat it, list more files after the options, or give a quoted glob or an fsspec URL "
                   "(s3://bucket/wiki/*.txt); the inputs are read in order as one corpus.")
@click.argument("more_specs", nargs=-1, metavar="[FILE]...")
@click.option("--input-format", "corpus_format", type=click.Choice(["auto", "text", "jsonl"]), default="auto",
              show_default=True, help="How to read FILE; auto: jsonl for a .jsonl name, else text.")
@click.option("--name", "corpus_name", metavar="NAME",
              help="Corpus name, the folder under results/corpus/. Default: the first FILE's stem ('stdin' for -).")
@click.option("--lang", help="Use the pinned model of this language (es, en); or pass --model.")
@model_options
@units_option
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sentences per forward pass, fewer for long ones; sorted by length first, so little padding is run.")
@click.option("--truncate", is_flag=True, help="Cut lines over the model's maximum length instead of skipping them.")
@click.option("--shard", "shard_text", metavar="i/N",
              help="Process lines i, i+N, i+2N, ... (counted from 1) into NAME-shard-i-of-N; see `merge`.")
@click.option("--threshold", "threshold_settings", metavar="NAME=VALUE", multiple=True,
              help="Change a labelling threshold: position (0.5), marker (0.5) or broad (0.8); repeatable.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="Start a local Dask cluster of N worker processes (needs the dask extra).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run on the Dask cluster whose scheduler listens at ADDRESS, e.g. tcp://10.0.0.5:8786.")
@click.option("--threads", type=click.IntRange(min=1), metavar="N",
              help="Torch threads per process. Default: 1 per Dask worker; torch's default in a single process.")
@click.option("--partition-size", type=click.IntRange(min=1), default=1024, show_default=True, metavar="N",
              help="Sentences per partition, the unit of work of a worker (a single process cuts the same "
                   "partitions, so its result is the cluster's).")
@measure_option
@out_option
@format_option
@quiet_option
def heads_command(corpus_specs, more_specs, corpus_format, corpus_name, lang, model_name, revision, offline,
                  device, units, batch_size, truncate, shard_text, threshold_settings, workers, scheduler, threads,
                  partition_size, measure, out_dir, formats, quiet) -> None:
    """Pool every head's attention statistics over a corpus and label each head.

    Per head, at word level: the mean weight on the previous, next and same word, on the first and last
    special tokens ([CLS], [SEP], <s>, </s>, ...) and punctuation, and the mean row entropy, pooled over every
    word of every sentence. Writes
    OUT/results/corpus/NAME/ (heads.csv, summary.json, sums.json) and OUT/figures/corpus/NAME/ (labels.png,
    statistics.png). With --workers or --scheduler the partitions run on a Dask cluster. With --measure norm
    the statistics pool the norm-based maps, into NAME-norm/ folders.
    """
    from real_attention.outputs.staging import staged_outputs
    from real_attention.corpus.cluster import Engine, run_corpus
    from real_attention.corpus.sums import CorpusError, CorpusRun, Shard, Thresholds, describe, folder_name, write_corpus
    from real_attention.corpus.inputs import CorpusText, expand
    from real_attention.engine.naming import short_revision

    with friendly_errors():
        shard = Shard.parse(shard_text) if shard_text is not None else None
        thresholds = Thresholds.parse(threshold_settings)
        engine = Engine(workers=workers, scheduler=scheduler, threads=threads, partition_size=partition_size)
        engine.check()
        if model_name is None and lang is None:
            raise CorpusError("heads needs a model: pass --model ID_OR_PATH (e.g. --model minilm) or --lang es|en "
                              "for that language's pinned model")
        inputs = expand(tuple(corpus_specs) + tuple(more_specs), corpus_format)
        name = corpus_name or inputs[0].stem
        folder = folder_name(name, shard, measure)
        with staged_outputs() as staging:
            results_folder = staging.folder(out_dir / "results" / "corpus" / folder)
            figures_folder = staging.folder(out_dir / "figures" / "corpus" / folder)
            from tqdm.auto import tqdm

            from real_attention.engine.pipeline import versions

            text = CorpusText(inputs, shard or Shard())
            with tqdm(total=text.total_lines(), unit="sent", desc=folder, disable=quiet, file=sys.stderr,
                      dynamic_ncols=True) as bar:
                result = run_corpus(engine, text, lang=lang, model=model_name, revision=revision, device=device,
                                    offline=offline, batch_size=batch_size, truncate=truncate, progress=bar,
                                    units=units, measure=measure)
            run = CorpusRun(model=result.model, revision=result.revision, name=name, sha256=text.sha256,
                            format=inputs[0].format, truncate=truncate, versions=versions(), shard=shard,
                            thresholds=thresholds, engine=result.engine, units=units, measure=measure)
            summary = write_corpus(results_folder, figures_folder, run, result.sums, formats)
    report_leftovers(staging)
    if quiet:
        return
    engine_note = "" if engine.kind == "single-process" else (
        f", {result.engine['workers']} Dask worker(s), {result.engine['partitions']} partition(s)")
    click.echo(f"{run.model} @ {short_revision(run.revision)}, corpus {name!r} (sha256 {run.sha256[:12]})"
               + ("" if shard is None else f", shard {shard.index}/{shard.count}") + engine_note)
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / 'corpus' / folder} and {out_dir / 'figures' / 'corpus' / folder}")


@cli.command("merge")
@click.argument("shard_dirs", nargs=-1, required=True, metavar="SHARD_DIR...",
                type=click.Path(file_okay=False, path_type=Path))
@out_option
@format_option
@quiet_option
def merge_command(shard_dirs, out_dir, formats, quiet) -> None:
    """Add up the shards of one `heads --shard i/N` run into the result of the unsharded run.

    Each SHARD_DIR is a results/corpus/NAME-shard-i-of-N/ folder; all N shards are needed. Writes
    OUT/results/corpus/NAME/ and OUT/figures/corpus/NAME/ in the same form as `heads` without --shard.
    """
    from real_attention.outputs.staging import staged_outputs
    from real_attention.corpus.sums import describe, merge_shards, write_corpus
    from real_attention.engine.naming import short_revision

    with friendly_errors():
        run, sums = merge_shards(shard_dirs)
        with staged_outputs() as staging:
            results_folder = staging.folder(out_dir / "results" / "corpus" / run.folder_name)
            figures_folder = staging.folder(out_dir / "figures" / "corpus" / run.folder_name)
            summary = write_corpus(results_folder, figures_folder, run, sums, formats)
    report_leftovers(staging)
    if quiet:
        return
    click.echo(f"{run.model} @ {short_revision(run.revision)}, corpus {run.name!r} (sha256 {run.sha256[:12]}), "
               f"{len(shard_dirs)} shard(s) merged")
    click.echo(describe(summary))
    click.echo(f"wrote {out_dir / 'results' / 'corpus' / run.folder_name} and "
               f"{out_dir / 'figures' / 'corpus' / run.folder_name}")


def main() -> None:
    try:
        cli()
    finally:
        # The interpreter's last garbage collection would walk every object torch, transformers and pandas
        # made, to free memory the process is about to give back anyway: about 0.7 s of a 4 s run. Frozen
        # objects are left out of it. Every file is closed and every staged folder settled by now.
        import gc

        gc.freeze()


if __name__ == "__main__":
    main()
