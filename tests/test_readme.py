"""Every Python block of the README runs as written (in a fresh folder, on the packaged MiniLM)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_blocks():
    assert len(python_blocks()) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("number", range(len(python_blocks())))
def test_a_readme_python_block_runs(number, needs_minilm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = python_blocks()[number]
    exec(compile(code, f"README.md python block {number + 1}", "exec"), {"__name__": "__readme__"})
