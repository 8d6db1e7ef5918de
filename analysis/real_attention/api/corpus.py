"""`ra.corpus` and `ra.merge`: every file of `real-attention heads --corpus` and `merge`, staged and swapped in.

    inputs -> sentences (streamed, length-sorted batches) -> pooled per-head sums (here or on Dask) -> labels
           -> results/corpus/<name>/ (heads.csv, summary.json, sums.json) and figures/corpus/<name>/
"""
from __future__ import annotations

import os

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from ..engine.progress import ProgressBar
    from ..statistics.cluster import CorpusResult
    from ..statistics.sums import CorpusRun, Thresholds


@dataclass(frozen=True)
class CorpusOutput:
    """What `ra.corpus` or `ra.merge` wrote: the run's facts, its summary and the two folders."""

    run: CorpusRun  # model, revision, corpus name and sha256, shard, thresholds, engine, units, measure
    summary: dict[str, Any]  # summary.json's content
    results_dir: Path  # OUT/results/corpus/<folder>
    figures_dir: Path | None  # OUT/figures/corpus/<folder>; None without figures (figures=False)
    engine: dict[str, Any]  # where the sums were computed: kind, workers, partitions
    shards: int = 0  # shards merged (ra.merge), else 0
    leftovers: tuple[str, ...] = ()  # old folders that could not be deleted, each with its reason

    @property
    def heads(self) -> pd.DataFrame:
        """heads.csv as a DataFrame, labels as written; sense/marker-free (a corpus has no focus word).
        DamagedTable if its bytes are not those the summary records (changed or cut off since)."""
        import hashlib
        import io

        import pandas as pd

        from ..outputs.table_checks import damaged

        path = self.results_dir / "heads.csv"
        try:
            data = path.read_bytes()
        except OSError as error:  # missing, a folder in its place, a dangling link: not what was written
            raise damaged(path, f"it cannot be read ({error.strerror or error})") from None
        recorded = self.summary.get("heads_sha256")
        if recorded is not None and hashlib.sha256(data).hexdigest() != recorded:
            raise damaged(path, f"its sha256 is not the {recorded[:12]}... that summary.json records for the file "
                                "as written (the bytes changed since)")
        return pd.read_csv(io.BytesIO(data))


def corpus(inputs: str | Path | Sequence[str | Path], *, name: str | None = None,
           model: str | os.PathLike[str] | None = None,
           lang: str | None = None, revision: str | None = None, out: str | Path = ".", units: str = "text",
           measure: str = "weights", input_format: str = "auto", batch_size: int = 32, truncate: bool = False,
           shard: str | None = None, limit: int | None = None,
           thresholds: Thresholds | dict[str, float] | Sequence[str] | None = None,
           workers: int | None = None, scheduler: str | None = None, threads: int | None = None,
           partition_size: int = 1024, formats: str | Sequence[str] = ("png",), figures: bool = True,
           offline: bool = False, device: str = "cpu", progress: Callable[..., ProgressBar] | None = None,
           wait: bool = True) -> CorpusOutput:
    """Pool every head's statistics over a corpus and write the files of `heads --corpus`.

    inputs: files, globs or fsspec URLs ('-' for stdin), read in order as one corpus. shard: "i/N" for lines
    i, i+N, ... (see `merge`). limit: the corpus's first `limit` lines only (blank ones counted; each shard takes
    its lines of those). thresholds: {"position": 0.5, ...} or ["position=0.5", ...]. `progress`: a
    factory `progress(total=, desc=)` of a tqdm-like bar (None: no bar). figures=False: the tables alone, and
    no figures folder (an earlier run's is removed: it would not show these sums). Returns a CorpusOutput.
    """
    from ..engine.batches import MAX_BATCH_SIZE
    from ..engine.checks import callable_or_none, flag, model_arg, optional_text, path_arg, whole_number
    from ..engine.checks import text as text_arg
    from ..engine.naming import name_from_file
    from ..engine.pipeline import versions
    from ..engine.units import check_rule
    from ..engine.measures import check_measure
    from ..outputs.staging import staged_outputs
    from ..statistics.cluster import Engine, run_corpus
    from ..statistics.inputs import CorpusText, expand
    from ..outputs.corpus_files import write_corpus
    from ..engine.models import choose_model
    from ..statistics.labels import thresholds_from
    from ..statistics.sums import CorpusError, CorpusRun, Shard, folder_name
    from ..outputs.drawing import DrawingPool
    from ..outputs.formats import check_formats

    check_measure(measure)
    check_rule(units)
    formats = check_formats(formats)
    model = model_arg(model)
    optional_text(lang, "lang", "a language code such as \"es\"")
    optional_text(revision, "revision", "a branch, tag or commit")
    text_arg(device, "device", "cpu, cuda, mps or auto")
    if model is None and lang is None:
        raise InputError("heads needs a model: pass model (--model) ID_OR_PATH (e.g. minilm) or lang (--lang) es|en "
                         "for that language's pinned model")
    if model is not None and lang is not None:  # --lang would be ignored: the model is the one named
        raise InputError("heads takes model (--model) or lang (--lang), the pinned model of a language, not both")
    choose_model(lang, model, revision)  # an unknown --lang or a misplaced --revision, before the progress bar
    if shard is not None and not isinstance(shard, str):
        raise InputError(f"shard must be a string \"i/N\" or None, not {type(shard).__name__}")
    callable_or_none(progress, "progress", "a factory progress(total=, desc=) of a tqdm-like bar")
    shard_range = Shard.parse(shard) if shard is not None else None
    chosen_thresholds = thresholds_from(thresholds)
    engine = Engine(workers=workers, scheduler=scheduler, threads=threads, partition_size=partition_size)
    engine.check()
    for value, label in ((truncate, "truncate"), (figures, "figures"), (offline, "offline"), (wait, "wait")):
        flag(value, label)
    path_arg(out, "out")
    if not isinstance(inputs, (str, Path, list, tuple)):
        raise InputError(f"inputs must be a path or a list of paths, not {type(inputs).__name__}")
    specs = (inputs,) if isinstance(inputs, (str, Path)) else tuple(inputs)
    for spec in specs:
        path_arg(spec, "inputs (--corpus)")
    batch_size = whole_number(batch_size, "batch_size (--batch-size)", 1, MAX_BATCH_SIZE, error=CorpusError)  # first
    if limit is not None:
        limit = whole_number(limit, "limit (--limit)", 1, error=CorpusError)
    found = expand(tuple(str(spec) for spec in specs), input_format)
    name = name_from_file(found[0].stem, found[0].name) if name is None else name  # '': a bad name
    folder = folder_name(name, shard_range, measure)
    out = Path(out)
    with staged_outputs(wait=wait, inputs=[item.name for item in found]) as staging, ExitStack() as drawing_processes:
        results_folder = staging.folder(out / "results" / "corpus" / folder)
        figures_folder = _figures_folder(staging, out / "figures" / "corpus" / folder, figures)
        # Started now, the drawing processes import matplotlib while this one loads the model (as `run`'s).
        pool = DrawingPool.start(2) if figures else None
        if pool is not None:
            drawing_processes.enter_context(pool)
        text = CorpusText(found, shard_range or Shard(), limit)
        batch_size = _rows_needed(found, limit, batch_size)
        bar = progress(total=text.total_lines(), desc=folder) if progress is not None else None
        try:
            result: CorpusResult = run_corpus(
                engine, text, lang=lang, model=model, revision=revision, device=device, offline=offline,
                batch_size=batch_size, truncate=truncate, progress=bar, units=units, measure=measure)
        finally:
            if bar is not None:
                bar.close()
        formats_read = {found_input.format for found_input in found}  # text and jsonl inputs together: "mixed"
        run = CorpusRun(model=result.model, revision=result.revision, name=name, sha256=text.sha256,
                        format=found[0].format if len(formats_read) == 1 else "mixed", truncate=truncate,
                        versions=versions(), shard=shard_range,
                        thresholds=chosen_thresholds, engine=result.engine, units=units, measure=measure,
                        inputs=None if shard_range is None else text.layout, limit=limit)
        summary = write_corpus(results_folder, figures_folder, run, result.sums, formats if figures else (), pool)
    return CorpusOutput(run=run, summary=summary, results_dir=out / "results" / "corpus" / folder,
                        figures_dir=out / "figures" / "corpus" / folder if figures else None, engine=dict(result.engine),
                        leftovers=tuple(staging.leftovers))


def _rows_needed(found, limit: int | None, batch_size: int) -> int:
    """The batch size, or the corpus's line count when it is smaller: a fixed-shape batch fills its rows with
    dummy sentences, so 4 lines at --batch-size 65536 ran 65,532 of them (minutes, gigabytes). Counted over the
    whole corpus (never one shard), and only up to batch_size lines, so every shard and engine agree and a large
    file is not read through (a compressed one is decompressed that far); unknown (stdin, a URL, a file that cannot
    be read) keeps batch_size."""
    from ..statistics.inputs import CorpusText
    from ..statistics.reading import Shard

    most = batch_size if limit is None else min(limit, batch_size)
    lines = CorpusText(found, Shard(), most).total_lines()
    return batch_size if lines is None else max(1, min(batch_size, lines))


def _figures_folder(staging, target: Path, figures: bool) -> Path:
    """The staging folder of a corpus's figures; without figures, the target is removed on commit (and the
    returned folder is never written)."""
    if figures:
        return staging.folder(target)
    staging.remove(target)
    return target


def merge(shard_dirs: Sequence[str | Path], *, out: str | Path = ".", formats: str | Sequence[str] = ("png",),
          figures: bool = True, wait: bool = True) -> CorpusOutput:
    """Add up the shards of one `heads --shard i/N` run (all N results/corpus/NAME-shard-i-of-N/ folders) into
    the files of the unsharded run. figures=False: the tables alone (as in `corpus`). Returns a CorpusOutput."""
    from ..outputs.staging import staged_outputs
    from ..outputs.corpus_files import write_corpus
    from ..statistics.sums import merge_shards
    from ..outputs.formats import check_formats

    from ..engine.checks import flag, path_arg

    formats = check_formats(formats)
    flag(figures, "figures")
    flag(wait, "wait")
    if not isinstance(shard_dirs, (str, Path, list, tuple)):
        raise InputError(f"merge takes the shard folders as a path or a list of paths, not {type(shard_dirs).__name__}")
    folders = [Path(path_arg(d, "shard_dirs (SHARD_DIR)")) for d in ([shard_dirs] if isinstance(shard_dirs, (str, Path))
                                                          else shard_dirs)]
    path_arg(out, "out")
    if not folders:
        raise InputError("merge needs the shard folders (results/corpus/NAME-shard-i-of-N/)")
    run, sums = merge_shards(folders)
    out = Path(out)
    with staged_outputs(wait=wait, inputs=folders) as staging:  # a shard is never replaced by the merge
        results_folder = staging.folder(out / "results" / "corpus" / run.folder_name)
        figures_folder = _figures_folder(staging, out / "figures" / "corpus" / run.folder_name, figures)
        summary = write_corpus(results_folder, figures_folder, run, sums, formats if figures else ())
    return CorpusOutput(run=run, summary=summary, results_dir=out / "results" / "corpus" / run.folder_name,
                        figures_dir=out / "figures" / "corpus" / run.folder_name if figures else None,
                        engine=dict(run.engine or {}),
                        shards=len(folders), leftovers=tuple(staging.leftovers))
