"""Context mixing (real_attention.engine.mixing): ALTI's decomposition against the models' own block outputs, value
zeroing batched against one by one and against an independent float64 re-run, the maps' rows, causal maps, the
files of run --mixing, --measure value-zeroing, the API, and the errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import SPANISH
from real_attention.engine import mixing as mx
from real_attention.engine.errors import InputError
from conftest import CAUSAL, second_device

from real_attention import cli

SENTENCE = "Me senté en el banco de mi jardín."


def load(folder: Path):
    from real_attention.engine.models import choose_model, load_model

    return load_model(choose_model(None, str(folder), None))


def randomise(loaded, seed: int = 3):
    """Every bias and norm weight random (they start at 0 and 1), so each bias term of the decomposition counts."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if name.endswith("bias") or "norm" in name.lower() or "ln_" in name:
                parameter.copy_(parameter + 0.3 * torch.randn(parameter.shape, generator=generator).to(parameter.device))
    return loaded


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return randomise(load(tiny_model_dir))


@pytest.fixture(scope="module", params=["llama", "gpt2", "gemma2"])
def decoder(tiny_decoders, request, tmp_path_factory):
    return randomise(load(tiny_decoders(request.param)))


def ids(loaded, text: str = SENTENCE) -> np.ndarray:
    return np.array(loaded.tokenizer(text)["input_ids"])


# ------------------------------------------------------------------------------------------- ALTI


def real_block_outputs(loaded, text: str) -> list[torch.Tensor]:
    """Each layer's attention-block output as the model itself computes it, in its own float32: after the
    attention LayerNorm (post-LN), else the residual stream before the MLP (the input of the norm before it)."""
    found = mx.blocks(loaded)
    seen: list[torch.Tensor] = []
    handles = []
    for block in found:
        if block.kind == "post":
            module = block.layer.get_submodule(block.after)
            handles.append(module.register_forward_hook(lambda m, args, out: seen.append(out[0].double())))
        else:
            name = next(n for n in ("pre_feedforward_layernorm", "post_attention_layernorm", "ln_2")
                        if hasattr(block.layer, n))
            module = block.layer.get_submodule(name)
            handles.append(module.register_forward_pre_hook(lambda m, args: seen.append(args[0][0].double())))
    with torch.no_grad():
        loaded.model(input_ids=torch.from_numpy(ids(loaded, text))[None])
    for handle in handles:
        handle.remove()
    return seen


def decompositions(loaded, piece_ids: np.ndarray) -> list:
    """ALTI's decomposition of every layer's attention block for one sentence's (t,) piece ids."""
    found = mx.blocks(loaded)
    out = []
    for block, given in zip(found, mx.layer_inputs(loaded, found, piece_ids)):
        layer = mx.Layer64(block)
        _, recorded = layer.run(given, given.hidden, record=True)
        out.append(mx.decompose(layer, given, loaded.heads, recorded))
    return out


def check_reconstruction(loaded, text: str = SENTENCE) -> None:
    real = real_block_outputs(loaded, text)
    decomposed = decompositions(loaded, ids(loaded, text))
    assert len(real) == len(decomposed) == loaded.layers
    for layer, (block, part) in enumerate(zip(real, decomposed)):
        np.testing.assert_allclose(part.output.numpy(), block.numpy(), atol=1e-5, rtol=1e-5,
                                   err_msg=f"layer {layer + 1}")
        assert part.parts.dtype == torch.float64


def test_alti_reconstructs_the_post_ln_block_of_bert(bert):
    assert {b.kind for b in mx.blocks(bert)} == {"post"}
    check_reconstruction(bert)


def test_alti_reconstructs_the_pre_ln_blocks_of_decoders(decoder):
    kinds = {b.kind for b in mx.blocks(decoder)}
    assert kinds == ({"sandwich"} if decoder.model.config.model_type == "gemma2" else {"pre"})
    check_reconstruction(decoder, CAUSAL.sentences[1].text)


@pytest.mark.slow
def test_alti_reconstructs_minilm(minilm):
    assert {b.kind for b in mx.blocks(minilm)} == {"post"}  # MiniLM is a post-LN BERT
    check_reconstruction(minilm)


def test_alti_contribution_is_the_l1_rule_by_hand():
    parts = torch.tensor([[[1.0, 0.0], [2.0, -1.0]], [[0.0, 0.0], [3.0, 3.0]]], dtype=torch.float64)  # (2, 2, 2)
    bias = torch.tensor([[0.5, 0.5], [0.0, 0.0]], dtype=torch.float64)
    decomposition = mx.Decomposition(parts, bias, None)
    # y_0 = (3.5, -0.5): ||y|| = 4; ||y - T_00|| = ||(2.5, -0.5)|| = 3 -> 1; ||y - T_01|| = ||(1.5, 0.5)|| = 2 -> 2
    # y_1 = (3, 3): ||y|| = 6; T_10 = 0 -> 0; T_11 = y -> 6
    np.testing.assert_allclose(mx.alti_contributions(decomposition).numpy(), [[1.0, 2.0], [0.0, 6.0]])


# ------------------------------------------------------------------------------------------- value zeroing


def test_batched_value_zeroing_equals_one_zeroing_at_a_time(bert):
    batched = mx.piece_mixing(bert, [ids(bert)], alti=False, heads=True)[0]
    one_by_one = mx.piece_mixing(bert, [ids(bert)], alti=False, heads=True, chunk=1)[0]
    np.testing.assert_allclose(batched.value_zeroing, one_by_one.value_zeroing, atol=1e-6, rtol=0)
    np.testing.assert_allclose(batched.heads, one_by_one.heads, atol=1e-6, rtol=0)
    assert not np.allclose(batched.heads[:, 0], batched.heads[:, 1])  # the heads differ: it is no copy


def reference_value_zeroing(loaded, piece_ids: np.ndarray) -> np.ndarray:
    """Mohebbi et al.'s procedure, written independently: a float64 copy of the whole model in eager attention,
    token j's value rows zeroed by a hook on the value projection, one re-run of layer l per token j."""
    import copy

    model = copy.deepcopy(loaded.model).double()
    x = torch.from_numpy(piece_ids)[None]
    with torch.no_grad():
        hidden = model(input_ids=x, output_hidden_states=True).hidden_states  # (L + 1) x (1, t, hidden)
    t = len(piece_ids)
    out = []
    for layer, module in enumerate(model.encoder.layer):
        raw = np.zeros((t, t))
        for j in range(t):
            def zero(m, args, output, j=j):
                output = output.clone()
                output[:, j] = 0
                return output
            handle = module.attention.self.value.register_forward_hook(zero)
            with torch.no_grad():
                changed = module(hidden[layer])[0]
            handle.remove()
            raw[:, j] = 1 - torch.nn.functional.cosine_similarity(changed, hidden[layer + 1][0], dim=-1).numpy()
        out.append(raw / raw.sum(axis=-1, keepdims=True))
    return np.stack(out)


def test_value_zeroing_matches_an_independent_float64_rerun(bert):
    ours = mx.piece_mixing(bert, [ids(bert)], alti=False)[0].value_zeroing
    np.testing.assert_allclose(ours, reference_value_zeroing(bert, ids(bert)), atol=1e-9)


def zeroings_in_full(loaded, text: str, monkeypatch):
    """Value zeroing's maps (layers, heads) as computed, and with every zeroing run as a full product W (V * keep)."""
    from real_attention.engine.mixing import layers

    fast = mx.piece_mixing(loaded, [ids(loaded, text)], alti=False, heads=True, chunk=3)[0]
    monkeypatch.setattr(layers, "_one_token_zeroings", lambda weights, value, output, keep: None)
    full = mx.piece_mixing(loaded, [ids(loaded, text)], alti=False, heads=True)[0]
    return fast, full


def test_zeroings_of_one_input_as_rank_one_changes_equal_every_zeroing_run_in_full(bert, monkeypatch):
    """Value zeroing computes the one input's attention once per layer (kept across chunks) and each zeroing of
    token j as W V less W[:, j] V[j] (t^2 d for the t zeroings, not t^3 d): the same maps as t full products
    W (V * keep), the layer's to the 1e-9 of the independent rerun above (about 3e-11 here), the per-head maps to
    1e-8 (one head's view of one token changes the output so little that 1 - cos cancels to a few digits: about
    1e-9 here; --measure value-zeroing writes them as float32)."""
    fast, full = zeroings_in_full(bert, SENTENCE, monkeypatch)
    np.testing.assert_allclose(fast.value_zeroing, full.value_zeroing, atol=1e-9, rtol=0)
    np.testing.assert_allclose(fast.heads, full.heads, atol=1e-8, rtol=0)


def test_rank_one_zeroings_on_decoders(decoder, monkeypatch):
    """The same on decoders: grouped key/value heads, soft-capped scores, causal masks."""
    fast, full = zeroings_in_full(decoder, CAUSAL.sentences[1].text, monkeypatch)
    np.testing.assert_allclose(fast.value_zeroing, full.value_zeroing, atol=1e-9, rtol=0)
    np.testing.assert_allclose(fast.heads, full.heads, atol=1e-8, rtol=0)


def test_per_head_value_zeroing_of_a_single_head_model_is_the_layers(tmp_path):
    from conftest import TINY_WORDS
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    BertTokenizerFast(vocab={p: i for i, p in enumerate(vocab)}, do_lower_case=True).save_pretrained(tmp_path)
    torch.manual_seed(4)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=2, num_attention_heads=1,
                         intermediate_size=16, max_position_embeddings=24)).save_pretrained(tmp_path)
    loaded = load(tmp_path)
    maps = mx.piece_mixing(loaded, [ids(loaded)], alti=False, heads=True)[0]
    assert maps.heads.shape[1] == 1
    np.testing.assert_allclose(maps.heads[:, 0], maps.value_zeroing, atol=1e-12)


def test_grouped_query_heads_are_zeroed_one_query_head_at_a_time(tiny_decoders, tmp_path):
    """In the tiny Llama two query heads share each key/value head; zeroing one query head's view leaves its
    partner's untouched, so the two heads' maps differ."""
    loaded = load(tiny_decoders("llama"))
    assert loaded.model.config.num_key_value_heads == 2 and loaded.heads == 4
    heads = mx.piece_mixing(loaded, [ids(loaded, CAUSAL.sentences[1].text)], alti=False, zeroing=False,
                            heads=True)[0].heads  # (L, 4, t, t)
    assert not np.allclose(heads[:, 0], heads[:, 1], atol=1e-6)  # heads 1 and 2 share a key/value head


def test_scale_rows_divides_by_the_plain_sum_and_keeps_empty_rows_on_the_token():
    raw = torch.tensor([[0.0, 0.0, 0.0], [1.0, 3.0, 5.0], [2.0, 0.0, 2.0]], dtype=torch.float64)
    scaled, sums = mx.scale_rows(raw, causal=False)
    np.testing.assert_allclose(scaled.numpy(), [[1, 0, 0], [1 / 9, 3 / 9, 5 / 9], [0.5, 0, 0.5]])
    np.testing.assert_allclose(sums.numpy(), [0, 9, 4])
    scaled, _ = mx.scale_rows(raw, causal=True)
    np.testing.assert_allclose(scaled.numpy(), [[1, 0, 0], [0.25, 0.75, 0], [0.5, 0, 0.5]])


def test_rolled_is_the_product_of_the_layers():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    b = np.array([[0.2, 0.8], [0.0, 1.0]])
    out = mx.rolled(np.stack([a, b]))
    np.testing.assert_allclose(out[0], a)
    np.testing.assert_allclose(out[1], b @ a)


# ------------------------------------------------------------------------------------------- word-level maps


TOLERANCE = {"attention": 1e-6, "norm": 1e-6, "alti": 1e-9, "value_zeroing": 1e-9}


def check_rows(mixing: mx.Mixing) -> None:
    for sentence in mixing.sentences:
        for kind in (sentence.maps, sentence.rolled):
            assert set(kind) == set(mx.MIXING_MEASURES)
            for measure, maps in kind.items():
                assert (maps >= 0).all(), measure
                # attention and norm come as the run has them, in float32; ALTI and value zeroing in float64
                np.testing.assert_allclose(maps.sum(axis=-1), 1.0, atol=TOLERANCE[measure], err_msg=measure)


def test_encoder_maps_are_rows_of_shares(bert):
    mixing = mx.compute_mixing(bert, [SENTENCE, "Fui al banco a sacar dinero."])
    check_rows(mixing)
    assert mixing.sentences[0].maps["alti"].shape == (3, len(mixing.sentences[0].words), len(mixing.sentences[0].words))
    assert np.triu(mixing.sentences[0].maps["value_zeroing"], k=1).sum() > 0  # an encoder looks both ways


def test_causal_maps_are_lower_triangular_and_the_first_row_is_on_itself(decoder):
    mixing = mx.compute_mixing(decoder, [s.text for s in CAUSAL.sentences])
    check_rows(mixing)
    for sentence in mixing.sentences:
        for kind in (sentence.maps, sentence.rolled):
            for measure, maps in kind.items():
                n = maps.shape[-1]
                assert np.all(maps[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0.0), measure
                np.testing.assert_allclose(maps[:, 0, 0], 1.0, atol=TOLERANCE[measure], err_msg=measure)


def test_agreement_has_every_layer_and_pair(bert):
    mixing = mx.compute_mixing(bert, [SENTENCE])
    frame = mixing.agreement()
    assert len(frame) == 3 * 6 and set(frame.layer) == {1, 2, 3}
    assert frame[["layer_spearman", "rolled_spearman"]].abs().max().max() <= 1.0
    from real_attention.outputs.mixing import spearman

    assert spearman(np.array([1.0, 2, 3]), np.array([10.0, 30, 20])) == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------- CLI and API


def config(tmp_path: Path) -> Path:
    path = tmp_path / "sentences.toml"
    path.write_text(SPANISH, encoding="utf-8")
    return path


def test_run_mixing_writes_its_files_and_the_api_gives_the_same_table(tiny_model_dir, tiny_loaded, tmp_path):
    import pandas as pd

    import real_attention as ra

    out = tmp_path / "out"
    args = ["run", "--model", str(tiny_model_dir), "--config", str(config(tmp_path)), "--out", str(out), "--quiet",
            "--mixing"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    results, figures = out / "results" / "es", out / "figures" / "es"
    table = pd.read_csv(results / "mixing.csv")
    assert list(table.columns) == ["sentence", "measure", "layer", "query_index", "query", "key_index", "key",
                                   "value", "rolled"]
    assert set(table.measure) == set(mx.MIXING_MEASURES)
    assert (results / "mixing_agreement.csv").is_file()
    assert sorted(p.name for p in figures.glob("mixing_s*")) == ["mixing_s1.png", "mixing_s2.png"]
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary["mixing"]["measures"]) == set(mx.MIXING_MEASURES)
    assert summary["mixing"]["value_zeroing_smallest_raw_row_sum"]["value"] > 0
    import hashlib

    for name, frame in (("mixing.csv", table), ("mixing_agreement.csv", pd.read_csv(results / "mixing_agreement.csv"))):
        assert summary["tables"][name] == {"rows": len(frame),
                                           "sha256": hashlib.sha256((results / name).read_bytes()).hexdigest()}
    assert "attention.csv" in summary["tables"] and "rollout.csv" in summary["tables"]
    assert '"mixing_labels":[["attention"' in (figures / "report.html").read_text()
    # the attention measure's rolled map is the rollout of rollout.csv
    rollout = pd.read_csv(results / "rollout.csv")
    attention = table[table.measure == "attention"].reset_index(drop=True)
    np.testing.assert_array_equal(attention.rolled.to_numpy(), rollout.weight.to_numpy())
    # the API's table is the CLI's file, byte for byte
    mixing = ra.mixing(tiny_loaded, ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."],
                       focus="banco", sense=["jardín", "dinero"])
    written = tmp_path / "api.csv"
    from real_attention.outputs.tables import write_csv

    write_csv(mixing.frame(), written)
    assert written.read_bytes() == (results / "mixing.csv").read_bytes()
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before  # byte-identical when repeated
    # ra.run(..., mixing=True) writes the same files and hands the maps back
    output = ra.run(config=config(tmp_path), model=str(tiny_model_dir), out=tmp_path / "api", mixing=True)
    assert isinstance(output.mixing, mx.Mixing) and len(output.mixing) == 2
    for name in ("mixing.csv", "mixing_agreement.csv", "summary.json"):
        assert (tmp_path / "api" / "results" / "es" / name).read_bytes() == before[name], name
    assert sorted(p.name for p in output.runs[0].figures if p.name.startswith("mixing_")) == [
        "mixing_s1.png", "mixing_s2.png"]


def test_measure_value_zeroing_flows_through_run_and_show(tiny_model_dir, tmp_path):
    import pandas as pd

    out = tmp_path / "out"
    base = ["--model", str(tiny_model_dir), "--config", str(config(tmp_path)), "--out", str(out), "--quiet"]
    result = CliRunner().invoke(cli, ["run", *base[:-1], "--measure", "value-zeroing", "--no-figures", "--quiet"])
    assert result.exit_code == 0, result.output
    folder = out / "results" / "es-value-zeroing"
    attention = pd.read_csv(folder / "attention.csv")
    sums = attention.groupby(["sentence", "layer", "head", "query_index"]).weight.sum()
    np.testing.assert_allclose(sums, 1.0, atol=2e-5)
    assert json.loads((folder / "summary.json").read_text())["measure"] == "value-zeroing"
    assert (folder / "heads.csv").is_file() and (folder / "focus.csv").is_file()
    assert (out / "figures" / "es-value-zeroing" / "report.html").is_file()
    shown = CliRunner().invoke(cli, ["show", "--layer", "1", "--head", "2", "--sentence", "1", "--out", str(out),
                                     "--measure", "value-zeroing"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.strip().endswith("es-value-zeroing/head_L1H2_s1.png")


def test_attend_takes_value_zeroing_and_its_maps_are_the_merged_per_head_maps(tiny_loaded):
    from real_attention.engine.extract import encode
    from real_attention.engine.words import merge_maps

    import real_attention as ra

    att = ra.attend(tiny_loaded, [SENTENCE], measure="value-zeroing")
    assert att.measure == "value-zeroing"
    (encoded,), _ = encode(tiny_loaded.tokenizer, [SENTENCE], tiny_loaded.max_tokens)
    pieces = mx.piece_mixing(tiny_loaded, [encoded.ids], alti=False, zeroing=False, heads=True)[0].heads  # (L, H, t, t)
    assert len(encoded.words) < pieces.shape[-1]  # jard ##ín: the merge has work to do
    units = torch.from_numpy(encoded.units)[None].expand(pieces.shape[0], -1)
    merged = merge_maps(torch.from_numpy(pieces).float(), units, len(encoded.words)).numpy()
    np.testing.assert_allclose(att[0].weights, merged, atol=1e-6)


def test_unknown_measure_is_refused(tiny_model_dir, tmp_path, tiny_loaded):
    import real_attention as ra

    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--measure", "alti", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 2 and "'alti' is not one of" in result.output
    with pytest.raises(InputError, match="unknown measure 'alti'"):
        ra.attend(tiny_loaded, [SENTENCE], measure="alti")


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory):
    from conftest import TINY_WORDS
    from transformers import BertTokenizerFast, MPNetConfig, MPNetModel

    folder = tmp_path_factory.mktemp("tiny-mpnet")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    BertTokenizerFast(vocab={p: i for i, p in enumerate(vocab)}, do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(5)
    MPNetModel(MPNetConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=32, max_position_embeddings=40)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("option", [["--mixing"], ["--measure", "value-zeroing"]])
def test_an_unsupported_model_is_one_error_before_any_work(mpnet_dir, tmp_path, option):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", str(mpnet_dir), "--config", str(config(tmp_path)),
                                      "--out", str(out), "--quiet", *option])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: context mixing and the value-zeroing measure re-run each layer")
    assert "MPNetModel gives its maps only through output_attentions" in lines[0]
    assert lines[0].endswith("Only the weights measure works with it, without context mixing")  # norm fails on MPNet too
    assert not out.exists() or not any(out.rglob("*.csv"))


def test_the_unsupported_model_error_suggests_norm_only_where_norm_works(mpnet_dir, tiny_loaded):
    """ALBERT shares one attention module across its layers: neither --mixing nor --measure norm takes it, and
    both say so; the suggestion to use norm comes only for a model norm can take apart."""
    from dataclasses import replace

    from transformers import AlbertConfig, AlbertModel

    from real_attention.engine.errors import ModelUnavailable
    from real_attention.engine.mixing.layers import _unsupported
    from real_attention.engine.norm import projections

    albert = AlbertModel(AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=32))
    with pytest.raises(ModelUnavailable, match="AlbertModel shares one attention module across its layers"):
        projections(albert, 4)
    assert str(_unsupported(replace(tiny_loaded, model=albert), "why")).endswith(
        "Only the weights measure works with it, without context mixing")
    assert str(_unsupported(tiny_loaded, "why")).endswith("Only the weights and norm measures work with it, without "
                                                          "context mixing")


def test_a_sentence_too_long_is_one_error(tiny_model_dir, tiny_loaded, tmp_path):
    import real_attention as ra

    long = " ".join(["banco"] * 40)
    with pytest.raises(InputError, match="sentence 2 has 42 tokens"):
        ra.mixing(tiny_loaded, [SENTENCE, long])
    path = tmp_path / "long.toml"
    path.write_text(f'[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "{long} jardín"\nsense = "jardín"\n'
                    'focus_occurrence = 1\n')
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(path), "--out",
                                      str(tmp_path / "out"), "--mixing"])
    assert result.exit_code == 2 and result.stderr.startswith("Loading "), result.output  # then the error:
    assert result.output.splitlines()[1].startswith("Error: sentence 1 has"), result.output


def test_api_checks_its_inputs(tiny_loaded):
    import real_attention as ra

    with pytest.raises(InputError, match="at least one sentence"):
        ra.mixing(tiny_loaded, [])
    with pytest.raises(InputError):
        ra.mixing(tiny_loaded, [SENTENCE], units="pieces")


@pytest.mark.browser
def test_the_report_draws_the_mixing_view(tiny_model_dir, tmp_path, browser):
    from test_report import open_report

    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config(tmp_path)),
                                      "--out", str(out), "--quiet", "--mixing", "--no-figures"])
    assert result.exit_code == 0, result.output
    plain = tmp_path / "plain"
    assert CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config(tmp_path)),
                                    "--out", str(plain), "--quiet", "--no-figures"]).exit_code == 0
    import pandas as pd

    table = pd.read_csv(out / "results" / "es" / "mixing.csv")
    focus = json.loads((out / "results" / "es" / "summary.json").read_text())["word_positions"][0]["focus_index"]
    driver = browser
    open_report(driver, out / "figures" / "es" / "report.html")
    cells = driver.execute_script("return [...document.querySelectorAll('#mixing-svg rect[data-measure]')]"
                                  ".map(r => [r.dataset.measure, +r.dataset.layer, +r.dataset.k, +r.dataset.w])")
    rows = table[(table.sentence == 1) & (table.query_index == focus)]
    assert len(cells) == len(rows) == 4 * 3 * 11
    expected = {(m, layer, k): w for m, layer, k, w in rows[["measure", "layer", "key_index", "rolled"]].itertuples(
        index=False)}
    for measure, layer, k, w in cells:
        assert abs(w - expected[(measure, layer, k)]) <= 1e-4  # ten-thousandths in the page
    assert not driver.execute_script("return document.getElementById('mixing-view').hidden")
    open_report(driver, plain / "figures" / "es" / "report.html")
    assert driver.execute_script("return document.getElementById('mixing-view').hidden")
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_decoder_agreement_leaves_out_the_upper_triangle_and_the_first_row(tiny_decoders, tmp_path):
    loaded = load(tiny_decoders("gpt2"))
    mixing = mx.compute_mixing(loaded, [CAUSAL.sentences[0].text])
    n = len(mixing[0].words)
    assert set(mixing.agreement().cells) == {n * (n + 1) // 2 - 1}


def test_corpus_statistics_take_value_zeroing(tiny_loaded):
    import real_attention as ra

    lines = [SENTENCE, "Fui al banco a sacar dinero."]
    by_zeroing = ra.corpus_stats(tiny_loaded, lines, measure="value-zeroing")
    by_weight = ra.corpus_stats(tiny_loaded, lines)
    assert len(by_zeroing) == len(by_weight) == 12
    assert not np.allclose(by_zeroing["prev"], by_weight["prev"])


def test_alti_refuses_a_block_that_is_not_x_plus_attention(tiny_decoders, tmp_path):
    """OLMo 2 normalises the attention output before adding it, with no norm in front of the feed-forward block:
    no part of its layer receives x + attention(x), so ALTI says so instead of decomposing the wrong sum. Value
    zeroing, which only re-runs the layer, still works."""
    from real_attention.engine.models import LoadedModel, ModelChoice
    from transformers import AutoTokenizer, Olmo2Config, Olmo2Model

    folder = tiny_decoders("llama")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(6)
    model = Olmo2Model(Olmo2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=32, attn_implementation="eager")).eval()
    loaded = LoadedModel(choice=ModelChoice(name="tiny-olmo2", revision=None, path=None), revision="none",
                         tokenizer=tokenizer, model=model, device="cpu", layers=2, heads=4, max_tokens=32, causal=True)
    piece_ids = ids(loaded, CAUSAL.sentences[0].text)
    with pytest.raises(InputError, match="ALTI needs the residual stream x \\+ attention"):
        decompositions(loaded, piece_ids)
    zeroed = mx.piece_mixing(loaded, [piece_ids], alti=False)[0].value_zeroing
    np.testing.assert_allclose(zeroed.sum(axis=-1), 1.0, atol=1e-12)


# ------------------------------------------------------------------------------------------- long sentences


def alti_both_ways(loaded, text: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's raw ALTI as one array (today's rule: alti_contributions(decompose(...))) and in chunks of
    one query (the smallest budget)."""
    found = mx.blocks(loaded)
    out = []
    for block, given in zip(found, mx.layer_inputs(loaded, found, ids(loaded, text))):
        layer = mx.Layer64(block)
        _, recorded = layer.run(given, given.hidden, record=True)
        whole = mx.alti_contributions(mx.decompose(layer, given, loaded.heads, recorded))
        out.append((whole, mx.alti_raw(layer, given, loaded.heads, recorded, budget=1)))
        assert torch.equal(whole, mx.alti_raw(layer, given, loaded.heads, recorded))  # one chunk: to the bit
    return out


def test_alti_in_chunks_of_queries_is_alti_in_one_array(bert):
    for whole, chunked in alti_both_ways(bert, SENTENCE):
        assert chunked.shape == whole.shape and chunked.dtype == torch.float64
        np.testing.assert_allclose(chunked.numpy(), whole.numpy(), atol=1e-12, rtol=0)


def test_alti_in_chunks_on_decoders(decoder):
    for whole, chunked in alti_both_ways(decoder, CAUSAL.sentences[1].text):
        np.testing.assert_allclose(chunked.numpy(), whole.numpy(), atol=1e-12, rtol=0)


@pytest.mark.parametrize("t, hidden", [(512, 384), (512, 576), (2048, 768), (8192, 4096), (15, 16)])
def test_a_chunk_of_alti_queries_fits_the_budget_whatever_the_length(t, hidden):
    from real_attention.engine.mixing.alti import ALTI_BUDGET, LIVE_COPIES

    rows = mx.alti_rows(t, hidden)
    assert rows >= 1
    assert rows == 1 or LIVE_COPIES * 8 * rows * t * hidden <= ALTI_BUDGET
    assert ALTI_BUDGET <= 2**30 // 2  # with value zeroing's own budget, under 1 GB at 512 pieces
    if t == 15:
        assert rows >= t  # a short sentence is one array: today's numbers to the bit


def test_value_masks_built_per_chunk_are_the_whole_masks():
    for per_head in (False, True):
        whole = mx.token_keep(5, 3, per_head)
        size = whole.shape[0]
        parts = torch.cat([mx.token_keep(5, 3, per_head, start, min(start + 4, size)) for start in range(0, size, 4)])
        assert torch.equal(parts, whole)
    assert torch.equal(mx.token_keep(3, 2, False)[:, 0], 1 - torch.eye(3, dtype=torch.float64))


def test_progress_counts_every_layer_of_every_sentence(bert):
    steps: list[int] = []

    class Bar:
        def __init__(self, total, desc):
            self.total = total

        def update(self, n):
            steps.append(n)

        def close(self):
            steps.append(-1)

    mx.piece_mixing(bert, [ids(bert), ids(bert, "el banco .")], alti=True, zeroing=False, progress=Bar)
    assert steps == [2] * bert.layers + [-1]


def test_a_long_sentence_is_announced_before_the_work(bert, monkeypatch):
    from real_attention.engine.mixing import compute

    assert mx.long_note([12, 40], 6) is None
    line = mx.long_note([12, mx.LONG_PIECES + 3, mx.LONG_PIECES], 6)
    assert line.startswith(f"sentence 2 has {mx.LONG_PIECES + 3} word pieces (and 1 more of {mx.LONG_PIECES} "
                           "pieces or more): context mixing re-runs each of the 6 layers")
    assert "takes minutes" in line
    monkeypatch.setattr(compute, "LONG_PIECES", 5)
    said: list[str] = []
    mx.compute_mixing(bert, [SENTENCE], note=said.append)
    assert len(said) == 1 and said[0].startswith("sentence 1 has ")
    with pytest.warns(UserWarning, match="context mixing re-runs each of the 3 layers"):
        mx.compute_mixing(bert, [SENTENCE])


def test_run_mixing_warns_on_stderr_up_front(tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.engine.mixing import compute

    monkeypatch.setattr(compute, "LONG_PIECES", 5)
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config(tmp_path)),
                                      "--out", str(tmp_path / "out"), "--mixing", "--no-figures", "--no-report",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("Warning: sentence ")]
    assert len(warned) == 1 and "takes minutes" in warned[0]
    assert (tmp_path / "out" / "results" / "es" / "mixing.csv").is_file()


# ----------------------------------------------------------------------------------------- devices


def test_the_float64_reruns_happen_on_the_models_device_where_it_has_float64():
    assert mx.mixing_device("cpu") == torch.device("cpu")
    assert mx.mixing_device("cuda:1") == torch.device("cuda:1")
    assert mx.mixing_device("mps") == torch.device("cpu")  # Apple's MPS has no float64


def test_the_layer_inputs_wait_on_the_host_and_move_to_the_layer(bert):
    found = mx.blocks(bert)
    given = mx.layer_inputs(bert, found, ids(bert))[0]
    assert given.hidden.device.type == "cpu" and given.hidden.dtype == torch.float64
    moved = given.to("cpu")
    assert moved.hidden.data_ptr() == given.hidden.data_ptr()  # already there: nothing is copied
    layer = mx.Layer64(found[0], mx.mixing_device(bert.device))
    assert {p.device.type for p in layer.layer.parameters()} == {"cpu"}
    assert {p.dtype for p in layer.layer.parameters()} == {torch.float64}


@pytest.mark.skipif(second_device() is None, reason="no cuda or mps device here")
def test_mixing_on_a_second_device_agrees_with_the_cpu(tiny_model_dir):
    device = second_device()
    assert device is not None
    from real_attention.engine.models import choose_model, load_model

    on_cpu = randomise(load(tiny_model_dir))
    there = randomise(load_model(choose_model(None, str(tiny_model_dir), None), device=device))
    texts = [SENTENCE, "Fui al banco a sacar dinero."]
    a, b = mx.compute_mixing(on_cpu, texts), mx.compute_mixing(there, texts)
    for first, second in zip(a.sentences, b.sentences):
        for measure in mx.MIXING_MEASURES:
            tolerance = 1e-9 if measure in ("alti", "value_zeroing") else 1e-6
            np.testing.assert_allclose(first.maps[measure], second.maps[measure], rtol=0, atol=tolerance)
            np.testing.assert_allclose(first.rolled[measure], second.rolled[measure], rtol=0, atol=tolerance)
    per_head = mx.head_value_zeroing  # --measure value-zeroing: (B, layers, H, t, t) on the model's device
    from real_attention.engine.extract import encode, pad_batch

    encoded, _ = encode(on_cpu.tokenizer, texts, on_cpu.max_tokens)
    batch = pad_batch(encoded, on_cpu.tokenizer.pad_token_id or 0)
    np.testing.assert_allclose(per_head(on_cpu, batch).cpu().numpy(), per_head(there, batch).cpu().numpy(),
                               rtol=0, atol=1e-6)


@pytest.mark.slow
def test_run_mixing_rolls_in_the_runs_batches(needs_minilm, tmp_path):
    """At --batch-size 1 the run pads each sentence alone: the mixing table's rolled attention is still
    rollout.csv's to the last digit (padded with every sentence at once, 2 of MiniLM's cells here differed)."""
    import pandas as pd

    path, out = tmp_path / "two.toml", tmp_path / "out"
    path.write_text('[en]\nfocus = "bank"\n[[en.sentences]]\ntext = "I sat on the bank of the river and watched '
                    'the water go by slowly."\nsense = "river"\n[[en.sentences]]\ntext = "The bank lent money."\n'
                    'sense = "money"\n', encoding="utf-8")
    args = ["run", "--model", "minilm", "--offline", "--config", str(path), "--lang", "en", "--out", str(out),
            "--quiet", "--mixing", "--no-figures", "--no-report", "--batch-size", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results" / "en" / "mixing.csv")
    rollout = pd.read_csv(out / "results" / "en" / "rollout.csv")
    attention = table[table.measure == "attention"].reset_index(drop=True)
    np.testing.assert_array_equal(attention.rolled.to_numpy(), rollout.weight.to_numpy())


@pytest.mark.parametrize("case", ["missing", "after"])
def test_run_mixing_finds_the_words_before_the_work(case, tiny_model_dir, tmp_path, monkeypatch):
    """A sense word not in its sentence, or after the focus word in a decoder's sentence, is found before
    the context mixing runs (it was found once all of it was done)."""
    from real_attention.engine.mixing import compute

    def never(*args, **options):
        raise AssertionError("the mixing ran")

    monkeypatch.setattr(compute, "piece_mixing", never)
    monkeypatch.setattr(compute, "rolled_head_means", never)
    text = SPANISH.replace('sense = "dinero"', 'sense = "casa"') if case == "missing" else SPANISH
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    expected = "the sense word 'casa' is not in sentence 2"
    if case == "after":  # the decoder sees only earlier words: jardín comes after banco
        from real_attention.engine.focus import SentenceError
        from real_attention.engine.mixing.compute import run_mixing
        from real_attention.engine.sentences import load_sentences

        import real_attention as ra

        decoder = ra.load(str(tiny_model_dir))
        object.__setattr__(decoder, "causal", True)  # the order check alone: no forward pass runs
        with pytest.raises(SentenceError, match="comes after the focus word 'banco', and this model is a decoder"):
            run_mixing(decoder, load_sentences(path, "es"))
        return
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(path), "--out",
                                      str(tmp_path / "out"), "--quiet", "--mixing"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert expected in result.output and "the mixing ran" not in result.output


@pytest.mark.parametrize("where, message", [
    ("head_means", "ran out of memory on a batch of 2 sentence(s)"),
    ("piece_mixing", "ran out of memory in the context mixing, which re-runs each layer in float64"),
])
def test_run_mixing_out_of_memory_is_one_line(where, message, tiny_model_dir, tmp_path, monkeypatch):
    import torch

    from real_attention.engine.mixing import compute

    def exhausted(*args, **options):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(compute, where, exhausted)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config(tmp_path)),
                                      "--out", str(out), "--quiet", "--mixing"])
    assert result.exit_code != 0 and "Traceback" not in result.output and "hit a bug" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("Error: the device cpu ") and message in line, line
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_near_zero_rows_name_the_word_and_its_place():
    """Two occurrences of one word are two rows: each carries its query_index."""
    from real_attention.outputs.mixing import mixing_summary

    mixing = mx.Mixing((), "m", "r", False, smallest_raw_row_sum={},
                       near_zero_rows=((1, 2, 0, "the"), (1, 2, 4, "the")))
    rows = mixing_summary(mixing)["value_zeroing_near_zero_rows"]["rows"]
    assert rows == [{"sentence": 1, "layer": 2, "query_index": 0, "query": "the"},
                    {"sentence": 1, "layer": 2, "query_index": 4, "query": "the"}]
