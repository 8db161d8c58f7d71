"""Every public function, class, method and property of the package has a
docstring (help(sw.X) always says something)."""
import inspect

import strideweave as sw


def public_objects():
    seen = set()
    for name in sw.__all__:
        obj = getattr(sw, name)
        if inspect.isfunction(obj) or inspect.isbuiltin(obj):
            yield f"sw.{name}", obj
        elif inspect.isclass(obj):
            yield f"sw.{name}", obj
            for cls in obj.__mro__:
                if not cls.__module__.startswith("strideweave"):
                    continue
                for attr, member in vars(cls).items():
                    if attr.startswith("_") and attr not in ("__getitem__", "__setitem__"):
                        continue
                    target = member.fget if isinstance(member, property) else member
                    if isinstance(target, (staticmethod, classmethod)):
                        target = target.__func__
                    if inspect.isfunction(target) and id(target) not in seen:
                        seen.add(id(target))
                        yield f"sw.{name}.{attr}", target


def test_every_public_function_and_method_has_a_docstring():
    found = list(public_objects())
    assert len(found) > 200
    missing = sorted(qual for qual, obj in found if not (inspect.getdoc(obj) or "").strip())
    assert not missing, f"{len(missing)} public name(s) without a docstring:\n  " + "\n  ".join(missing)
