"""The import graph of both packages: no cycle among our modules, and the data model a leaf.

Every import counts: at the top, under ``TYPE_CHECKING`` and inside functions (a cycle through a lazy
import is still two modules that need each other), and importing ``a.b.c`` counts ``a.b``'s
``__init__`` too, as Python runs it, unless the importer is inside ``a.b`` already.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

PACKAGES = ("scrapy_zhdedup", "es_plugin")


def our_modules() -> dict[str, Path]:
    """Dotted name → file, for every module of both packages (a package is its ``__init__.py``)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _targets(name: str, path: Path) -> set[str]:
    """Every dotted name an import of the module may load: the module, and each imported name as a submodule."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of ours that importing it runs first."""
    modules = our_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target in _targets(name, path):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                loaded = ".".join(parts[:i])
                inside = name == loaded or name.startswith(loaded + ".")  # its own package is being imported already
                if loaded in modules and not inside:
                    edges.add(loaded)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_data_model_imports_nothing_of_ours() -> None:
    assert import_graph()["scrapy_zhdedup.model"] == set()


def _edges(source: str, target: str) -> set[tuple[str, str]]:
    """The imports from modules under ``source`` of modules under ``target``."""
    return {(name, loaded) for name, edges in import_graph().items() if name.startswith(source + ".")
            for loaded in edges if loaded.startswith(target + ".")}


def test_es_plugin_uses_the_engine_not_the_embedded_store() -> None:
    """The Elasticsearch side shares the engine and its utilities (files, the Bloom filter, the fingerprint
    settings), never the embedded store; ``es dedup-index`` judges against the engine's memory of judged
    documents (``memory/``), the embedded store's too, so that an index deduplicated there agrees with
    ``zhdedup scan``; that memory knows nothing of the directory the embedded store keeps it in."""
    assert _edges("es_plugin", "scrapy_zhdedup.store") == set()
    assert ("es_plugin.commands.dedup_index", "scrapy_zhdedup.memory.store") in _edges("es_plugin", "scrapy_zhdedup.memory")
    assert _edges("scrapy_zhdedup.memory", "scrapy_zhdedup.store") == set()


def test_the_report_does_not_reach_into_the_command_line() -> None:
    assert _edges("scrapy_zhdedup.report", "scrapy_zhdedup.cli") == set()


def test_tests_import_shared_helpers_only_from_support() -> None:
    """One way to share a test helper: ``tests/support/``, never another test module."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names
                      if name.startswith("tests.") and not name.startswith("tests.support")]
    assert found == []

if __name__ == "__main__":
    for group in cycles(import_graph()):
        print(" ".join(group))
