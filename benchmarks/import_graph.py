"""The shape of a package's import graph, printed: its modules, the loose ones in its root, its levels and its circles.

    python -m benchmarks.import_graph autograder

An import inside a function counts, as for import-linter (whose graph, grimp's, this reads). A module's level is
the length of the longest chain of imports below it within the package (a module that imports none of the
package's modules is on level 1), each circle counted as one module; the graph's levels are its highest. A
package's ``__init__`` counts as a module, its folder is not one.
"""

from __future__ import annotations

import argparse
import sys

import grimp
import networkx as nx


def graph_of(package: str) -> nx.DiGraph:
    """The package's modules, each with an edge to every module of the package it imports."""
    imports = grimp.build_graph(package, cache_dir=None)
    modules = {m for m in imports.modules if m == package or m.startswith(package + ".")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    graph.add_edges_from((m, i) for m in modules for i in imports.find_modules_directly_imported_by(m) & modules)
    return graph


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """The strongly connected parts of more than one module."""
    return sorted(sorted(part) for part in nx.strongly_connected_components(graph) if len(part) > 1)


def levels(graph: nx.DiGraph) -> dict[str, int]:
    """Each module's level: 1 + the longest chain of imports below it, each circle counted as one module."""
    parts = nx.condensation(graph)
    level = {}
    for part in reversed(list(nx.topological_sort(parts))):  # a part after all that it imports
        level[part] = 1 + max((level[below] for below in parts.successors(part)), default=0)
    return {module: level[parts.graph["mapping"][module]] for module in graph}


def longest_chain(graph: nx.DiGraph) -> list[str]:
    """A longest chain of imports, from the module that starts it down to one that imports none of the package's
    (a circle on it named by one of its modules)."""
    parts = nx.condensation(graph)
    return [min(parts.nodes[part]["members"]) for part in nx.dag_longest_path(parts)]


def summary(package: str) -> dict:
    graph = graph_of(package)
    children = {m for m in graph if m.count(".") == 1}
    folders = {m for m in children if any(other.startswith(m + ".") for other in graph)}
    by_module = levels(graph)
    return {
        "modules": graph.number_of_nodes(),
        "root_modules": sorted(m for m in children - folders if m.rsplit(".", 1)[1] != "__main__"),
        "folders": sorted(folders),
        "levels": max(by_module.values(), default=0),
        "circles": circles(graph),
        "longest_chain": longest_chain(graph),
        "by_module": by_module,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package", nargs="?", default="autograder")
    parser.add_argument("--levels", action="store_true", help="each module's level, highest first")
    args = parser.parse_args(argv)
    shape = summary(args.package)
    print(f"{args.package}: {shape['modules']} modules on {shape['levels']} levels")
    print(f"  loose modules in its root: {len(shape['root_modules'])} ({', '.join(shape['root_modules'])})")
    print(f"  folders: {len(shape['folders'])} ({', '.join(m.split('.', 1)[1] for m in shape['folders'])})")
    print(f"  longest chain: {' -> '.join(m.split('.', 1)[-1] for m in shape['longest_chain'])}")
    print(f"  import circles: {len(shape['circles'])}")
    for part in shape["circles"]:
        print("    " + " <-> ".join(part))
    if args.levels:
        for module, level in sorted(shape["by_module"].items(), key=lambda item: (-item[1], item[0])):
            print(f"  {level:3d}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
