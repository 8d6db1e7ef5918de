"""Heads as dependency parsers: predictions and counts on hand-made maps, the possessive case, the baselines,
reading CoNLL-U, the given-words unit rule on real tokenizers, the API against the CLI, the bad inputs, and
MiniLM on UD English-EWT dev (slow)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from real_attention.engine.extract import encode_words
from real_attention.engine.units import MissingWord
from real_attention.syntax_probe.probe import write_syntax
from real_attention.syntax_probe.scoring import (
    OFFSETS,
    GoldBatch,
    SyntaxCounts,
    baselines_frame,
    best_frame,
    heads_frame,
    predict,
    scored_index,
)
from real_attention.syntax_probe.treebank import TreebankError, TreeSentence, read_treebank

import real_attention as ra
from real_attention import cli


def ud_folder() -> Path | None:
    """UD English-EWT: $REAL_ATTENTION_UD, else shared/data/ud beside the checkout, else /work/shared/data/ud."""
    repo = Path(__file__).resolve().parents[1]
    for folder in (os.environ.get("REAL_ATTENTION_UD"), repo.parent / "shared/data/ud", "/work/shared/data/ud"):
        if folder and (Path(folder) / "en_ewt-ud-dev.conllu").is_file():
            return Path(folder)
    return None


def tree(words, heads, relations) -> TreeSentence:
    """heads counted from 1 as in CoNLL-U, 0 the root."""
    return TreeSentence(tuple(words), np.array(heads, dtype=np.int64) - 1, tuple(relations), 1)


# "The dog saw cats" (det, nsubj, root, obj) and "Dogs bark" (nsubj, root)
SENTENCES = [tree(["The", "dog", "saw", "cats"], [2, 3, 0, 3], ["det", "nsubj", "root", "obj"]),
             tree(["Dogs", "bark"], [2, 0], ["nsubj", "root"])]


def maps_of(*heads_maps) -> torch.Tensor:
    """Per head, a list of per-sentence (W, W) maps -> (B, H, W, W) zero-padded."""
    width = max(m.shape[0] for maps in heads_maps for m in maps)
    out = np.zeros((len(heads_maps[0]), len(heads_maps), width, width), dtype=np.float32)
    for h, maps in enumerate(heads_maps):
        for b, m in enumerate(maps):
            out[b, h, :m.shape[0], :m.shape[0]] = m
    return torch.from_numpy(out)


def counted(sentences, maps) -> SyntaxCounts:
    counts = SyntaxCounts(layers=1, heads=maps.shape[1])
    gold = GoldBatch.of(sentences, counts.relation_ids)
    counts.add_gold(gold)
    counts.add_layer(0, gold, predict(maps, torch.from_numpy(gold.lengths)).numpy())
    return counts


def accuracy(frame, relation, direction, head=1, layer=1) -> float:
    row = frame[(frame["relation"] == relation) & (frame["direction"] == direction) & (frame["layer"] == layer)
                & (frame["head"] == head)]
    assert len(row) == 1
    return float(row.accuracy.iloc[0])


def test_known_argmaxes_give_known_accuracies_in_both_directions():
    previous = [np.eye(4, k=-1) + np.diag([1, 0, 0, 0]), np.eye(2, k=-1) + np.diag([1, 0])]  # row i -> i-1
    # dep->head: The->nothing (row 0 is all 0 once the diagonal is: 4, no word), dog->The, saw->dog, cats->saw:
    # only obj right. head->dep (the transpose): The<-dog, dog<-saw, saw<-cats, cats<-nothing: det and one nsubj
    # right; in "Dogs bark": Dogs<-bark right, bark (the root) never.
    predictions = predict(maps_of(previous), torch.tensor([4, 2])).numpy()
    assert predictions[0, 0, 0].tolist() == [4, 0, 1, 2] and predictions[1, 0, 0].tolist() == [1, 2, 3, 4]
    assert predictions[:, 1, 0, :2].tolist() == [[4, 0], [1, 4]]  # pads are never predicted
    frame = heads_frame(counted(SENTENCES, maps_of(previous)))
    assert accuracy(frame, "obj", "dep->head") == 1 and accuracy(frame, "det", "dep->head") == 0
    assert accuracy(frame, "nsubj", "dep->head") == 0 and accuracy(frame, "nsubj", "head->dep") == 1
    assert accuracy(frame, "det", "head->dep") == 1 and accuracy(frame, "obj", "head->dep") == 0
    assert accuracy(frame, "root", "dep->head") == 0 and accuracy(frame, "root", "head->dep") == 0
    assert accuracy(frame, "all", "dep->head") == 1 / 6 and accuracy(frame, "all", "head->dep") == 3 / 6
    assert list(frame.relation.unique()) == ["all", "det", "nsubj", "obj", "root"]
    assert frame.total[frame.relation == "nsubj"].unique().tolist() == [2]


def test_ties_go_to_the_first_word_and_the_gold_head_is_found():
    uniform = [np.full((4, 4), 0.25), np.full((2, 2), 0.5)]
    gold_map = np.zeros((4, 4))
    gold_map[[0, 1, 2, 3], [1, 2, 2, 2]] = 1  # every row on its gold head (saw: on itself, the root)
    predictions = predict(maps_of(uniform, [gold_map, np.eye(2, k=1)]), torch.tensor([4, 2])).numpy()
    assert predictions[0, 0, 0].tolist() == [1, 0, 0, 0]  # the diagonal is 0; ties: the first word
    frame = heads_frame(counted(SENTENCES, maps_of(uniform, [gold_map, np.eye(2, k=1)])))
    assert accuracy(frame, "all", "dep->head", head=2) == 4 / 6  # every word but the two roots


def test_the_possessive_case_scores_the_next_word_and_survives_a_final_possessor():
    assert scored_index(["John", "'s", "dog"], ["poss", "case", "nsubj"]).tolist() == [1, 1, 2]
    assert scored_index(["JOHN", "\u2019S", "dog"], ["poss", "case", "nsubj"]).tolist() == [1, 1, 2]
    assert scored_index(["the", "dog", "of", "John"], ["det", "root", "case", "poss"]).tolist() == [0, 1, 2, 3]
    assert scored_index(["his", "dog"], ["poss", "root"]).tolist() == [0, 1]
    # UD's plural possessive is ' alone ("soldiers ' families"): once scored as the possessor itself
    assert scored_index(["soldiers", "'", "families"], ["poss", "case", "root"]).tolist() == [1, 1, 2]
    assert scored_index(["soldiers", "\u2019", "families"], ["poss", "case", "root"]).tolist() == [1, 1, 2]
    # a closing quotation mark after a possessor is punctuation, not the possessive: the possessor is scored itself
    assert scored_index(["our", "'", "said"], ["poss", "punct", "root"]).tolist() == [0, 1, 2]
    sentence = tree(["John", "'s", "dog", "barked"], [3, 1, 4, 0], ["poss", "case", "nsubj", "root"])
    # John -> 's, 's -> dog: John (poss) is scored by the prediction of 's, which is its gold head, dog
    m = np.zeros((4, 4))
    m[[0, 1, 2, 3], [1, 2, 3, 2]] = 1
    frame = heads_frame(counted([sentence], maps_of([m])))
    assert accuracy(frame, "poss", "dep->head") == 1 and accuracy(frame, "case", "dep->head") == 0
    m[1] = np.eye(4)[0]  # 's -> John: now John's poss is wrong, though John itself still points at 's
    assert accuracy(heads_frame(counted([sentence], maps_of([m]))), "poss", "dep->head") == 0


def test_baselines_are_fixed_offsets_clamped_to_the_sentence():
    gold = GoldBatch.of(SENTENCES, SyntaxCounts(1, 1).relation_ids)
    predictions = gold.baseline_predictions()
    # before the start: the root (-1), as Clark's offset_predictor; past the end: the last word
    assert predictions[:, 0].tolist() == [[-1, -1, -1, 0], [-1, -1, 0, 1], [-1, 0, 1, 2], [0, 1, 2, 3],
                                          [1, 2, 3, 3], [2, 3, 3, 3]]
    assert predictions[OFFSETS.index(1), 1, :2].tolist() == [1, 1]
    counts = counted(SENTENCES, maps_of([np.eye(4), np.eye(2)]))
    frame = baselines_frame(counts)
    everything = frame[frame.relation == "all"].set_index("offset")
    # -1: cats; +1: The, dog, Dogs; +2: Dogs (clamped to bark); the rest nothing
    assert everything.correct.to_dict() == {-3: 0, -2: 0, -1: 1, 0: 0, 1: 3, 2: 1}
    best = best_frame(counts, min_count=1).set_index("relation")
    assert best.loc["all", "baseline_offset"] == 1 and best.loc["all", "baseline_accuracy"] == 3 / 6
    assert best.loc["obj", "baseline_offset"] == -1 and best.loc["nsubj", "baseline_accuracy"] == 1


def test_a_baseline_word_before_the_sentence_is_the_root_and_never_correct():
    # "Go home now": Go is the root, home and now hang on Go. The old rule clamped i - 2 and i - 3 to the first
    # word, Go, and so credited -2 with home and -3 with home and now; Clark's rule predicts the root there.
    sentence = tree(["Go", "home", "now"], [0, 1, 1], ["root", "obj", "advmod"])
    counts = SyntaxCounts(layers=1, heads=1)
    gold = GoldBatch.of([sentence], counts.relation_ids)
    assert gold.baseline_predictions()[:, 0].tolist() == [[-1, -1, -1], [-1, -1, 0], [-1, 0, 1], [0, 1, 2],
                                                          [1, 2, 2], [2, 2, 2]]
    counts.add_gold(gold)
    frame = baselines_frame(counts)
    everything = frame[frame.relation == "all"].set_index("offset")
    # -1 predicts the root for Go, the root word: still not credited (no head can predict the root either)
    assert everything.correct.to_dict() == {-3: 0, -2: 1, -1: 1, 0: 0, 1: 0, 2: 0}
    assert frame[(frame.relation == "root")].correct.sum() == 0


def test_the_best_head_breaks_ties_by_layer_head_then_direction_and_skips_rare_root_and_punct():
    counts = SyntaxCounts(layers=2, heads=2)
    counts.relation_ids(["det", "punct", "root", "amod"])
    counts.totals[:] = [10, 10, 10, 3]
    counts.correct[1, 0, 1, 0] = 7  # det: head->dep of L1H2 ...
    counts.correct[0, 1, 0, 0] = 7  # ... ties with dep->head of L2H1: the lower (layer, head) wins
    counts.correct[:, 1, 1, 2] = 4  # root: both directions of L2H2; the root is never reported
    counts.correct[:, 1, 1, 3] = 2  # amod: tied directions: dep->head
    counts.baseline[[1, 4], 3] = 1  # amod: offsets -2 and +1 tie: the lowest
    best = best_frame(counts, min_count=3).set_index("relation")
    assert list(best.index) == ["all", "amod", "det"]
    assert tuple(best.loc["det", ["layer", "head", "direction"]]) == (1, 2, "head->dep")
    assert tuple(best.loc["amod", ["layer", "head", "direction", "baseline_offset"]]) == (2, 2, "dep->head", -2)
    assert list(best_frame(counts, min_count=4).relation) == ["all", "det"]


SNIPPET = """# sent_id = 1
# text = I don't see it.
1\tI\tI\tPRON\t_\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\t_\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\t_\t_\t4\tadvmod\t_\t_
4\tsee\tsee\tVERB\t_\t_\t0\troot\t_\t_
4.1\tsaw\tsee\tVERB\t_\t_\t_\t_\t4:conj\t_
5\tit\tit\tPRON\t_\t_\t4\tobj:x\t_\t_
6\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_

# text = Kim's dog slept yesterday
1\tKim\tKim\tPROPN\t_\t_\t3\tnmod:poss\t_\t_
2\t's\t's\tPART\t_\t_\t1\tcase\t_\t_
3\tdog\tdog\tNOUN\t_\t_\t4\tnsubj\t_\t_
4\tslept\tsleep\tVERB\t_\t_\t0\troot\t_\t_
5\tyesterday\tyesterday\tNOUN\t_\t_\t4\tobl:tmod\t_\t_
"""


def test_conllu_words_skip_multiword_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "snippet.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    first, second = read_treebank(path)
    assert first.words == ("I", "do", "n't", "see", "it", ".")
    assert first.heads.tolist() == [3, 3, 3, -1, 3, 3]
    assert first.relations == ("nsubj", "aux", "advmod", "root", "obj", "punct") and first.line == 1
    assert second.relations == ("poss", "case", "nsubj", "root", "obl") and second.line == 12
    assert [s.words for s in read_treebank(path, limit=1)] == [first.words]


BAD = {
    "not CoNLL-U": ("The bank is closed.\n", "line 1: not CoNLL-U: a word line has 10 tab-separated columns"),
    "HEAD outside": (SNIPPET.replace("5\tit\tit\tPRON\t_\t_\t4", "5\tit\tit\tPRON\t_\t_\t9"),
                     "line 9: HEAD 9 points outside the sentence (its words are 1 to 6, and 0 is the root)"),
    "cycle": (SNIPPET.replace("3\tdog\tdog\tNOUN\t_\t_\t4", "3\tdog\tdog\tNOUN\t_\t_\t1"),
              "line 13: the HEADs of words 1, 3 form a cycle; a dependency tree reaches the root (0) from every word"),
    "empty": ("", "line 1: no sentence: the file is empty"),
    "blank lines only": ("\n \n\t\n", "line 1: no sentence: the file holds only blank lines"),
    "two roots": (SNIPPET.replace("5\tyesterday\tyesterday\tNOUN\t_\t_\t4\tobl:tmod", "5\tyesterday\tyesterday\tNOUN\t_\t_\t0\troot"),
                  "line 17: the sentence that starts on line 12 has 2 roots (words 4, 5 have HEAD 0); a dependency "
                  "tree has exactly one"),
    "bad HEAD": (SNIPPET.replace("6\t.\t.\tPUNCT\t_\t_\t4", "6\t.\t.\tPUNCT\t_\t_\tx"),
                 "line 10: not CoNLL-U: Failed parsing field 'head'"),
    # the sentence went on after it: that line is named, not a HEAD of the cut sentence
    "spaces inside a sentence": (SNIPPET.replace("4\tsee\tsee", "   \n4\tsee\tsee", 1),
                                 "line 7: holds only spaces or tabs inside a sentence (line 8 goes on with word 4)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_every_bad_treebank_is_one_error_line_naming_file_and_line(case, tmp_path):
    text, expected = BAD[case]
    path = tmp_path / "bad.conllu"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", str(tmp_path / "no-model"),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {path}, {expected}"), line
    assert not (tmp_path / "out").exists()
    with pytest.raises(TreebankError):
        list(read_treebank(path))


def test_a_line_of_spaces_between_sentences_still_ends_one(tmp_path):
    path = tmp_path / "spaced.conllu"
    path.write_text(SNIPPET.replace("\n\n# text = Kim", "\n \t \n# text = Kim"), encoding="utf-8")
    assert [len(sentence.words) for sentence in read_treebank(path)] == [6, 5]


def test_a_default_name_that_cannot_be_a_folder_says_where_it_came_from(tmp_path):
    path = tmp_path / "ewt-norm.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", str(tmp_path / "no-model")])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: the name taken from 'ewt-norm.conllu' cannot be a folder name (") and \
        line.endswith("; pass --name NAME"), line


def test_a_word_with_no_weight_but_its_own_predicts_nothing():
    """A decoder's last word is attended by no later word: its column is all 0 off the diagonal, and the first
    word's tie gave every decoder head credit for each last word whose head is word 1."""
    causal = np.tril(np.full((4, 4), 0.25))  # row i: keys 0..i
    predictions = predict(maps_of([causal]), torch.tensor([4])).numpy()
    assert predictions[1, 0, 0].tolist() == [1, 2, 3, 4]  # head->dep: word 3's column is empty: 4, no word
    assert predictions[0, 0, 0].tolist()[1:] == [0, 0, 0]  # dep->head: rows still predict (ties: the first word)
    sentence = [tree(["Read", "the", "book", "."], [0, 3, 1, 1], ["root", "det", "obj", "punct"])]
    frame = heads_frame(counted(sentence, maps_of([causal])))
    assert accuracy(frame, "punct", "head->dep") == 0.0


def test_a_treebank_word_like_a_special_token_is_text(minilm):
    sep = minilm.tokenizer.sep_token_id
    encoded, _, _ = encode_words(minilm.tokenizer, [("From", "[SEP]", "AP")], minilm.max_tokens)
    assert encoded[0].ids.tolist().count(sep) == 1 and encoded[0].ids[-1] == sep
    assert encoded[0].words[1:4] == ("From", "[SEP]", "AP")


@pytest.mark.parametrize("options, expected", [
    (["--limit", "0"], "Error: Invalid value for '--limit': 0 is not in the range x>=1."),
    (["--name", "../up"], "Error: name (--name) '../up' cannot be a folder name"),
    (["--name", "ewt-norm"], "Error: name (--name) 'ewt-norm' ends in '-norm'"),
    ([], "Error: syntax needs a model: pass --model ID_OR_PATH"),
    (["--lang", "en"], "Error: syntax takes --model or --lang (the pinned model of a language), not both"),
    (["--name", "blocked"], "Error: {tmp}/out/results/syntax/blocked is a file, not a folder"),
])
def test_bad_options_are_one_error_line(options, expected, tmp_path):
    """Each before the model loads (the model folder does not even exist); a file where the results go is found
    before the scoring, not after it."""
    path = tmp_path / "ok.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    (tmp_path / "out" / "results" / "syntax").mkdir(parents=True)
    (tmp_path / "out" / "results" / "syntax" / "blocked").write_text("mine", encoding="utf-8")
    model = [] if not options else ["--model", str(tmp_path / "no-model")]
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), *model, *options, "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(expected.format(tmp=tmp_path)), line


def test_a_treebank_that_is_not_a_regular_file_says_so(tmp_path):
    result = CliRunner().invoke(cli, ["syntax", "--treebank", "/dev/zero", "--model", str(tmp_path / "no-model"),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == ("Error: /dev/zero is not a regular file (a device, a pipe or a socket); pass a "
                                     "CoNLL-U treebank file (.conllu), e.g. UD English-EWT's en_ewt-ud-dev.conllu")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, expected", [
    (lambda tmp: ".", "Error: . is a folder; pass a CoNLL-U treebank file (.conllu), e.g. UD English-EWT's "
                      "en_ewt-ud-dev.conllu"),  # was: "the name taken from '' cannot be a folder name"
    (lambda tmp: tmp / "ewt.conllu.gz", "Error: {path} is gzip-compressed; syntax reads plain CoNLL-U text: "
                                        "decompress it first (with gunzip)"),  # was: "not UTF-8 at byte 1"
])
def test_a_folder_or_a_compressed_treebank_is_named_as_such(tmp_path, monkeypatch, make, expected):
    import gzip

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ewt.conllu.gz").write_bytes(gzip.compress(SNIPPET.encode("utf-8")))
    path = make(tmp_path)
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", str(tmp_path / "no-model")])
    assert result.exit_code == 2 and result.output.strip() == expected.format(path=path), result.output


# --- the given-words rule on real tokenizers -----------------------------------------------------------------


def pieces_by_word(tokenizer, words) -> list[list[str]]:
    (encoded,), _, _ = encode_words(tokenizer, [tuple(words)], 512)
    tokens = tokenizer.convert_ids_to_tokens(encoded.ids.tolist())
    grouped: dict[int, list[str]] = {}
    for token, unit in zip(tokens, encoded.units.tolist()):
        grouped.setdefault(unit, []).append(token)
    assert encoded.words[1:-1] == tuple(words) or encoded.words == tuple(words)
    return list(grouped.values())


def test_given_words_with_wordpiece(minilm):
    tokenizer = minilm.tokenizer
    words = ["I", "do", "n't", "know", "Smith", "'s", "e-mail", "."]
    assert pieces_by_word(tokenizer, words) == [["[CLS]"], ["i"], ["do"], ["n", "'", "t"], ["know"], ["smith"],
                                                ["'", "s"], ["e", "-", "mail"], ["."], ["[SEP]"]]
    _, _, missing = encode_words(tokenizer, [("a", "\u200b", "b")], 512)  # BERT drops the zero-width space
    assert [(i, str(e)) for i, e in missing] == [(0, "word 2 ('\\u200b') gets no piece from the tokenizer")]
    with pytest.raises(ra.InputError, match=r"words= sentence 1, word 2 has no visible character"):
        ra.attend(minilm, words=[["a", "\u200b", "b"]])  # checked as a sentence's text is, before the tokenizer
    with pytest.raises(MissingWord, match=r"sentence 1: word 2"):
        ra.attend(minilm, words=[["a", "\ue000", "b"]])  # visible, but BERT gives it no piece


def test_given_words_with_byte_level_bpe_whose_offsets_hold_the_space(tiny_decoders, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_decoders("gpt2"))  # untrimmed: " bank" has the space
    words = ["the", "river", "flooded", "the", "bank", "."]
    groups = pieces_by_word(tokenizer, words)
    assert len(groups) == len(words)
    assert ["".join(g).replace("\u0120", "") for g in groups] == words


def test_attend_takes_texts_or_words_exactly_once(tiny_loaded):
    att = ra.attend(tiny_loaded, words=[["me", "senté", "en", "el", "banco", "."]])
    assert att[0].words == ("[CLS]", "me", "senté", "en", "el", "banco", ".", "[SEP]") and att.units == "words"
    assert att[0].weights.shape == (3, 4, 8, 8)
    for bad, message in [({}, "either texts or words="), ({"words": ["el banco"]}, "is a string"),
                         ({"words": [["el", " "]]}, "word 2 is empty"),
                         ({"words": [["el"]], "focus": "el"}, "takes no focus=")]:
        with pytest.raises(ra.InputError, match=message):
            ra.attend(tiny_loaded, **bad)
    with pytest.raises(ra.InputError, match="exactly one"):
        ra.attend(tiny_loaded, ["el banco"], words=[["el", "banco"]])


def test_a_decoders_dep_to_head_points_only_left(tiny_decoders, tmp_path):
    from test_decoders import load

    loaded = load(tiny_decoders("llama"))
    att = ra.attend(loaded, words=[["the", "river", "flooded", "the", "bank", "."]])
    keep = [i for i, w in enumerate(att[0].words) if w != "<s>"]
    maps = torch.from_numpy(att[0].weights[:, :, keep][:, :, :, keep])  # (L, H, W, W) as a batch of L
    predictions = predict(maps, torch.tensor([len(keep)] * maps.shape[0])).numpy()
    words = np.arange(len(keep))
    assert (predictions[0][:, :, 1:] < words[1:]).all()  # dep->head: an earlier word, always
    assert (predictions[1][:, :, :-1] > words[:-1]).all()  # head->dep: the word that attends most comes later


# --- end to end ---------------------------------------------------------------------------------------------


def test_the_api_equals_the_cli_and_reruns_are_byte_identical(tiny_model_dir, tiny_loaded, tmp_path):
    path = tmp_path / "snippet.conllu"
    long = "\n".join(f"{i}\tbanco\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                     for i in range(1, 31))
    path.write_text(SNIPPET + "\n" + long + "\n", encoding="utf-8")  # 30 words: over the tiny model's 24 tokens
    command = ["syntax", "--treebank", str(path), "--model", str(tiny_model_dir), "--min-count", "1", "--quiet",
               "--out", str(tmp_path / "cli")]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    import real_attention.syntax_probe.probe  # noqa: F401  (an imported stage folder must not shadow ra.syntax)

    assert callable(ra.syntax) and callable(ra.write_syntax)
    api = ra.syntax(tiny_loaded, path, min_count=1)
    assert api.summary["counts"] == {"sentences": 2, "words": 11, "skipped": 1, "no_piece": 0}
    assert api.summary["batch_size"] == 32 and api.summary["device"] == "cpu"  # the maps' bits depend on both
    folder = tmp_path / "cli" / "results" / "syntax" / "snippet"
    write_syntax(api, tmp_path / "api")
    for name in ("heads.csv", "best.csv", "baselines.csv", "summary.json"):
        assert (folder / name).read_bytes() == (tmp_path / "api/results/syntax/snippet" / name).read_bytes()
    figures = sorted(p.name for p in (tmp_path / "cli/figures/syntax/snippet").iterdir())
    assert figures == ["best.png", "examples_nsubj.png", "examples_obj.png", "relations.png"]  # no det
    from real_attention.syntax_probe.probe import describe

    said = describe(api).splitlines()
    assert [line for line in said if line.startswith("no examples_")] == [
        "no examples_det figure: no word of the sentences scored has it"]
    assert "no examples_nsubj figure: 2 word(s) have it, fewer than min_count (--min-count) 3" in describe(
        ra.syntax(tiny_loaded, path, min_count=3))
    before = {p.name: p.read_bytes() for p in [*folder.iterdir(), *(tmp_path / "cli/figures/syntax/snippet").iterdir()]}
    assert CliRunner().invoke(cli, command).exit_code == 0
    after = {p.name: p.read_bytes() for p in [*folder.iterdir(), *(tmp_path / "cli/figures/syntax/snippet").iterdir()]}
    assert before == after
    assert len(api.heads) == 2 * 3 * 4 * (1 + 9)  # directions x layers x heads x (all + 9 relations; not dep)


def test_a_relation_only_in_short_sentences_gets_no_example_and_says_why(tiny_loaded, tmp_path):
    from real_attention.syntax_probe.probe import describe

    path = tmp_path / "short.conllu"
    path.write_text("1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
                    "3\tslept\tsleep\tVERB\t_\t_\t0\troot\t_\t_\n", encoding="utf-8")
    result = ra.syntax(tiny_loaded, path, min_count=1)
    assert not result.examples
    assert "no examples_det figure: no sentence scored of 6 to 14 words has it" in describe(result).splitlines()


def test_the_norm_measure_writes_its_own_folder(tiny_model_dir, tmp_path):
    path = tmp_path / "ewt.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", str(tiny_model_dir), "--quiet",
                                      "--measure", "norm", "--name", "mine", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results/syntax/mine-norm/summary.json").is_file()


@pytest.mark.slow
def test_minilm_on_ewt_dev_finds_a_determiner_head_above_the_baseline(minilm, tmp_path):
    folder = ud_folder()
    if folder is None:
        pytest.skip("UD English-EWT dev not found: set REAL_ATTENTION_UD or put shared/data/ud beside the checkout")
    result = ra.syntax(minilm, folder / "en_ewt-ud-dev.conllu", limit=200)
    det = result.best.set_index("relation").loc["det"]
    assert result.summary["counts"]["sentences"] == 200 and det.total > 300
    assert det.accuracy > det.baseline_accuracy + 0.1, det


def test_a_big_treebank_is_streamed_again_with_the_same_counts(tiny_loaded, tmp_path, monkeypatch):
    """A treebank of at most KEEP_SENTENCES sentences is scored from the checked copy in memory; a bigger one is
    read again as a stream: both give the same tables."""
    from real_attention.syntax_probe import probe

    path = tmp_path / "snippet.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    kept = probe.scan_treebank(path)
    assert kept.kept is not None and len(kept.kept) == kept.sentences
    in_memory = ra.syntax(tiny_loaded, kept, min_count=1)
    monkeypatch.setattr(probe, "KEEP_SENTENCES", 0)
    streamed_bank = probe.scan_treebank(path)
    assert streamed_bank.kept is None
    streamed = ra.syntax(tiny_loaded, streamed_bank, min_count=1)
    assert in_memory.heads.equals(streamed.heads) and in_memory.best.equals(streamed.best)
    assert in_memory.summary == streamed.summary


def test_given_words_place_whitespace_pieces_and_name_a_word_without_one():
    """By hand: a piece of only whitespace (SentencePiece's lone "▁") takes the next piece's word, or the
    previous one's at the end; specials get -1; a word no piece starts in is named."""
    import numpy as np

    from real_attention.engine.units import MissingWord, given_assign

    text, spans = "The bank .", [(0, 3), (4, 8), (9, 10)]
    special = np.array([True, False, False, False, False, False, False])
    offsets = np.array([(0, 0), (0, 3), (3, 4), (4, 6), (6, 8), (8, 10), (10, 10)])  # [CLS] The ▁ ba nk ▁. ▁
    assert given_assign(text, spans, special, offsets).tolist() == [-1, 0, 1, 1, 1, 2, 2]
    with pytest.raises(MissingWord, match=r"word 2 \('bank'\)"):
        given_assign(text, spans, special[:3], offsets[:3])


PLAIN_AND_ODD_LINES = [
    "1\tThe\tthe\tDET\tDT\tDefinite=Def\t2\tdet\t2:det\t_", "1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_",
    "8.1\tx\t_\t_\t_\t_\t_\t_\t5:conj\t_", "0.1\tx\t_\t_\t_\t_\t_\t_\t_\t_", "1\tx\t_\t_\t_\t_\t-1\troot\t_\t_",
    "1\tx\t_\t_\t_\t_\t_\t_\t_\t_", "1\t_\t_\t_\t_\t_\t0\troot\t_\t_", "12\tbank's\t_\t_\t_\t_\t3\tnmod:poss\t_\t_",
    # not in the plain form (conllu reads them, or names what is wrong)
    "2-1\tx\t_\t_\t_\t_\t_\t_\t_\t_", "01\tx\t_\t_\t_\t_\t0\troot\t_\t_", "1\tx\t_\t_\t_\t_\t00\troot\t_\t_",
    "1\ta  b\t_\t_\t_\t_\t0\troot\t_\t_", "x\ty\t_\t_\t_\t_\t0\troot\t_\t_", "1\tx\t_\t_\t_\t_\t1.5\troot\t_\t_",
]


@pytest.mark.parametrize("line", PLAIN_AND_ODD_LINES)
def test_the_plain_reader_reads_what_conllu_reads_or_leaves_the_line_to_it(line, tmp_path):
    """The fast reader of plain word lines gives conllu's ID, FORM, HEAD and DEPREL, or None (then conllu reads the
    block and names what is wrong)."""
    from real_attention.syntax_probe.treebank import TreebankError, _parse, _plain_tokens

    plain = _plain_tokens([(1, line)])
    try:
        (token,) = _parse(tmp_path / "t.conllu", [(1, line)])
    except TreebankError:
        assert plain is None
        return
    if plain is not None:
        assert plain == [{key: token[key] for key in ("id", "form", "head", "deprel")}]
    assert (plain is None) == (line in PLAIN_AND_ODD_LINES[-6:])


def test_the_plain_reader_agrees_with_conllu_on_every_ewt_dev_line():
    from real_attention.syntax_probe.treebank import _blocks, _parse, _plain_tokens

    folder = ud_folder()
    if folder is None:
        pytest.skip("UD English-EWT dev not found (set REAL_ATTENTION_UD)")
    path = folder / "en_ewt-ud-dev.conllu"
    for block in _blocks(path):
        lines = [(number, line) for number, line in block if not line.startswith("#")]
        plain = _plain_tokens(lines)
        assert plain is not None, lines[0]
        expected = [{key: token[key] for key in ("id", "form", "head", "deprel")} for token in _parse(path, lines)]
        assert plain == expected, lines[0]
        assert [type(t["id"]) for t in plain] == [type(t["id"]) for t in expected]


def test_every_layer_at_once_as_on_a_gpu_gives_the_layer_by_layer_counts(tiny_loaded, tmp_path, monkeypatch):
    """On a GPU the probe merges, predicts and counts a batch's layers together after the forward pass
    (statistics.streaming.layers_at_once); forced on the CPU it gives the layer-by-layer tables."""
    from real_attention.statistics import streaming

    path = tmp_path / "snippet.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    by_layer = ra.syntax(tiny_loaded, path, min_count=1)
    monkeypatch.setattr(streaming, "layers_at_once", lambda device: True)
    together = ra.syntax(tiny_loaded, path, min_count=1)
    assert by_layer.heads.equals(together.heads) and by_layer.best.equals(together.best)
    assert by_layer.heads["correct"].sum() > 0 and set(by_layer.heads["layer"]) == set(range(1, tiny_loaded.layers + 1))


def test_a_sentence_with_a_word_of_no_piece_is_skipped_with_a_warning_even_quiet(needs_minilm, tmp_path):
    """A lone combining accent gets no piece (MiniLM's tokenizer strips accents): the sentence was dropped
    silently."""
    path = tmp_path / "accent.conllu"
    path.write_text(SNIPPET.rstrip("\n") + "\n\n# text = see \u0301\n1\tsee\tsee\tVERB\t_\t_\t0\troot\t_\t_\n"
                    "2\t\u0301\t_\tX\t_\t_\t1\tdep\t_\t_\n\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", "minilm", "--offline",
                                      "--min-count", "1", "--quiet", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "Warning: 1 sentence(s) skipped: a word the tokenizer gives no piece" in result.output


def test_a_treebank_whose_lines_end_in_cr_alone_says_so(tmp_path):
    """It said 'no sentence: it has comments but no word line' (the whole file was one line)."""
    path = tmp_path / "mac.conllu"
    path.write_bytes(SNIPPET.replace("\n", "\r").encode("utf-8"))
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", str(tmp_path / "no-model")])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {path}, line 1: holds a carriage return (CR) inside the line"), line


def test_the_relations_figure_says_when_no_relation_but_root_and_punct_is_there():
    import pandas as pd
    from real_attention.syntax_probe.figures import relations_figure
    from real_attention.syntax_probe.scoring import ALL, DIRECTIONS

    rows = [{"relation": relation, "direction": direction, "layer": 1, "head": head, "accuracy": 0.5, "total": 3}
            for relation in (ALL, "root", "punct") for direction in DIRECTIONS for head in (1, 2)]
    figure = relations_figure(pd.DataFrame(rows), pd.DataFrame(), "tiny")
    texts = [text.get_text() for ax in figure.axes for text in ax.texts]
    assert texts == ["no relation but root and punct in these sentences"]
    assert figure.get_suptitle() == "tiny: no relation to draw"


def test_best_says_its_ties_and_the_intervals_of_both_accuracies():
    """best.csv's first maximum hid a tie (discourse: L3H2 and L3H9 at 50/128), and gave no interval: a margin of one
    point on 972 words read as a finding."""
    from real_attention.syntax_probe.scoring import wilson

    assert wilson(50, 128) == pytest.approx((0.310470, 0.477154), abs=1e-6)  # by hand: centre 0.3938, half 0.0833
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0 and wilson(5, 10)[0] > 0.2
    counts = counted(SENTENCES, maps_of([np.eye(4), np.eye(2)]))
    best = best_frame(counts, min_count=1).set_index("relation")
    row = best.loc["all"]
    assert (row.accuracy_low, row.accuracy_high) == wilson(round(row.accuracy * row.total), row.total)
    assert (row.baseline_low, row.baseline_high) == wilson(3, 6)
    # one layer, one head: its two directions are the only candidates; made equal, they tie, and dep->head is shown
    import copy

    both = copy.deepcopy(counts)
    r = both.relations.index("obj")
    both.correct[1, ..., r] = both.correct[0, ..., r]  # (directions, layers, heads, relations)
    tied = best_frame(both, min_count=1).set_index("relation")
    assert tied.loc["obj", "ties"] == 1 and tied.loc["obj", "direction"] == "dep->head"
    assert best_frame(counts, min_count=1).set_index("relation").loc["obj", "ties"] in (0, 1)


def test_subtypes_are_scored_apart_when_asked(tiny, tmp_path):
    """The relation before ':' merged subtypes whose heads differ (on EWT dev, acl:relcl has a head that beats its
    baseline, plain acl none; compound:prt attaches left, compound right); --subtypes keeps them apart."""
    from real_attention.syntax_probe.treebank import read_treebank

    path = tmp_path / "snippet.conllu"
    path.write_text(SNIPPET, encoding="utf-8")
    plain, split = (sorted({r for s in read_treebank(path) for r in (s.with_subtypes() if keep else s).relations})
                    for keep in (False, True))
    assert "obl" in plain and "obl:tmod" not in plain and "obj" in plain
    assert "obl:tmod" in split and "obj:x" in split and "poss" in split and "nmod:poss" not in split
    basic = ra.syntax(tiny, path, min_count=1)
    apart = ra.syntax(tiny, path, min_count=1, subtypes=True)
    assert "obl:tmod" in set(apart.heads["relation"]) and "obl:tmod" not in set(basic.heads["relation"])
    assert apart.summary["relations"].startswith("the whole DEPREL") and basic.summary["relations"].startswith(
        "the DEPREL before ':'")
    everything = lambda result: result.heads[result.heads.relation == "all"].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(everything(basic), everything(apart))  # the same words, the same predictions
    result = CliRunner().invoke(cli, ["syntax", "--treebank", str(path), "--model", "x", "--subtypes", "--limit", "0"])
    assert result.exit_code == 2 and "--subtypes" not in result.output  # the flag is known; --limit 0 is the error
    with pytest.raises(ra.InputError, match="subtypes must be True or False"):
        ra.syntax(tiny, path, subtypes="yes")
    # its own default folder: a --subtypes run never replaces the basic one
    from real_attention.syntax_probe.probe import output_name

    assert output_name(None, path, "weights", True) == "snippet-subtypes" and output_name(None, path, "weights") == \
        "snippet"
    written, _ = ra.write_syntax(apart, tmp_path / "out", formats=())
    assert written.name == "snippet-subtypes"
