"""Argument checks every entry point shares, made in Python before any C
call: the C API sees only int64 and cannot tell a bool, a float or an
endless iterator from an integer sequence."""
import itertools
import numbers
from collections.abc import Iterable, Sized

import numpy as np

from ._errors import StrideWeaveTypeError, StrideWeaveValueError

# An iterable without len() is consumed up to this many items; one that
# yields more is taken for endless.
MAX_ITERABLE_ITEMS = 1 << 22
_ENDLESS = (itertools.count, itertools.cycle)


def integer(value, what):
    """An int from an integral value; bool, float and others are TypeError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise StrideWeaveTypeError(f"{what} must be an integer, not {type(value).__name__}")
    return int(value)


def nonnegative(value, what):
    """An int >= 0 (a size, an offset); TypeError as integer(), ValueError below 0."""
    value = integer(value, what)
    if value < 0:
        raise StrideWeaveValueError(f"{what} must be >= 0, got {value}")
    return value


def file_io(chunk_bytes, requests_in_flight):
    """A file carrier's request options: bytes per read or write request and
    requests in flight per transfer, ints >= 0 (0: the runtime's default,
    4 MiB requests, 4 in flight); TypeError as integer(), ValueError
    below 0 or for more requests than a uint32 holds."""
    chunk_bytes = nonnegative(chunk_bytes, "chunk_bytes")
    requests_in_flight = nonnegative(requests_in_flight, "requests_in_flight")
    if requests_in_flight > 0xFFFFFFFF:
        raise StrideWeaveValueError(f"requests_in_flight must be at most {0xFFFFFFFF}, got {requests_in_flight}")
    return chunk_bytes, requests_in_flight


def finite(obj, what):
    """The items of a finite iterable as a tuple; TypeError otherwise."""
    if isinstance(obj, (tuple, list, range)):
        return tuple(obj)
    if isinstance(obj, (str, bytes, bytearray, memoryview)):
        raise StrideWeaveTypeError(f"{what} must be a finite iterable of integers, not {type(obj).__name__}")
    if isinstance(obj, _ENDLESS):
        raise StrideWeaveTypeError(f"{what} must be a finite iterable; {type(obj).__name__} never ends")
    if isinstance(obj, itertools.repeat):
        try:
            obj.__length_hint__()
        except TypeError:
            raise StrideWeaveTypeError(f"{what} must be a finite iterable; itertools.repeat without times "
                                       "never ends") from None
    if isinstance(obj, Sized) and isinstance(obj, Iterable):
        try:
            return tuple(obj)
        except TypeError as e:  # e.g. a 0-d NumPy array
            raise StrideWeaveTypeError(f"{what} must be a finite iterable: {e}") from None
    try:
        iterator = iter(obj)
    except TypeError:
        raise StrideWeaveTypeError(f"{what} must be a finite iterable, not {type(obj).__name__}") from None
    items = tuple(itertools.islice(iterator, MAX_ITERABLE_ITEMS + 1))
    if len(items) > MAX_ITERABLE_ITEMS:
        raise StrideWeaveTypeError(f"{what} must be a finite iterable; it yielded more than "
                                   f"{MAX_ITERABLE_ITEMS} items")
    return items
