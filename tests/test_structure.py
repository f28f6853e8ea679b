"""The project's structure: the module table, one definition per closed set, shared test helpers."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _listed() -> list[str]:
    """The paths in the first column of the module table."""
    return re.findall(r"^\| `([^`]+)` \|", ARCHITECTURE.read_text(encoding="utf-8"), re.M)


def test_architecture_lists_every_module_of_the_package():
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "drover").rglob("*.py")}
    missing = sorted(modules - set(_listed()))
    assert not missing, f"docs/architecture.md has no row for {', '.join(missing)}"


def test_architecture_lists_nothing_that_is_absent():
    listed = _listed()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    absent = [path for path in listed if not (ROOT / path).exists()]
    assert not absent, f"docs/architecture.md lists {', '.join(absent)}, which does not exist"


def test_each_closed_set_is_the_vocabulary_one():
    from functools import partial

    import click

    from drover.loop import configchecks, runs
    from drover.cli import main as cli
    from drover import config, prompts as templates, vocabulary
    from drover.prompts import fields
    from drover.ledger import depstate, writes
    from drover.trackers import base

    assert config.SLOTS is runs.LAUNCH_SLOTS is templates.SLOTS is configchecks.SLOTS is vocabulary.SLOTS
    assert fields.SLOTS is vocabulary.TEMPLATE_SLOTS
    assert config.GUIDANCE_LEVELS is vocabulary.GUIDANCE_LEVELS
    assert depstate.LEVELS is writes.LEVELS is vocabulary.LEVELS
    assert writes.DISPOSITIONS is base.DISPOSITIONS is vocabulary.DISPOSITIONS
    ctx = click.Context(cli.cli)
    choices = {(command.name, param.name): tuple(param.type.choices)
               for command in map(partial(cli.cli.get_command, ctx), cli.cli.list_commands(ctx))
               for param in command.params
               if hasattr(param.type, "choices") and param.name in ("level", "disposition", "slot", "guidance")}
    assert choices == {
        ("audit", "level"): vocabulary.LEVELS,
        ("dispose", "disposition"): vocabulary.DISPOSITIONS,
        ("prompt", "slot"): vocabulary.TEMPLATE_SLOTS,
        ("prompt", "guidance"): vocabulary.GUIDANCE_LEVELS,
        ("override", "slot"): vocabulary.SLOTS,
    }


def test_tests_share_helpers_through_helpers_py_not_each_other():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(from\s+(tests\.)?test_\w*\s+import|import\s+(tests\.)?test_)", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "import shared helpers from tests/helpers.py:\n" + "\n".join(offenders)


def test_no_module_runs_git_but_the_git_package():
    # demo.py plays an outside agent in a scratch repository; agents.py and the github tracker
    # run other programs, never git. Inside drover/git/, run.py alone starts a process.
    offenders = []
    for path in sorted((ROOT / "drover").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel.startswith("drover/git/"):
            if rel != "drover/git/run.py" and re.search(r"\bimport subprocess\b|\bposix_spawn|\bos\.exec|\bfork\(", text):
                offenders.append(rel)
        elif rel != "drover/cli/demo.py" and re.search(r"""["']git["']\s*,""", text):
            offenders.append(rel)
    assert not offenders, f"git is run outside drover/git/run.py in {', '.join(offenders)}"


# --- the layers: docs/architecture.md's table, held against every import of the package -------

def _layers() -> dict[str, int]:
    """Each top-level module or package of drover/ -> its layer, from docs/architecture.md."""
    layers: dict[str, int] = {}
    for number, cells in re.findall(r"^\| (\d+) \| ([^|]+) \|", ARCHITECTURE.read_text(encoding="utf-8"), re.M):
        for path in re.findall(r"`drover/(\w+)(?:\.py|/)`", cells):
            layers[path] = int(number)
    return layers


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Every drover module -> the drover modules it imports, wherever in the file (inside functions
    and `if TYPE_CHECKING:` too: an import the type checker needs is a dependency all the same)."""
    import ast

    modules = {_module_name(path): path for path in (ROOT / "drover").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("drover.") and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def _unit(module: str) -> str:
    return module.split(".")[1]


def test_every_top_level_module_and_package_has_a_layer():
    top = {path.stem if path.is_file() else path.name for path in (ROOT / "drover").iterdir()
           if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()}
    layers = _layers()
    assert top == set(layers), f"docs/architecture.md's layers: missing {sorted(top - set(layers))}, " \
                               f"absent {sorted(set(layers) - top)}"
    assert len(top) <= 12, f"{len(top)} modules and packages at the top of drover/: {sorted(top)}"


def test_imports_run_only_downward():
    layers = _layers()
    upward = [f"{source} imports {target}" for source, targets in sorted(_imports().items()) for target in sorted(targets)
              if _unit(source) != _unit(target) and layers[_unit(target)] >= layers[_unit(source)]]
    assert not upward, "an import runs up or across a layer (docs/architecture.md):\n" + "\n".join(upward)


def test_no_import_circle():
    graph = _imports()
    done: set[str] = set()

    def circle_from(start: str) -> list[str]:
        path: list[str] = []
        on_path: set[str] = set()

        def visit(node: str) -> list[str]:
            if node in on_path:
                return path[path.index(node):] + [node]
            if node in done:
                return []
            path.append(node)
            on_path.add(node)
            for target in sorted(graph.get(node, ())):
                found = visit(target)
                if found:
                    return found
            path.pop()
            on_path.discard(node)
            done.add(node)
            return []

        return visit(start)

    for module in sorted(graph):
        circle = circle_from(module)
        assert not circle, "import circle: " + " -> ".join(circle)


def test_no_module_is_over_500_lines():
    long = {path.relative_to(ROOT).as_posix(): count for path in (ROOT / "drover").rglob("*.py")
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"modules over 500 lines: {long}"


def test_every_test_docs_security_md_names_as_a_proof_exists():
    named = set(re.findall(r"`(test_\w+)`", (ROOT / "docs" / "security.md").read_text(encoding="utf-8")))
    defined = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    assert named, "docs/security.md names no test"
    missing = sorted(named - defined)
    assert not missing, f"docs/security.md names tests that do not exist: {', '.join(missing)}"


def test_no_docstring_holds_a_lone_surrogate():
    """A docstring with a lone surrogate (`"\\udc80"` written unescaped) compiles on 3.11 and not on
    3.13, which cleans docstrings as UTF-8 (`make test-pythons` failed on one): write it `\\\\udc80`."""
    import ast

    held = []
    for path in sorted((ROOT / "drover").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                if re.search("[\ud800-\udfff]", doc):
                    held.append(f"{path.relative_to(ROOT)}:{node.body[0].lineno}")
    assert held == []
