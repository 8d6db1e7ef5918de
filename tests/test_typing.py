"""The package as a user's tools see it, from a folder outside the checkout: one import name, the same version
from every entry point, and the public API typed for editors (jedi's goto, pyright's types).

Every check runs in a subprocess whose working folder is a temporary one and whose PYTHONPATH is this checkout's
source root (analysis/), as an installed package would be found: nothing of the checkout's root is importable.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOT = REPO / "analysis"
PACKAGE = SOURCE_ROOT / "real_attention"

# The names whose definitions an editor must find (issue 26), and those pyright must type (a few of them).
GOTO_NAMES = ("attend", "run", "syntax", "mixing", "serve", "read_attention")
TYPED = {"attend": "(model: LoadedModel", "run": "(lang: str", "cli": "Group", "__version__": "str"}


def outside(folder: Path, *command: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`command` run in `folder` with only the source root on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT)}
    return subprocess.run([str(part) for part in command], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)


def python(folder: Path, code: str, *args: str, timeout: float = 300) -> str:
    """What `code` (given `args`) prints, run by this interpreter in `folder`; fails the test if it fails."""
    done = outside(folder, sys.executable, "-c", code, *args, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- one import name -------------------------------------------------------------------------------------

def test_only_the_package_is_importable_from_outside_the_checkout(tmp_path):
    found = json.loads(python(tmp_path, """if True:
        import importlib, json, real_attention
        missing = {}
        for name in ("analysis", "tests", "benchmarks"):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:
                missing[name] = True
            else:
                missing[name] = False
        print(json.dumps({"file": real_attention.__file__, "missing": missing}))
    """))
    assert found["file"].endswith(os.path.join("real_attention", "__init__.py"))
    assert Path(found["file"]) == PACKAGE / "__init__.py"  # this checkout's package, not another install's
    assert all((REPO / name).is_dir() for name in found["missing"])  # each is there, to be (not) found
    assert found["missing"] == {"analysis": True, "tests": True, "benchmarks": True}


def test_every_entry_point_reports_the_same_version(tmp_path):
    """python real_attention.py, python -m real_attention and the real-attention script; pyproject's too."""
    import real_attention

    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert real_attention.__version__ == version
    script = Path(sys.executable).with_name("real-attention")
    if not script.exists():
        pytest.skip(f"no real-attention script next to {sys.executable} (the project is not installed here)")
    runs = {
        "real_attention.py": outside(tmp_path, sys.executable, REPO / "real_attention.py", "--version"),
        "-m real_attention": outside(tmp_path, sys.executable, "-m", "real_attention", "--version"),
        "real-attention": outside(tmp_path, script, "--version"),
    }
    for how, done in runs.items():
        assert done.returncode == 0, (how, done.stderr)
    outputs = {how: done.stdout.strip() for how, done in runs.items()}
    assert set(outputs.values()) == {f"real-attention, version {version}"}, outputs


# --- editors ---------------------------------------------------------------------------------------------

GOTO = """if True:
    import inspect, json, sys
    import jedi
    import real_attention as ra

    names = sys.argv[1:]
    code = "import real_attention as ra\\n" + "".join(f"ra.{name}\\n" for name in names)
    script = jedi.Script(code, path="notebook.py")
    found = {}
    for line, name in enumerate(names, start=2):
        definitions = script.goto(line, len("ra."), follow_imports=True)
        found[name] = {
            "goto": [{"module_path": str(d.module_path), "type": d.type, "name": d.name, "line": d.line}
                     for d in definitions],
            "defined_in": inspect.getsourcefile(getattr(ra, name)),  # where Python finds it at run time
        }
    print(json.dumps(found))
"""


@pytest.mark.slow  # jedi parses the package and its imports: seconds
def test_jedi_goto_lands_on_each_public_functions_definition(tmp_path):
    pytest.importorskip("jedi")
    found = json.loads(python(tmp_path, GOTO, *GOTO_NAMES, timeout=600))
    for name in GOTO_NAMES:
        definitions = found[name]["goto"]
        assert len(definitions) == 1, (name, definitions)  # none: jedi cannot see through the lazy import
        definition = definitions[0]
        module = Path(definition["module_path"])
        assert module == Path(found[name]["defined_in"]), name  # the defining module, not __init__'s import
        assert module.is_relative_to(PACKAGE) and module.name != "__init__.py", (name, module)
        assert (definition["type"], definition["name"]) == ("function", name)
        source_line = module.read_text(encoding="utf-8").splitlines()[definition["line"] - 1]
        assert source_line.startswith(f"def {name}("), (name, source_line)


def _pyright() -> Path:
    """The venv's pyright, if it runs here (the PyPI package fetches its Node.js part on first use)."""
    pyright = Path(sys.executable).with_name("pyright")
    if not pyright.exists():
        pytest.skip("pyright is not installed in this environment")
    try:
        done = subprocess.run([str(pyright), "--version"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("pyright --version did not answer in 2 minutes (fetching Node.js or pyright offline?)")
    if done.returncode != 0 or "pyright" not in done.stdout:
        pytest.skip(f"pyright cannot run here: {(done.stderr or done.stdout).strip()[:200]}")
    return pyright


@pytest.mark.slow  # pyright starts Node.js and reads the package: seconds
def test_pyright_types_every_public_name(tmp_path):
    """reveal_type of every name in __all__ is its real type, no Unknown in it; a name outside the API is an error
    (the lazy __getattr__ is hidden from type checkers: it made a misspelt `ra.atend` Any, silently)."""
    import real_attention

    pyright = _pyright()
    names = list(real_attention.__all__)
    assert set(TYPED) <= set(names)
    probe = tmp_path / "probe.py"
    probe.write_text("import real_attention as ra\n\n" + "".join(f"reveal_type(ra.{name})\n" for name in names),
                     encoding="utf-8")
    # An Attention's sentences have their maps: `att[i].weights` is an array to a type checker, not Optional (the
    # README's and docs' `att[0].weights.shape`), while a WordAttention's weights may be None (a streamed run).
    maps = tmp_path / "maps.py"
    maps.write_text("import real_attention as ra\n\n\ndef f(att: ra.Attention, one: ra.WordAttention) -> None:\n"
                    "    reveal_type(att[0].weights)\n    reveal_type(one.weights)\n", encoding="utf-8")
    misspelt = tmp_path / "misspelt.py"
    misspelt.write_text("import real_attention as ra\n\nra.atend\n", encoding="utf-8")
    done = outside(tmp_path, pyright, "--outputjson", "--pythonpath", sys.executable, probe, maps, misspelt,
                   timeout=600)
    report = json.loads(done.stdout)
    wrong = [d for d in report["generalDiagnostics"] if Path(d["file"]).name == "misspelt.py"]
    assert [d["severity"] for d in wrong] == ["error"] and '"atend" is not a known attribute' in wrong[0]["message"]
    report["generalDiagnostics"] = [d for d in report["generalDiagnostics"] if d not in wrong]
    in_maps = [d for d in report["generalDiagnostics"] if Path(d["file"]).name == "maps.py"]
    assert [d["message"] for d in in_maps if d["severity"] != "information"] == []
    weights, optional = (d["message"] for d in sorted(in_maps, key=lambda d: d["range"]["start"]["line"]))
    assert "ndarray" in weights and "None" not in weights, weights
    assert "None" in optional, optional
    diagnostics = [d for d in report["generalDiagnostics"] if d not in in_maps]
    assert [d for d in diagnostics if d["severity"] != "information"] == [], diagnostics
    revealed = {}
    for diagnostic in diagnostics:
        name = names[diagnostic["range"]["start"]["line"] - 2]  # line 2 (from 0) is the first reveal_type
        prefix = f'Type of "ra.{name}" is "'
        assert diagnostic["message"].startswith(prefix), diagnostic["message"]
        revealed[name] = diagnostic["message"][len(prefix):-1]
    assert revealed.keys() == set(names)
    assert {name: text for name, text in revealed.items() if "Unknown" in text or text == "Any"} == {}
    for name, start in TYPED.items():
        assert revealed[name].startswith(start), (name, revealed[name])


def test_the_checkout_script_loaded_again_by_a_spawned_process_only_sets_the_path(tmp_path):
    """multiprocessing's and Dask's spawned workers load the main script again as `__mp_main__`: the script must not
    try to import a package of that name (`python real_attention.py heads --workers 2` crashed so)."""
    code = ("import runpy, sys; before = dict(sys.modules); "
            f"runpy.run_path({str(REPO / 'real_attention.py')!r}, run_name='__mp_main__'); "
            "assert 'real_attention' not in sys.modules; "
            f"assert sys.path[0] == {str(REPO / 'analysis')!r}; print('ok')")
    assert python(tmp_path, code).strip().endswith("ok")
