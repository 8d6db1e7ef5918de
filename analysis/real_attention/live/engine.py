"""The server's one model thread: requests queue up and never run two forward passes at once.

A request is a Query (what POST /api/attend names: sentences, focus and sense words, measure, unit rule, language
label; never a file, a folder or a model). The thread takes the queued queries of one measure and unit rule
together and groups them by length (shared_passes), so that a pass costs about what its queries would alone: a
long sentence never pads thirty short ones to its length. Each group runs as one batch
(real_attention.engine.pipeline.attend_with_sums, length-batched within), then each query's words are located and
its heads classified on its own (classify_words), as `ra.attend` does, and the group is answered before the next
runs. A lone query, or a group with an error, goes through `ra.attend` itself, query by query, so each error names
that query's own sentences.
"""
from __future__ import annotations

import asyncio
import collections
import queue
import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..engine.errors import InputError, RealAttentionError
from ..engine.measure_names import VALUE_ZEROING

BATCH_SENTENCES = 64  # the most sentences one round takes from the queue, and one shared pass holds
# A shared pass pads its sentences to its longest: it may add at most this share of the pieces it holds, or
# PAD_PIECES pieces when that is more (tiny sentences: one pass costs less than several)
PAD_SHARE = 0.5
PAD_PIECES = 64
MAX_QUEUED = 64  # requests waiting beyond this are refused (503) instead of piling up
# value-zeroing re-runs each layer once per piece (its cost grows as pieces^2): a request of --max-pieces pieces took
# 80 s on 2 cores, and the server answers one forward pass at a time; it takes this share of --max-pieces
VALUE_ZEROING_SHARE = 16
_FORWARD = threading.Lock()  # one forward pass at a time in this process, whatever number of apps share a model
BUSY = f"{MAX_QUEUED} requests are waiting already; try again in a moment"


@dataclass(frozen=True)
class Query:
    """One request's input, checked for types (not yet for content: the library does that)."""

    texts: tuple[str, ...]  # (S,) the sentences
    focus: str | None = None  # the ambiguous word; with `sense`, the heads are classified
    sense: tuple[str, ...] | None = None  # (S,) the word that decides its sense in each sentence
    measure: str = "weights"
    units: str = "text"
    lang: str = ""  # a label for the answer's summary and header (ra.attend's lang); "": none


class Busy(RealAttentionError):
    """Too many requests wait already."""


def check_limits(model, query: Query, max_sentences: int, max_pieces: int) -> tuple[int, ...]:
    """(S,) the word pieces of each sentence of the query; InputError if it has more sentences, or more word
    pieces over all its sentences, than allowed."""
    if len(query.texts) > max_sentences:
        raise InputError(f"{len(query.texts)} sentences; this server takes at most {max_sentences} per request "
                         "(its --max-sentences, max_sentences= of ra.serve)")
    if not query.texts:  # ra.attend says what is wrong
        return ()
    # as the run encodes them (engine.extract.encode): a typed "[MASK]" is the pieces of its characters, not one
    lengths = tuple(len(ids) for ids in model.tokenizer(list(query.texts), verbose=False,
                                                        split_special_tokens=True)["input_ids"])
    pieces = sum(lengths)
    if pieces > max_pieces:
        raise InputError(f"the sentences have {pieces} word pieces together; this server takes at most {max_pieces} "
                         "per request (its --max-pieces, max_pieces= of ra.serve)")
    if query.measure == VALUE_ZEROING and pieces > max_pieces // VALUE_ZEROING_SHARE:
        raise InputError(f"the sentences have {pieces} word pieces together; value-zeroing runs every layer again "
                         f"for each piece, so this server takes at most {max_pieces // VALUE_ZEROING_SHARE} per "
                         f"request for it (a {VALUE_ZEROING_SHARE}th of --max-pieces); weights and norm take "
                         f"{max_pieces}")
    return lengths


def shared_passes(lengths: list[tuple[int, ...]]) -> list[list[int]]:
    """Queries grouped into the forward passes they share, as lists of their indices, shortest first.

    lengths[i]: the piece counts of query i's sentences (check_limits). Sorted by their longest sentence, the
    queries join a pass while it holds at most BATCH_SENTENCES sentences and pads them (each to the pass's longest)
    by at most PAD_SHARE of the pieces they hold, or PAD_PIECES: a pass then costs about the sum of its queries
    alone, and a long sentence runs with those of its length, not with every short one. A query is never split.
    """
    passes: list[list[int]] = []
    rows = pieces = 0
    for i in sorted(range(len(lengths)), key=lambda i: max(lengths[i], default=0)):
        longest, more_rows, more_pieces = max(lengths[i], default=0), len(lengths[i]), sum(lengths[i])
        padding = (rows + more_rows) * longest - (pieces + more_pieces)  # sorted: longest is the pass's longest
        if passes and rows + more_rows <= BATCH_SENTENCES and padding <= max(PAD_SHARE * (pieces + more_pieces),
                                                                             PAD_PIECES):
            passes[-1].append(i)
            rows, pieces = rows + more_rows, pieces + more_pieces
        else:
            passes.append([i])
            rows, pieces = more_rows, more_pieces
    return passes


class Answered(NamedTuple):
    """A query's answer: its Attention and the notes a reader must see beside it (notes_of)."""

    attention: Any
    notes: tuple[str, ...]


def notes_of(model, attention) -> tuple[str, ...]:
    """What `ra.attend` would warn about an answer, for the page and the JSON: words the vocabulary lacks (they
    became the unknown token) or the tokenizer deletes (no piece: not in the maps; engine.models.check_encodes),
    and units of the text rule that one piece straddles, joined into one. Called in the model's thread (or with
    its lock held): the tokenizer is not to be shared between threads."""
    from ..engine.models import check_encodes
    from ..engine.units import joined_notes

    unknown = check_encodes(model, [sentence.text for sentence in attention.sentences])
    return ((unknown,) if unknown else ()) + joined_notes([sentence.joined for sentence in attention.sentences])


def attend_one(model, query: Query):
    """`ra.attend` on one query: an Attention, classified when the query has a focus or sense word."""
    from ..api.api import attend

    focused = query.focus is not None or query.sense is not None
    return attend(model, list(query.texts), focus=query.focus if focused else None,
                  sense=list(query.sense) if query.sense is not None else None, lang=query.lang, units=query.units,
                  measure=query.measure)


def attend_many(model, queries: list[Query]) -> list:
    """Each query's Attention (or the RealAttentionError it raised), from the forward passes they share.

    All queries share a measure and a unit rule. Their sentences run together, sorted by length into batches of
    bounded memory (engine.batches.length_batches, as `ra.attend` runs them; shared_passes chooses queries of
    similar lengths); the focus and sense words of each query must be units of its sentences (the `required` words).
    """
    # with an empty query or sentence among them, each query alone: ra.attend's message names what is wrong
    if len(queries) == 1 or not all(query.texts and all(text.strip() for text in query.texts) for query in queries):
        return [_alone(model, query) for query in queries]
    from ..engine.pipeline import attend_with_sums, classify_words, versions
    from ..api.arguments import sentence_set
    from ..api.attention import Attention

    measure, units = queries[0].measure, queries[0].units
    try:
        stripped = [[text.strip() for text in query.texts] for query in queries]  # as ra.attend takes them
        sets = [None if q.focus is None and q.sense is None else sentence_set(texts, q.focus, q.sense, q.lang)
                for q, texts in zip(queries, stripped)]
        texts: list[str] = []
        required: list[tuple[str, ...]] = []  # required[i]: the words that must be units of sentence i
        for part, chosen in zip(stripped, sets):
            texts += part
            required += [()] * len(part) if chosen is None else [(chosen.focus, s.sense) for s in chosen.sentences]
        attentions, _, rollouts = attend_with_sums(model, texts, units=units, required=required, measure=measure,
                                                   batch_size=BATCH_SENTENCES)
    except RealAttentionError:  # each alone, so the message names that query's own sentence numbers
        return [_alone(model, query) for query in queries]
    answers: list[Attention | RealAttentionError] = []
    start = 0
    for query, chosen in zip(queries, sets):
        span = slice(start, start + len(query.texts))
        start = span.stop
        if chosen is None:
            answers.append(Attention.from_maps(model, attentions[span], rollouts[span], units=units,
                                               measure=measure))
            continue
        try:
            answers.append(Attention.from_result(classify_words(
                attentions[span], chosen, model=model.choice.name, revision=model.revision, versions=versions(),
                units=units, measure=measure, rollout=tuple(rollouts[span]), causal=model.causal,
                weights_note=model.choice.weights_note, device=str(model.device))))
        except RealAttentionError as error:
            answers.append(error)
    return answers


def _alone(model, query: Query):
    try:
        return attend_one(model, query)
    except RealAttentionError as error:
        return error


class Worker:
    """The thread that owns the model. `await worker.submit(query)` -> the query's Answered (its Attention and
    notes), or its error raised.

    Queued queries of one measure and unit rule are taken together, up to BATCH_SENTENCES sentences, grouped by
    length (shared_passes) and answered group by group, the shortest first; the event loop only waits, so the
    server answers /api/health meanwhile.
    """

    def __init__(self, model, *, max_sentences: int = 16, max_pieces: int = 256) -> None:
        self.model = model
        self.max_sentences, self.max_pieces = max_sentences, max_pieces
        self.jobs: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.started = threading.Lock()
        self.held = 0  # jobs the thread has taken from the queue and not yet answered

    def start(self) -> None:
        with self.started:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="real-attention-model", daemon=True)
                self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Answer what is queued, then end the thread."""
        if self.thread is not None and self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join(timeout)

    def waiting(self) -> int:
        """The requests queued, and taken by the thread but not yet answered."""
        return self.jobs.qsize() + self.held

    async def submit(self, query: Query):
        if self.waiting() >= MAX_QUEUED:
            raise Busy(BUSY)
        self.start()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.jobs.put((query, loop, future))
        return await future

    def _run(self) -> None:
        pending: collections.deque = collections.deque()
        stopping = False
        while pending or not stopping:
            if not pending:
                job = self.jobs.get()
                if job is None:
                    break
                pending.append(job)
            while True:  # whatever queued up meanwhile joins this round
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                else:
                    pending.append(job)
            self.held = len(pending)
            batch = self._take(pending)
            try:
                self._answer(batch)
            except Exception as error:  # noqa: BLE001 - a bug: those requests get a 500, the thread keeps serving
                for job in batch:
                    _settle(job, error)
            self.held = len(pending)

    @staticmethod
    def _take(pending: collections.deque) -> list:
        """The first job and the queued ones of the same measure and unit rule, up to BATCH_SENTENCES sentences."""
        first = pending.popleft()
        batch, count = [first], len(first[0].texts)
        kept: collections.deque = collections.deque()
        key = (first[0].measure, first[0].units)
        while pending:
            job = pending.popleft()
            if (job[0].measure, job[0].units) == key and count + len(job[0].texts) <= BATCH_SENTENCES:
                batch.append(job)
                count += len(job[0].texts)
            else:
                kept.append(job)
        pending.extend(kept)
        return batch

    def _answer(self, batch: list) -> None:
        ready, lengths = [], []
        for job in batch:
            try:
                with _FORWARD:  # the tokenizer is not to be shared between threads (another app's may use it)
                    lengths.append(check_limits(self.model, job[0], self.max_sentences, self.max_pieces))
            except Exception as error:  # noqa: BLE001 - the library's message (422), or a bug (500)
                self.held -= 1  # before the answer: its request may be counting the waiting ones at once
                _settle(job, error)
            else:
                ready.append(job)
        for group in shared_passes(lengths):
            self._answer_pass([ready[i] for i in group])

    def _answer_pass(self, ready: list) -> None:
        """Answer the jobs of one shared pass (shared_passes), each with its Attention and notes, or its error."""
        try:
            with _FORWARD:
                answers = attend_many(self.model, [job[0] for job in ready])
        except Exception as error:  # noqa: BLE001 - a bug: the request gets a 500, the thread keeps serving
            answers = [error] * len(ready)
        for job, answer in zip(ready, answers):
            if not isinstance(answer, BaseException):
                try:
                    with _FORWARD:  # notes_of tokenizes
                        answer = Answered(answer, notes_of(self.model, answer))
                except Exception as error:  # noqa: BLE001 - a bug: a 500 for this request alone
                    answer = error
            self.held -= 1
            _settle(job, answer)


def _settle(job, answer) -> None:
    _, loop, future = job

    def settle() -> None:
        if future.done():  # the client went away
            return
        if isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the event loop has closed: nobody waits
        pass
