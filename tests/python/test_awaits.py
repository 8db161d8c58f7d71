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


def pending_promotion(tiles=4, secondary=carriers.File):
    te = seeded_tiled(np.ones(tiles * BIG, np.float32), (tiles,), (BIG,), secondary)
    return te, te.promote_async(sw.TileSet([(i,) for i in range(tiles)]))


def test_users_never_construct_handles():
    for cls in (sw.AwaitResult, sw.AwaitMove, sw.AwaitProjection, sw.AwaitResidency):
        with pytest.raises(TypeError):
            cls()


def test_wait_with_a_timeout_and_done():
    # The promotion must still be pending for wait(timeout=0) to time out; on
    # a loaded machine a small one may finish first, and a larger one is tried.
    for tiles in (4, 16, 64):
        te, h = pending_promotion(tiles=tiles)
        pending = not h.done
        try:
            h.wait(timeout=0)
        except TimeoutError as raised:
            assert pending
            assert type(raised) is sw.StrideWeaveTimeoutError and isinstance(raised, sw.Error)
            assert raised.code == sw.ErrorCode.TIMEOUT
            break
        assert h.done  # it finished before the zero timeout was checked
    else:
        pytest.fail("every promotion finished before wait(timeout=0) could time out")
    assert h.wait(timeout=60) is None and h.done and h.wait() is None
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
        assert h.done
    finally:
        rt.shutdown()


def test_shutdown_cancels_pending_work():
    rt = sw.Runtime()
    te = seeded_tiled(np.ones(4 * BIG, np.float32), (4,), (BIG,), carriers.File)
    sec = carriers.File(4 * BIG, runtime=rt)
    te = sw.TiledEvictable(carriers.CPU(0, runtime=rt), sec, (4,), (BIG,))
    h = te.promote_async(sw.TileSet([(i,) for i in range(4)]))
    pending = not h.done
    rt.shutdown()
    if pending:
        with pytest.raises(RuntimeError) as e:
            h.wait()
        exact(e, sw.CancelledError)
        assert te.primary_tiles == sw.TileSet()  # usable and unchanged


def test_wait_releases_the_gil():
    # While wait() blocks with the GIL held no other Python thread can run, so
    # ticks recorded during the wait prove it was released (two: one could
    # slip in between taking `start` and entering wait()). A promotion
    # can finish before the other thread is scheduled on a loaded machine:
    # such an attempt proves nothing, and a larger one is tried.
    for tiles in (8, 16, 32, 64):
        te, h = pending_promotion(tiles=tiles)
        ticks = []
        stop = threading.Event()
        started = threading.Event()

        def ticker():
            started.set()
            while not stop.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.0005)

        thread = threading.Thread(target=ticker)
        thread.start()
        started.wait()
        try:
            start = time.perf_counter()
            h.wait()
            end = time.perf_counter()
        finally:
            stop.set()
            thread.join()
        if sum(start < t < end for t in ticks) >= 2:
            return
    pytest.fail("no other Python thread ran while wait() blocked")


def test_await_in_asyncio_without_blocking_the_loop():
    # The promotion must still be pending when the coroutine awaits it; on a
    # fast, idle machine a small one is not, and a larger one is tried.
    for tiles in (8, 24, 64):
        te, h = pending_promotion(tiles=tiles)
        full = te.full_tensor()

        async def main():
            ticks = 0
            done = asyncio.Event()

            async def ticker():
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            pending = not h.done
            assert await h is None
            assert h.done
            compact = await te.project(full, sw.TileSelection([[5, 1]]))
            again = await asyncio.gather(*(te.project(full, sw.TileSelection([[k]])) for k in range(3)))
            done.set()
            await task
            return pending, ticks, compact, again

        pending, ticks, compact, again = asyncio.run(main())
        assert compact.shape == (2 * BIG,) and [a.shape for a in again] == [(BIG,)] * 3
        if pending:
            assert ticks > 1, "the event loop kept running while the promotion was pending"
            return
    pytest.fail("every promotion finished before the coroutine awaited it")


def test_awaiting_the_same_handle_twice_and_after_completion():
    te, h = pending_promotion()

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
