"""The API's surface: bool label columns, batching, heatmaps titled by the Attention, piece maps, and every
public input checked with InputError (also under python -O, where an assert would vanish)."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import real_attention as ra
from conftest import SENTENCES

ROOT = Path(__file__).resolve().parent.parent
# lengths differ, so a batch of 2 sorts them and pads
MANY = ["Fui al banco.", "Me senté en el banco de mi jardín.", "el banco.", "Fui al banco a sacar dinero.",
        "mi jardín.", "I sat on the bank of my garden.", "I went to the bank to get some money."]


def test_label_columns_are_bool_and_heads_csv_keeps_true_false(tiny_att, tmp_path):
    from real_attention.outputs.tables import write_csv

    heads = ra.classify(tiny_att)
    assert heads["sense_head"].dtype == bool and heads["marker_head"].dtype == bool
    assert len(heads[heads.sense_head]) == int(tiny_att.result.report.sense_head.sum())
    write_csv(heads, tmp_path / "heads.csv")
    lines = (tmp_path / "heads.csv").read_text().splitlines()
    flags = {line.split(",")[2] for line in lines[1:]} | {line.split(",")[3] for line in lines[1:]}
    assert flags <= {"true", "false"} and "True" not in (tmp_path / "heads.csv").read_text()


def test_batches_sorted_by_length_give_the_numbers_of_one_batch_in_input_order(tiny):
    one = ra.attend(tiny, MANY, batch_size=len(MANY))
    batched = ra.attend(tiny, MANY, batch_size=2)
    assert [s.text for s in batched] == [s.text for s in one] == MANY
    for a, b, ra_, rb in zip(one, batched, one.rollout, batched.rollout):
        assert a.words == b.words
        np.testing.assert_allclose(a.weights, b.weights, atol=1e-6)
        np.testing.assert_allclose(ra_, rb, atol=1e-6)


def test_batched_sums_equal_one_batch(tiny_loaded):
    from real_attention.engine.pipeline import attend_with_sums

    _, whole, _ = attend_with_sums(tiny_loaded, MANY)
    _, parts, _ = attend_with_sums(tiny_loaded, MANY, batch_size=3)
    np.testing.assert_allclose(parts.totals, whole.totals, atol=1e-6)
    assert (parts.sentences, parts.units, parts.pairs, parts.tokens) == \
        (whole.sentences, whole.units, whole.pairs, whole.tokens)


def test_length_batches_bound_the_pairs_of_a_batch_and_keep_one_batch_in_order():
    from real_attention.engine.batches import PAIR_TOKENS, index_batches, length_batches

    lengths = [5, 3, 90, 3, 41, 12, 200, 7]
    batches = length_batches(range(len(lengths)), 4, lengths.__getitem__)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(lengths)  # sorted by length, ties in the order given
    for batch in batches:  # at most 4 sentences and 4 * PAIR_TOKENS**2 pairs, or one sentence alone
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 4 and (len(batch) * longest**2 <= 4 * PAIR_TOKENS**2 or len(batch) == 1)
    assert [len(batch) for batch in batches] == [4, 2, 1, 1]  # 3 3 5 7 | 12 41 (2 * 41² ≤ 4 * 40²) | 90 | 200
    assert index_batches([9, 3, 5], 4) == [[0, 1, 2]]  # one batch keeps the order given
    assert index_batches([9, 3, 5], 2) == [[1, 2], [0]]
    assert index_batches([90, 90], 2) == [[0], [1]]  # two long ones do not share a batch
    assert index_batches([9, 3, 5], None) == [[0, 1, 2]]
    assert length_batches([], 4) == [] and index_batches([], 4) == []


def test_attend_on_long_sentences_runs_batches_of_bounded_memory(tiny, monkeypatch):
    """ra.attend cuts its batches by the corpus's rule: with PAIR_TOKENS at 4, no batch holds more than
    batch_size * 16 query-key pairs per head, and the numbers are those of one batch."""
    from real_attention.engine import batches, pipeline

    one = ra.attend(tiny, MANY, batch_size=len(MANY))
    monkeypatch.setattr(batches, "PAIR_TOKENS", 4)
    seen = []
    original = pipeline._attend_batch

    def spy(loaded, encoded, *rest):
        seen.append([len(s.ids) for s in encoded])
        return original(loaded, encoded, *rest)

    monkeypatch.setattr(pipeline, "_attend_batch", spy)
    bounded = ra.attend(tiny, MANY, batch_size=len(MANY))
    assert len(seen) > 1 and sum(map(len, seen)) == len(MANY)
    assert all(len(batch) * max(batch) ** 2 <= len(MANY) * 16 or len(batch) == 1 for batch in seen)
    for a, b in zip(one, bounded):
        assert a.words == b.words
        np.testing.assert_allclose(a.weights, b.weights, atol=1e-6)


def test_whole_numbers_are_checked_once_for_every_stage():
    from real_attention.engine.checks import whole_number
    from real_attention.engine.sentences import ConfigError

    assert whole_number(np.int64(3), "n") == 3 and type(whole_number(np.int64(3), "n")) is int
    with pytest.raises(ra.InputError, match=r"^n 0 is out of range: at least 1$"):
        whole_number(0, "n")
    with pytest.raises(ra.InputError, match=r"^n must be a whole number, at least 1, not float 2.5$"):
        whole_number(2.5, "n")
    with pytest.raises(ra.InputError, match=r"^n must be a whole number, 1 to 3, not bool True$"):
        whole_number(True, "n", 1, 3)
    with pytest.raises(ConfigError, match="occurrence 0 is out of range"):
        whole_number(0, "occurrence", error=ConfigError)
    with pytest.raises(ra.InputError, match=re.escape("report_sentences (--report-sentences) 0 is out of range: at least 1")):
        ra.run(report_sentences=0)


def test_the_heatmap_takes_its_title_from_the_attention(tiny_att):
    figure = tiny_att.heatmap(1, layer=2, head=3)
    title = figure.axes[0].get_title()
    assert tiny_att.model.rstrip("/").split("/")[-1] in title and "sentence 2" in title
    assert ra.heatmap(tiny_att[1], 2, 3).axes[0].get_title() != title  # a bare sentence knows no model
    same = ra.heatmap(tiny_att, 2, 3, index=1)
    assert np.array_equal(figure.axes[0].images[0].get_array(), same.axes[0].images[0].get_array())
    expected = tiny_att[1].weights[1, 2]
    assert np.allclose(np.asarray(figure.axes[0].images[0].get_array()), expected)


def test_piece_maps_on_request(tiny):
    plain = ra.attend(tiny, SENTENCES)
    assert plain[0].pieces == () and plain[0].piece_weights is None
    att = ra.attend(tiny, SENTENCES, pieces=True)
    first = att[0]
    t = len(first.pieces)
    assert first.pieces[0] == "[CLS]" and first.pieces[-1] == "[SEP]" and "##é" in first.pieces
    assert first.piece_weights.shape == (att.layers, att.heads, t, t) and first.piece_weights.dtype == np.float32
    np.testing.assert_allclose(first.piece_weights.sum(axis=-1), 1.0, atol=1e-5)
    assert len(tiny.tokenizer(first.text)["input_ids"]) == t
    second = att[1]
    assert len(second.pieces) != t  # each sentence its own length, no padding
    assert np.allclose(second.piece_weights.sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(att[0].weights, plain[0].weights, atol=1e-6)  # the word maps are unchanged


def test_piece_maps_are_the_models_own_attentions(tiny):
    import torch

    att = ra.attend(tiny, SENTENCES[:1], pieces=True)
    ids = tiny.tokenizer(SENTENCES[0], return_tensors="pt")
    with torch.inference_mode():
        maps = tiny.model(**ids, output_attentions=True).attentions
    expected = torch.stack(maps)[:, 0].numpy()  # (layers, heads, t, t)
    np.testing.assert_allclose(att[0].piece_weights, expected, atol=1e-6)


def test_layer_and_head_from_the_tables_own_numbers(tiny_att):
    heads = ra.classify(tiny_att)
    row = heads.iloc[5]
    assert isinstance(row["layer"], np.integer)
    ra.heatmap(tiny_att[0], layer=row["layer"], head=row["head"])
    ra.heatmap(tiny_att[0], layer=np.int64(1), head=np.int32(2))
    with pytest.raises(ra.InputError, match=r"^layer 9 is out of range: 1 to 3$"):
        ra.heatmap(tiny_att[0], layer=np.int64(9), head=1)
    with pytest.raises(ra.InputError, match="head must be a whole number"):
        ra.heatmap(tiny_att[0], layer=1, head=1.0)


@pytest.mark.parametrize(("call", "argument"), [
    (lambda m, a: ra.attend(m, 3), "texts"),
    (lambda m, a: ra.attend(m, b"Fui al banco."), "texts"),
    (lambda m, a: ra.attend(m, ["Fui al banco.", None]), "texts"),
    (lambda m, a: ra.attend(m, ["Fui al banco."], focus=3, sense="banco"), "focus"),
    (lambda m, a: ra.attend(m, ["Fui al banco."], focus="banco", sense=[3]), "sense"),
    (lambda m, a: ra.attend(m, ["Fui al banco."], batch_size=0), "batch_size"),
    (lambda m, a: ra.attend(m, ["Fui al banco."], batch_size="2"), "batch_size"),
    (lambda m, a: ra.attend("minilm", ["Fui al banco."]), "model"),
    (lambda m, a: ra.load(3), "model"),
    (lambda m, a: ra.load("minilm", revision=7), "revision"),
    (lambda m, a: ra.classify("att"), "classify"),
    (lambda m, a: ra.heatmap("att", 1, 1), "heatmap"),
    (lambda m, a: ra.heatmap(a, 1, 1, index=5), "index"),
    (lambda m, a: ra.corpus_stats(m, [None, 3]), "lines"),
    (lambda m, a: ra.corpus_stats(m, b"el banco."), "lines"),
    (lambda m, a: ra.corpus_stats(m, 3), "lines"),
    (lambda m, a: ra.corpus_stats(m, ["el banco."], batch_size=-1), "batch_size"),
    # a review found these ending in TypeError or AttributeError, or a string taken as true
    (lambda m, a: ra.run(out=None), "out must be a path"),
    (lambda m, a: ra.run(config=3), "config must be a path"),
    (lambda m, a: ra.run(model=3), "model must be a non-empty string"),
    (lambda m, a: ra.run(figures="no"), "figures must be True or False"),
    (lambda m, a: ra.run(report="no"), "report must be True or False"),
    (lambda m, a: ra.run(offline="x"), "offline must be True or False"),
    (lambda m, a: ra.corpus(None, model="minilm"), "inputs must be a path or a list of paths"),
    (lambda m, a: ra.corpus([3], model="minilm"), r"inputs \(--corpus\) must be a path"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", truncate="x"), "truncate must be True or False"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", out=None), "out must be a path"),
    (lambda m, a: ra.merge(None), "merge takes the shard folders"),
    (lambda m, a: ra.merge([None]), r"shard_dirs \(SHARD_DIR\) must be a path"),
    (lambda m, a: ra.read_attention(None), "path must be a path"),
    (lambda m, a: ra.read_attention(b"/tmp"), "path must be a path"),
    (lambda m, a: ra.syntax("minilm", "t.conllu"), "syntax: model must be a loaded model"),
    (lambda m, a: ra.syntax(m, None), "treebank must be a path"),
    (lambda m, a: ra.write_syntax(None), "write_syntax takes what ra.syntax returns"),
    (lambda m, a: ra.write_importance(None), "write_importance takes what ra.importance returns"),
    (lambda m, a: ra.mixing(m, ["Fui al banco a sacar dinero."], focus="ban", sense=["dinero"]),
     "only part of the word 'banco'"),
    (lambda m, a: ra.mixing(m, ["Fui al banco a sacar dinero."], focus="xyz", sense=["dinero"]),
     "the focus word 'xyz' is not in sentence 1"),
    (lambda m, a: ra.importance(m, ["Fui al banco."], corpus_file="/nonexistent/c.txt"),
     "corpus_file '/nonexistent/c.txt' cannot be read"),
    (lambda m, a: ra.heatmap(a, 1, 1, revision=3), "revision must be a non-empty string"),
    (lambda m, a: ra.heatmap(a, 1, 1, model=3), "model must be a non-empty string"),
    (lambda m, a: ra.corpus_stats(m, ["el banco."], progress=3), "progress must be a tqdm-like bar"),
    (lambda m, a: ra.compare(None, ["el banco."]), "compare takes the models as a list"),
    (lambda m, a: ra.compare([m, m], None), "compare takes the sentences as"),
    (lambda m, a: ra.compare([m, m], b"el banco."), "compare takes the sentences as"),
    (lambda m, a: ra.compare([m, m], ["el banco."], names=3), "names must be a list of strings"),
    (lambda m, a: ra.compare([m, m], ["el banco."], progress=3), "progress must be a factory"),
    (lambda m, a: ra.app(None), "model must be a loaded model .* or a model's name, not None"),
    (lambda m, a: ra.Thresholds(position="x"), "threshold position must be a number between 0 and 1"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", shard=3), "shard must be a string"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", thresholds=3), "thresholds must be a ra.Thresholds, a dict"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", progress=3), "progress must be a factory"),
    # a later review: an AttributeError, a TypeError from transformers, or a flag taken as true
    (lambda m, a: ra.corpus("c.txt", model=3), "model must be a non-empty string"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", revision=3), "revision must be a non-empty string"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", device=3), "device must be a non-empty string"),
    (lambda m, a: ra.corpus("c.txt", model="minilm", lang="es"), r"heads takes model \(--model\) or lang \(--lang\)"),
    (lambda m, a: ra.attend(m, "el \ud800 banco"), "unpaired surrogate"),
    (lambda m, a: ra.attend(m, "   "), "texts: sentence 1 is empty"),
    (lambda m, a: ra.attend(m, words=[["el", "\ud800"]]), "words= sentence 1, word 2 .*unpaired surrogate"),
    (lambda m, a: ra.attend(m, words=[["a\x00b"]]), "words= sentence 1, word 1"),
    (lambda m, a: ra.attend(m, words=3), "words= must be a list of sentences"),
    (lambda m, a: ra.attend(m, words=[3]), "words= sentence 1 is int"),
    (lambda m, a: ra.run(formats=None), "formats must be 'png', 'svg', 'pdf' or a list of them, not NoneType"),
    (lambda m, a: ra.run(formats=[3]), "formats must be strings"),
    (lambda m, a: ra.merge(["a", "b"], formats=3), "formats must be"),
    (lambda m, a: ra.merge(["a", "b"], figures="no"), "figures must be True or False"),
    (lambda m, a: ra.merge(["a", "b"], wait="no"), "wait must be True or False"),
    (lambda m, a: ra.run(progress=3), "progress must be a callable"),
    (lambda m, a: ra.Attention(sentences=(), model="m", revision="r", versions={}), "at least one sentence"),
    (lambda m, a: ra.attend(m, ["Fui al banco a sacar dinero."], focus="banco a", sense=["a sacar"]),
     "the words 'banco a' and 'a sacar' overlap"),
])
def test_wrong_types_are_one_input_error_naming_the_argument(tiny, tiny_att, call, argument):
    with pytest.raises(ra.InputError, match=argument):
        call(tiny, tiny_att)


# Messages that both interfaces reach name the argument as `python_name (--flag)`: a Python user never typed the
# flag, a command-line user never wrote the keyword. Each call: (model folder, loaded model, a corpus file, a
# folder to write to) -> the call that fails; then each name the message must hold.
NAMED_BOTH_WAYS = [
    (lambda d, m, c, o: ra.load("minilm", revision="abc"), ["revision (--revision)", "model (--model)"]),
    (lambda d, m, c, o: ra.load(d, revision="abc"), ["revision (--revision)", "model (--model)"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, batch_size=0), ["batch_size (--batch-size)"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, thresholds=["nonsense"]), ["thresholds (--threshold) 'nonsense'"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, thresholds={"broad": 2}), ["thresholds (--threshold)"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, shard="one of two"), ["shard (--shard) 'one of two'"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, shard="3/2"), ["shard (--shard) i/N"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, workers=2, scheduler="tcp://127.0.0.1:8786"),
     ["workers (--workers)", "scheduler (--scheduler)"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, threads=100_000), ["threads (--threads) 100000"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, partition_size=0), ["partition_size (--partition-size) 0"]),
    (lambda d, m, c, o: ra.corpus(c, model=d, out=o, name="a/b"), ["name (--name) 'a/b'"]),
    (lambda d, m, c, o: ra.corpus(Path(o) / "missing.txt", model=d, out=o), ["inputs (--corpus)"]),
    (lambda d, m, c, o: ra.corpus(c, out=o), ["model (--model)", "lang (--lang)"]),
    (lambda d, m, c, o: ra.run(model=d, out=o, compare_measures=True, measure="norm"),
     ["compare_measures (--compare-measures)", "measure (--measure) norm"]),
    (lambda d, m, c, o: ra.run(model=d, out=o, lang="es-norm"), ["lang (--lang) 'es-norm'", "measure (--measure)"]),
    (lambda d, m, c, o: ra.syntax(m, Path(o) / "t.conllu", batch_size=0), ["batch_size (--batch-size)"]),
    (lambda d, m, c, o: ra.syntax(m, Path(o) / "t.conllu", min_count=0), ["min_count (--min-count)"]),
    (lambda d, m, c, o: ra.detect(m, repeats=1), ["repeats (--repeats)"]),
    (lambda d, m, c, o: ra.detect(m, length=10, repeats=3), ["length (--length) 10 x repeats (--repeats) 3"]),
    (lambda d, m, c, o: ra.compare([m], ["el banco."]), ["models (--model)"]),
    (lambda d, m, c, o: ra.compare([m, m], ["el banco."], measure="value-zeroing"), ["measure (--measure)"]),
    (lambda d, m, c, o: ra.importance(m, ["el banco."], batch_size=0), ["batch_size (--batch-size)"]),
]


@pytest.mark.parametrize(("call", "names"), NAMED_BOTH_WAYS)
def test_an_argument_both_interfaces_take_is_named_both_ways(tiny_model_dir, tiny, tmp_path, call, names):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Fui al banco.\n", encoding="utf-8")
    with pytest.raises(ra.InputError) as raised:
        call(str(tiny_model_dir), tiny, str(corpus), str(tmp_path / "out"))
    message = str(raised.value)
    assert "\n" not in message
    for name in names:
        assert name in message, message
    # every flag the message names is given with the Python name before it
    flags = re.findall(r"(?<![\w(])--[a-z-]+", message)
    assert not flags, f"a flag without its Python name: {flags} in {message!r}"
    assert not (tmp_path / "out").exists()


def test_a_single_string_is_one_sentence_for_corpus_stats(tiny):
    one = ra.corpus_stats(tiny, "Fui al banco a sacar dinero.")
    assert set(one["n_sentences"]) == {1}
    listed = ra.corpus_stats(tiny, ["Fui al banco a sacar dinero."])
    assert one.equals(listed)


def test_bad_inputs_are_input_errors_under_python_O(tiny_model_dir):
    """asserts vanish under -O; the checks must not."""
    code = (
        # Only this project's modules are compiled under -O (their asserts gone); torch and transformers load from
        # the ordinary .pyc that pip wrote, not recompiled for -O (40 s on a fresh environment) and never rewritten.
        "import sys, importlib._bootstrap_external as external\n"
        "sys.dont_write_bytecode = True\n"
        "ordinary = external.cache_from_source\n"
        "def cache_from_source(path, debug_override=None, *, optimization=None):\n"
        "    return ordinary(path, optimization=None if 'real_attention' in path else '')\n"
        "external.cache_from_source = cache_from_source\n"
        "import numpy as np, real_attention as ra\n"
        "from real_attention.engine.extract import Encoded\n"
        "Encoded('x', np.zeros(2, np.int64), np.zeros(3, np.int64), np.zeros(1, np.int64), ())  # its assert: gone\n"
        f"m = ra.load({str(tiny_model_dir)!r})\n"
        "att = ra.attend(m, ['Fui al banco.'])\n"
        "calls = [lambda: ra.attend(m, 3), lambda: ra.attend(m, ['x'], focus=3, sense='x'), lambda: ra.load(3),\n"
        "         lambda: ra.classify('att'), lambda: ra.attend(m, b'abc'), lambda: ra.corpus_stats(m, [None, 3]),\n"
        "         lambda: ra.heatmap(att[0], layer=np.int64(99), head=1), lambda: ra.attend(m, ['x'], batch_size=0),\n"
        "         lambda: ra.WordAttention('x', ('x',), (0,), np.zeros((1, 1, 2, 2), np.float32)),\n"
        "         lambda: ra.WordAttention('x', ('x',), (0,), np.zeros((1, 1, 1, 1)))]\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "    except ra.InputError:\n"
        "        continue\n"
        "    raise SystemExit('no InputError')\n"
        "print('ok', __debug__)\n"
    )
    done = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip() == "ok False", done.stderr[-3000:]


def test_words_the_vocabulary_lacks_are_warned_about_with_words_too(tiny):
    """attend's docstring promises the warning; the words= path skipped it."""
    with pytest.warns(UserWarning, match="lacks characters of 1 word"):
        ra.attend(tiny, words=[["Fui", "al", "banco", "\u0e01\u0e02"]])


def test_a_heatmap_drawn_from_one_sentence_has_no_placeholder_title(tiny_loaded):
    """ra.heatmap(att[0], ...) without model= titled the figure 'model @  · layer 1, head 4'."""
    import real_attention as ra

    att = ra.attend(tiny_loaded, "Me senté en el banco de mi jardín.")
    figure = ra.heatmap(att[0], layer=1, head=2, focus="banco", sense="jardín")
    title = figure._suptitle.get_text() if figure._suptitle is not None else figure.axes[0].get_title()
    assert title.startswith("layer 1, head 2") and "model @" not in title, title
    named = ra.heatmap(att[0], layer=1, head=2, model="tiny", revision="abc1234")
    title = named._suptitle.get_text() if named._suptitle is not None else named.axes[0].get_title()
    assert title.startswith("tiny @ abc1234 · layer 1, head 2"), title


def test_a_line_that_is_none_is_named_once(tiny_loaded):
    import real_attention as ra

    with pytest.raises(ra.InputError, match=r"^lines: line 1 is None, not a string$"):
        ra.corpus_stats(tiny_loaded, [None, 3])


def test_model_paths_and_thresholds_in_every_form(tiny_model_dir, tmp_path):
    """A model folder as a pathlib.Path works wherever a string does; ra.corpus takes a ra.Thresholds (what
    corpus_stats took) and corpus_stats a dict (what corpus took), with the same labels."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("Fui al banco a sacar dinero.\nMe senté en el banco de mi jardín.\n", encoding="utf-8")
    chosen = ra.Thresholds(position=0.3, broad=0.6)
    output = ra.corpus(corpus, model=Path(tiny_model_dir), out=tmp_path / "o", thresholds=chosen, figures=False)
    assert output.run.thresholds == chosen
    loaded = ra.load(Path(tiny_model_dir))
    frame = ra.corpus_stats(loaded, corpus.read_text(encoding="utf-8").splitlines(),
                            thresholds={"position": 0.3, "broad": 0.6})
    assert list(frame["label"]) == list(output.heads["label"])
    assert ra.run(config=None, model=Path(tiny_model_dir), lang="es", out=tmp_path / "r", figures=False,
                  report=False).summary["model"] == str(tiny_model_dir)


def test_focus_and_sense_words_are_stripped_as_run_strips_them(tiny):
    spaced = ra.attend(tiny, ["Fui al banco a sacar dinero."], focus=" banco ", sense=["dinero "])
    plain = ra.attend(tiny, ["Fui al banco a sacar dinero."], focus="banco", sense=["dinero"])
    assert spaced.result.sentence_set.focus == "banco"
    np.testing.assert_array_equal(spaced[0].weights, plain[0].weights)


def test_a_mixing_shows_what_it_holds_and_is_a_sequence():
    from collections.abc import Sequence

    from real_attention.engine.mixing.result import Mixing

    mixing = Mixing(sentences=(), model="m", revision="r", causal=False)
    assert isinstance(mixing, Sequence) and repr(mixing).startswith("<Mixing: 0 sentence(s) of m, measures")
    assert "_API" not in dir(ra) and "Any" not in dir(ra) and "engine" in dir(ra)


def test_thresholds_from_numpy_numbers():
    from real_attention.statistics.labels import thresholds_from

    assert thresholds_from({"broad": np.float64(0.7), "position": np.float32(0.25)}) == ra.Thresholds(broad=0.7,
                                                                                                       position=0.25)
    assert thresholds_from(None) == ra.Thresholds() and thresholds_from("broad=0.6") == ra.Thresholds(broad=0.6)


def test_a_corpus_outputs_heads_table_that_is_gone_or_changed_is_a_damaged_table(tiny_model_dir, tmp_path):
    """CorpusOutput.heads refused a changed heads.csv, but a missing one, a folder in its place or a dangling link
    raised a bare FileNotFoundError or IsADirectoryError."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("Fui al banco a sacar dinero.\nMe senté en el banco de mi jardín.\n", encoding="utf-8")
    output = ra.corpus(corpus, model=str(tiny_model_dir), out=tmp_path / "o", figures=False)
    table = output.results_dir / "heads.csv"
    written = table.read_bytes()
    assert len(output.heads) == 12
    table.write_bytes(written.replace(b"\n1,1,", b"\n1,2,", 1))
    with pytest.raises(ra.InputError, match="its sha256 is not the"):
        _ = output.heads
    table.unlink()
    with pytest.raises(ra.InputError, match=r"heads\.csv.*cannot be read \(No such file or directory\)"):
        _ = output.heads
    table.mkdir()
    with pytest.raises(ra.InputError, match=r"cannot be read \(Is a directory\)"):
        _ = output.heads
    table.rmdir()
    table.symlink_to(tmp_path / "nowhere.csv")
    with pytest.raises(ra.InputError, match="cannot be read"):
        _ = output.heads


def test_options_are_keywords_so_a_positional_slip_is_a_type_error():
    # ra.run("es", None, "minilm") would otherwise read "minilm" as the model after a config of None, and a
    # formats string passed where `name` stands would name the results folder "svg"
    import inspect

    assert [name for name, p in inspect.signature(ra.run).parameters.items()
            if p.kind is not p.KEYWORD_ONLY] == ["lang"]
    for writer in (ra.write_syntax, ra.write_compare, ra.write_detect, ra.write_importance):
        parameters = inspect.signature(writer).parameters
        assert [name for name, p in parameters.items() if p.kind is not p.KEYWORD_ONLY] == ["result", "out", "name"]
    with pytest.raises(TypeError):
        ra.run("es", None)  # type: ignore[misc]


def test_load_takes_a_model_or_the_pinned_model_of_a_language(monkeypatch):
    # lang alone once loaded MiniLM (the default model), silently
    import real_attention.engine.models as models

    chosen = []
    monkeypatch.setattr(models, "load_model", lambda choice, **options: chosen.append(choice) or choice)
    ra.load(lang="es")
    ra.load(lang="en")
    ra.load()
    ra.load("smollm2")
    assert [choice.name for choice in chosen] == [models.PINNED_MODELS["es"][0], models.PINNED_MODELS["en"][0],
                                                  "sentence-transformers/all-MiniLM-L6-v2",
                                                  "HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert chosen[0].revision == models.PINNED_MODELS["es"][1]
    with pytest.raises(ra.InputError, match="load takes model or lang .*, not both"):
        ra.load("minilm", lang="es")
