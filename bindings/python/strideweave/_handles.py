"""Carrier wrappers by handle and by kind: one Python object per live C
carrier (so `tensor.carrier is carrier`), and the registry of carrier
classes by sw_carrier_kind_t. strideweave.carriers registers each class as
it defines it, so modules below the carriers (the Tensor among them) find a
carrier's class here instead of importing strideweave.carriers."""
import weakref

from ._lib import native as N

_carriers = weakref.WeakValueDictionary()
_classes = {}  # sw_carrier_kind_t -> the class wrapping carriers of that kind
_types = ()  # the registered classes, for isinstance


def carrier_kind(kind):
    """Class decorator: the class wraps every C carrier of `kind`."""

    def register(cls):
        global _types
        cls._kind = kind
        _classes[kind] = cls
        _types = tuple(_classes.values())
        return cls

    return register


def is_carrier(obj):
    """Whether `obj` is a carrier: an instance of a registered class."""
    return isinstance(obj, _types)


def carrier_class(kind):
    """The class registered for carriers of `kind` (strideweave.carriers
    registers them all on import)."""
    return _classes[kind]


def adopt_carrier(h, rt):
    """The wrapper for a new carrier reference `h` (None for a NULL handle)."""
    if h is None:
        return None
    existing = _carriers.get(int(h))
    if existing is not None:
        N.sw_carrier_release(h)
        return existing
    return _classes[N.sw_carrier_kind(h)]._adopt(h, rt)


def register_carrier(obj):
    """Makes `obj` the wrapper of its handle."""
    _carriers[int(obj._h)] = obj
