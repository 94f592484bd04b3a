"""Cancellation from threads and from asyncio; closing with work in flight; finalizers."""
import asyncio
import collections
import gc
import random
import subprocess
import sys
import threading
import weakref

import pytest

import pixload

from conftest import drain


def test_exactly_one_result_per_request_under_random_cancels_from_threads(server):
    """2,000 requests (fast, and slow ones still in flight), four threads cancelling at
    random while the main thread dispatches: every request gets exactly one callback, and
    every request whose cancel() returned True reports CANCELLED, never an image."""
    results = collections.Counter()
    statuses = {}
    lock = threading.Lock()

    def on_result(result):
        results[result.token] += 1
        statuses[result.token] = result.status

    with pixload.Loader(cancel_storm_limit=0) as loader, pixload.Queue() as queue:
        requests = []
        for i in range(2000):
            if i % 100 == 0:  # 20 slow bodies: still downloading when the cancels come
                url = server.url("slow/medium.jpg", case="threads", i=i)
            else:  # 1,980 fast ones; every 3rd URL repeats, so some requests are merged
                url = server.url("gradient.jpg", case="threads", i=i - i % 3)
            requests.append(loader.load(url, on_result, queue=queue, size=(24, 24)))
        cancelled_by_us = set()

        def canceller(seed):
            rng = random.Random(seed)
            for request in rng.sample(requests, 600):
                if request.cancel():
                    with lock:
                        cancelled_by_us.add(request.token)

        threads = [threading.Thread(target=canceller, args=(seed,)) for seed in range(4)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):  # dispatch while the threads cancel
            if queue.wait(0.01):
                queue.dispatch()
        for t in threads:
            t.join()
        slow_left = [r for r in requests[::100] if r.token not in results]
        for request in slow_left:  # don't wait 3 s per body
            request.cancel()
        drain(queue, lambda: len(results) == len(requests))
        assert queue.wait(0.1) == 0 and queue.dispatch() == 0  # nothing more comes
    assert len(results) == 2000 and set(results.values()) == {1}
    assert {r.token for r in requests} == set(results)
    assert cancelled_by_us, "the threads cancelled nothing: the test did not test"
    assert all(statuses[t] == pixload.Status.CANCELLED for t in cancelled_by_us)
    outcomes = collections.Counter(statuses.values())
    print(f"\n  outcomes: {dict(outcomes)}; cancel() returned True for {len(cancelled_by_us)}")
    assert outcomes[pixload.Status.OK] > 0
    assert set(outcomes) <= {pixload.Status.OK, pixload.Status.CANCELLED}
    assert pixload.pending_callbacks() == 0


def test_asyncio_task_cancel_cancels_the_request(server):
    async def main():
        async with pixload.Loader() as loader:
            url = server.url("slow/noise.jpg", case="asyncio-cancel")
            task = asyncio.ensure_future(loader.fetch(url))
            other = asyncio.ensure_future(loader.fetch(server.url("gradient.jpg", case="asyncio-other")))
            assert (await other).size == (640, 480)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The CANCELLED callback arrives through the queue: the registry empties.
            for _ in range(500):
                if pixload.pending_callbacks() == 0:
                    break
                await asyncio.sleep(0.01)
            assert pixload.pending_callbacks() == 0
            assert loader.stats().cancelled == 1
            # noise.jpg at 20 KB/s takes ~13 s; it was stopped long before.
            assert loader.stats().bytes_downloaded < 200_000

    asyncio.run(asyncio.wait_for(main(), 30))


def test_asyncio_cancel_leaves_a_merged_request_alone(server):
    """Two tasks load the same slow URL (one download); cancelling one leaves the other."""
    async def main():
        async with pixload.Loader() as loader:
            url = server.url("slow/medium.jpg", case="asyncio-merged")
            a = asyncio.ensure_future(loader.fetch(url, size=(50, 50)))
            b = asyncio.ensure_future(loader.fetch(url, size=(50, 50)))
            await asyncio.sleep(0.2)
            a.cancel()
            image = await b
            assert image.size == (50, 38)
            with pytest.raises(asyncio.CancelledError):
                await a
            assert len(server.requests_for("/slow/medium.jpg?case=asyncio-merged ")) == 1

    asyncio.run(asyncio.wait_for(main(), 30))


def test_asyncio_wait_for_timeout_and_many_concurrent(server):
    async def main():
        async with pixload.Loader() as loader:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(loader.fetch(server.url("slow/noise.jpg", case="wait-for")), 0.3)
            images = await asyncio.gather(*(loader.fetch(server.url("gradient.jpg", case="gather", i=i),
                                                         size=(32, 32), format="gray8") for i in range(200)))
            assert all(im.size == (32, 24) for im in images)
            with pytest.raises(pixload.HTTPError):
                await loader.fetch(server.url("missing.jpg", case="async"))

    asyncio.run(main())
    assert pixload.pending_callbacks() == 0


def test_loader_close_inside_the_loop_fails_pending_fetches(server):
    async def main():
        loader = pixload.Loader()
        tasks = [asyncio.ensure_future(loader.fetch(server.url("slow/medium.jpg", case="close-async", i=i)))
                 for i in range(5)]
        await asyncio.sleep(0.1)
        loader.close()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(o, pixload.RequestCancelled) for o in outcomes), outcomes
        with pytest.raises(ValueError, match="closed"):
            await loader.fetch(server.url("gradient.jpg"))

    asyncio.run(asyncio.wait_for(main(), 30))
    assert pixload.pending_callbacks() == 0


def test_close_loader_with_work_in_flight(server):
    results = []
    with pixload.Queue() as queue:
        loader = pixload.Loader()
        for i in range(10):
            loader.load(server.url("slow/medium.jpg", case="close-loader", i=i), results.append, queue=queue)
        loader.close()
        loader.close()  # idempotent
        assert loader.closed
        with pytest.raises(ValueError):
            loader.load(server.url("gradient.jpg"), results.append, queue=queue)
        drain(queue, lambda: len(results) == 10)  # each still gets its one callback
    assert all(r.cancelled and r.image is None for r in results)
    assert isinstance(results[0].error, pixload.RequestCancelled)


def test_close_queue_with_work_in_flight_delivers_on_the_closing_thread(server, loader):
    results = []
    queue = pixload.Queue()
    for i in range(10):
        loader.load(server.url("slow/medium.jpg", case="close-queue", i=i),
                    lambda r: results.append((r, threading.get_ident())), queue=queue)
    queue.close()  # runs the CANCELLED callbacks before it returns
    assert len(results) == 10
    assert all(r.cancelled and tid == threading.get_ident() for r, tid in results)
    assert pixload.pending_callbacks() == 0
    with pytest.raises(ValueError):
        queue.dispatch()


def test_context_managers_and_finalizers(server):
    with pixload.Loader() as loader, pixload.Queue() as queue:
        image = loader.fetch_sync(server.url("gradient.jpg", case="ctx"), size=(10, 10))
        with image:
            assert image.pixels
        assert image.closed
    assert loader.closed and queue.closed
    # Dropped without close(): the finalizers free them.
    loader, queue = pixload.Loader(), pixload.Queue()
    finalizers = [loader._finalizer, queue._finalizer]
    del loader, queue
    gc.collect()
    assert not any(f.alive for f in finalizers)


def test_dropping_a_loader_inside_a_callback_defers_its_free(server, loader, queue):
    """pxl_loader_free must not run inside a callback; the finalizer waits for the end of
    the dispatch instead of deadlocking or crashing."""
    inner = [pixload.Loader()]
    finalizer = inner[0]._finalizer
    state = {}

    def on_result(result):
        inner.clear()  # the last reference to that loader goes inside the callback
        gc.collect()
        state["alive_inside"] = finalizer.alive

    loader.load(server.url("gradient.jpg", case="defer"), on_result, queue=queue, size=(8, 8))
    drain(queue, lambda: state)
    assert state["alive_inside"] is False  # detached from Python at once ...
    assert not pixload._callbacks._tls.deferred  # ... and freed when the dispatch ended


def test_interpreter_exit_with_everything_open(server):
    """Open loader, queue, table, requests in flight and pixel views at exit: no crash,
    no 'Exception ignored', exit status 0."""
    code = f"""
import pixload
loader = pixload.Loader()
queue = pixload.Queue()
image = loader.fetch_sync({server.url("gradient.jpg", case="exit")!r}, size=(20, 20))
try:
    array = image.to_numpy()
except ImportError:
    array = None
view = image.pixels
for i in range(5):
    loader.load({server.url("slow/medium.jpg", case="exit")!r} + f"&i={{i}}", print, queue=queue)
table = pixload.Table(loader, queue, 100, lambda row: {server.url("gradient.jpg", case="exit-table")!r} + f"&r={{row}}",
                      lambda row, result: None)
table.set_visible(0, 10)
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok") and "Exception" not in run.stderr, run.stderr
    # The five loads in flight got their one callback (CANCELLED) as the queue was freed.
    assert run.stdout.count("<pixload.Result") == 5 and run.stdout.count("CANCELLED") == 5
