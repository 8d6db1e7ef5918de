"""The `real-attention` command line: a thin Click layer over the Python API (`import real_attention as ra`).

Each command parses its options, calls the API, writes files and prints. Importing this module loads Click only;
torch, transformers, matplotlib and pandas are imported when a command first needs them.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import click

from . import __version__
from .engine.sentences import DEFAULT_LANG
from .outputs.formats import FIGURE_FORMATS

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class CommandError(click.ClickException):
    """One `Error:` line with the library error's own exit code (2 for bad input, 1 otherwise)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class


@contextmanager
def friendly_errors():
    """Turn the library's own errors, and only those, into one `Error:` line; a bug keeps its traceback."""
    from .engine.errors import RealAttentionError

    try:
        yield
    except RealAttentionError as error:
        raise CommandError(str(error), error.exit_code) from None


@contextmanager
def loading_notice(quiet: bool):
    """While in it, a model that starts loading says what it is on stderr, one line (nothing when quiet); above a
    progress bar already drawn (heads --corpus draws its bar first), as tqdm.write puts it."""
    from .engine.models import ON_LOADING

    def say(line: str) -> None:
        from tqdm.auto import tqdm

        if getattr(tqdm, "_instances", None):  # a bar is drawn: write above it
            tqdm.write(line, file=sys.stderr)
        else:  # in order with the command's other output
            click.echo(line, err=True)

    token = ON_LOADING.set(None if quiet else say)
    try:
        yield
    finally:
        ON_LOADING.reset(token)


def one_line_usage_error(error: click.UsageError, where: str = "real-attention") -> CommandError:
    """Click's usage error as one `Error:` line that names the help to read (Click prints the usage block and a
    hint first: three lines before the one that says what is wrong). where: the command whose help to name when
    the error has no context (Click's parser raises "requires an argument" without one)."""
    where = error.ctx.command_path if error.ctx is not None else where
    message = error.format_message().rstrip()
    return CommandError(f"{message}{'' if message.endswith(('.', '?', '?)')) else '.'} See '{where} --help'.",
                        error.exit_code)


COMMAND_PATH = "real_attention.command_path"  # ctx.meta's key of the command being run: `real-attention heads`
# `real-attention` alone prints the help (Click 8.2 and later raise it as a usage error; earlier ones print it)
NO_ARGS_IS_HELP: tuple[type[Exception], ...] = tuple(
    error for error in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if error is not None)


class Group(click.Group):
    """The command group: a usage error is one `Error:` line; an unexpected exception is a bug: show its
    traceback, ask for a report, exit 1."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NO_ARGS_IS_HELP:
            raise
        except click.UsageError as error:  # the group's own options (`real-attention --bogus`)
            raise one_line_usage_error(error) from None

    def resolve_command(self, ctx: click.Context, args):
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:  # for a usage error of its options that comes without a context
            ctx.meta[COMMAND_PATH] = f"{ctx.command_path} {command.name}"
        return name, command, rest

    def invoke(self, ctx: click.Context):
        import signal

        from .outputs.staging import Terminated, raise_if_signalled, sigterm_as_interrupt

        try:
            # SIGTERM (kill, timeout, docker stop) cleans up as Ctrl-C does; the library's warnings (a wait for
            # another run's lock, words a tokenizer deletes) are `Warning:` lines in every command
            with sigterm_as_interrupt(), relayed_warnings():
                result = super().invoke(ctx)
                raise_if_signalled()  # one a finalizer swallowed still ends the command as a signal
                return result
        except NO_ARGS_IS_HELP:
            raise
        except click.UsageError as error:  # a command's options and arguments, or no such command
            raise one_line_usage_error(error, ctx.meta.get(COMMAND_PATH, ctx.command_path)) from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # BrokenPipeError: the reader went away; main() ends quietly
        except Terminated:
            click.echo("Terminated.", err=True)
            ctx.exit(128 + signal.SIGTERM)  # the status a shell reports for a process SIGTERM ended
        except KeyboardInterrupt:  # Ctrl-C: the staged folders are gone and earlier results untouched
            click.echo("Interrupted.", err=True)
            ctx.exit(128 + signal.SIGINT)  # the status a shell reports for a process Ctrl-C ended
        except Exception:  # noqa: BLE001 - a bug, not bad input
            import traceback

            traceback.print_exc()
            click.echo(f"real-attention {__version__} hit a bug, not a problem with your input. Please report it "
                       "with the command you ran and the traceback above.", err=True)
            ctx.exit(1)


def warn(message: str) -> None:
    click.echo(f"Warning: {message}", err=True)


@contextmanager
def relayed_warnings():
    """The library's own warnings (RealAttentionWarning) raised inside the block, shown as they come as this tool's
    `Warning:` lines (Python's form names a file and a line of the code, as if it were a bug), once per place as
    Python's default filter does, whatever PYTHONWARNINGS or -W say (with `error`, a wait for another run's lock
    would end the command as a bug). Other packages' warnings are shown, or not, as Python's filters decide."""
    import warnings

    from .engine.errors import RealAttentionWarning

    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, RealAttentionWarning):
            warn(str(message))
        else:
            original(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():  # restores showwarning (and the filters) when the block ends
        warnings.simplefilter("default", RealAttentionWarning)
        warnings.showwarning = show
        yield


class GivenPath(click.Path):
    """click.Path as a Path that refuses an empty name: Path("") is the current folder, so an unset $CORPUS would be
    read as "--corpus . is a folder"."""

    def __init__(self, **kwargs) -> None:
        super().__init__(path_type=Path, **kwargs)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("it is empty; give a path", param, ctx)
        if isinstance(value, str):
            _name_length(value, param.opts[0] if param is not None else "the path")
        return super().convert(value, param, ctx)


def _name_length(value: str, option: str) -> None:
    """A path no file system can hold is one Error: line (asking whether it exists raised OSError, a 'bug')."""
    from .engine.checks import check_name_length
    from .engine.errors import InputError

    try:
        check_name_length(value, option)
    except InputError as error:
        click.echo(f"Error: {error}", err=True)
        raise click.exceptions.Exit(2) from None


def _out_folder(_ctx, _param, value: str) -> Path:
    """--out as a Path; an empty one (an unset $OUT) is one error line, not the current folder (Path('') is '.')."""
    if value == "":
        click.echo("Error: --out is empty; give a folder (--out . for this one)", err=True)
        raise click.exceptions.Exit(2)
    _name_length(value, "--out")
    return Path(value)


def one_model_choice(model_name: str | None, lang: str | None, command: str, example: str) -> None:
    """InputError unless exactly one of --model and --lang picks the model (with both, --lang was ignored)."""
    from .engine.errors import InputError

    if model_name is None and lang is None:
        raise InputError(f"{command} needs a model: pass --model ID_OR_PATH (e.g. --model {example}) or --lang es|en")
    if model_name is not None and lang is not None:
        raise InputError(f"{command} takes --model or --lang (the pinned model of a language), not both")


# 65,536: the most sentences (or sequences) one forward pass takes (engine.batches.MAX_BATCH_SIZE)
BATCH_SIZE = click.IntRange(1, 1 << 16)
DEVICE_HELP = "Torch device, e.g. cpu, cuda, cuda:1, mps; auto: cuda, else mps, else cpu."


def out_option(function):
    return click.option(
        "--out", "out_dir", type=click.Path(file_okay=False), default=".", callback=_out_folder, metavar="DIR",
        show_default=True, help="Folder that receives results/ and figures/.",
    )(function)


def format_option(function):
    return click.option(
        "--format", "formats", type=click.Choice(FIGURE_FORMATS), multiple=True, default=("png",),
        show_default=True, help="Figure format; give it more than once for several.",
        callback=lambda _ctx, _param, formats: tuple(dict.fromkeys(formats)),  # each once, in the order given
    )(function)


def no_corpus_figures_option(function):
    return click.option("--no-figures", "no_figures", is_flag=True,
                        help="Write the tables alone (heads.csv, summary.json, sums.json): no figures folder, and "
                             "an earlier run's is removed.")(function)


def quiet_option(function=None, *, text: str = "Print nothing but errors and warnings: no summary, no banner, no "
                                                  "progress bar."):
    """--quiet/-q with the command's own wording of what it leaves out (as a decorator, bare or called)."""
    option = click.option("--quiet", "-q", is_flag=True, help=text)
    return option if function is None else option(function)


def wait_option(function):
    return click.option("--no-wait", "no_wait", is_flag=True,
                        help="If another run is writing the same output folders, stop with an error instead of "
                             "waiting for it.")(function)


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
                          "packaged offline encoder and decoder. Default: the pinned model of --lang (give one of "
                          "the two)."),
        click.option("--revision", metavar="REV", help="Hub revision (commit, tag or branch) for a Hub id --model."),
        click.option("--offline", is_flag=True, help="Use local files only; never touch the network."),
        click.option("--device", default="cpu", show_default=True, help=DEVICE_HELP),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group(cls=Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="real-attention")
def cli() -> None:
    """Per-head, word-level attention of real BERT models and decoders."""


@cli.command("lesson", short_help="The lesson's model-free numbers and figures.")
@out_option
@format_option
@wait_option
@quiet_option
def lesson_command(out_dir: Path, formats: tuple[str, ...], no_wait: bool, quiet: bool) -> None:
    """Regenerate the lesson's model-free numbers and figures (numpy and matplotlib; no model, no torch).

    Writes OUT/results/lesson/ (CSV, JSON) and OUT/figures/lesson/ and prints each number next to the lesson's.
    """
    from .lesson.files import format_report, write_lesson
    from .lesson.numbers import compute_lesson

    results = compute_lesson()
    with friendly_errors():
        results_dir, figures_dir = write_lesson(results, out_dir, formats, wait=not no_wait)
    if not quiet:
        click.echo(format_report(results))
        click.echo(f"Wrote {results_dir}/ and {figures_dir}/")


MEASURE_TEXT = ("weights (post-softmax attention), norm (||alpha f(x)||, Kobayashi et al. 2020) or value-zeroing "
                "(1 - cosine of the layer's output when that head alone loses a word's value vector, Mohebbi et al. "
                "2023), rows rescaled to sum to 1")


def measure_option(help_text: str):
    """--measure, with the help of the command that takes it (what the measure changes differs by command)."""
    from .engine.measure_names import MEASURES, WEIGHTS

    def decorate(function):
        return click.option("--measure", type=click.Choice(MEASURES), default=WEIGHTS, show_default=True,
                            help=help_text)(function)

    return decorate


@cli.command("run", short_help="Every head's word-level maps of a config's sentences, classified; figures, report.")
@click.option("--lang", default=DEFAULT_LANG, show_default=True,
              help="Language table of the config (es, en, ...); also the results folder's name.")
@click.option("--config", "config", type=GivenPath(), metavar="FILE",
              help="TOML file of sentences; replaces the lesson's packaged config.")
@model_options
@units_option
@out_option
@measure_option(f"What each head's map shows: {MEASURE_TEXT}. Results go to folders named LANG-norm or LANG-value-zeroing "
                "(weights: LANG).")
@click.option("--compare-measures", is_flag=True,
              help="Run the weights and the norm (results/LANG/ and results/LANG-norm/), side by side per head: "
                   "results/LANG/measures.csv and figures/LANG/measures.png.")
@click.option("--mixing", is_flag=True,
              help="Also compute context mixing layer by layer: attention, norm, ALTI (Ferrando et al. 2022) and "
                   "value zeroing (Mohebbi et al. 2023), each rolled over layers: results/LANG/mixing.csv, "
                   "mixing_agreement.csv and figures/LANG/mixing_s1.png, ... (LANG-norm/ with --measure norm).")
@click.option("--no-report", is_flag=True, help="Skip the interactive HTML report.")
@click.option("--no-figures", is_flag=True, help="Skip the figures.")
@click.option("--all-figures", is_flag=True,
              help="Draw the per-sentence heatmaps and focus bars of every sentence, not only the first 10 "
                   "(keeps every sentence's maps in memory).")
@click.option("--table-format", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True,
              help="How attention and rollout are stored: csv, or parquet (typed columns, about a tenth of the "
                   "size; needs the parquet extra). ra.read_attention reads either.")
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sentences per forward pass; lower it if the device runs out of memory.")
@click.option("--report-sentences", type=click.IntRange(min=1), default=200, show_default=True, metavar="N",
              help="The report holds the first N sentences (the tables hold all of them).")
@format_option
@wait_option
@quiet_option
def run_command(no_report: bool, no_figures: bool, model_name: str | None, out_dir: Path, no_wait: bool,
                quiet: bool, **options) -> None:
    """Extract every head's word-level attention and classify all heads.

    Writes OUT/results/LANG/ with attention.csv, focus.csv, heads.csv, rollout.csv and summary.json
    (attention.parquet and rollout.parquet with --table-format parquet), and OUT/figures/LANG/report.html,
    one self-contained page that opens offline, of the first 200 sentences (--report-sentences).
    Figures in OUT/figures/LANG/: a heatmap per sentence of the best sense-word, previous-word,
    next-word and top marker-weight heads (e.g. sense_L1H4_s1.png), overview.png, focus_bars_s1.png, ... and
    rollout_s1.png, ..., for the first 10 sentences unless --all-figures.
    With --measure norm or value-zeroing the folders are LANG-norm or LANG-value-zeroing instead of LANG.
    OUT/figures/LANG/ always holds exactly what this run drew: with --no-figures --no-report it is removed.
    """
    from .api.run import run
    from .outputs.console import run_lines

    with friendly_errors(), loading_notice(quiet):
        output = run(model=model_name, out=out_dir, figures=not no_figures, report=not no_report, quiet=quiet,
                     wait=not no_wait, progress=warn, **options)
    for line in output.leftovers + tuple(note for note in (output.unknown_note, output.font_note) if note):
        warn(line)
    if not quiet:
        click.echo("\n".join(run_lines(output)))


@cli.command("show", short_help="One more head of a finished run, drawn without the model.")
@click.option("--lang", default=DEFAULT_LANG, show_default=True, help="Language of the run to draw from.")
@click.option("--layer", type=int, required=True, help="Layer, counted from 1.")
@click.option("--head", type=int, required=True, help="Head within the layer, counted from 1.")
@click.option("--sentence", type=int, help="Sentence number, counted from 1. Default: every sentence.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=".", callback=_out_folder, metavar="DIR",
              show_default=True, help="The --out folder of `real-attention run`; figures go to OUT/figures/show/LANG/.")
@measure_option("Which run to draw from: that of `run --measure MEASURE`, read from results/LANG/ (weights), "
                "results/LANG-norm/ or results/LANG-value-zeroing/; the figures go to figures/show/ under the same "
                "name.")
@format_option
@quiet_option(text="Print nothing but errors and warnings: not the paths of the files drawn.")
def show_command(lang, layer, head, sentence, out_dir, measure, formats, quiet) -> None:
    """Draw the word x word heatmap of any one head from a finished run (no model is loaded).

    Reads OUT/results/LANG/attention.csv (or .parquet) and summary.json, writes OUT/figures/show/LANG/head_L<l>H<h>_s<k>.png
    (its own folder: a later `run` replaces figures/LANG/ whole) and prints its path. With --measure norm or
    value-zeroing: the LANG-norm or LANG-value-zeroing folders of that run.
    """
    from .outputs.drawing import show_head

    with friendly_errors():
        paths, note = show_head(out_dir, lang, layer, head, sentence, measure, formats, quiet=quiet)
    if note:
        warn(note)
    if not quiet:
        for path in paths:
            click.echo(str(path))


@cli.command("heads", short_help="Head statistics and labels pooled over a corpus (heads --corpus).")
@click.option("--corpus", "corpus_specs", required=True, multiple=True, metavar="FILE",
              help="UTF-8 text with one sentence per line, or .jsonl with a \"text\" field (.gz, .bz2, .xz and .zst "
                   "are decompressed); '-' reads stdin. "
                   "Repeat it, list more files after the options, or give a quoted glob or an fsspec URL "
                   "(s3://bucket/wiki/*.txt); the inputs are read in order as one corpus.")
@click.argument("more_specs", nargs=-1, metavar="[FILE]...")
@click.option("--input-format", "input_format", type=click.Choice(["auto", "text", "jsonl"]), default="auto",
              show_default=True, help="How to read FILE; auto: jsonl for a .jsonl name, else text.")
@click.option("--name", "name", metavar="NAME",
              help="Corpus name, the folder under results/corpus/. Default: the first FILE's stem ('stdin' for -).")
@click.option("--lang", help="Use the pinned model of this language (es, en); or pass --model.")
@model_options
@units_option
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sentences per forward pass, fewer for long ones; grouped by length, so little padding is run. "
              "Shards merge bit for bit when they share it (and torch threads).")
@click.option("--truncate", is_flag=True, help="Cut lines over the model's maximum length instead of skipping them.")
@click.option("--shard", "shard", metavar="i/N",
              help="Process lines i, i+N, i+2N, ... (counted from 1) into NAME-shard-i-of-N; see `merge`.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="Read the first N lines of the corpus only (blank ones counted; the inputs in order, as one "
                   "corpus); every shard of a run takes its lines of those N.")
@click.option("--threshold", "thresholds", metavar="NAME=VALUE", multiple=True,
              help="Change a labelling threshold: position (0.5) and marker (0.5), a pooled mean weight from 0 to 1; "
                   "broad (0.8), a fraction of uniform attention's entropy; repeatable.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="Start a local Dask cluster of N worker processes (needs the dask extra).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run on the Dask cluster whose scheduler listens at ADDRESS, e.g. tcp://10.0.0.5:8786.")
@click.option("--threads", type=click.IntRange(min=1), metavar="N",
              help="Torch threads per process. Default: 1 per Dask worker; torch's default in a single process.")
@click.option("--partition-size", type=click.IntRange(min=1), default=1024, show_default=True, metavar="N",
              help="Sentences per partition, the unit of work of a worker (a single process cuts the same "
                   "partitions, so its result is the cluster's).")
@measure_option(f"Which maps the statistics pool: {MEASURE_TEXT}. Results go to results/corpus/NAME-norm/ or "
                "NAME-value-zeroing/ (weights: NAME/); shards of different measures do not merge.")
@out_option
@format_option
@no_corpus_figures_option
@wait_option
@quiet_option
def heads_command(corpus_specs, more_specs, model_name, out_dir, no_wait, quiet, no_figures, **options) -> None:
    """Pool every head's attention statistics over a corpus and label each head.

    Per head, at word level: the mean weight on the previous, next and same word, on the first unit (a
    decoder's sink), on the first and last special tokens ([CLS], [SEP], <s>, </s>, ...), on punctuation and on
    all markers together, and the mean row entropy, pooled over every word of every sentence. Writes
    OUT/results/corpus/NAME/ (heads.csv, summary.json, sums.json) and OUT/figures/corpus/NAME/ (labels.png,
    statistics.png). With --workers or --scheduler the partitions run on a Dask cluster. With --measure norm or
    value-zeroing the statistics pool those maps, into NAME-norm/ or NAME-value-zeroing/ folders.
    """
    from .api.corpus import corpus
    from .engine.errors import InputError
    from .outputs.console import corpus_lines

    with friendly_errors(), loading_notice(quiet):
        if len(corpus_specs) > 1 and more_specs:  # Click keeps no order between an option and the arguments
            raise InputError("give the inputs as --corpus A B C or as --corpus A --corpus B, not both: the order "
                             "they were typed in cannot be kept, and a corpus is read in order")
        output = corpus(corpus_specs + more_specs, model=model_name, out=out_dir, wait=not no_wait,
                        figures=not no_figures, progress=None if quiet else progress_bar, **options)
    for line in output.leftovers:
        warn(line)
    if not quiet:
        click.echo("\n".join(corpus_lines(output)))


@cli.command("merge", short_help="Add up the shards of heads --shard i/N.")
@click.argument("shard_dirs", nargs=-1, required=True, metavar="SHARD_DIR...",
                type=GivenPath(file_okay=False))
@out_option
@format_option
@no_corpus_figures_option
@wait_option
@quiet_option
def merge_command(shard_dirs, out_dir, formats, no_figures, no_wait, quiet) -> None:
    """Add up the shards of one `heads --shard i/N` run into the result of the unsharded run.

    Each SHARD_DIR is a results/corpus/NAME-shard-i-of-N/ folder; all N shards are needed. Writes
    OUT/results/corpus/NAME/ and OUT/figures/corpus/NAME/ in the same form as `heads` without --shard.
    """
    from .api.corpus import merge
    from .outputs.console import corpus_lines

    with friendly_errors():
        output = merge(shard_dirs, out=out_dir, formats=formats, figures=not no_figures, wait=not no_wait)
    from .statistics.merging import differing_settings_warning

    for line in [*output.leftovers, differing_settings_warning(output.engine)]:
        if line:
            warn(line)
    if not quiet:
        click.echo("\n".join(corpus_lines(output)))


def progress_bar(total: int, desc: str, unit: str = "sent"):
    """A tqdm bar on stderr, for the library's `progress=` factories."""
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=True)


# --- syntax: heads as dependency parsers ------------------------------------------------------------------


@cli.command("syntax", short_help="Every head as a dependency parser on a UD treebank (Clark et al. 2019).")
@click.option("--treebank", required=True, type=GivenPath(), metavar="FILE.conllu",
              help="A CoNLL-U treebank, e.g. UD English-EWT's en_ewt-ud-dev.conllu.")
@click.option("--lang", help="Use the pinned model of this language (es, en); or pass --model.")
@model_options
@measure_option(f"Which maps predict each word's head: {MEASURE_TEXT}. Results go to results/syntax/NAME-norm/ or "
                "NAME-value-zeroing/ (weights: NAME/).")
@click.option("--name", metavar="NAME", help="The folder under results/syntax/ and figures/syntax/. "
              "Default: the treebank's stem.")
@click.option("--min-count", type=click.IntRange(min=1), default=100, show_default=True, metavar="N",
              help="best.csv reports a relation with at least this many words (always `all`).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="Score the first N sentences of the treebank only.")
@click.option("--subtypes", is_flag=True, help="Score UD's relation subtypes apart (acl:relcl, nmod:unmarked, "
              "compound:prt) rather than the relation before ':' (nmod:poss is poss either way).")
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sentences per forward pass, fewer for long ones; sorted by length first.")
@out_option
@format_option
@wait_option
@quiet_option
def syntax_command(treebank, lang, model_name, revision, offline, device, measure, name, min_count, limit,
                   subtypes, batch_size, out_dir, formats, no_wait, quiet) -> None:
    """Which head best predicts each dependency relation of a treebank (Clark et al. 2019, Sec. 4).

    Writes OUT/results/syntax/NAME/ (heads.csv, best.csv, baselines.csv, summary.json) and
    OUT/figures/syntax/NAME/ (best.png, relations.png, and examples_det.png, examples_nsubj.png, examples_obj.png
    for each relation with min-count words and a sentence of 6 to 14 words).
    """
    from tqdm.auto import tqdm

    from .api.api import load
    from .outputs.staging import check_targets
    from .syntax_probe.probe import check_options, describe, output_name, scan_treebank
    from .syntax_probe.probe import syntax, write_syntax

    with friendly_errors():
        one_model_choice(model_name, lang, "syntax", "minilm")
        name = output_name(name, treebank, measure, subtypes)  # a bad --name, before any work
        check_targets([out_dir / "results" / "syntax" / name, out_dir / "figures" / "syntax" / name], [treebank])
        check_options(batch_size, min_count)
        bank = scan_treebank(treebank, limit)
        with loading_notice(quiet):
            loaded = load(model_name, revision=revision, lang=lang, device=device, offline=offline)
        with tqdm(total=bank.sentences, unit="sent", desc=name, disable=quiet, file=sys.stderr,
                  dynamic_ncols=True) as bar:
            result = syntax(loaded, bank, measure=measure, min_count=min_count, batch_size=batch_size, progress=bar,
                            subtypes=subtypes)
        results_folder, figures_folder = write_syntax(result, out_dir, name, formats=formats, wait=not no_wait)
    if result.summary["counts"]["no_piece"]:  # a warning, so -q shows it too
        warn(f"{result.summary['counts']['no_piece']} sentence(s) skipped: a word the tokenizer gives no piece")
    if not quiet:
        click.echo(f"{result.summary['model']} on {bank.name} (sha256 {bank.sha256[:12]})")
        click.echo(describe(result))
        click.echo(f"wrote {results_folder} and {figures_folder}")


# --- compare and detect: heads side by side, and Olsson's test -----------------------------------------------


def compared_models(model_names, revisions) -> tuple[list[tuple[str, str | None]], list[str]]:
    """compare's --model and --revision: (model, revision) pairs and the labels they are shown by."""
    from .engine.errors import InputError

    if len(model_names) < 2:
        raise InputError(f"compare needs at least two models: give --model twice or more (got "
                         f"{len(model_names)}); --model minilm --model minilm compares MiniLM with itself")
    if revisions and len(revisions) != len(model_names):
        raise InputError(f"--revision was given {len(revisions)} time(s) for {len(model_names)} --model; give "
                         "it once per --model, in the same order, or not at all")
    paired = list(zip(model_names, revisions or [None] * len(model_names)))
    return paired, [model if revision is None else f"{model}@{revision}" for model, revision in paired]


@cli.command("compare", short_help="Every head of two or more models against every other (Clark et al. 2019, Sec. 6).")
@click.option("--corpus", required=True, type=GivenPath(), metavar="FILE",
              help="UTF-8 text with one sentence per line, or .jsonl with a \"text\" field (read twice: first only "
                   "tokenized); .gz, .bz2, .xz and .zst are decompressed.")
@click.option("--model", "model_names", multiple=True, metavar="ID_OR_PATH",
              help="A model to compare; give it twice or more (the same model twice compares it with itself).")
@click.option("--revision", "revisions", multiple=True, metavar="REV",
              help="Hub revision of each --model, in the same order: give it once per --model or not at all.")
@click.option("--offline", is_flag=True, help="Use local files only; never touch the network.")
@click.option("--device", default="cpu", show_default=True, help=DEVICE_HELP)
@click.option("--measure", type=click.Choice(["weights", "norm"]), default="weights", show_default=True,
              help="The maps compared: post-softmax weights, or norm (||alpha f(x)||, Kobayashi et al. 2020).")
@units_option
@click.option("--rows", type=click.Choice(["all", "causal"]), default="all", show_default=True,
              help="causal: cut every encoder row to the words up to its query and renormalise it, so that encoders "
              "and decoders are compared on what both see.")
@click.option("--name", metavar="NAME", help="The folder under results/compare/ and figures/compare/. "
              "Default: the models' names joined by -vs-.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="Compare on the first N sentences only (blank lines not counted).")
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sentences per forward pass.")
@out_option
@format_option
@wait_option
@quiet_option
def compare_command(corpus, model_names, revisions, offline, device, measure, units, rows, name, limit, batch_size,
                    out_dir, formats, no_wait, quiet) -> None:
    """Compare every head of two or more models with every other (Clark et al. 2019, Sec. 6).

    The distance between two heads is the Jensen-Shannon divergence (nats, 0 to ln 2) of their word-level rows,
    averaged over every query word of every sentence. Writes OUT/results/compare/NAME/ (distances.csv,
    matching.csv, mds.csv, heads.csv, summary.json) and OUT/figures/compare/NAME/ (mds.png, distances.png and, for two
    models, layers.png).
    """
    from .api.api import load
    from .comparison.compare import CorpusLines, compare, default_name, describe, folder_name, write_compare
    from .outputs.staging import check_targets

    with friendly_errors():
        paired, labels = compared_models(model_names, revisions)  # --batch-size and --limit: Click's ranges
        name = default_name(labels) + ("-causal" if rows == "causal" else "") if name is None else name  # '' is bad
        folder = folder_name(name, measure)  # a bad --name, before any work
        check_targets([out_dir / "results" / "compare" / folder, out_dir / "figures" / "compare" / folder], [corpus])
        lines = CorpusLines(corpus)
        lines.check_has_sentence()  # before the models load
        with loading_notice(quiet):
            models = [load(model, revision=revision, device=device, offline=offline) for model, revision in paired]
        result = compare(models, lines, names=labels, measure=measure, units=units, batch_size=batch_size,
                         limit=limit, progress=None if quiet else progress_bar, rows=rows)
        results_folder, figures_folder = write_compare(result, out_dir, name, formats=formats, wait=not no_wait)
    if not quiet:
        click.echo(describe(result))
        click.echo(f"wrote {results_folder} and {figures_folder}")


@cli.command("detect", short_help="Induction, previous-token and sink heads on repeated random tokens.")
@click.option("--lang", help="Use the pinned model of this language (es, en); or pass --model.")
@model_options
@click.option("--length", type=click.IntRange(min=3), default=25, show_default=True, metavar="N",
              help="Random tokens per sequence (at least 3: at 2 the token after an earlier copy is the previous one).")
@click.option("--repeats", type=click.IntRange(min=2), default=4, show_default=True, metavar="N",
              help="Times each sequence is repeated (at least 2: the scores are read in the repeats after the first).")
@click.option("--samples", type=click.IntRange(1, 1_000_000), default=32, show_default=True, metavar="N",
              help="Random sequences.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the draw.")
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sequences per forward pass.")
@click.option("--name", metavar="NAME", help="The folder under results/detect/ and figures/detect/. "
              "Default: the model's last path part.")
@out_option
@format_option
@wait_option
@quiet_option
def detect_command(lang, model_name, revision, offline, device, length, repeats, samples, seed, batch_size, name,
                   out_dir, formats, no_wait, quiet) -> None:
    """Find induction and previous-token heads by repeated random tokens (Olsson et al. 2022).

    Per head, in the repeats after the first: induction (weight on the tokens right after the current token's
    earlier occurrences, summed), duplicate (on those occurrences), previous (on the token before), first (on the
    first token, position 0) and the row entropy. Writes OUT/results/detect/NAME/ (heads.csv, summary.json) and
    OUT/figures/detect/NAME/scores.png.
    """
    from .api.api import load
    from .comparison.detect import check_options, default_name, describe, detect, write_detect
    from .engine.models import choose_model
    from .outputs.folders import plain_folder_name
    from .outputs.staging import check_targets

    with friendly_errors():
        one_model_choice(model_name, lang, "detect", "smollm2")
        check_options(length, repeats, samples, seed, batch_size)
        name = plain_folder_name(default_name(choose_model(lang, model_name, revision).name) if name is None else name,
                                 "name (--name)")
        check_targets([out_dir / "results" / "detect" / name, out_dir / "figures" / "detect" / name])
        with loading_notice(quiet):
            loaded = load(model_name, revision=revision, lang=lang, device=device, offline=offline)
        result = detect(loaded, length=length, repeats=repeats, samples=samples, seed=seed, batch_size=batch_size,
                        progress=None if quiet else partial(progress_bar, unit="sample"))
        results_folder, figures_folder = write_detect(result, out_dir, name, formats=formats, wait=not no_wait)
    if not quiet:
        click.echo(f"{result.summary['model']}: {samples} samples of {length} random tokens x {repeats}")
        click.echo(describe(result))
        click.echo(f"wrote {results_folder} and {figures_folder}")


# ---- importance: which heads matter (Michel et al. 2019) ----------------------------------------------------


@cli.command("importance", short_help="Which heads the model needs: ablation, Michel's Taylor score, pruning curves.")
@click.option("--corpus", "corpus", required=True, type=GivenPath(), metavar="FILE",
              help="One sentence a line, or JSON lines {\"text\": ..., \"label\": ...} (labels for --objective label); "
                   "UTF-8, read whole (.gz, .bz2, .xz and .zst are decompressed; no stdin). A line starting with { "
                   "is JSON.")
@click.option("--lang", help="Use the pinned model of this language (es, en); or pass --model.")
@model_options
@click.option("--objective", type=click.Choice(["auto", "lm", "mlm", "embedding", "label"]), default="auto",
              show_default=True,
              help="The loss the heads are scored by. lm: next-token cross-entropy (decoders); mlm: cross-entropy on "
                   "15% of the pieces masked (encoders with a masked-LM head); embedding: 1 - cos with the intact "
                   "model's mean-pooled embedding; label: cross-entropy and accuracy of a classifier on labelled "
                   "lines. auto: label, lm, mlm, embedding, the first the model and the corpus allow.")
@click.option("--name", metavar="NAME", help="The folder under results/importance/ and figures/importance/. "
              "Default: the corpus file's stem.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="Score the first N sentences only (blank lines not counted).")
@click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True, metavar="N",
              help="Sentences per forward pass (sorted by length first); several masks share a pass.")
@click.option("--prune-step", type=click.FloatRange(min=0, max=1, min_open=True), default=0.1, show_default=True,
              metavar="F", help="Fraction of all heads removed at each step of the pruning curves.")
@click.option("--max-tokens", type=click.IntRange(min=2), metavar="N",
              help="Cut each sentence to its first N pieces (special ones included). Default: the model's maximum; "
                   "for the embedding objective, sentence-transformers' max_seq_length where the model has one.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the random pruning order and of the mlm objective's masked pieces.")
@out_option
@format_option
@wait_option
@quiet_option
def importance_command(corpus, lang, model_name, revision, offline, device, objective, name, limit, batch_size,
                       prune_step, max_tokens, seed, out_dir, formats, no_wait, quiet) -> None:
    """Which heads matter: each head's importance by ablation and by Michel et al.'s Taylor score, and the
    objective as heads are pruned in three orders (Michel, Levy and Neubig 2019).

    Writes OUT/results/importance/NAME/ (heads.csv, pruning.csv, summary.json) and
    OUT/figures/importance/NAME/ (ablation.png, pruning.png, and taylor.png for the lm, mlm and label objectives).
    """
    from tqdm.auto import tqdm

    from .engine.models import choose_model, load_model
    from .head_importance.objectives import HEAD_OF
    from .outputs.staging import check_targets
    from .head_importance.run import (check_options, describe, importance, importance_work, objective_for,
                                      output_name, read_corpus_lines, split_sentences, write_importance)

    with friendly_errors():
        one_model_choice(model_name, lang, "importance", "minilm")
        check_options(batch_size, prune_step, seed, max_tokens)  # before the model loads
        name = output_name(name, corpus)
        check_targets([out_dir / "results" / "importance" / name, out_dir / "figures" / "importance" / name], [corpus])
        items, lines = read_corpus_lines(corpus, limit)
        texts, labels = split_sentences(items, lines)
        choice = choose_model(lang, model_name, revision)
        chosen = objective_for(choice, objective, labels, offline, lines)  # a bad label: before the model loads
        with loading_notice(quiet):
            loaded = load_model(choice, device=device, offline=offline, head=HEAD_OF[chosen])
        total = importance_work(loaded.layers, loaded.heads, len(texts), prune_step, chosen != "embedding")
        # the total counts every masked pass over every sentence (72 heads x 16 sentences and more), not the corpus
        with tqdm(total=total, unit=" pass", desc=f"{name}: {len(texts)} sentences x masks", disable=quiet,
                  file=sys.stderr, dynamic_ncols=True) as bar:
            sentences = texts if labels is None else [{"text": t, "label": lab} for t, lab in zip(texts, labels)]
            result = importance(loaded, sentences, chosen, batch_size=batch_size, prune_step=prune_step, seed=seed,
                                max_tokens=max_tokens, corpus=name, corpus_file=corpus, progress=bar.update)
        results_folder, figures_folder = write_importance(result, out_dir, name, formats=formats, wait=not no_wait)
    if not quiet:
        click.echo(describe(result))
        click.echo(f"wrote {results_folder} and {figures_folder}")


# ---- serve: the live page (analysis/live/) -------------------------------------------------------------------
@cli.command("serve", short_help="The live page and JSON API, the model loaded once.")
@click.option("--lang", help="Serve the pinned model of this language (es, en); with --model: whose example sentences "
                             "fill the form (default es, en-causal for a decoder).")
@model_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 lets anyone on the network use the model (a warning says so).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="TCP port; 0: a free one.")
@measure_option(f"The form's measure when the page opens, and that of every request that names none: {MEASURE_TEXT}. "
                "Each request may name its own; nothing is written.")
@click.option("--max-sentences", type=click.IntRange(min=1), default=16, show_default=True,
              help="The most sentences one request may have.")
@click.option("--max-pieces", type=click.IntRange(min=1), default=256, show_default=True,
              help="The most word pieces one request may have, over all its sentences.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@quiet_option(text="Leave out the line that says where it listens (printed all the same with --port 0, the only "
                   "place the chosen port is said); warnings and errors are still shown.")
def serve_command(lang, model_name, revision, offline, device, host, port, measure, max_sentences, max_pieces,
                  open_browser, quiet) -> None:
    """Serve a live page where anyone types sentences and sees every head; the model loads once.

    GET / is the page (the report's views, drawn for each answer, offline); POST /api/attend is the JSON API;
    POST /api/report returns the sentences' report.html; GET /api/health says the model and its revision.
    Ctrl-C stops it.
    """
    from .api.api import load
    from .live.server import require_serve_extra, serve

    with friendly_errors():
        if model_name is None and lang is None:
            from .engine.errors import InputError

            raise InputError("serve needs a model: pass --model ID_OR_PATH (e.g. --model minilm) or --lang es|en")
        require_serve_extra()  # before the model's load, not after it
        with loading_notice(quiet):  # with --model, --lang only chooses the page's example sentences
            loaded = load(model_name, revision=revision, lang=None if model_name else lang, device=device,
                          offline=offline)
        serve(loaded, host=host, port=port, lang=lang, measure=measure, max_sentences=max_sentences,
              max_pieces=max_pieces, open_browser=open_browser, quiet=quiet)


def main() -> None:
    """Run the `real-attention` command line on sys.argv (what `python -m real_attention` does), ending quietly
    when its reader goes away (a closed pipe)."""
    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 ("bad\udcff") is printed, not a crash
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        cli(prog_name="real-attention")  # one name in usage and error lines, however it was started
    except BrokenPipeError:
        # The reader of our output went away (`real-attention run | head`): stop quietly. Python would report
        # the pipe again when it flushes stdout at exit, so point stdout at nowhere first.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    finally:
        # The interpreter's last garbage collection would walk every object torch, transformers and pandas
        # made, to free memory the process is about to give back anyway: about 0.7 s of a 4 s run. Frozen
        # objects are left out of it. Every file is closed and every staged folder settled by now.
        import gc

        gc.freeze()


if __name__ == "__main__":
    main()
