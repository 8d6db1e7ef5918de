"""The server's one model thread: requests queue up and never run two forward passes at once.

A request is a Query (what POST /api/attend names: sentences, focus and sense words, measure, unit rule; never a
file, a folder or a model). The thread takes the queued queries of one measure and unit rule together and runs
them as one batch: one forward pass (real_attention.engine.pipeline.attend_with_sums), then each query's words are
located and its heads classified on its own (classify_words), as `ra.attend` does. A lone query, or a batch with
an error, goes through `ra.attend` itself, query by query, so each error names that query's own sentences.
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

BATCH_SENTENCES = 64  # the most sentences one forward pass takes from the queue
MAX_QUEUED = 64  # requests waiting beyond this are refused (503) instead of piling up
# value-zeroing re-runs each layer once per piece (its cost grows as pieces^2): a request of --max-pieces pieces took
# 80 s on 2 cores, and the server answers one forward pass at a time; it takes this share of --max-pieces
VALUE_ZEROING_SHARE = 16
_FORWARD = threading.Lock()  # one forward pass at a time in this process, whatever number of apps share a model


@dataclass(frozen=True)
class Query:
    """One request's input, checked for types (not yet for content: the library does that)."""

    texts: tuple[str, ...]  # (S,) the sentences
    focus: str | None = None  # the ambiguous word; with `sense`, the heads are classified
    sense: tuple[str, ...] | None = None  # (S,) the word that decides its sense in each sentence
    measure: str = "weights"
    units: str = "text"


class Busy(RealAttentionError):
    """Too many requests wait already."""


def check_limits(model, query: Query, max_sentences: int, max_pieces: int) -> None:
    """InputError if the query has more sentences, or more word pieces over all its sentences, than allowed."""
    if len(query.texts) > max_sentences:
        raise InputError(f"{len(query.texts)} sentences; this server takes at most {max_sentences} per request "
                         "(--max-sentences)")
    if not query.texts:  # ra.attend says what is wrong
        return
    # as the run encodes them (engine.extract.encode): a typed "[MASK]" is the pieces of its characters, not one
    pieces = sum(len(ids) for ids in model.tokenizer(list(query.texts), verbose=False,
                                                     split_special_tokens=True)["input_ids"])
    if pieces > max_pieces:
        raise InputError(f"the sentences have {pieces} word pieces together; this server takes at most {max_pieces} "
                         "per request (--max-pieces)")
    if query.measure == VALUE_ZEROING and pieces > max_pieces // VALUE_ZEROING_SHARE:
        raise InputError(f"the sentences have {pieces} word pieces together; value-zeroing runs every layer again "
                         f"for each piece, so this server takes at most {max_pieces // VALUE_ZEROING_SHARE} per "
                         f"request for it (--max-pieces / {VALUE_ZEROING_SHARE}); weights and norm take {max_pieces}")


class Answered(NamedTuple):
    """A query's answer: its Attention and the notes a reader must see beside it (notes_of)."""

    attention: Any
    notes: tuple[str, ...]


def notes_of(model, attention) -> tuple[str, ...]:
    """What `ra.attend` would warn about an answer, for the page and the JSON: words the vocabulary lacks (they
    became the unknown token), and units of the text rule that one piece straddles, joined into one. Called in the
    model's thread: the tokenizer is not to be shared between threads."""
    from ..engine.models import check_encodes

    notes = []
    unknown = check_encodes(model, [sentence.text for sentence in attention.sentences])
    if unknown:
        notes.append(unknown)
    for number, sentence in enumerate(attention.sentences, start=1):
        for join in sentence.joined:
            notes.append(f"sentence {number}: {' and '.join(repr(unit) for unit in join.units)} are one word here: "
                         f"the piece {join.piece!r} spans them")
    return tuple(notes)


def attend_one(model, query: Query, lang: str = ""):
    """`ra.attend` on one query: an Attention, classified when the query has a focus or sense word."""
    from ..api.api import attend

    focused = query.focus is not None or query.sense is not None
    return attend(model, list(query.texts), focus=query.focus if focused else None,
                  sense=list(query.sense) if query.sense is not None else None, lang=lang, units=query.units,
                  measure=query.measure)


def attend_many(model, queries: list[Query], lang: str = "") -> list:
    """Each query's Attention (or the RealAttentionError it raised), from one forward pass when they can share one.

    All queries share a measure and a unit rule. Their sentences run as one padded batch; the focus and sense words
    of each query must be units of its sentences (the `required` words of the pass).
    """
    if len(queries) == 1 or not all(text.strip() for query in queries for text in query.texts):
        return [_alone(model, query, lang) for query in queries]
    from ..engine.models import check_encodes
    from ..engine.pipeline import attend_with_sums, classify_words, versions
    from ..api.arguments import sentence_set
    from ..api.attention import Attention

    measure, units = queries[0].measure, queries[0].units
    try:
        stripped = [[text.strip() for text in query.texts] for query in queries]  # as ra.attend takes them
        sets = [None if q.focus is None and q.sense is None else sentence_set(texts, q.focus, q.sense, lang)
                for q, texts in zip(queries, stripped)]
        texts: list[str] = []
        required: list[tuple[str, ...]] = []  # required[i]: the words that must be units of sentence i
        for part, chosen in zip(stripped, sets):
            texts += part
            required += [()] * len(part) if chosen is None else [(chosen.focus, s.sense) for s in chosen.sentences]
        check_encodes(model, texts)
        attentions, _, rollouts = attend_with_sums(model, texts, units=units, required=required, measure=measure)
    except RealAttentionError:  # each alone, so the message names that query's own sentence numbers
        return [_alone(model, query, lang) for query in queries]
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


def _alone(model, query: Query, lang: str):
    try:
        return attend_one(model, query, lang)
    except RealAttentionError as error:
        return error


class Worker:
    """The thread that owns the model. `await worker.submit(query)` -> the query's Answered (its Attention and
    notes), or its error raised.

    Queued queries of one measure and unit rule are taken together, up to BATCH_SENTENCES sentences, and answered
    from one forward pass; the event loop only waits, so the server answers /api/health meanwhile.
    """

    def __init__(self, model, *, lang: str = "", max_sentences: int = 16, max_pieces: int = 256) -> None:
        self.model, self.lang = model, lang
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

    async def submit(self, query: Query):
        if self.jobs.qsize() + self.held >= MAX_QUEUED:  # queued, and taken by the thread but not yet answered
            raise Busy(f"{MAX_QUEUED} requests are waiting already; try again in a moment")
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
        ready = []
        for job in batch:
            try:
                check_limits(self.model, job[0], self.max_sentences, self.max_pieces)
            except Exception as error:  # noqa: BLE001 - the library's message (422), or a bug (500)
                _settle(job, error)
            else:
                ready.append(job)
        if not ready:
            return
        try:
            with _FORWARD:
                answers = attend_many(self.model, [job[0] for job in ready], self.lang)
        except Exception as error:  # noqa: BLE001 - a bug: the request gets a 500, the thread keeps serving
            answers = [error] * len(ready)
        for job, answer in zip(ready, answers):
            if not isinstance(answer, BaseException):
                try:
                    answer = Answered(answer, notes_of(self.model, answer))
                except Exception as error:  # noqa: BLE001 - a bug: a 500 for this request alone
                    answer = error
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
