"""The type stubs (.pyi) beside the package's public modules describe the
live package, so a type checker and an editor see what runs:

- every public module has a stub, installed and copied into the build tree
  beside it with the py.typed marker;
- every public name of a module at runtime has a stub entry, and every
  public stub entry is a name of the module at runtime, of the same kind
  (class, function, value), with the same __all__;
- every public method, property and attribute of every public class at
  runtime (its own and those it inherits from the package's classes) is in
  the stub of the class or of a stubbed base, and the other way round; a
  stubbed property or class/static method is one at runtime;
- a stubbed function or method has the runtime's parameter names, kinds
  (positional, keyword-only, *args, **kwargs) and literal defaults, where
  the runtime's signature can be introspected (each overload's keywords are
  the runtime's).

The stubs are read with ast, the package with inspect. Whether the stubs
type-check, and the examples against them, is the mypy stage of the full
test command (tools/typecheck/run_mypy.sh).
"""
import ast
import importlib
import inspect
import json
import pathlib
import subprocess

import pytest

import strideweave as sw
from conftest import ROOT

PACKAGE = "strideweave"
SOURCES = ROOT / "bindings" / "python" / PACKAGE
# The copy the suite imports (build/bindings/python, or $STRIDEWEAVE_PYTHONPATH).
IMPORTED = pathlib.Path(sw.__file__).parent
# Public modules whose import needs more than the package's own dependencies.
NEEDS = {"strideweave.hf": ("torch", "transformers"), "strideweave.hf.__main__": ("torch", "transformers")}
# Public names a module documents beyond its __all__ (left out of it on purpose).
EXTRA_PUBLIC = {"strideweave": {"CancelledError", "__version__"}}
# Dunders of package classes that say nothing to a type checker.
IGNORED_DUNDERS = {
    "__module__", "__qualname__", "__doc__", "__slots__", "__dict__", "__weakref__", "__del__", "__reduce__",
    "__reduce_ex__", "__repr__", "__str__", "__setattr__", "__delattr__", "__annotations__", "__orig_bases__",
    "__parameters__", "__protocol_attrs__", "__subclasshook__", "__abstractmethods__", "__init_subclass__",
    "__non_callable_proto_members__", "__firstlineno__", "__static_attributes__", "__match_args__",
}


def module_name(path):
    parts = list(path.relative_to(SOURCES.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_public_module(name):
    return not any(p.startswith("_") and p != "__main__" for p in name.split("."))


PUBLIC_MODULES = sorted(module_name(p) for p in SOURCES.rglob("*.py") if is_public_module(module_name(p)))


def stub_path(root, name):
    rel = pathlib.Path(*name.split(".")[1:])
    package_init = root / rel / "__init__.pyi"
    if (root / rel).is_dir():
        return package_init
    return (root / rel).with_suffix(".pyi")


def public(name):
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


# ---- the stubs, read with ast -------------------------------------------------------------------


class Stub:
    """A stub module's top-level symbols: name -> list of nodes (several
    for an overloaded function), and its explicit re-exports."""

    def __init__(self, name):
        self.name = name
        self.path = stub_path(IMPORTED, name)
        self.tree = ast.parse(self.path.read_text(), filename=str(self.path))
        self.symbols = {}
        self.imports = {}  # local name -> (module, name or None for a module), re-exported or not
        self.reexports = set()
        self.all = None
        for node in self._statements(self.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.symbols.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.symbols.setdefault(node.target.id, []).append(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        if target.id == "__all__":
                            self.all = ast.literal_eval(node.value)
                        else:
                            self.symbols.setdefault(target.id, []).append(node)
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                for alias in node.names:
                    local = alias.asname or alias.name
                    submodule = f"{base}.{alias.name}"
                    if submodule.startswith(PACKAGE) and stub_path(IMPORTED, submodule).exists():
                        self.imports[local] = (submodule, None)
                    else:
                        self.imports[local] = (base, alias.name)
                    if alias.asname == alias.name:
                        self.reexports.add(local)

    @staticmethod
    def _statements(body):
        for node in body:
            if isinstance(node, ast.If):  # sys.version_info branches
                yield from Stub._statements(node.body)
                yield from Stub._statements(node.orelse)
            else:
                yield node

    def _absolute(self, node):
        if not node.level:
            return node.module
        parts = self.name.split(".")
        if self.path.name != "__init__.pyi":
            parts = parts[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def public_names(self):
        names = {n for n in self.symbols if public(n)}
        return names | {n for n in self.reexports if public(n)}


_stubs = {}


def stub(name):
    if name not in _stubs:
        _stubs[name] = Stub(name)
    return _stubs[name]


def resolve(module, name):
    """(stub module, nodes) defining `name` as seen from stub `module`,
    following imports between the package's stubs; None outside them."""
    s = stub(module)
    if name in s.symbols:
        return s, s.symbols[name]
    if name in s.imports:
        target, attr = s.imports[name]
        if attr is None or not target.startswith(PACKAGE) or not stub_path(IMPORTED, target).exists():
            return None
        return resolve(target, attr)
    return None


def decorators(node):
    return {d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else None
            for d in getattr(node, "decorator_list", [])}


def stub_class_members(module, cls_node):
    """name -> nodes of a stub class and of its bases stubbed in the package."""
    members = {}
    for node in cls_node.body:
        if isinstance(node, ast.FunctionDef):
            members.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    members.setdefault(target.id, []).append(node)
    for base in cls_node.bases:
        if isinstance(base, ast.Name):
            found = resolve(module, base.id)
            if found and isinstance(found[1][0], ast.ClassDef):
                for name, nodes in stub_class_members(found[0].name, found[1][0]).items():
                    members.setdefault(name, nodes)
    return members


# ---- signatures ---------------------------------------------------------------------------------

P = inspect.Parameter
_NO_DEFAULT = object()  # a default that is not a literal
_ABSENT = object()  # no default


def literal(node):
    """The value of a literal default, Ellipsis for `...`, _NO_DEFAULT otherwise."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _NO_DEFAULT


def stub_parameters(fn):
    """[(name, kind, default)] of a stub function: default is _ABSENT
    without one, Ellipsis for `...`, else the literal (or _NO_DEFAULT)."""
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        out.append((arg.arg, kind, _ABSENT if default is None else literal(default)))
    if a.vararg:
        out.append((a.vararg.arg, P.VAR_POSITIONAL, _ABSENT))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, P.KEYWORD_ONLY, _ABSENT if default is None else literal(default)))
    if a.kwarg:
        out.append((a.kwarg.arg, P.VAR_KEYWORD, _ABSENT))
    return out


def runtime_signature(obj):
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None  # a builtin without a text signature


def check_signature(where, stub_fns, obj, problems):
    sig = runtime_signature(obj)
    if sig is None:
        return
    runtime = list(sig.parameters.values())
    if len(stub_fns) > 1:
        # Overloads: each one's keyword-capable parameters are the runtime's.
        names = {p.name for p in runtime if p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)}
        takes_kwargs = any(p.kind == P.VAR_KEYWORD for p in runtime)
        for fn in stub_fns:
            for name, kind, _ in stub_parameters(fn):
                if kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) and name not in names and not takes_kwargs:
                    problems.append(f"{where}: overload parameter {name!r} is not a parameter at runtime {sig}")
        return
    stubbed = stub_parameters(stub_fns[0])
    got = [(name, kind) for name, kind, _ in stubbed]
    want = [(p.name, p.kind) for p in runtime]
    if got != want:
        problems.append(f"{where}: stub parameters {[(n, str(k)) for n, k in got]} != runtime "
                        f"{[(n, str(k)) for n, k in want]} {sig}")
        return
    for (name, _, default), p in zip(stubbed, runtime):
        has_stub, has_runtime = default is not _ABSENT, p.default is not P.empty
        if has_stub != has_runtime:
            problems.append(f"{where}: parameter {name!r} has a default in {'the stub' if has_stub else 'the runtime'} "
                            f"only")
        elif has_stub and default is not Ellipsis and default is not _NO_DEFAULT and default != p.default:
            problems.append(f"{where}: parameter {name!r} defaults to {default!r} in the stub, {p.default!r} at "
                            f"runtime")


# ---- the live package, read with inspect --------------------------------------------------------


def load(name):
    for dependency in NEEDS.get(name, ()):
        pytest.importorskip(dependency, reason=f"{name} needs {dependency}")
    return importlib.import_module(name)


def runtime_public_names(module):
    names = set(getattr(module, "__all__", ()))
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if getattr(value, "__module__", None) == module.__name__:
            names.add(name)  # defined here, not imported
    return names | EXTRA_PUBLIC.get(module.__name__, set())


def in_package(obj):
    return (getattr(obj, "__module__", None) or "").partition(".")[0] == PACKAGE


def runtime_class_members(cls):
    """name -> (defining class, raw attribute) of a public class's public
    members, its own and those its package bases define."""
    out = {}
    for klass in cls.__mro__:
        if not in_package(klass):
            continue
        for name, value in vars(klass).items():
            if name in out or not public(name) or name in IGNORED_DUNDERS:
                continue
            if callable(value) and not inspect.isclass(value) and not in_package(value):
                continue  # taken from elsewhere: a Protocol's __init__, IntEnum's __format__, object.__hash__
            out[name] = (klass, value)
    return out


# ---- the tests ----------------------------------------------------------------------------------


def test_public_modules_are_the_expected_ones():
    assert PUBLIC_MODULES == ["strideweave", "strideweave.carriers", "strideweave.carriers.tiled_evictable",
                              "strideweave.hf", "strideweave.hf.__main__", "strideweave.interop", "strideweave.remote"]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_has_a_stub_beside_it(name):
    source = stub_path(SOURCES, name)
    assert source.exists(), f"{name} has no stub {source.relative_to(ROOT)}"
    copy = stub_path(IMPORTED, name)
    assert copy.exists(), f"the imported package has no {copy}: is the stub in its meson.build's sources?"
    assert copy.read_bytes() == source.read_bytes(), f"{copy} is not the source's {source}: rebuild"
    # A stub of a module that is not public is dead weight (the public stubs declare the names).
    for path in SOURCES.rglob("*.pyi"):
        assert is_public_module(module_name(path)), f"{path.relative_to(ROOT)} stubs a private module"
    assert (IMPORTED / "py.typed").exists()


def test_the_stubs_and_the_marker_are_installed():
    build = ROOT / "build"
    if not (build / "meson-info").is_dir():
        pytest.skip("no meson build directory at build/ to ask what it installs")
    listed = subprocess.run(["meson", "introspect", "--installed", str(build)], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"meson introspect failed: {listed.stderr.strip()}")
    installed = {pathlib.PurePath(p).as_posix() for p in json.loads(listed.stdout).values()}
    wanted = [stub_path(SOURCES, n).relative_to(SOURCES.parent).as_posix() for n in PUBLIC_MODULES]
    wanted.append(f"{PACKAGE}/py.typed")
    for rel in wanted:
        assert any(p.endswith("/" + rel) for p in installed), f"{rel} is not installed"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_has_a_stub_and_every_stub_a_name(name):
    module = load(name)
    s = stub(name)
    runtime = runtime_public_names(module)
    stubbed = s.public_names()
    assert sorted(runtime - stubbed) == [], f"{name}: public at runtime, missing from {s.path.name}"
    assert sorted(stubbed - runtime) == [], f"{name}: in {s.path.name}, not public at runtime"
    assert s.all == getattr(module, "__all__", None), f"{name}: the stub's __all__ is not the runtime's"
    problems = []
    for attr in sorted(runtime):
        obj = getattr(module, attr)
        found = resolve(name, attr)
        if found is None:
            if inspect.ismodule(obj):
                continue  # a submodule re-exported (`from . import carriers as carriers`)
            problems.append(f"{name}.{attr}: the stub's entry is not defined in the package's stubs")
            continue
        where, nodes = found
        node = nodes[0]
        if isinstance(node, ast.ClassDef):
            if not inspect.isclass(obj):
                problems.append(f"{name}.{attr}: a class in the stub, {type(obj).__name__} at runtime")
        elif isinstance(node, ast.FunctionDef):
            if not callable(obj) or inspect.isclass(obj):
                problems.append(f"{name}.{attr}: a function in the stub, {type(obj).__name__} at runtime")
            else:
                check_signature(f"{name}.{attr}", nodes, obj, problems)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            alias = resolve(where.name, node.value.id)
            if alias is None or getattr(module, node.value.id, None) is not obj:
                problems.append(f"{name}.{attr}: the stub makes it {node.value.id}; at runtime it is another object")
        else:
            if inspect.isclass(obj) or inspect.isfunction(obj):
                problems.append(f"{name}.{attr}: a value in the stub, a {type(obj).__name__} at runtime")
            value = node.value
            if isinstance(node, ast.AnnAssign) and value is not None and literal(value) not in (_NO_DEFAULT, Ellipsis):
                if literal(value) != obj:
                    problems.append(f"{name}.{attr}: {literal(value)!r} in the stub, {obj!r} at runtime")
    assert problems == []


def public_classes():
    for name in PUBLIC_MODULES:
        module = load(name) if not NEEDS.get(name) else None
        if module is None:
            continue
        for attr in sorted(runtime_public_names(module)):
            obj = getattr(module, attr)
            found = resolve(name, attr)
            if found and isinstance(found[1][0], ast.Assign):
                continue  # another name of a class (CancelledError), checked under its own
            if inspect.isclass(obj) and in_package(obj):
                yield pytest.param(name, attr, id=f"{name}.{attr}")


@pytest.mark.parametrize("module,attr", list(public_classes()))
def test_every_public_member_of_every_public_class_is_stubbed(module, attr):
    cls = getattr(importlib.import_module(module), attr)
    found = resolve(module, attr)
    assert found is not None and isinstance(found[1][0], ast.ClassDef), f"{module}.{attr} has no stub class"
    where, (node, *_) = found
    stubbed = {n: nodes for n, nodes in stub_class_members(where.name, node).items() if public(n)}
    runtime = runtime_class_members(cls)
    assert sorted(set(runtime) - set(stubbed)) == [], f"{attr}: members missing from the stub"
    problems = []
    for name, nodes in sorted(stubbed.items()):
        if not hasattr(cls, name):
            problems.append(f"{attr}.{name}: in the stub, not at runtime")
            continue
        if name not in runtime:
            continue  # inherited from outside the package (Exception.args, int.__new__, ...)
        static = inspect.getattr_static(cls, name)
        kinds = decorators(nodes[0])
        if "property" in kinds and not isinstance(static, property):
            problems.append(f"{attr}.{name}: a property in the stub, {type(static).__name__} at runtime")
        if "classmethod" in kinds and not isinstance(static, classmethod):
            problems.append(f"{attr}.{name}: a classmethod in the stub, {type(static).__name__} at runtime")
        if "staticmethod" in kinds and not isinstance(static, staticmethod):
            problems.append(f"{attr}.{name}: a staticmethod in the stub, {type(static).__name__} at runtime")
        if isinstance(nodes[0], ast.FunctionDef) and "property" not in kinds and not any(
                k and k.endswith(("setter", "deleter")) for k in kinds):
            functions = [n for n in nodes if isinstance(n, ast.FunctionDef)]
            check_signature(f"{attr}.{name}", functions, static, problems)
    assert problems == []
