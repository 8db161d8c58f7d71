"""Runtimes: the package creates one default, process-wide runtime lazily;
constructors take an optional runtime= keyword for others."""
import atexit
import threading

from ._checks import nonnegative
from ._errors import StrideWeaveTypeError, StrideWeaveValueError
from ._lib import native as N


class Runtime:
    """Owns the loop thread, the worker pool and the buffer pool behind every
    carrier and tensor created with it (sw_runtime_t)."""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, *, compute_threads=0, worker_threads=0):
        counts = []
        for name, value in (("compute_threads", compute_threads), ("worker_threads", worker_threads)):
            value = nonnegative(value, name)
            if value > 0xFFFFFFFF:
                raise StrideWeaveValueError(f"{name} must be below 2**32, got {value}")
            counts.append(value)
        self._h = N.runtime_create(*counts)

    def __reduce__(self):
        raise StrideWeaveTypeError("a strideweave.Runtime cannot be pickled: it owns threads and memory of this "
                                   "process")

    @property
    def compute_threads(self):
        """The number of threads of the compute pool."""
        return N.sw_runtime_compute_threads(self._h)

    def event_fd(self):
        """A file descriptor readable while completions wait for process_events()."""
        return N.sw_runtime_event_fd(self._h)

    def process_events(self):
        """Fires the completion callbacks owed to this thread; returns how many."""
        return N.sw_runtime_process_events(self._h)

    def shutdown(self):
        """Cancels pending work (CancelledError), stops the threads. Idempotent."""
        N.sw_runtime_shutdown(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """`with Runtime() as rt:` shuts the runtime down at the end."""
        self.shutdown()
        return False

    def __del__(self):
        try:
            N.sw_runtime_release(self._h)
        except Exception:
            pass

    def __repr__(self):
        return f"<strideweave.Runtime at {int(self._h):#x}>"


_default = None
_default_lock = threading.Lock()


def default_runtime():
    """The process-wide runtime used when no runtime= is given (created on first use)."""
    global _default
    rt = _default
    if rt is None:
        with _default_lock:
            if _default is None:
                _default = Runtime()
                atexit.register(_shutdown_default)
            rt = _default
    return rt


def _shutdown_default():
    # Cancels work still pending at exit while Python can still run callbacks.
    if _default is not None:
        try:
            _default.shutdown()
        except Exception:
            pass


def resolve(runtime):
    if runtime is None:
        return default_runtime()
    if not isinstance(runtime, Runtime):
        raise StrideWeaveTypeError(f"runtime must be a strideweave.Runtime, not {type(runtime).__name__}")
    return runtime
