"""The package's layout: folders by owner, imports that run one way, modules a person can
read in one sitting, and docs that name files which exist.

Everything here reads the source (its syntax tree); nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agent_memory"
MAX_LINES = 1000
# Modules over MAX_LINES until a later step splits them, and why they may wait.
LONG_FOR_NOW: dict[str, str] = {}
MAX_FUNCTION_LINES = 150
# Functions (or whole modules) over MAX_FUNCTION_LINES until their rewrite lands, and why.
LONG_FUNCTIONS_FOR_NOW: dict[str, str] = {}
# Folders whose __init__.py does more than say what the folder owns, and why.
INIT_WITH_CODE = {
    "agent_memory": "from agent_memory import Vault, the library's entry point, and __version__",
    "agent_memory/cli": "main, the entry point installed scripts name (agent_memory.cli:main) and python -m runs",
}
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "benchmarks").glob("*.md"))]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
FOLDERS = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an import statement names (``from ..x import y`` -> ``agent_memory.x``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) for every import of the package in ``path``: at the
    top, inside functions and under ``TYPE_CHECKING`` alike (each is a dependency)."""
    module = module_name(path) if path.is_relative_to(PACKAGE) else ""
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = imported_from(node, module, path.name == "__init__.py")
            found += [(target, alias.name, node.lineno) for alias in node.names]
    return [(target, name, line) for target, name, line in found if target.split(".")[0] == "agent_memory"]


def dependencies(path: Path) -> set[str]:
    """The package's modules that ``path`` imports (a name that is a module counts as that module)."""
    out = set()
    for target, name, _line in imports(path):
        out.add(f"{target}.{name}" if f"{target}.{name}" in MODULES else target)
    return out & set(MODULES)


def a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path (first module repeated at the end), or [] when there is none."""
    state: dict[str, str] = {}  # "open" while its imports are walked, then "done"
    for start in sorted(graph):
        if start in state:
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        state[start] = "open"
        while stack:
            module, todo = stack[-1]
            if not todo:
                state[module] = "done"
                stack.pop()
                continue
            nxt = todo.pop()
            if state.get(nxt) == "open":
                path = [m for m, _ in stack]
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                state[nxt] = "open"
                stack.append((nxt, sorted(graph[nxt])))
    return []


def defined_names(path: Path) -> set[str]:
    """Names a module defines itself at its top (functions, classes, assignments), not
    names it imports from elsewhere."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_a_cycle_is_found_when_there_is_one() -> None:
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_back() -> None:
    """Imports run one way: no cycle between the package's modules, counting imports
    inside functions and under TYPE_CHECKING (a cycle hidden there is still one)."""
    graph = {module: dependencies(path) - {module} for module, path in MODULES.items()}
    assert a_cycle(graph) == []


def test_no_module_is_longer_than_a_person_reads_in_one_sitting() -> None:
    longer = sorted(str(path.relative_to(ROOT)) for path in MODULES.values()
                    if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES)
    assert longer == sorted(LONG_FOR_NOW), f"modules over {MAX_LINES} lines (split them by concern)"


def test_no_function_is_longer_than_a_person_follows_at_once() -> None:
    """A function does one thing: past ~150 lines it does several (split it, name the parts)."""
    longer = []
    for path in MODULES.values():
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS_FOR_NOW:
                    longer.append(f"{name}:{node.name}")
    assert sorted(longer) == sorted(k for k in LONG_FUNCTIONS_FOR_NOW if ":" in k), (
        f"functions over {MAX_FUNCTION_LINES} lines (split them), or an exemption no longer needed (drop it)")


def test_every_folder_says_what_it_owns_and_nothing_else() -> None:
    for folder in FOLDERS:
        name = str(folder.relative_to(ROOT))
        tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        assert len(doc.split()) >= 8, f"{name}/__init__.py: a docstring saying what the folder owns"
        if name not in INIT_WITH_CODE:
            assert len(tree.body) == 1, f"{name}/__init__.py: nothing but its docstring (import from the modules)"
    holding_code = {path.parent for path in PACKAGE.rglob("*.py")}
    assert sorted(holding_code - set(FOLDERS)) == [], "a folder of modules without an __init__.py"


def test_nothing_is_imported_through_a_re_export() -> None:
    """A name is imported from the module that defines it, not from one that imported it
    (the package's own __init__ files excepted: INIT_WITH_CODE)."""
    defined = {module: defined_names(path) for module, path in MODULES.items()}
    exempt = {module_name(ROOT / folder / "__init__.py") for folder in INIT_WITH_CODE}
    found = []
    for path in [*MODULES.values(), *sorted((ROOT / "tests").glob("*.py"))]:
        for target, name, line in imports(path):
            if name is None or target in exempt or target not in MODULES or f"{target}.{name}" in MODULES:
                continue
            if name not in defined[target]:
                found.append(f"{path.relative_to(ROOT)}:{line}: {name} from {target}")
    assert found == []


def test_contributing_says_what_each_folder_owns() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)/`", layout))
    folders = {folder.name for folder in FOLDERS if folder != PACKAGE}
    assert sorted(folders - named) == []


def test_every_code_path_the_docs_name_exists() -> None:
    missing = []
    for page in DOCS:
        for path in re.findall(r"agent_memory/[\w/]*\w(?:\.py)?", page.read_text(encoding="utf-8")):
            if not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert missing == []


def test_no_class_is_built_from_another_of_the_package() -> None:
    """The composer composes: a job is an object another one holds, never a base class
    (mixins spread one object over modules and make behaviour hang on base-class order).
    Exceptions, TypedDict shapes and Protocols may extend their own kind."""
    bases: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                # The package's classes are imported by name; a dotted base (logging.Handler) is another library's.
                bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
                where[node.name] = f"{path.relative_to(ROOT)}:{node.lineno}"

    def a_shape(name: str, depth: int = 0) -> bool:
        if name in ("Exception", "TypedDict", "Protocol"):
            return True
        return depth < 20 and any(a_shape(base, depth + 1) for base in bases.get(name, []))

    built = [f"{where[name]}: {name}({base})" for name, names in bases.items() for base in names
             if base in bases and not a_shape(base)]
    assert built == []
    stubs = [str(path.relative_to(ROOT)) for path in sorted((PACKAGE / "vault").glob("*.py"))
             if "TYPE_CHECKING" in path.read_text(encoding="utf-8")]
    assert stubs == [], "the vault's jobs name what they use in their constructors, not under TYPE_CHECKING"
