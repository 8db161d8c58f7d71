"""Grad mode: per thread, on by default."""
import functools

from ._lib import native as N


def is_grad_enabled():
    """Whether grad mode is on for the calling thread (it is by default)."""
    return N.sw_is_grad_enabled()


class set_grad_enabled:
    """Sets this thread's grad mode; as a context manager, restores it after."""

    def __init__(self, mode):
        self._previous = N.sw_set_grad_enabled(bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        N.sw_set_grad_enabled(self._previous)
        return False


class _GradScope:
    _mode = False

    def __enter__(self):
        self._previous = N.sw_set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        N.sw_set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradScope):
    """`with sw.no_grad():` (or as a decorator): ops record no autograd node."""

    _mode = False


class enable_grad(_GradScope):
    """Turns grad mode back on inside a no_grad scope."""

    _mode = True
