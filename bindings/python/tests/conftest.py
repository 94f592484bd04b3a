"""Shared fixtures: the C API test images served by a private nginx (scripts/nginx.sh).

Environment:
  PIXLOAD_LIBRARY    the libpixload.so.0 under test (else the package's search order)
  PIXLOAD_CLI        the C client to compare pixels with (default build/bin/pixload)
  PXL_PY_TEST_PORT   nginx port (default: one scripts/free-port.sh says is free)
"""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def pytest_report_header(config):
    import pixload
    return [f"pixload {pixload.version()} from {pixload.library_origin}; package {pixload.__file__}"]


def _free_port():
    return int(subprocess.run([str(ROOT / "scripts/free-port.sh")], check=True, capture_output=True,
                              text=True).stdout)


class Server:
    def __init__(self, base, www, state):
        self.base = base
        self.www = www
        self.state = state

    def url(self, path, **query):
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return f"{self.base}/{path}" + (f"?{q}" if q else "")

    def requests_for(self, path_prefix):
        """Lines of the access log whose URI starts with path_prefix."""
        log = pathlib.Path(self.state, "access.log")
        if not log.exists():
            return []
        return [line for line in log.read_text().splitlines() if line.startswith(path_prefix)]


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="pxl-pytest.")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server(workdir):
    www = workdir / "www"
    www.mkdir()
    mkfixtures = workdir / "mkfixtures"
    subprocess.run(["gcc", "-std=c11", "-O1", str(ROOT / "Tests/capi/mkfixtures.c"), "-ljpeg", "-lpng", "-lwebp", "-lwebpmux",
                    "-o", str(mkfixtures)], check=True)
    subprocess.run([str(mkfixtures), str(www)], check=True)
    state = workdir / "nginx"
    nginx = str(ROOT / "scripts/nginx.sh")
    fixed = os.environ.get("PXL_PY_TEST_PORT")
    last_error = None
    # A kernel-chosen free port can be taken again before nginx binds it: try a few.
    for _ in range(1 if fixed else 5):
        port = int(fixed) if fixed else _free_port()
        run = subprocess.run([nginx, "start", str(www), str(port), str(state)], capture_output=True, text=True)
        if run.returncode == 0:
            break
        last_error = run.stderr
    else:
        pytest.fail(f"nginx did not start: {last_error}")
    try:
        yield Server(f"http://127.0.0.1:{port}", www, state)
    finally:
        subprocess.run([nginx, "stop", str(state)], check=False)


@pytest.fixture
def loader():
    import pixload

    with pixload.Loader() as loader:
        yield loader


@pytest.fixture
def queue():
    import pixload

    with pixload.Queue() as queue:
        yield queue


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("PIXLOAD_CLI") or str(ROOT / "build/bin/pixload")
    if not os.access(path, os.X_OK):
        pytest.fail(f"the C client {path} is missing: run `make all` or set PIXLOAD_CLI")
    return path


def drain(queue, done, timeout=30.0):
    """Dispatches queue until done() is true; fails the test after timeout seconds."""
    assert queue.run_until(done, timeout), f"not done after {timeout} s"


def pytest_collection_modifyitems(session, config, items):
    """test_memory.py judges RSS growth across 10,000 loads: it runs first, before other
    tests leave threads, event loops and freed-but-unreturned arenas behind in this process
    (after the whole suite its measure swung from 0.1 to 4.7 MiB on the same loads)."""
    items.sort(key=lambda item: 0 if item.fspath.basename == "test_memory.py" else 1)
