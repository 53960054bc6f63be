"""The package's layout rules (issues 22 and 28), read from the source with `ast`, nothing imported.

* the packages keep a declared order (`ORDER`, lowest first): a package imports only packages
  of lower tiers. Every import counts: module level, inside functions and classes,
  ``importlib.import_module`` / ``__import__`` of a constant name, and a module's dotted name
  in a string (the lazy-export tables of the package ``__init__`` files, the CLI's command
  table); imports under ``if TYPE_CHECKING:`` never run and do not count;
* no import cycles among the package's modules (module-level imports; imports under
  ``if TYPE_CHECKING:`` and inside functions are not counted);
* no module imports another module's underscore names;
* no module imports a name through a module that only re-imports it (a re-export shim);
  package ``__init__`` files, the documented public lists, are exempt;
* DSPy's private modules (``dspy.clients``, ``dspy._vendor``, any ``_name``) are imported
  (also through ``importlib``), DSPy's private attributes read (``lm_module._private``), and
  DSPy's modules patched (also a module bound by ``importlib.import_module``), only in
  `binaryeval_dspy.lm.dspy_internals`;
* no click ``ctx.meta`` side channel for settings;
* library code (outside ``binaryeval_dspy/cli/``) names settings and parameters in its
  messages, never command-line flags (``--max-cost``): the CLI translates names to flags
  in one place (`binaryeval_dspy.cli.error_handling.with_flag_names`).

Each rule is a function of the parsed sources (`load_sources`), checked on the package, and
checked on a copy of the package with one violation planted (the ``test_*_finds_*`` tests),
so that a rule that stops seeing its violations fails.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "binaryeval_dspy"
TOP = "binaryeval_dspy"
DOOR = "binaryeval_dspy.lm.dspy_internals"

#: The package order, lowest first: a package (a sub-package or a top-level module of
#: `binaryeval_dspy`) imports only packages of lower tiers, never one of its own tier or above.
#: The package's ``__init__`` (the public list) may import anything.
ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "_lazy"),
    ("extras",),
    ("checks", "signatures", "metrics", "render"),
    ("schemas",),
    ("analysis", "ifbench", "scoring", "verdict_rules", "panels"),
    ("data",),
    ("lm",),
    ("cost",),
    ("settings",),
    ("engines",),
    ("programs",),
    ("runs",),
    ("meta_eval",),
    ("optimizers",),
    ("comparison",),
    ("reports",),
    ("cli",),
    ("pytest_hooks",),
    ("pytest_plugin",),
)
TIER = {package: tier for tier, packages in enumerate(ORDER) for package in packages}

#: DSPy modules whose public names may be imported anywhere: the top level and the packages
#: DSPy documents (``dspy.utils.__all__`` lists ``exceptions``).
PUBLIC_DSPY = {"dspy", "dspy.adapters", "dspy.evaluate", "dspy.lm15", "dspy.predict", "dspy.primitives",
               "dspy.signatures", "dspy.streaming", "dspy.teleprompt", "dspy.utils", "dspy.utils.exceptions"}

#: The calls that import the module named by their first argument.
IMPORT_CALLS = {"importlib.import_module", "import_module", "__import__"}

Sources = dict[str, tuple[Path, ast.Module]]


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def load_sources(package: Path = PACKAGE) -> Sources:
    """module name -> (path, parsed tree) for every ``.py`` file of `package` (a checkout's
    ``binaryeval_dspy/`` folder, or a copy of it)."""
    return {_module_name(p, package.parent): (p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p)))
            for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts}


SOURCES = load_sources()


def _rel(sources: Sources, name: str) -> str:
    path = sources[name][0]
    return path.relative_to(path.parents[len(name.split(".")) - (path.name != "__init__.py")]).as_posix()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """The nodes inside the body of an ``if TYPE_CHECKING:`` (its ``else`` runs, and counts)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                hidden.update(id(n) for n in ast.walk(child))
    return hidden


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _imported_by_call(node: ast.AST) -> str | None:
    """The module that ``importlib.import_module("x")`` / ``__import__("x")`` imports, if constant."""
    if (isinstance(node, ast.Call) and ast.unparse(node.func) in IMPORT_CALLS and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _module_level_imports(body: list[ast.stmt]):
    """Imports run when the module is imported: top level, and inside top-level if / try blocks
    (except ``if TYPE_CHECKING:``); not those inside functions or classes."""
    for node in body:
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def import_graph(sources: Sources = SOURCES) -> dict[str, set[str]]:
    """module -> the package modules its module-level imports load (``from pkg import sub`` is an
    edge to ``pkg.sub``; the parent packages Python runs first are not counted)."""
    graph: dict[str, set[str]] = {}
    for name, (_path, tree) in sources.items():
        edges: set[str] = set()
        for node in _module_level_imports(tree.body):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in sources)
            elif node.level == 0 and node.module and node.module.startswith(TOP):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in sources else node.module)
        edges.discard(name)
        graph[name] = edges & set(sources)
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


def _root_names(sources: Sources) -> set[str]:
    """Names the package's ``__init__`` itself assigns (``__version__``): importing them loads nothing else."""
    tree = sources[TOP][1]
    return {target.id for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)}


def module_imports(sources: Sources, name: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every package module that module `name` imports when it runs:
    ``import`` / ``from ... import`` at any depth (relative ones resolved), a constant
    ``importlib.import_module`` / ``__import__``, and a string that is a module's dotted name
    (a lazy-export table, the CLI's command table), docstrings and ``if TYPE_CHECKING:``
    blocks left out. ``from binaryeval_dspy import X`` of a lazy export is an import of the
    package ``__init__``; of a name the ``__init__`` assigns itself, of nothing."""
    path, tree = sources[name]
    hidden = _type_checking_nodes(tree) | _docstrings(tree)
    own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    root_names = _root_names(sources)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == TOP]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            if module.split(".")[0] != TOP:
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in sources:
                    found.append((node.lineno, sub))
                elif not (module == TOP and alias.name in root_names):
                    found.append((node.lineno, module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in sources \
                and node.value != TOP:
            found.append((node.lineno, node.value))
        elif (target := _imported_by_call(node)) is not None and target.split(".")[0] == TOP:
            found.append((node.lineno, target))
    return found


def package_of(module: str) -> str:
    """The package a module belongs to: ``binaryeval_dspy.lm.calls`` -> ``lm``,
    ``binaryeval_dspy.errors`` -> ``errors``, ``binaryeval_dspy`` -> ``binaryeval_dspy``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else TOP


def undeclared_packages(sources: Sources = SOURCES) -> list[str]:
    """Packages of the source that `ORDER` does not place, and packages it places that do not exist."""
    packages = {package_of(name) for name in sources} - {TOP}
    return sorted(packages ^ set(TIER))


def order_violations(sources: Sources = SOURCES) -> list[str]:
    """``"<file>:<line>: <package> -> <package> (<module>)"`` for each import of a package
    of the same tier or above (`ORDER`); the package ``__init__`` may import anything."""
    found = []
    for name in sources:
        source = package_of(name)
        if source == TOP:
            continue
        for line, module in module_imports(sources, name):
            target = package_of(module)
            if target != source and (target == TOP or TIER.get(target, -1) >= TIER.get(source, -1)):
                found.append((_rel(sources, name), line, f"{source} -> {target} ({module})"))
    return [f"{path}:{line}: {what}" for path, line, what in sorted(set(found))]


def test_every_package_has_its_place_in_the_order():
    assert undeclared_packages() == []


def test_the_documented_order_is_the_one_kept():
    """docs/development.md's table of the package order (``| row | packages |``) is `ORDER`."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (`.+`) \|$", text.split("| row | packages |", 1)[1], flags=re.MULTILINE)
    assert [tuple(re.findall(r"`(\w+)`", packages)) for _row, packages in rows] == list(ORDER)
    assert [int(row) for row, _packages in rows] == list(range(1, len(ORDER) + 1))


def test_packages_import_only_lower_packages():
    assert order_violations() == []


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
                and (node.module or "").startswith(TOP)):
            yield node


def underscore_imports(sources: Sources = SOURCES) -> list[str]:
    """Imports of another module's underscore names (``from m import _helper``)."""
    return [f"{_rel(sources, name)}:{node.lineno}: {alias.name} from {node.module}"
            for name, (_path, tree) in sources.items()
            for node in _package_imports(tree) for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_underscore_names():
    assert underscore_imports() == []


def shim_imports(sources: Sources = SOURCES) -> list[str]:
    """Names imported from a module (not a package ``__init__``) that only re-imports them."""
    imported: dict[str, dict[str, str]] = {}  # module -> {name it imports at top level: from where}
    for name, (_path, tree) in sources.items():
        imported[name] = {alias.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
                          and (node.module or "").startswith(TOP) for alias in node.names
                          if alias.asname is None}
    found = []
    for name, (_path, tree) in sources.items():
        for node in _package_imports(tree):
            source = node.module
            if source not in sources or sources[source][0].name == "__init__.py":
                continue
            found += [f"{_rel(sources, name)}:{node.lineno}: {alias.name} from {source} (defined in "
                      f"{imported[source][alias.name]})" for alias in node.names if alias.name in imported[source]]
    return found


def test_names_are_imported_from_the_module_that_defines_them():
    assert shim_imports() == []


def _dspy_imports(tree: ast.Module):
    """(line, module, name or None) for every import of DSPy in `tree`, at any depth, also
    through a constant ``importlib.import_module`` / ``__import__``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "dspy")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "dspy":
            yield from ((node.lineno, node.module, a.name) for a in node.names)
        elif (target := _imported_by_call(node)) is not None and target.split(".")[0] == "dspy":
            yield node.lineno, target, None


def _private_dspy(module: str, name: str | None) -> bool:
    if any(part.startswith("_") for part in module.split(".")) or (name or "").startswith("_"):
        return True
    return module not in PUBLIC_DSPY


def _dspy_bound(tree: ast.Module) -> set[str]:
    """Names bound to DSPy or to something imported from it: ``dspy``, the alias of
    ``import dspy.x as m``, the lowercase names of ``from dspy.x import m``, and a name
    assigned ``importlib.import_module("dspy.x")``."""
    bound = {"dspy"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "dspy")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dspy":
            bound.update(a.asname or a.name for a in node.names if a.name.islower())
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            target = _imported_by_call(node.value)
            if target is not None and target.split(".")[0] == "dspy":
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound.update(t.id for t in targets if isinstance(t, ast.Name))
    return bound


def _rooted_in_dspy(node: ast.expr, bound: set[str]) -> bool:
    """`node` is ``name.a.b`` with `name` bound to DSPy, or ``importlib.import_module("dspy...").a``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in bound
    target = _imported_by_call(node)
    return target is not None and target.split(".")[0] == "dspy"


def _private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def private_dspy_reads(tree: ast.Module) -> list[str]:
    """Reads of DSPy's underscore attributes (``lm_module._private``, ``getattr(dspy.x, "_y")``),
    as ``line: expression``."""
    bound = _dspy_bound(tree)
    found = []
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and _private(node.attr) and _rooted_in_dspy(node.value, bound)
        by_name = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in ("getattr", "hasattr") and len(node.args) > 1
                   and isinstance(node.args[1], ast.Constant) and _private(node.args[1].value)
                   and _rooted_in_dspy(node.args[0], bound))
        if attribute or by_name:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


#: DSPy's private names as source text (a dotted path in a string counts too).
PRIVATE_DSPY_TEXT = re.compile(r"_get_litellm|dspy\._vendor|_vendor\.lm15|_is_openai_reasoning_model|dspy\.clients\.")


def private_dspy_uses(sources: Sources = SOURCES) -> list[str]:
    """Outside the door: imports of DSPy's private modules and names, reads of its underscore
    attributes, and its private names in the source text."""
    found = []
    for name, (path, tree) in sources.items():
        if name == DOOR:
            continue
        found += [f"{_rel(sources, name)}:{line}: {module}{'' if item is None else ' import ' + item}"
                  for line, module, item in _dspy_imports(tree) if _private_dspy(module, item)]
        found += [f"{_rel(sources, name)}:{read}" for read in private_dspy_reads(tree)]
        if match := PRIVATE_DSPY_TEXT.search(path.read_text(encoding="utf-8")):
            found.append(f"{_rel(sources, name)}: names {match.group()}")
    return found


def test_private_dspy_imports_only_behind_the_door():
    assert private_dspy_uses() == []
    door = SOURCES[DOOR][1]
    assert any(_private_dspy(m, i) for _line, m, i in _dspy_imports(door))  # the rule sees them
    assert PRIVATE_DSPY_TEXT.search(SOURCES[DOOR][0].read_text(encoding="utf-8"))


def dspy_patches(tree: ast.Module) -> list[str]:
    """Assignments to an attribute of DSPy or of a module imported from it (``dspy.x = ...``,
    ``utils.x = ...`` after ``from dspy.adapters import utils``, ``m.x = ...`` after
    ``m = importlib.import_module("dspy.x")``, ``setattr(dspy..., ...)``), as ``line: target``."""
    bound = _dspy_bound(tree)
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else [node.targets[0]] if isinstance(node, ast.Delete) else []
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _rooted_in_dspy(target.value, bound):
                found.append(f"{node.lineno}: {ast.unparse(target)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                and node.args and _rooted_in_dspy(node.args[0], bound)):
            found.append(f"{node.lineno}: {ast.unparse(node.args[0])}")
    return found


def test_patch_finder_finds_patches():
    tree = ast.parse("import dspy\nfrom dspy.adapters import utils\nutils.serialize_for_json = f\n"
                     "dspy.cache = None\nsetattr(dspy.settings, 'x', 1)\nlm = dspy.LM('m')\nlm.model = 'n'\n")
    assert dspy_patches(tree) == ["3: utils.serialize_for_json", "4: dspy.cache", "5: dspy.settings"]


def patches_outside_the_door(sources: Sources = SOURCES) -> list[str]:
    """DSPy patches (`dspy_patches`) in any module but the door."""
    return [f"{_rel(sources, name)}:{patch}" for name, (_path, tree) in sources.items() if name != DOOR
            for patch in dspy_patches(tree)]


def test_dspy_is_patched_only_behind_the_door():
    assert patches_outside_the_door() == []
    assert dspy_patches(SOURCES[DOOR][1])  # the door's patches are seen by the rule


def click_side_channels(sources: Sources = SOURCES) -> list[str]:
    """Modules that use click's ``ctx.meta`` / ``get_current_context``."""
    return [f"{_rel(sources, name)}: {word}" for name, (path, _tree) in sources.items()
            for word in ("ctx.meta", "get_current_context") if word in path.read_text(encoding="utf-8")]


def test_no_click_context_side_channel():
    assert click_side_channels() == []


#: A command-line flag as messages write it: two dashes, then a lowercase word ("--max-cost").
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Modules outside cli/ that are command-line front ends of their own: the pytest plugin
#: declares pytest's options (``--bineval-lm``), and the llama.cpp server module builds
#: ``python -m llama_cpp.server``'s command line (``--model``, ``--port``): neither are bineval's flags.
OWN_COMMAND_LINE = {"binaryeval_dspy.pytest_plugin", "binaryeval_dspy.lm.llama_server"}


def flags_in_strings(tree: ast.Module) -> list[str]:
    """``"<line>: <flag>"`` for each flag in a string constant of `tree`, docstrings of the
    module, classes and functions left out (comments are not in the tree)."""
    docstrings = _docstrings(tree)
    return [f"{node.lineno}: {flag}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for flag in FLAG.findall(node.value)]


def test_flag_finder_skips_docstrings_and_comments():
    tree = ast.parse('"""Use --out."""\ndef f():\n    """--lm is fine here."""\n    # --timeout\n'
                     '    raise ValueError(f"bad --max-cost {x}", "a-b --", "x--y")\n')
    assert flags_in_strings(tree) == ["5: --max-cost"]


def library_flags(sources: Sources = SOURCES) -> list[str]:
    """Command-line flags in library strings (outside ``cli/`` and `OWN_COMMAND_LINE`)."""
    return [f"{_rel(sources, name)}:{flag}" for name, (_path, tree) in sources.items()
            if not name.startswith("binaryeval_dspy.cli") and name not in OWN_COMMAND_LINE
            for flag in flags_in_strings(tree)]


def test_library_messages_name_no_cli_flags():
    assert library_flags() == []


# --- each rule finds a violation planted on a copy of the package ---------------------------


@pytest.fixture
def plant(tmp_path):
    """``plant(file, code, old=None)``: copy the package's Python files to `tmp_path` (once per
    test), append `code` to `file` (relative to the package; a new file if it does not exist)
    or put it in place of `old`, and return the copy's sources. Files left as they were keep
    the trees parsed from the package (the same text); the planted file is parsed again."""
    copy = tmp_path / TOP
    shutil.copytree(PACKAGE, copy, ignore=lambda folder, names: [
        n for n in names if n == "__pycache__" or (not n.endswith(".py") and not (Path(folder) / n).is_dir())])
    sources: Sources = {name: (copy / path.relative_to(PACKAGE), tree) for name, (path, tree) in SOURCES.items()}

    def planted(file: str, code: str, old: str | None = None) -> Sources:
        path = copy / file
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if old is None:
            text += "\n" + code
        else:
            assert old in text, f"{old!r} is not in {file}"
            text = text.replace(old, code, 1)
        path.write_text(text, encoding="utf-8")
        sources[_module_name(path, tmp_path)] = (path, ast.parse(text, filename=str(path)))
        return dict(sorted(sources.items()))

    return planted


def _line(sources: Sources, module: str, text: str) -> int:
    """The number of the last line of `module` that holds `text`."""
    lines = sources[module][0].read_text(encoding="utf-8").splitlines()
    return max(n for n, line in enumerate(lines, 1) if text in line)


def test_order_rule_finds_a_function_level_import(plant):
    sources = plant("schemas/question_set.py", "def leak():\n    from binaryeval_dspy.cli.main import cli\n\n"
                    "    return cli\n")
    line = _line(sources, "binaryeval_dspy.schemas.question_set", "import cli")
    assert order_violations(sources) == [
        f"binaryeval_dspy/schemas/question_set.py:{line}: schemas -> cli (binaryeval_dspy.cli.main)"]


def test_order_rule_finds_importlib_and_dunder_import(plant):
    sources = plant("schemas/verdict.py", "import importlib\n\n\ndef leak():\n"
                    "    importlib.import_module('binaryeval_dspy.runs.run_directory')\n"
                    "    return __import__('binaryeval_dspy.engines')\n")
    module = "binaryeval_dspy.schemas.verdict"
    assert order_violations(sources) == [
        (f"binaryeval_dspy/schemas/verdict.py:{_line(sources, module, 'import_module(')}: schemas -> runs "
        "(binaryeval_dspy.runs.run_directory)"),
        (f"binaryeval_dspy/schemas/verdict.py:{_line(sources, module, '__import__(')}: schemas -> engines "
        "(binaryeval_dspy.engines)")]


def test_order_rule_finds_a_lazy_export_upwards(plant):
    sources = plant("lm/__init__.py", '_EXPORTS: dict[str, str] = {\n    **dict.fromkeys(["CostBudget"], '
                    '"binaryeval_dspy.cost.budget"),', old="_EXPORTS: dict[str, str] = {")
    line = _line(sources, "binaryeval_dspy.lm", "cost.budget")
    assert order_violations(sources) == [f"binaryeval_dspy/lm/__init__.py:{line}: lm -> cost (binaryeval_dspy.cost.budget)"]


def test_order_rule_finds_same_tier_relative_and_package_root_imports(plant):
    plant("scoring.py", "def peer():\n    from binaryeval_dspy.panels import PANEL_RULES\n")
    plant("lm/calls.py", "def relative():\n    from ..engines import base\n")
    sources = plant("checks/registry.py", "def root():\n    from binaryeval_dspy import BinEval\n"
                    "    from binaryeval_dspy import __version__\n")
    assert [found.split(": ", 1)[1] for found in order_violations(sources)] == [
        "checks -> binaryeval_dspy (binaryeval_dspy)", "lm -> engines (binaryeval_dspy.engines.base)",
        "scoring -> panels (binaryeval_dspy.panels)"]


def test_order_rule_leaves_out_type_checking_and_docstrings(plant):
    sources = plant("schemas/question_set.py", "if TYPE_CHECKING:\n    from binaryeval_dspy.cli.main import cli\n"
                    "else:\n    from binaryeval_dspy.runs import evaluation\n\n\n"
                    "def f():\n    \"\"\"binaryeval_dspy.cli.main\"\"\"\n")
    line = _line(sources, "binaryeval_dspy.schemas.question_set", "import evaluation")
    assert order_violations(sources) == [
        f"binaryeval_dspy/schemas/question_set.py:{line}: schemas -> runs (binaryeval_dspy.runs.evaluation)"]


def test_every_package_rule_finds_an_unplaced_package(plant):
    sources = plant("caching.py", "CACHE = {}\n")  # a new top-level module that ORDER does not place
    assert undeclared_packages(sources) == ["caching"]


def test_cycle_rule_finds_a_planted_cycle(plant):
    sources = plant("errors.py", "from binaryeval_dspy.extras import missing_extra  # noqa: E402\n")
    assert import_cycles(import_graph(sources)) == [["binaryeval_dspy.errors", "binaryeval_dspy.extras"]]


def test_underscore_rule_finds_a_function_level_import(plant):
    sources = plant("runs/evaluation.py", "def peek():\n    from binaryeval_dspy.lm.calls import _private\n")
    line = _line(sources, "binaryeval_dspy.runs.evaluation", "import _private")
    assert underscore_imports(sources) == [
        f"binaryeval_dspy/runs/evaluation.py:{line}: _private from binaryeval_dspy.lm.calls"]


def test_shim_rule_finds_a_name_imported_through_its_importer(plant):
    sources = plant("runs/evaluation.py", "def usage():\n    from binaryeval_dspy.cost.budget import Usage\n")
    line = _line(sources, "binaryeval_dspy.runs.evaluation", "budget import Usage")
    assert shim_imports(sources) == [(f"binaryeval_dspy/runs/evaluation.py:{line}: Usage from binaryeval_dspy."
                                     "cost.budget (defined in binaryeval_dspy.schemas.item_result)")]


def test_private_dspy_rule_finds_a_private_module_and_its_attribute(plant):
    sources = plant("engines/threads.py", "import dspy.clients.lm as dspy_lm\n\n\ndef f():\n"
                    "    return dspy_lm._private\n")
    module = "binaryeval_dspy.engines.threads"
    assert private_dspy_uses(sources) == [
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, 'import dspy.clients')}: dspy.clients.lm",
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '._private')}: dspy_lm._private",
        "binaryeval_dspy/engines/threads.py: names dspy.clients."]


def test_private_dspy_rule_finds_private_reads_through_public_modules(plant):
    sources = plant("engines/threads.py", "from dspy import clients\nfrom dspy.adapters import json_adapter\n\n\n"
                    "def f():\n    clients.lm._lm_state\n"
                    "    json_adapter._structured_format\n    return getattr(dspy.settings, '_lock')\n")
    module = "binaryeval_dspy.engines.threads"
    assert private_dspy_uses(sources) == [
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '_lm_state')}: clients.lm._lm_state",
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '_structured')}: json_adapter._structured_format",
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '_lock')}: getattr(dspy.settings, '_lock')"]


def test_private_dspy_rule_finds_an_importlib_import(plant):
    sources = plant("engines/threads.py", "def f():\n    import importlib\n\n"
                    "    return importlib.import_module('dspy.adapters._private')\n")
    line = _line(sources, "binaryeval_dspy.engines.threads", "import_module(")
    assert private_dspy_uses(sources) == [f"binaryeval_dspy/engines/threads.py:{line}: dspy.adapters._private"]


def test_patch_rule_finds_a_patch_through_importlib(plant):
    sources = plant("engines/threads.py", "def f():\n    import importlib\n\n"
                    "    json_adapter = importlib.import_module('dspy.adapters.json_adapter')\n"
                    "    json_adapter.x = 1\n    importlib.import_module('dspy.adapters').y = 2\n"
                    "    setattr(json_adapter, 'z', 3)\n")
    module = "binaryeval_dspy.engines.threads"
    assert patches_outside_the_door(sources) == [
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '.x = 1')}: json_adapter.x",
        (f"binaryeval_dspy/engines/threads.py:{_line(sources, module, '.y = 2')}: "
        "importlib.import_module('dspy.adapters').y"),
        f"binaryeval_dspy/engines/threads.py:{_line(sources, module, 'setattr(')}: json_adapter"]


def test_click_rule_finds_a_context_side_channel(plant):
    sources = plant("cli/options.py", "def settings_of(ctx):\n    return ctx.meta\n")
    assert click_side_channels(sources) == ["binaryeval_dspy/cli/options.py: ctx.meta"]


def test_flag_rule_finds_a_flag_in_a_library_message(plant):
    sources = plant("runs/evaluation.py", "def refuse():\n    raise ValueError('lower --max-cost')\n")
    line = _line(sources, "binaryeval_dspy.runs.evaluation", "lower --max-cost")
    assert library_flags(sources) == [f"binaryeval_dspy/runs/evaluation.py:{line}: --max-cost"]
