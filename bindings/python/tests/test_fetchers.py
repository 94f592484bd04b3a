"""Fetchers for the host's own schemes (Loader.add_fetcher) and data: URIs, with real
storage: a SQLite database read on the fetcher's own thread, a zip archive, an asyncio
coroutine; and hosts that misbehave."""
import asyncio
import base64
import queue as queue_module
import sqlite3
import threading
import urllib.parse
import zipfile

import pytest

import pixload


def wait_for(condition, timeout=5.0):
    done = threading.Event()
    deadline = threading.Timer(timeout, done.set)
    deadline.start()
    try:
        while not condition() and not done.is_set():
            done.wait(0.005)
    finally:
        deadline.cancel()
    return condition()


class SQLiteFetcher:
    """Blobs of an `images` table, read by a thread of its own (sqlite3 blocks); `hold`
    keeps it from answering until released."""

    def __init__(self, path):
        self.path = path
        self.jobs = queue_module.Queue()
        self.starts = []
        self.cancels = 0
        self.hold = threading.Event()
        self.hold.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def __call__(self, url, sink):
        self.starts.append(url)
        sink.on_cancel = self._cancelled
        self.jobs.put((url, sink))

    def _cancelled(self):
        self.cancels += 1

    def _run(self):
        db = sqlite3.connect(self.path)
        while True:
            job = self.jobs.get()
            if job is None:
                break
            self.hold.wait()
            url, sink = job
            row = db.execute("SELECT data FROM images WHERE name = ?", (url.rsplit("/", 1)[-1],)).fetchone()
            if row is None:
                sink.finish(pixload.Status.NOT_FOUND, "no such image")
                continue
            data = row[0]
            for at in range(0, len(data), 4096):
                if not sink.write(data[at:at + 4096]):
                    break
            sink.finish()
        db.close()

    def close(self):
        self.hold.set()
        self.jobs.put(None)
        self.thread.join()


@pytest.fixture
def database(server, tmp_path):
    path = tmp_path / "images.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE images (name TEXT PRIMARY KEY, data BLOB)")
    for name in ("gradient.jpg", "alpha.png", "progressive.jpg"):
        db.execute("INSERT INTO images VALUES (?, ?)", (name, (server.www / name).read_bytes()))
    db.commit()
    db.close()
    fetcher = SQLiteFetcher(str(path))
    yield fetcher
    fetcher.close()


def test_sqlite_fetcher_merges_caches_and_reaches_disk(database, tmp_path):
    cache = tmp_path / "cache"
    for round in range(2):
        with pixload.Loader(disk_cache_bytes=8 << 20, disk_cache_dir=str(cache), disk_variant_max_side=0) as loader, \
                pixload.Queue() as q:
            loader.add_fetcher("db", database, disk_cache=True)
            starts = len(database.starts)
            if round == 0:
                database.hold.clear()
            results = []
            for i in range(20):
                loader.load("db://images/gradient.jpg", results.append, queue=q, size=(32 * (1 + i % 5), 0))
            if round == 0:
                assert wait_for(lambda: len(database.starts) > starts)
                assert len(database.starts) - starts == 1  # one start for the key
                database.hold.set()
            assert q.run_until(lambda: len(results) == 20, timeout=30)
            assert all(r.ok for r in results), [r.error for r in results if not r.ok]
            sources = {r.source for r in results}
            if round == 0:
                assert sources == {pixload.Source.FETCHER}
            else:  # nothing holds the disk: a size already decoded may come from memory
                assert pixload.Source.DISK in sources and sources <= {pixload.Source.DISK, pixload.Source.MEMORY}
            assert sorted({r.image.width for r in results}) == [32, 64, 96, 128, 160]
            assert len(database.starts) - starts == (1 if round == 0 else 0)
            with pytest.raises(pixload.NotFoundError, match="no such image"):
                loader.fetch_sync("db://images/missing.jpg", timeout=10)


def test_cancels_reach_the_fetcher(database):
    with pixload.Loader() as loader, pixload.Queue() as q:
        loader.add_fetcher("db", database, max_concurrent=1)
        database.hold.clear()
        results = []
        a = loader.load("db://images/gradient.jpg", results.append, queue=q)
        b = loader.load("db://images/gradient.jpg", results.append, queue=q, size=(10, 10))
        assert wait_for(lambda: database.starts)
        a.cancel()
        assert not wait_for(lambda: database.cancels, timeout=0.1)  # b still wants it
        b.cancel()
        assert wait_for(lambda: database.cancels == 1)
        database.hold.set()
        assert q.run_until(lambda: len(results) == 2, timeout=10)
        assert all(isinstance(r.error, pixload.RequestCancelled) for r in results)
        assert database.cancels == 1


def test_zip_archive_fetcher_through_a_table(server, tmp_path):
    archive = tmp_path / "images.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("gradient.jpg", "alpha.png"):
            z.write(server.www / name, name)
    starts = []
    lock = threading.Lock()
    hold = threading.Event()

    def serve(url, sink):
        starts.append(url)

        def work():
            hold.wait()
            with lock, zipfile.ZipFile(archive) as z:
                try:
                    sink.write(z.read(url.split(":", 1)[1]))
                    sink.finish()
                except KeyError:
                    sink.finish(pixload.Status.NOT_FOUND)
        threading.Thread(target=work).start()

    rows = {}
    with pixload.Loader() as loader, pixload.Queue() as q:
        loader.add_fetcher("zip", serve)
        names = ["gradient.jpg", "alpha.png", "missing.png"]
        with pixload.Table(loader, q, 6, lambda row: {"url": "zip:" + names[row % 3], "size": (16 + row, 0)},
                           lambda row, result: rows.__setitem__(row, result)) as table:
            table.set_visible(0, 6)
            hold.set()
            assert q.run_until(lambda: len(rows) == 6, timeout=30)
        assert sorted(starts) == ["zip:alpha.png", "zip:gradient.jpg", "zip:missing.png"]
        for row, result in rows.items():
            if row % 3 == 2:
                assert result.error.status == pixload.Status.NOT_FOUND
            else:
                assert result.ok and result.image.width == 16 + row and result.source == pixload.Source.FETCHER


def test_coroutine_fetcher_runs_on_the_awaiting_loop(server):
    data = (server.www / "alpha.png").read_bytes()
    seen = {}

    async def serve(url, sink):
        seen["loop"] = asyncio.get_running_loop()
        if url == "aio:forever":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                seen["cancelled"] = True
                raise
        await asyncio.sleep(0)
        sink.write(data)

    async def main(loader):
        image = await loader.fetch("aio:alpha")
        assert seen["loop"] is asyncio.get_running_loop()
        task = asyncio.ensure_future(loader.fetch("aio:forever"))
        while "cancelled" not in seen and not task.done():
            await asyncio.sleep(0.01)
            if seen.get("loop") and not task.cancelled() and "started" not in seen:
                seen["started"] = True
                await asyncio.sleep(0.05)
                task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return image

    with pixload.Loader() as loader:
        loader.add_fetcher("aio", serve)
        image = asyncio.run(main(loader))
        assert (image.width, image.height) == (300, 200)
        assert seen.get("cancelled")  # the library's cancel reached the coroutine
        with pytest.raises(TypeError, match="coroutine"):
            loader.fetch_sync("aio:alpha")


def test_misbehaving_fetchers():
    sinks = []
    with pixload.Loader(timeout_ms=300, max_body_bytes=1000) as loader:
        loader.add_fetcher("silent", lambda url, sink: sinks.append(sink))
        with pytest.raises(pixload.PixloadTimeoutError):
            loader.fetch_sync("silent:never", timeout=10)
        assert wait_for(lambda: sinks[0].cancelled)
        assert sinks[0].write(b"late") is False
        assert sinks[0].finish() is False  # the request had ended
        assert sinks[0].finish() is False  # and a second finish is harmless

        def raises(url, sink):
            raise RuntimeError("broken fetcher")
        loader.add_fetcher("raises", raises)
        with pytest.raises(pixload.LocalIOError, match="broken fetcher"):
            loader.fetch_sync("raises:x", timeout=10)

        results = []
        with pixload.Queue() as q:
            loader.load("silent:big", results.append, queue=q)
            assert wait_for(lambda: len(sinks) == 2)
            assert sinks[1].write(b"x" * 600)
            assert not sinks[1].write(b"x" * 600)  # over max_body_bytes: ended
            assert q.run_until(lambda: results, timeout=10)
            assert results[0].error.status == pixload.Status.BODY_TOO_LARGE
            assert wait_for(lambda: sinks[1].cancelled)

            # Closed with a fetch out: its request ends CANCELLED, the sink is told.
            loader.load("silent:open", results.append, queue=q)
            assert wait_for(lambda: len(sinks) == 3)
            loader.close()
            assert sinks[2].cancelled
            assert q.run_until(lambda: len(results) == 2, timeout=10)
            assert isinstance(results[1].error, pixload.RequestCancelled)
            assert sinks[2].write(b"x") is False


def test_registration_rules():
    from pixload import _fetchers

    with pixload.Loader() as loader:
        before = len(_fetchers._fetchers)
        for scheme in ("http", "data", "file", "ftp", "a b", ""):
            with pytest.raises(pixload.InvalidArgumentError):
                loader.add_fetcher(scheme, lambda url, sink: None)
        # A refusal never calls destroy (pixload.h, "Extensions"): the binding drops its entry.
        assert len(_fetchers._fetchers) == before
        with pytest.raises(pixload.URLError):
            loader.fetch_sync("app:x")
        loader.add_fetcher("app", lambda url, sink: sink.finish(pixload.Status.NOT_FOUND))
        with pytest.raises(pixload.InvalidArgumentError):
            loader.add_fetcher("APP", lambda url, sink: None)
        with pytest.raises(pixload.NotFoundError):
            loader.fetch_sync("app:x")
        assert loader.remove_fetcher("app")
        assert not loader.remove_fetcher("app")


def test_data_uris(server, tmp_path):
    png = (server.www / "alpha.png").read_bytes()
    b64 = "data:image/jpeg;base64," + base64.b64encode(png).decode()  # the media type is ignored
    pct = "data:," + urllib.parse.quote_from_bytes(png, safe="")
    with pixload.Loader() as loader:
        with pytest.raises(pixload.URLError):
            loader.fetch_sync(b64)
    cache = tmp_path / "cache"
    with pixload.Loader(allowed_schemes={"http", "https", "data"}, disk_cache_bytes=8 << 20,
                        disk_cache_dir=str(cache)) as loader, pixload.Queue() as q:
        for uri in (b64, pct):
            results = []
            loader.load(uri, results.append, queue=q)
            assert q.run_until(lambda: results, timeout=10)
            assert results[0].ok and results[0].source == pixload.Source.DATA
            assert (results[0].image.width, results[0].image.height) == (300, 200)
    with pixload.Loader(allowed_schemes={"data"}, disk_cache_bytes=8 << 20, disk_cache_dir=str(cache)) as loader:
        with pytest.raises(pixload.NotCachedError):  # never written to disk
            loader.fetch_sync(b64, cache_only=True)
    with pixload.Loader(allowed_schemes={"data"}, max_body_bytes=len(png) - 1) as loader:
        with pytest.raises(pixload.ImageError) as error:
            loader.fetch_sync(b64)
        assert error.value.status == pixload.Status.BODY_TOO_LARGE
