"""Await handles: wait, done, timeouts, the GIL, and asyncio."""
import asyncio
import threading
import time

import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from conftest import exact, seeded_tiled

BIG = 1 << 21


class held_promotion:
    """A promotion whose first read is held in flight (sw_testing_hold) until
    release() or the end of the with-block: pending, deterministically."""

    def __init__(self, tiles=4):
        self.rt = sw.Runtime()
        N = sw._native
        sec = carriers.File(tiles * 16, runtime=self.rt)
        self.te = sw.TiledEvictable(carriers.CPU(0, runtime=self.rt), sec, (tiles,), (16,))
        N.sw_testing_hold(self.rt._h, N.SW_FAULT_READ, 1)
        self.handle = self.te.promote_async(sw.TileSet([(i,) for i in range(tiles)]))
        N.sw_testing_wait_held(self.rt._h, 60 * 10**9)
        self.released = False

    def release(self):
        if not self.released:
            self.released = True
            sw._native.sw_testing_release_hold(self.rt._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        self.handle.wait(timeout=60)
        self.rt.shutdown()


def test_users_never_construct_handles():
    for cls in (sw.AwaitResult, sw.AwaitMove, sw.AwaitProjection, sw.AwaitResidency):
        with pytest.raises(TypeError):
            cls()


def test_wait_with_a_timeout_and_done():
    with held_promotion() as p:
        h = p.handle
        assert not h.done()
        with pytest.raises(TimeoutError) as raised:
            h.wait(timeout=0)
        assert type(raised.value) is sw.StrideWeaveTimeoutError and isinstance(raised.value, sw.Error)
        assert raised.value.code == sw.ErrorCode.TIMEOUT
        assert not h.done()
        p.release()
        assert h.wait(timeout=60) is None and h.done() and h.wait() is None
        with pytest.raises(sw.StrideWeaveValueError):
            h.wait(timeout=-1)
        with pytest.raises(sw.StrideWeaveTypeError):
            h.wait(timeout="1")


def test_failed_work_raises_the_same_kind_every_wait():
    rt = sw.Runtime()
    try:
        te = sw.TiledEvictable(carriers.CPU(0, runtime=rt), carriers.File(8, runtime=rt), (4,), (2,))
        sw._native.sw_testing_inject_fault(rt._h, sw._native.SW_FAULT_READ, 1)
        h = te.promote_async(sw.TileSet([(0,), (1,)]))
        for _ in range(2):
            with pytest.raises(OSError) as e:
                h.wait()
            exact(e, sw.StrideWeaveOSError)
        assert h.done()
    finally:
        rt.shutdown()


def test_shutdown_cancels_pending_work():
    p = held_promotion()
    p.rt.shutdown()  # also lets the held read complete, into a cancelled request
    with pytest.raises(RuntimeError) as e:
        p.handle.wait()
    exact(e, sw.CancelledError)
    assert p.te.primary_tiles == sw.TileSet()  # usable and unchanged


def test_wait_releases_the_gil():
    # While wait() blocks with the GIL held no other Python thread can run.
    # The promotion is held in flight until another Python thread has ticked
    # twice during the wait and then releases it: that only happens if wait()
    # released the GIL (if not, wait's own timeout ends the test).
    with held_promotion() as p:
        ticks = []
        waiting = threading.Event()

        def ticker():
            waiting.wait()
            while len(ticks) < 2:
                ticks.append(time.perf_counter())
                time.sleep(0.001)
            p.release()

        thread = threading.Thread(target=ticker)
        thread.start()
        start = time.perf_counter()
        waiting.set()
        try:
            p.handle.wait(timeout=30)
        finally:
            p.release()
            thread.join()
        end = time.perf_counter()
        assert sum(start < t < end for t in ticks) >= 2


def test_await_in_asyncio_without_blocking_the_loop():
    # The promotion is held in flight until the event loop has ticked while
    # the coroutine awaits it; the ticker then lets it complete.
    with held_promotion(tiles=8) as p:
        te, h = p.te, p.handle
        full = te.full_tensor()

        async def main():
            ticks = 0
            done = asyncio.Event()

            async def ticker():
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    if ticks == 3:
                        p.release()
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            assert not h.done()
            assert await h is None
            assert h.done()
            compact = await te.project(full, sw.TileSelection([[5, 1]]))
            again = await asyncio.gather(*(te.project(full, sw.TileSelection([[k]])) for k in range(3)))
            done.set()
            await task
            return ticks, compact, again

        ticks, compact, again = asyncio.run(main())
        assert ticks >= 3, "the event loop kept running while the promotion was pending"
        assert compact.shape == (32,) and [a.shape for a in again] == [(16,)] * 3


def test_awaiting_the_same_handle_twice_and_after_completion():
    te, h = seeded_tiled(np.ones(4 * BIG, np.float32), (4,), (BIG,), carriers.File), None
    h = te.promote_async(sw.TileSet([(i,) for i in range(4)]))

    async def main():
        a, b = await asyncio.gather(_await(h), _await(h))
        c = await h
        return a, b, c

    assert asyncio.run(main()) == (None, None, None)
    p = te.project(te.full_tensor(), sw.TileSelection([[0]]))
    result = p.wait()

    async def late():
        return await p

    assert asyncio.run(late()) is result


async def _await(handle):
    return await handle


def test_awaited_failure_raises_in_the_coroutine():
    rt = sw.Runtime()
    try:
        te = sw.TiledEvictable(carriers.CPU(0, runtime=rt), carriers.File(4 * BIG, runtime=rt), (4,), (BIG,))
        sw._native.sw_testing_inject_fault(rt._h, sw._native.SW_FAULT_READ, 3)
        h = te.promote_async(sw.TileSet([(i,) for i in range(4)]))

        async def main():
            await h

        with pytest.raises(sw.StrideWeaveOSError):
            asyncio.run(main())
    finally:
        rt.shutdown()


def test_done_is_a_method_and_the_timeout_message_is_in_seconds():
    with held_promotion() as p:
        h = p.handle
        assert callable(h.done) and h.done() is False
        with pytest.raises(TimeoutError, match=r"after 0\.05 s; the work is still pending"):
            h.wait(timeout=0.05)
        p.release()
        h.wait(timeout=60)
        assert h.done() is True


def test_add_done_callback_fires_once_on_the_waiting_thread_or_at_once():
    with held_promotion() as p:
        h = p.handle
        seen = []
        h.add_done_callback(lambda x: seen.append(("first", x)))
        h.add_done_callback(lambda x: 1 / 0)  # logged; the others still run
        h.add_done_callback(lambda x: seen.append(("second", x)))
        assert seen == []
        with pytest.raises(TypeError):
            h.add_done_callback(42)
        p.release()
        h.wait(timeout=60)
        assert seen == [("first", h), ("second", h)]
        h.add_done_callback(lambda x: seen.append(("late", x)))  # already done: at once
        assert seen[-1] == ("late", h)
        h.wait()
        assert len(seen) == 3
