"""No import circle between the package's modules: the layers' contract (import-linter) holds between
folders, this holds inside them too (a module reached again from itself, ``if TYPE_CHECKING`` imports
counted: a circle of types is still a circle a reader walks)."""

from __future__ import annotations

import grimp

PACKAGES = ("messages", "core", "actors", "driver", "bridge", "mcp_gateway", "kitsune")


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                circle = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    circle.append(member)
                    if member == module:
                        break
                if len(circle) > 1:
                    found.append(sorted(circle))
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert _circles(grimp.build_graph(*PACKAGES)) == []


def test_the_search_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a.c", imported="a.d")
    assert _circles(graph) == [["a.b", "a.c"]]
