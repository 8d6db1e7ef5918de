"""The sentences to analyse: a TOML config with one table per language."""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .checks import whole_number
from .errors import InputError
from .text import text_problem

DEFAULT_CONFIG_NAME = "sentences.toml"
DEFAULT_LANG = "es"  # the lesson's: the table of the packaged config that `run`, `show` and `serve` use by default


class ConfigError(InputError):
    """The config or one of its sentences cannot be used; the message says why."""


@dataclass(frozen=True)
class Sentence:
    text: str
    sense: str  # the word that decides the focus word's sense
    focus_occurrence: int | None = None  # which occurrence, from 1; needed only if it repeats
    sense_occurrence: int | None = None


@dataclass(frozen=True)
class SentenceSet:
    lang: str
    focus: str  # the ambiguous word, e.g. "banco"
    sentences: tuple[Sentence, ...]

    def __post_init__(self) -> None:
        if not self.sentences:
            raise InputError("a sentence set needs at least one sentence")


def default_config_text() -> str:
    from importlib import resources

    return resources.files(__package__).joinpath(DEFAULT_CONFIG_NAME).read_text(encoding="utf-8")


MAX_CONFIG_BYTES = 8 << 20  # the most a config may hold: the lesson's is 4 kB


def read_config(path: str | Path | None) -> tuple[dict, str]:
    """Parse the TOML at `path` (the packaged lesson config if None); returns (tables, source name)."""
    import tomllib  # here, not at the top: the CLI imports this module for DEFAULT_LANG as it starts

    if path is None:
        source, text = f"<packaged {DEFAULT_CONFIG_NAME}>", default_config_text()
    else:
        source = str(path)
        try:
            with open(path, "rb") as handle:  # a pipe (--config <(...)) too; /dev/zero would never end: a cap
                raw = handle.read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(f"config {source} is larger than {MAX_CONFIG_BYTES >> 20} MB; a config lists a few "
                                  "sentences (a corpus goes to heads --corpus)")
            # a byte-order mark is not TOML; line ends as read_text gave them (universal newlines: \r and \r\n)
            text = raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        except IsADirectoryError:
            raise ConfigError(f"config {source} is a folder; pass a TOML file") from None
        except FileNotFoundError:
            raise ConfigError(f"config {source} does not exist") from None
        except OSError as error:
            raise ConfigError(f"cannot read config {source}: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise ConfigError(f"config {source} is not UTF-8 ({error.reason} at byte {error.start})") from None
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"malformed TOML in {source}: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(f"malformed TOML in {source}: nested too deeply (a config needs two levels)") from None
    return tables, source


def _optional_occurrence(raw: dict, key: str, where: str) -> int | None:
    return whole_number(raw[key], f"{where}: {key}", error=ConfigError) if key in raw else None


def check_apart(sense: str, focus: str, where: str) -> None:
    """ConfigError if one of the sense and focus words holds the other as a word of its own (`sense = "the
    bank"` with `focus = "bank"`): the focus word would then be a part of the sense word, not a unit apart."""
    from .units import text_spans

    for outer, inner, how in ((sense, focus, "contains the focus word"), (focus, sense, "is part of the focus word")):
        if any(same_word(outer[start:end], inner) for start, end in text_spans(outer)) and not same_word(outer, inner):
            raise ConfigError(f"{where}: the sense word {sense!r} {how} {focus!r}; the two must be different "
                              f"words of the sentence, each one unit (name the one word that decides the sense)")


def _nonempty_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    if not value.strip():
        raise ConfigError(f"{where} is empty")
    problem = text_problem(value)
    if problem is not None:
        raise ConfigError(f"{where} {problem}")
    return value.strip()


TABLE_KEYS = ("focus", "sentences")
SENTENCE_KEYS = ("text", "sense", "focus_occurrence", "sense_occurrence")


def check_keys(keys, known: tuple[str, ...], where: str, elsewhere: tuple[str, ...] = (),
               elsewhere_name: str = "") -> None:
    """ConfigError for the first key not in `known`, suggesting the closest known one; a key that belongs
    at another level (`elsewhere`, e.g. a sentence's key in a language table) is named with where it goes."""
    import difflib

    for key in sorted(set(keys) - set(known)):
        if key in elsewhere:  # the right key at the wrong level
            raise ConfigError(f"{where} has `{key}`, which goes in {elsewhere_name}")
        close = difflib.get_close_matches(key, known + elsewhere, n=1, cutoff=0.6)
        if close and close[0] in elsewhere:
            hint = f"did you mean `{close[0]}`? It goes in {elsewhere_name}"
        elif close:
            hint = f"did you mean `{close[0]}`?"
        else:
            hint = f"known keys: {', '.join(known)}"
        raise ConfigError(f"{where} has an unknown key `{key}`; {hint}")


def same_word(a: str, b: str) -> bool:
    """Words compare as a reader would: Unicode-normalised and case-folded ("Banco" is "banco")."""
    return unicodedata.normalize("NFC", a).casefold() == unicodedata.normalize("NFC", b).casefold()


def load_sentences(path: str | Path | None, lang: str) -> SentenceSet:
    """Read the `lang` table of the config at `path` and check that it is complete."""
    tables, source = read_config(path)
    languages = sorted(name for name, value in tables.items() if isinstance(value, dict))
    if lang not in tables:
        raise ConfigError(
            f"unknown language {lang!r} in {source}; it has: {', '.join(languages) or 'none'}"
        )
    strays = [name for name, value in tables.items() if not isinstance(value, dict)]
    if strays:  # a top-level `key = value`: every top-level name is a language table
        raise ConfigError(
            f"in {source}: `{strays[0]}` at the top level is not a language table; "
            f"put it under a table such as [{languages[0] if languages else 'es'}]"
        )
    table = tables[lang]
    check_keys(table, TABLE_KEYS, f"in {source}: [{lang}]", SENTENCE_KEYS, f"each [[{lang}.sentences]] entry")
    for key in ("focus", "sentences"):
        if key not in table:
            raise ConfigError(f"in {source}: [{lang}] has no `{key}`")
    focus = _nonempty_str(table["focus"], f"in {source}: {lang}.focus")
    raw_sentences = table["sentences"]
    if not isinstance(raw_sentences, list) or not raw_sentences:
        raise ConfigError(f"in {source}: {lang}.sentences must be a non-empty list of tables")
    sentences = []
    for number, raw in enumerate(raw_sentences, start=1):
        where = f"in {source}: {lang} sentence {number}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table with `text` and `sense`")
        for key in ("text", "sense"):
            if key not in raw:
                raise ConfigError(f"{where} has no `{key}`")
        check_keys(raw, SENTENCE_KEYS, where, TABLE_KEYS, f"the [{lang}] table")
        sentence = Sentence(
            text=_nonempty_str(raw["text"], f"{where}: text"),
            sense=_nonempty_str(raw["sense"], f"{where}: sense"),
            focus_occurrence=_optional_occurrence(raw, "focus_occurrence", where),
            sense_occurrence=_optional_occurrence(raw, "sense_occurrence", where),
        )
        if same_word(sentence.sense, focus):
            raise ConfigError(
                f"{where}: the sense word {sentence.sense!r} is the focus word itself; name the word that decides "
                f"the sense of {focus!r}, or a head that looks at {focus!r} itself would count as a sense-word head"
            )
        check_apart(sentence.sense, focus, where)
        sentences.append(sentence)
    return SentenceSet(lang=lang, focus=focus, sentences=tuple(sentences))
