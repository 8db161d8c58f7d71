"""Completion handles: AwaitResult and its kinds. wait() blocks with the GIL
released; `await handle` in asyncio never blocks the event loop: it waits
for the runtime's event fd (loop.add_reader) and the completion callback
the runtime then fires on the loop's thread."""
import asyncio
import logging
import numbers
import threading

from ._errors import StrideWeaveTypeError, StrideWeaveValueError
from ._lib import native as N
from ._tensor import adopt_tensor

_PENDING = N.SW_AWAIT_PENDING
_KIND_RESIDENCY = N.SW_AWAIT_RESIDENCY


class AwaitResult:
    """A handle on eagerly started work. Users never construct one."""

    __slots__ = ("_h", "_rt", "_has_result", "_result", "_waiters", "_subscribed", "_on_result", "_callbacks",
                 "__weakref__")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError(f"{type(self).__name__} handles are returned by StrideWeave calls, "
                                   "not constructed")

    @classmethod
    def _adopt(cls, h, rt, on_result=None):
        obj = object.__new__(cls)
        obj._h = h
        obj._rt = rt
        obj._has_result = False
        obj._result = None
        obj._waiters = []
        obj._subscribed = False
        obj._on_result = on_result
        obj._callbacks = []
        return obj

    def __reduce__(self):
        raise StrideWeaveTypeError(f"a strideweave {type(self).__name__} cannot be pickled: it tracks work running "
                                   "in this process")

    def __del__(self):
        try:
            N.sw_await_release(self._h)
        except Exception:
            pass

    def done(self):
        """True once the work succeeded or failed (a method, as
        concurrent.futures.Future.done)."""
        return self._has_result or N.sw_await_query(self._h) != _PENDING

    def add_done_callback(self, fn):
        """Calls fn(handle) once the work is terminal, as
        concurrent.futures.Future.add_done_callback: at once when it already
        is; otherwise on the first thread that then waits on the handle
        (wait(), await) or calls its runtime's process_events(). An exception
        fn raises is logged (logger "strideweave") and the rest still run."""
        if not callable(fn):
            raise StrideWeaveTypeError(f"add_done_callback needs a callable, not {type(fn).__name__}")
        if self.done():
            _run_callback(fn, self)
            return
        self._callbacks.append(fn)
        self._ensure_subscribed()

    def wait(self, timeout=None):
        """Blocks (GIL released) until terminal or `timeout` seconds pass
        (TimeoutError; the work stays pending). Returns the same result
        object every time, or raises the work's error every time."""
        if timeout is None:
            ns = -1
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
                raise StrideWeaveTypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
            if not timeout >= 0:
                raise StrideWeaveValueError(f"timeout must be >= 0, got {timeout}")
            ns = int(timeout * 1e9)
        if self._has_result:
            return self._result
        N.await_wait(self._h, ns)
        return self._finish()

    def _finish(self):
        if not self._has_result:
            result = None
            if N.sw_await_kind(self._h) != _KIND_RESIDENCY:
                result = adopt_tensor(N.sw_await_result(self._h), self._rt)
                if self._on_result is not None:
                    self._on_result(result)
            self._result = result
            self._has_result = True
            self._on_result = None
        return self._result

    def __await__(self):
        if not self.done():
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            self._subscribe(loop, future)
            yield from future
        return self.wait()

    def _subscribe(self, loop, future):
        pump = _pump(loop, self._rt)
        pump.acquire()
        self._waiters.append((loop, future, pump))
        self._ensure_subscribed()

    def _ensure_subscribed(self):
        # The library takes one completion callback per await: it serves both
        # the asyncio waiters and add_done_callback.
        if not self._subscribed:
            N.await_set_callback(self._h, self._completed)
            self._subscribed = True

    def _completed(self, code, message):
        # Runs on whichever thread fired the callback: hand over to each loop.
        waiters, self._waiters = self._waiters, []
        for loop, future, pump in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, future, pump)
            except RuntimeError:  # the loop is closed
                pass
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _run_callback(fn, self)

    def __repr__(self):
        state = "done" if self.done() else "pending"
        return f"<strideweave.{type(self).__name__} {state}>"


class AwaitMove(AwaitResult):
    """Completion of a move or scatter; wait() returns the result Tensor."""

    __slots__ = ()


class AwaitProjection(AwaitResult):
    """Completion of a projection; wait() returns the compact Tensor."""

    __slots__ = ()


class AwaitResidency(AwaitResult):
    """Completion of a promotion or eviction; wait() returns None."""

    __slots__ = ()


_log = logging.getLogger("strideweave")


def _run_callback(fn, handle):
    try:
        fn(handle)
    except Exception:
        _log.exception("exception calling the done callback of %r", handle)


def _resolve(future, pump):
    pump.release()
    if not future.done():
        future.set_result(None)


class _EventPump:
    """Watches one runtime's event fd on one event loop while handles wait."""

    def __init__(self, loop, rt):
        self.loop = loop
        self.rt = rt
        self.fd = rt.event_fd()
        self.count = 0

    def acquire(self):
        if self.count == 0:
            self.loop.add_reader(self.fd, self.rt.process_events)
        self.count += 1

    def release(self):
        self.count -= 1
        if self.count == 0:
            self.loop.remove_reader(self.fd)
            # A completion may have been signalled after the last callback.
            self.rt.process_events()


_pumps = {}
_pumps_lock = threading.Lock()


def _pump(loop, rt):
    key = (id(loop), id(rt))
    with _pumps_lock:
        pump = _pumps.get(key)
        if pump is None or pump.loop is not loop:
            pump = _pumps[key] = _EventPump(loop, rt)
        return pump
