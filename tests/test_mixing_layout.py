"""The layout of the measures and the mixing package (issue 26, items 2 and 4): engine imports no other stage
(imports inside functions included), value zeroing and norm each have one owner, and no module of engine.mixing
imports engine.measures (which imports value zeroing from it)."""
from __future__ import annotations

import ast
from pathlib import Path

import real_attention

PACKAGE = Path(real_attention.__file__).resolve().parent
STAGES = ("statistics", "outputs", "api", "syntax_probe", "lesson", "live", "cli")


def imports(path: Path) -> list[str]:
    """Every module `path` imports, as an absolute dotted name, at any depth of its code."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.append(".".join((*base, node.module or "")).rstrip("."))
            else:
                found.append(node.module or "")
    return found


def test_engine_imports_no_other_stage_even_inside_functions():
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        for name in imports(path):
            assert not any(name.startswith(f"real_attention.{stage}") for stage in STAGES), (path, name)
            assert name != "real_attention" or path.name == "__init__.py", (path, name)


def test_the_mixing_package_never_imports_the_measures_module():
    for path in sorted((PACKAGE / "engine" / "mixing").rglob("*.py")):
        assert "real_attention.engine.measures" not in imports(path), path


def test_each_measure_name_is_written_once():
    """The string "value-zeroing" (and "value_zeroing", and "norm") is assigned to a constant in one module: the
    light engine/measure_names.py, which the command line reads without importing the measures' maths."""
    owners: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                if node.value.value in ("value-zeroing", "value_zeroing", "norm"):
                    owners.setdefault(node.value.value, []).append(str(path.relative_to(PACKAGE)))
    assert owners == {"value-zeroing": ["engine/measure_names.py"], "norm": ["engine/measure_names.py"]}


def test_the_names_agree():
    from real_attention.engine import measures, mixing
    from real_attention.engine.mixing import value_zeroing

    assert measures.VALUE_ZEROING == value_zeroing.VALUE_ZEROING == "value-zeroing"
    assert mixing.VALUE_ZEROING_KEY == value_zeroing.KEY == "value_zeroing"  # mixing.csv's measure column
    assert mixing.MIXING_MEASURES == ("attention", "norm", "alti", "value_zeroing")
    assert measures.MEASURES == ("weights", "norm", "value-zeroing")
