"""The package's layout rules (issue 22), read from the source with `ast`, nothing imported.

* no import cycles among the package's modules (module-level imports; imports under
  ``if TYPE_CHECKING:`` and inside functions are not counted);
* no module imports another module's underscore names;
* no module imports a name through a module that only re-imports it (a re-export shim);
  package ``__init__`` files, the documented public lists, are exempt;
* DSPy's private modules (``dspy.clients``, ``dspy._vendor``, any ``_name``) are imported,
  and DSPy's modules patched, only in `binaryeval_dspy.lm.dspy_internals`;
* no click ``ctx.meta`` side channel for settings;
* library code (outside ``binaryeval_dspy/cli/``) names settings and parameters in its
  messages, never command-line flags (``--max-cost``): the CLI translates names to flags
  in one place (`binaryeval_dspy.cli.error_handling.with_flag_names`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "binaryeval_dspy"
DOOR = "binaryeval_dspy.lm.dspy_internals"


#: DSPy modules whose public names may be imported anywhere: the top level and the packages
#: DSPy documents (``dspy.utils.__all__`` lists ``exceptions``).
PUBLIC_DSPY = {"dspy", "dspy.adapters", "dspy.evaluate", "dspy.lm15", "dspy.predict", "dspy.primitives",
               "dspy.signatures", "dspy.streaming", "dspy.teleprompt", "dspy.utils", "dspy.utils.exceptions"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))}


SOURCES = _sources()


def _rel(name: str) -> str:
    return SOURCES[name][0].relative_to(ROOT).as_posix()


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                hidden.update(id(n) for n in ast.walk(child))
    return hidden


def _module_level_imports(body: list[ast.stmt]):
    """Imports run when the module is imported: top level, and inside top-level if / try blocks
    (except ``if TYPE_CHECKING:``); not those inside functions or classes."""
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules its module-level imports load (``from pkg import sub`` is an
    edge to ``pkg.sub``; the parent packages Python runs first are not counted)."""
    graph: dict[str, set[str]] = {}
    for name, (_path, tree) in SOURCES.items():
        edges: set[str] = set()
        for node in _module_level_imports(tree.body):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in SOURCES)
            elif node.level == 0 and node.module and node.module.startswith("binaryeval_dspy"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in SOURCES else node.module)
        edges.discard(name)
        graph[name] = edges & set(SOURCES)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert import_cycles(import_graph()) == []


def _package_imports(tree: ast.Module):
    """Every ``from binaryeval_dspy... import`` in `tree`, at any depth, outside TYPE_CHECKING."""
    hidden = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and id(node) not in hidden and node.level == 0
                and (node.module or "").startswith("binaryeval_dspy")):
            yield node


def test_no_module_imports_another_modules_underscore_names():
    found = [f"{_rel(name)}:{node.lineno}: {alias.name} from {node.module}"
             for name, (_path, tree) in SOURCES.items()
             for node in _package_imports(tree) for alias in node.names
             if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []


def test_names_are_imported_from_the_module_that_defines_them():
    imported: dict[str, dict[str, str]] = {}  # module -> {name it imports at top level: from where}
    for name, (_path, tree) in SOURCES.items():
        imported[name] = {alias.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
                          and (node.module or "").startswith("binaryeval_dspy") for alias in node.names
                          if alias.asname is None}
    found = []
    for name, (path, tree) in SOURCES.items():
        for node in _package_imports(tree):
            source = node.module
            if source not in SOURCES or SOURCES[source][0].name == "__init__.py":
                continue
            found += [f"{_rel(name)}:{node.lineno}: {alias.name} from {source} (defined in "
                      f"{imported[source][alias.name]})" for alias in node.names if alias.name in imported[source]]
    assert found == []


def _dspy_imports(tree: ast.Module):
    """(line, module, name or None) for every import of DSPy in `tree`, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "dspy")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "dspy":
            yield from ((node.lineno, node.module, a.name) for a in node.names)


def _private_dspy(module: str, name: str | None) -> bool:
    if any(part.startswith("_") for part in module.split(".")) or (name or "").startswith("_"):
        return True
    return module not in PUBLIC_DSPY


def test_private_dspy_imports_only_behind_the_door():
    found = [f"{_rel(name)}:{line}: {module}{'' if item is None else ' import ' + item}"
             for name, (_path, tree) in SOURCES.items() if name != DOOR
             for line, module, item in _dspy_imports(tree) if _private_dspy(module, item)]
    assert found == []
    assert any(_private_dspy(m, i) for _line, m, i in _dspy_imports(SOURCES[DOOR][1]))  # the rule sees them
    private = re.compile(r"_get_litellm|dspy\._vendor|_vendor\.lm15|_is_openai_reasoning_model|dspy\.clients\.")
    named = [_rel(n) for n, (path, _tree) in SOURCES.items() if private.search(path.read_text(encoding="utf-8"))]
    assert named == [_rel(DOOR)]


def dspy_patches(tree: ast.Module) -> list[str]:
    """Assignments to an attribute of DSPy or of a module imported from it (``dspy.x = ...``,
    ``utils.x = ...`` after ``from dspy.adapters import utils``, ``setattr(dspy..., ...)``), as
    ``line: target``."""
    bound = {"dspy"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("dspy"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dspy"):
            bound.update(a.asname or a.name for a in node.names if a.name.islower())
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{node.lineno}: {ast.unparse(target)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and node.args and ast.unparse(node.args[0]).split(".")[0] in bound):
            found.append(f"{node.lineno}: {ast.unparse(node.args[0])}")
    return found


def test_patch_finder_finds_patches():
    tree = ast.parse("import dspy\nfrom dspy.adapters import utils\nutils.serialize_for_json = f\n"
                     "dspy.cache = None\nsetattr(dspy.settings, 'x', 1)\nlm = dspy.LM('m')\nlm.model = 'n'\n")
    assert dspy_patches(tree) == ["3: utils.serialize_for_json", "4: dspy.cache", "5: dspy.settings"]


def test_dspy_is_patched_only_behind_the_door():
    found = [f"{_rel(name)}:{patch}" for name, (_path, tree) in SOURCES.items() if name != DOOR
             for patch in dspy_patches(tree)]
    assert found == []
    assert dspy_patches(SOURCES[DOOR][1])  # the door's patches are seen by the rule


def test_no_click_context_side_channel():
    found = [f"{_rel(name)}: {word}" for name, (path, _tree) in SOURCES.items()
             for word in ("ctx.meta", "get_current_context") if word in path.read_text(encoding="utf-8")]
    assert found == []


#: A command-line flag as messages write it: two dashes, then a lowercase word ("--max-cost").
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Modules outside cli/ that are command-line front ends of their own: the pytest plugin
#: declares pytest's options (``--bineval-lm``), and the llama.cpp server module builds
#: ``python -m llama_cpp.server``'s command line (``--model``, ``--port``): neither are bineval's flags.
OWN_COMMAND_LINE = {"binaryeval_dspy.pytest_plugin", "binaryeval_dspy.lm.llama_server"}


def flags_in_strings(tree: ast.Module) -> list[str]:
    """``"<line>: <flag>"`` for each flag in a string constant of `tree`, docstrings of the
    module, classes and functions left out (comments are not in the tree)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [f"{node.lineno}: {flag}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for flag in FLAG.findall(node.value)]


def test_flag_finder_skips_docstrings_and_comments():
    tree = ast.parse('"""Use --out."""\ndef f():\n    """--lm is fine here."""\n    # --timeout\n'
                     '    raise ValueError(f"bad --max-cost {x}", "a-b --", "x--y")\n')
    assert flags_in_strings(tree) == ["5: --max-cost"]


def test_library_messages_name_no_cli_flags():
    found = [f"{_rel(name)}:{flag}" for name, (_path, tree) in SOURCES.items()
             if not name.startswith("binaryeval_dspy.cli") and name not in OWN_COMMAND_LINE
             for flag in flags_in_strings(tree)]
    assert found == []
