"""The log callback (pxl_config.log, since 0.2.0): lines arrive on the library's threads."""
import gc
import threading
import time

import pytest

import pixload


def wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def unusable_cache_dir(tmp_path):
    """A directory path under a regular file: the disk cache cannot be created there."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    return str(blocker / "cache")


def test_an_unusable_disk_cache_is_logged_as_a_warning(server, tmp_path):
    lines = []
    lock = threading.Lock()

    def log(level, message):
        with lock:
            lines.append((level, message, threading.get_ident()))

    with pixload.Loader(disk_cache_dir=unusable_cache_dir(tmp_path), disk_cache_bytes=1 << 20, log=log) as loader:
        # Still loads, from the network (the loader turns memory-only).
        image = loader.fetch_sync(server.url("gradient.jpg", case="log-warning"), size=(32, 32), timeout=30)
        assert image.size == (32, 24)
        assert wait_for(lambda: any("without a disk cache" in m for _, m, _ in lines)), lines
    with lock:
        level, message, thread = next(line for line in lines if "without a disk cache" in line[1])
    assert level is pixload.LogLevel.WARNING
    assert isinstance(message, str) and not message.endswith("\n")
    assert thread != threading.get_ident()  # a disk thread of the library


def test_a_raising_log_callback_is_ignored_and_the_loader_keeps_working(server, tmp_path):
    calls = []

    def log(level, message):
        calls.append(message)
        raise RuntimeError("a broken logger")

    with pixload.Loader(disk_cache_dir=unusable_cache_dir(tmp_path), disk_cache_bytes=1 << 20, log=log) as loader:
        assert wait_for(lambda: calls)
        image = loader.fetch_sync(server.url("gradient.jpg", case="log-raises"), size=(16, 16), timeout=30)
        assert image.width == 16


def test_the_log_callback_outlives_the_dropped_loader_object(tmp_path):
    """Only the library holds the CFUNCTYPE while the loader lives: dropping the Python
    objects must not free it under a running disk thread."""
    lines = []
    loader = pixload.Loader(disk_cache_dir=unusable_cache_dir(tmp_path), disk_cache_bytes=1 << 20,
                            log=lambda level, message: lines.append(message))
    del loader
    gc.collect()  # frees the loader (pxl_loader_free joins its threads), then the trampoline
    # The line may or may not have been written before the free; either way, no crash.


def test_log_level_below_warning_silences_warnings(tmp_path):
    lines = []
    with pixload.Loader(disk_cache_dir=unusable_cache_dir(tmp_path), disk_cache_bytes=1 << 20,
                        log=lambda level, message: lines.append(message), log_level="error") as loader:
        loader.clear_disk_cache()  # opens the disk cache (and fails) on this thread, at once
    assert lines == []


def test_log_must_be_callable():
    with pytest.raises(TypeError):
        pixload.Loader(log="stderr")
