"""The package's layout holds: stages import one way, and the public API is listed once, consistently.

The graph (docs/layout.md), bottom to top:

    engine < statistics < outputs < {lesson, api} < {syntax_probe, live, other job stages} < cli.py, __init__.py

A module may import its own stage and any stage below it, never one above it, and never another stage of its
own level (api and lesson do not import each other; neither do two job stages). Every import counts: at module
level, inside a function, under TYPE_CHECKING, relative or absolute. Only the standard library's `ast` reads
the files, so nothing is imported to check them.
"""
from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "real_attention"
ROOT = Path(__file__).resolve().parents[1] / "analysis" / PACKAGE
LAYOUT_DOC = Path(__file__).resolve().parents[1] / "docs" / "layout.md"

# Each stage and its level. A folder of the package not named here is a job stage (JOB_LEVEL), like
# syntax_probe and live: it may import everything below it and no other job stage.
LEVELS = {"engine": 0, "statistics": 1, "outputs": 2, "lesson": 3, "api": 3, "syntax_probe": 4, "live": 4}
JOB_LEVEL = 4
TOP = "top"  # the package's own modules (__init__, cli, __main__): they may import every stage
TOP_LEVEL = 5



@dataclass(frozen=True)
class Edge:
    file: str  # relative to the package folder
    line: int
    importer: str  # module name relative to the package, e.g. "outputs.console"
    imported: str  # likewise, e.g. "api.run"

    def key(self) -> str:
        return f"{self.file}: {self.importer} -> {self.imported}"


def stage_of(module: str) -> str:
    """The stage of a module named relative to the package ("engine.units" -> "engine", "cli" -> top)."""
    head, dot, _ = module.partition(".")
    if not dot and (ROOT / f"{head}.py").exists():
        return TOP  # __init__, cli, __main__
    return head or TOP


def level_of(stage: str) -> int:
    return TOP_LEVEL if stage == TOP else LEVELS.get(stage, JOB_LEVEL)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_of(path: Path) -> list[str]:
    """The package a module's relative imports start from, as parts relative to ROOT."""
    return list(path.relative_to(ROOT).parent.parts)


def imports(path: Path) -> list[Edge]:
    """Every import of the package's own modules in one file, resolved to names relative to the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    file = path.relative_to(ROOT).as_posix()
    importer = module_name(path)
    edges: list[Edge] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    targets.append(alias.name[len(PACKAGE) + 1:])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_of(path)
                assert node.level - 1 <= len(base), f"{file}:{node.lineno}: a relative import above the package"
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                module = node.module[len(PACKAGE) + 1:]
            else:
                continue
            # `from . import x`, `from .. import api`: a name may be a module (or a stage) of its own; any other
            # name of the package itself (`from .. import __version__`) comes from __init__, the top.
            for alias in node.names:
                name = f"{module}.{alias.name}" if module else alias.name
                if (ROOT / name.replace(".", "/")).is_dir() or (ROOT / (name.replace(".", "/") + ".py")).exists():
                    targets.append(name)
                elif not module:
                    targets.append("__init__")
            if module:
                targets.append(module)
        edges.extend(Edge(file, node.lineno, importer, target) for target in targets)
    return edges


def all_edges() -> list[Edge]:
    return [edge for path in sorted(ROOT.rglob("*.py")) for edge in imports(path)]


def forbidden(edge: Edge) -> str | None:
    """Why an edge breaks the graph, or None."""
    source, target = stage_of(edge.importer), stage_of(edge.imported)
    if source == target:
        return None
    low, high = level_of(source), level_of(target)
    if high > low:
        return f"{source} (level {low}) imports {target} (level {high}), a stage above it"
    if high == low:
        return f"{source} imports {target}, another stage of its own level {low}"
    return None


def test_the_edges_are_read_from_every_kind_of_import(tmp_path):
    """The reader itself: lazy, relative, absolute and `from . import` edges all come back resolved."""
    assert {stage_of("engine.units"), stage_of("cli"), stage_of("__init__"), stage_of("")} == {"engine", TOP}
    edges = {(e.importer, e.imported) for e in all_edges()}
    assert ("cli", "api.run") in edges or ("cli", "api.api") in edges  # cli imports the API
    # A function-level import is read: outputs.drawing imports matplotlib's and the engine's names inside
    # functions; at least one of the package's edges sits inside a function body.
    lazy = [e for path in sorted(ROOT.rglob("*.py")) for e in _lazy_imports(path)]
    assert lazy, "no import inside a function was found: the reader misses them"
    # An upward edge written every way is caught.
    assert forbidden(Edge("engine/x.py", 1, "engine.x", "outputs.tables"))
    assert forbidden(Edge("outputs/x.py", 1, "outputs.x", "api.run"))
    assert forbidden(Edge("api/x.py", 1, "api.x", "lesson.numbers"))  # same level
    assert forbidden(Edge("live/x.py", 1, "live.x", "importance.job"))  # two job stages
    assert forbidden(Edge("engine/x.py", 1, "engine.x", "cli"))
    assert not forbidden(Edge("api/x.py", 1, "api.x", "engine.units"))
    assert not forbidden(Edge("cli.py", 1, "cli", "live.server"))


def _lazy_imports(path: Path) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inner = [n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, ast.ImportFrom) and n.level]
    return [Edge(path.name, n.lineno, "", n.module or "") for n in inner]


def test_no_stage_imports_one_above_it_or_beside_it():
    bad = [f"{edge.file}:{edge.line}: {edge.importer} -> {edge.imported}: {why}"
           for edge in all_edges() if (why := forbidden(edge)) is not None]
    assert not bad, "imports against the stage graph (docs/layout.md):\n" + "\n".join(bad)


def test_every_stage_is_described_where_the_graph_is_written():
    stages = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(LEVELS) <= set(stages), f"LEVELS names a stage that is gone: {sorted(set(LEVELS) - set(stages))}"
    written = LAYOUT_DOC.read_text(encoding="utf-8")
    missing = [stage for stage in stages if f"{stage}/ " not in written and f"`{stage}/`" not in written]
    assert not missing, f"docs/layout.md does not describe the stage(s) {missing}"


def _init_tree() -> ast.Module:
    return ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))


def _api_dict() -> dict[str, str]:
    for node in _init_tree().body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_API" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("__init__.py has no _API = {...}")


def _type_checking_names() -> dict[str, str]:
    """Each name the TYPE_CHECKING block of __init__.py imports, and the module (relative) it comes from."""
    names: dict[str, str] = {}
    for node in _init_tree().body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level == 1, ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname in (None, alias.name), f"{alias.name} is imported as {alias.asname}"
                    assert alias.name not in names, f"{alias.name} is imported twice under TYPE_CHECKING"
                    names[alias.name] = "." + (statement.module or "")
    assert names, "__init__.py has no TYPE_CHECKING block"
    return names


def test_all_lists_the_api_and_the_version():
    import real_attention as ra

    # cli and main are bound at import (so the submodule real_attention.cli never shadows the group), not lazily
    assert sorted(ra.__all__) == sorted([*_api_dict(), "cli", "main", "__version__"])
    assert ra.cli is importlib.import_module(".cli", PACKAGE).cli
    assert len(ra.__all__) == len(set(ra.__all__))


def test_the_type_checking_block_names_what_api_names():
    api, typed = _api_dict(), _type_checking_names()
    assert set(typed) == set(api), (f"only in _API: {sorted(set(api) - set(typed))}; "
                                    f"only under TYPE_CHECKING: {sorted(set(typed) - set(api))}")
    different = {name: (api[name], typed[name]) for name in api if api[name] != typed[name]}
    assert not different, f"_API and TYPE_CHECKING name different modules: {different}"


def _assigned(module) -> set[str]:
    """The names a module's own top level binds by def, class or assignment (not by import)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def test_each_api_name_is_defined_in_its_module():
    """_API points at the module that defines each name, not one that imports it from elsewhere."""
    import inspect

    for name, where in _api_dict().items():
        module = importlib.import_module(where, PACKAGE)
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, f"{name} is defined in {value.__module__}, not {where}"
        assert name in _assigned(module), f"{name} is not defined in {module.__name__} (imported there?)"
