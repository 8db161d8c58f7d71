"""Wrapper identity: one Python object per live C carrier or tensor handle
where identity matters (tensor.carrier, await results, gradients)."""
import weakref

from ._lib import native as N

_carriers = weakref.WeakValueDictionary()
_tensors = weakref.WeakValueDictionary()
# sw_carrier_kind_t -> Python class; filled in by strideweave.carriers.
carrier_classes = {}


def adopt_carrier(h, rt):
    """The wrapper for a new carrier reference `h` (None for a NULL handle)."""
    if h is None:
        return None
    existing = _carriers.get(int(h))
    if existing is not None:
        N.sw_carrier_release(h)
        return existing
    return carrier_classes[N.sw_carrier_kind(h)]._adopt(h, rt)


def register_carrier(obj):
    _carriers[int(obj._h)] = obj


def adopt_tensor(h, rt):
    """The wrapper for a new tensor reference `h`, reusing a live wrapper."""
    if h is None:
        return None
    existing = _tensors.get(int(h))
    if existing is not None:
        N.sw_tensor_release(h)
        return existing
    from ._tensor import Tensor

    t = Tensor._adopt(h, rt)
    _tensors[int(h)] = t
    return t
