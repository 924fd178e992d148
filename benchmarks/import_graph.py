"""The shape of a package's import graph, printed: its modules, the loose ones in its root, its levels and its circles.

    python -m benchmarks.import_graph autograder

An import inside a function counts, as for import-linter (whose graph, grimp's, this reads). A module's level is
the length of the longest chain of imports below it within the package (a module that imports none of the
package's modules is on level 1), each circle counted as one module; the graph's levels are its highest. A
package's ``__init__`` counts as a module, its folder is not one.
"""

from __future__ import annotations

import argparse
import functools
import sys

import grimp


def graph_of(package: str) -> grimp.ImportGraph:
    return grimp.build_graph(package, cache_dir=None)


def circles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def levels(graph: grimp.ImportGraph, modules: set[str]) -> dict[str, int]:
    parts = circles(graph, modules)
    part_of = {member: tuple(part) for part in parts for member in part}

    def key(module: str) -> tuple[str, ...]:
        return part_of.get(module, (module,))

    @functools.cache
    def level(part: tuple[str, ...]) -> int:
        below = {key(m) for member in part for m in graph.find_modules_directly_imported_by(member) & modules}
        below.discard(part)
        return 1 + max((level(other) for other in below), default=0)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    return {module: level(key(module)) for module in modules}


def summary(package: str) -> dict:
    graph = graph_of(package)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    root = sorted(
        m
        for m in modules
        if m.count(".") == 1 and not graph.find_children(m) and m.rsplit(".", 1)[1] not in ("__init__", "__main__")
    )
    by_module = levels(graph, modules)
    return {
        "modules": len(modules),
        "root_modules": root,
        "folders": sorted(m for m in modules if m.count(".") == 1 and graph.find_children(m)),
        "levels": max(by_module.values(), default=0),
        "circles": circles(graph, modules),
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
    print(f"  import circles: {len(shape['circles'])}")
    for part in shape["circles"]:
        print("    " + " <-> ".join(part))
    if args.levels:
        for module, level in sorted(shape["by_module"].items(), key=lambda item: (-item[1], item[0])):
            print(f"  {level:3d}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
