"""study/ stays small and flat (CPU only, nothing imported): the import graph of its modules,
read from the source with ast (imports inside functions included), has no cycle; no module is
over MAX_LINES; nothing imports the package's __init__ (which loads names lazily) or the
child-process entry module."""
import ast
import re
from pathlib import Path

import pytest

STUDY = Path(__file__).resolve().parent.parent / "study"
MAX_LINES = 330
INIT = "__init__"


def imports_of(path: Path, modules: set, package: str = "study") -> set:
    """The package modules `path` imports: `from . import x`, `from .x import y`,
    `import study.x`, `from study import x`, `from study.x import y`, anywhere in the file.
    A name that is not a module file (`from . import kernel`, `import study`) means __init__."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level > 1:
                raise AssertionError(f"{path.name}: relative import beyond the package")
            if node.level == 1:
                parts = node.module.split(".") if node.module else []
            elif node.module and node.module.split(".")[0] == package:
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts:
                out.add(parts[0])
            else:
                out |= {a.name if a.name in modules else INIT for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package:
                    out.add(parts[1] if len(parts) > 1 else INIT)
    return out


def graph(directory: Path = STUDY) -> dict:
    files = {p.stem: p for p in directory.glob("*.py")}
    return {name: imports_of(p, set(files)) - {name} for name, p in files.items()}


def find_cycle(g: dict) -> list:
    """One import cycle as [a, b, ..., a], or [] if the graph is acyclic."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = "done"
        stack.pop()
        return []
    for n in sorted(g):
        if n not in state and (found := visit(n)):
            return found
    return []


def test_graph_reader_sees_every_import_form(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\nfrom .c import x\n")
    (tmp_path / "b.py").write_text("def f():\n    import study.c\n    from study import a, name\n")
    (tmp_path / "c.py").write_text("def g():\n    from study.d import y\n    import study\n")
    (tmp_path / "d.py").write_text("import os\nimport numpy.study\n")
    g = graph(tmp_path)
    assert g == {"a": {"b", "c"}, "b": {"c", "a", INIT}, "c": {"d", INIT}, "d": set()}
    assert find_cycle(g) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert not cycle, "import cycle in study/: " + " -> ".join(cycle)


def test_nothing_imports_the_package_init():
    """__init__ loads its names lazily from the defining modules; a module importing names from
    the package itself would hide a cycle through it."""
    offenders = sorted(n for n, deps in graph().items() if INIT in deps and n != INIT)
    assert not offenders, f"import from the defining module instead of the package: {offenders}"


def test_worker_entry_is_imported_by_nothing():
    """`python -m study.worker` must not find study.worker already imported (runpy warns)."""
    assert not [n for n, deps in graph().items() if "worker" in deps]


@pytest.mark.parametrize("path", sorted(STUDY.glob("*.py")), ids=lambda p: p.name)
def test_module_size(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines (> {MAX_LINES}): split it by responsibility"


def test_children_start_through_the_worker_module():
    """Every `-m study.<module>` a module spawns is study.worker (see its docstring)."""
    spawned = []
    for path in STUDY.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List):
                vals = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                spawned += [(path.name, vals[i + 1]) for i, v in enumerate(vals[:-1]) if v == "-m"
                            and isinstance(vals[i + 1], str) and vals[i + 1].startswith("study")]
    assert spawned and all(mod == "study.worker" for _, mod in spawned), spawned


def test_architecture_page_lists_every_module():
    """docs/ARCHITECTURE.md's module map names every module of study/ (a new module is added
    there, with its one responsibility, or the map goes stale)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9_]+\.py)` \|", page, flags=re.M))
    modules = {p.name for p in (Path(__file__).resolve().parent.parent / "study").glob("*.py")} - {"__main__.py"}
    assert modules <= listed, f"docs/ARCHITECTURE.md's module map misses {sorted(modules - listed)}"
