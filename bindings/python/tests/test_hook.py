"""The request hook (Loader(request_hook=...)) against the fault server's /auth route,
which answers 401 until the bearer token is its current one: a token service that
refreshes on a thread of its own, one refresh for 50 requests in flight, a coroutine hook
on the fetch's event loop, redirect hops, failing and silent hooks."""
import asyncio
import json
import os
import pathlib
import subprocess
import threading
import urllib.parse
import urllib.request

import pytest

import pixload

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def fault(server, workdir):
    """The fault server (Tests/faultserver) serving the fixtures; stopped by its pid."""
    out = open(workdir / "faultserver-hook.out", "w+")
    process = subprocess.Popen(["python3", str(ROOT / "Tests/faultserver/faultserver.py"), "--www", str(server.www),
                                "--lifetime", "600"], stdout=out, stderr=subprocess.DEVNULL)
    ready = None
    for _ in range(100):
        out.seek(0)
        ready = next((line for line in out.read().splitlines() if line.startswith("faultserver ready")), None)
        if ready or process.poll() is not None:
            break
        threading.Event().wait(0.1)
    if not ready:
        process.kill()
        pytest.fail("the fault server did not start")
    port = int(ready.split("http=")[1].split()[0])
    yield Fault(f"http://127.0.0.1:{port}")
    process.terminate()
    process.wait()
    out.close()


class Fault:
    def __init__(self, base):
        self.base = base

    def get(self, target):
        with urllib.request.urlopen(self.base + target, timeout=5) as response:
            return response.read()

    def set_token(self, realm, token):
        assert self.get(f"/__token?realm={realm}&token={urllib.parse.quote(token)}") == b"token set\n"

    def requests(self, url):
        """What the server saw for url: a list of {"headers": [[name, value]...], ...}."""
        target = url[len(self.base):]
        return json.loads(self.get("/__stats.json?uri=" + urllib.parse.quote(target, safe="")))["requests"]


def bearer(record):
    return next((v for k, v in record["headers"] if k.lower() == "authorization"), None)


class TokenService:
    """The host's side: answers at once with the token it holds; on a 401 with that token
    keeps the call while one refresh runs on its own thread (a round trip to the server,
    which issues the new token), then answers every kept call."""

    def __init__(self, fault, realm, token):
        self.fault, self.realm, self.token = fault, realm, token
        self.lock = threading.Lock()
        self.kept = []
        self.refreshing = False
        self.refreshes = 0
        self.calls = []
        fault.set_token(realm, token)

    def __call__(self, call):
        with self.lock:
            self.calls.append((call.url, call.status))
            if call.status in (401, 403):
                refused = next((h[len("Authorization: Bearer "):] for h in call.headers
                                if h.startswith("Authorization: Bearer ")), "")
                if self.refreshing or refused == self.token:
                    self.kept.append(call)
                    if not self.refreshing:
                        self.refreshing = True
                        self.refreshes += 1
                        threading.Thread(target=self._refresh, daemon=True).start()
                    return
            elif self.refreshing:
                self.kept.append(call)
                return
            token = self.token
        call.answer([f"Authorization: Bearer {token}"])

    def _refresh(self):
        token = f"{self.realm}-secret-{self.refreshes}"
        self.fault.set_token(self.realm, token)
        with self.lock:
            self.token = token
            kept, self.kept, self.refreshing = self.kept, [], False
        for call in kept:
            assert call.answer({"Authorization": f"Bearer {token}"})


def test_token_refresh_for_many(fault, workdir):
    """50 requests in flight after the server rotated its token: one refresh, all succeed
    with the new token; the image cached under the old token is still served from memory
    and from disk (a second loader), with no request; the token is in no log line, error
    message or metrics."""
    realm = f"py{os.getpid()}"
    service = TokenService(fault, realm, "first-secret")
    lines = []
    options = dict(request_hook=service, disk_cache_bytes=64 << 20, disk_cache_dir=str(workdir / "hook-cache"),
                   max_retries=0, log=lambda level, line: lines.append(line), log_level=pixload.LogLevel.INFO)
    first = f"{fault.base}/auth/realm={realm}?case=first"
    with pixload.Loader(**options) as loader:
        assert loader.fetch_sync(first, size=(64, 64)).width <= 64
        assert [bearer(r) for r in fault.requests(first)] == ["Bearer first-secret"]

        fault.set_token(realm, "rotated-elsewhere")
        urls = [f"{fault.base}/auth/realm={realm}?case=many-{i}" for i in range(50)]

        results = []
        with pixload.Queue() as queue:
            for url in urls:
                loader.load(url, results.append, queue=queue, size=(32, 32))
            assert queue.run_until(lambda: len(results) == 50, 30)
        assert [r.status for r in results] == [pixload.Status.OK] * 50
        assert service.refreshes == 1
        assert 1 <= sum(1 for _, status in service.calls if status == 401) <= 50
        for url in urls:
            seen = fault.requests(url)
            assert 1 <= len(seen) <= 2 and bearer(seen[-1]) == f"Bearer {realm}-secret-1"
        for r in results:
            assert "secret" not in repr(r.metrics)
            assert "secret" not in (r.message or "")

        calls = len(service.calls)
        assert loader.lookup(first, size=(64, 64)) is not None  # the memory cache
    with pixload.Loader(**options) as loader:
        results = []
        with pixload.Queue() as queue:
            loader.load(first, results.append, queue=queue, size=(64, 64))
            assert queue.run_until(lambda: results, 10)
        assert results[0].source == pixload.Source.DISK
    assert len(fault.requests(first)) == 1
    assert len(service.calls) == calls
    assert not [line for line in lines if "secret" in line]


def test_coroutine_hook_on_the_fetch_loop_and_redirect_hops(fault):
    """A coroutine hook runs on the loop of the `await loader.fetch` that started the
    request, for every hop: a /go/to= redirect to /auth asks it twice."""
    realm = f"pyco{os.getpid()}"
    fault.set_token(realm, "co-secret")
    seen = []

    async def hook(call):
        seen.append((call.url, threading.get_ident()))
        await asyncio.sleep(0.01)  # an await: the refresh a real hook would do
        return {"Authorization": "Bearer co-secret"}

    target = urllib.parse.quote(f"/auth/realm={realm}", safe="")
    url = f"{fault.base}/go/to={target}?case=co"

    async def main():
        with pixload.Loader(request_hook=hook) as loader:
            image = await loader.fetch(url)
            return image, threading.get_ident()

    image, loop_thread = asyncio.run(main())
    assert image.width > 0
    assert [u for u, _ in seen] == [url, f"{fault.base}/auth/realm={realm}?case=co"]
    assert all(thread == loop_thread for _, thread in seen)
    # The sync path has no loop for a coroutine hook: the request fails, it does not hang.
    with pixload.Loader(request_hook=hook) as loader:
        with pytest.raises(pixload.PixloadError) as error:
            loader.fetch_sync(f"{fault.base}/auth/realm={realm}?case=co-sync", timeout=10)
        assert error.value.status == pixload.Status.UNSUPPORTED


def test_failing_and_silent_hooks(fault):
    """A hook that fails ends its requests with its status; one that raises, with IO; one
    that never answers, with TimeoutError after hook_timeout_ms, its late answer ignored;
    a plain function may return the headers."""
    realm = f"pyf{os.getpid()}"
    fault.set_token(realm, "good-secret")
    url = f"{fault.base}/auth/realm={realm}"

    with pixload.Loader(request_hook=lambda call: call.fail(pixload.Status.NOT_FOUND, "signed out")) as loader:
        with pytest.raises(pixload.NotFoundError, match="signed out"):
            loader.fetch_sync(url + "?case=fail")
    assert fault.requests(url + "?case=fail") == []

    def raising(call):
        raise RuntimeError("no keychain")

    with pixload.Loader(request_hook=raising) as loader:
        with pytest.raises(pixload.LocalIOError, match="no keychain"):
            loader.fetch_sync(url + "?case=raise")

    with pixload.Loader(request_hook=lambda call: ["Authorization: Bearer good-secret"]) as loader:
        assert loader.fetch_sync(url + "?case=returned").width > 0

    kept = []
    with pixload.Loader(request_hook=kept.append, hook_timeout_ms=300) as loader:
        with pytest.raises(pixload.PixloadTimeoutError):
            loader.fetch_sync(url + "?case=silent", timeout=10)
        assert len(kept) == 1 and kept[0].answer(["Authorization: Bearer good-secret"]) is False
    assert fault.requests(url + "?case=silent") == []

    with pixload.Loader(request_hook=lambda call: call.answer(["no colon"])) as loader:
        with pytest.raises(pixload.InvalidArgumentError):
            loader.fetch_sync(url + "?case=invalid")


def test_loader_closed_with_calls_held(fault):
    """Closing the loader while the hook holds calls ends their requests CANCELLED; the
    calls stay answerable (doing nothing)."""
    kept = []
    results = []
    loader = pixload.Loader(request_hook=kept.append)
    with pixload.Queue() as queue:
        for i in range(3):
            loader.load(f"{fault.base}/image?case=closed-{i}", results.append, queue=queue)
        deadline = threading.Event()
        for _ in range(500):
            if len(kept) == 3:
                break
            deadline.wait(0.01)
        assert len(kept) == 3
        loader.close()
        assert queue.run_until(lambda: len(results) == 3, 10)
    assert [r.status for r in results] == [pixload.Status.CANCELLED] * 3
    assert [call.answer() for call in kept] == [False] * 3
