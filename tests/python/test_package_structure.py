"""The package's modules form layers: each imports only modules below it, all
at its top, so no import works only because of the order others ran in.
Read from the sources with ast, so the rules hold for every module whether
a test imports it or not:

- the graph of imports between the package's modules has no cycle
  (importing a submodule of another package runs that package's __init__
  too, so it counts as importing both);
- no import inside a function or class body;
- no import after the module's first other statement (a docstring, __all__
  and `from __future__` may come first), nor inside a module-level block;
- only the native-access module imports the SWIG extension, so the error
  classes are registered before any call into the library can fail.
"""
import ast

from conftest import ROOT

PACKAGE = "strideweave"
SOURCES = ROOT / "bindings" / "python" / PACKAGE
NATIVE = f"{PACKAGE}._native"
# The one importer of NATIVE: it registers the error classes with it.
NATIVE_ACCESS = f"{PACKAGE}._lib"
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
IMPORTS = (ast.Import, ast.ImportFrom)


def module_name(path):
    parts = list(path.relative_to(SOURCES.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): (p, ast.parse(p.read_text(), filename=str(p))) for p in sorted(SOURCES.rglob("*.py"))}
KNOWN = set(MODULES) | {NATIVE}  # the extension has no source here but is a module of the package


def ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def imported_modules(name, node):
    """The package modules an import statement of module `name` names."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE}
    target = node.module or ""
    if node.level:
        path, _ = MODULES[name]
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    if target.split(".")[0] != PACKAGE:
        return set()
    # `from package import x` imports the submodule x when there is one, and
    # otherwise reads an attribute of the package itself.
    return {f"{target}.{a.name}" if f"{target}.{a.name}" in KNOWN else target for a in node.names}


def imports_with_place(tree):
    """(import statement, place) for every import of a module: "top" for a
    statement of the module's body, "scope" inside a function or class
    body, "block" inside a module-level if, try, with or loop."""

    def inside(node, place):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, IMPORTS):
                yield child, place
            else:
                yield from inside(child, "scope" if place == "scope" or isinstance(child, SCOPES) else place)

    for node in tree.body:
        if isinstance(node, IMPORTS):
            yield node, "top"
        else:
            yield from inside(node, "scope" if isinstance(node, SCOPES) else "block")


def import_graph():
    """module -> the package modules importing it runs: those it names, and
    the packages above them that are not above the importer itself (Python
    runs a package's __init__ before any of its submodules)."""
    graph = {}
    for name, (_, tree) in MODULES.items():
        edges = set()
        for node, _ in imports_with_place(tree):
            for target in imported_modules(name, node):
                edges |= {target} | (ancestors(target) - ancestors(name))
        graph[name] = edges - {name}
    return graph


GRAPH = import_graph()


def cycles(graph):
    """For each strongly connected component of `graph` with more than one
    module (Tarjan's algorithm): one cycle through it, and its modules."""
    index, low, stack, components = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        path = [min(component)]
        while True:
            nxt = min(w for w in graph[path[-1]] if w in component)
            if nxt in path:
                cycle = " -> ".join(path[path.index(nxt):] + [nxt])
                found.append(f"{cycle}; these {len(component)} modules all import each other through cycles: "
                             f"{', '.join(sorted(component))}")
                break
            path.append(nxt)
    return found


def is_header(node):
    """A statement that may come before a module's imports."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return True  # the docstring
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return True
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    return False


def where(name, node):
    return f"{MODULES[name][0].relative_to(ROOT)}:{node.lineno}"


def test_the_sources_are_the_package():
    assert {PACKAGE, f"{PACKAGE}.carriers", f"{PACKAGE}.carriers.tiled_evictable"} <= set(MODULES)
    assert f"{PACKAGE}.carriers._carrier" in GRAPH[f"{PACKAGE}.carriers"]


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, f"{len(found)} import cycle(s):\n  " + "\n  ".join(found)


def test_no_imports_inside_functions_or_classes():
    found = [where(name, node) for name, (_, tree) in MODULES.items()
             for node, place in imports_with_place(tree) if place == "scope"]
    assert not found, f"{len(found)} import(s) inside a function or class body:\n  " + "\n  ".join(found)


def test_imports_come_first():
    found = []
    for name, (_, tree) in MODULES.items():
        first = next((n for n in tree.body if not isinstance(n, IMPORTS) and not is_header(n)), None)
        for node, place in imports_with_place(tree):
            if place == "block":
                found.append(f"{where(name, node)} inside a module-level block")
            elif place == "top" and first is not None and node.lineno > first.lineno:
                found.append(f"{where(name, node)} after the statement at line {first.lineno}")
    assert not found, (f"{len(found)} import(s) after their module's first other statement:\n  "
                       + "\n  ".join(found))


def test_only_the_native_access_module_imports_the_extension():
    found = sorted(name for name, edges in GRAPH.items() if NATIVE in edges and name != NATIVE_ACCESS)
    assert not found, (f"{', '.join(found)} import {NATIVE} directly; import it from {NATIVE_ACCESS}, "
                       "which registers the error classes first")
