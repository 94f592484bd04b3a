"""Request metrics (result.metrics) in every path: network, a memory hit, a disk hit in a
second process (original and kept thumbnail), a 304, a merged request, a cancel, a
failure; and table rows' placeholders."""
import json
import subprocess
import sys
import time

import pixload
from conftest import drain


def load(loader, queue, url, **options):
    got = []
    loader.load(url, got.append, queue=queue, **options)
    drain(queue, lambda: got)
    return got[0]


STAGES = ("slot_wait_us", "dns_us", "connect_us", "tls_us", "first_byte_us", "transfer_us", "disk_read_us",
          "decode_us", "process_us", "queue_wait_us")


def assert_adds_up(m, host_us):
    """total_us is the stages and other_us exactly, and no more than the host saw."""
    assert sum(getattr(m, name) for name in STAGES) + m.other_us == m.total_us
    assert 0 < m.total_us <= host_us + 1000


def test_network_then_memory(server, loader, queue):
    url = server.url("gradient.jpg", case="metrics-net")
    started = time.monotonic()
    first = load(loader, queue, url, size=(64, 48))
    assert_adds_up(first.metrics, (time.monotonic() - started) * 1e6)
    m = first.metrics
    assert first.ok and m.tier == pixload.Tier.NETWORK and not m.joined
    assert m.http_status == 200 and m.http_version in (10, 11, 20)
    assert m.received_bytes == server.www.joinpath("gradient.jpg").stat().st_size
    assert m.decode_us > 0 and m.decoded_bytes == m.delivered_bytes == 64 * 48 * 4
    assert m.transfer_us + m.first_byte_us > 0 and m.disk_read_us == 0 and m.process_us == 0
    started = time.monotonic()
    second = load(loader, queue, url, size=(64, 48))
    assert_adds_up(second.metrics, (time.monotonic() - started) * 1e6)
    m = second.metrics
    assert m.tier == pixload.Tier.MEMORY and m.delivered_bytes == 64 * 48 * 4
    assert (m.received_bytes, m.decode_us, m.decoded_bytes, m.http_status) == (0, 0, 0, 0)


def test_a_failure_keeps_what_was_measured(server, loader, queue):
    result = load(loader, queue, server.url("missing.jpg", case="metrics-404"))
    assert not result.ok and result.metrics.http_status == 404
    assert result.metrics.tier == pixload.Tier.NONE


SECOND_PROCESS = """
import json, sys, pixload
with pixload.Loader(disk_cache_dir=sys.argv[1], disk_cache_bytes=8 << 20) as loader, pixload.Queue() as queue:
    got = []
    options = json.loads(sys.argv[3])
    loader.load(sys.argv[2], got.append, queue=queue, **options)
    queue.run_until(lambda: got, 30)
    m = got[0].metrics
    print(json.dumps({"ok": got[0].ok, "tier": m.tier.name, "disk_read_us": m.disk_read_us,
                      "decode_us": m.decode_us, "received_bytes": m.received_bytes}))
"""


def in_second_process(cache, url, **options):
    run = subprocess.run([sys.executable, "-c", SECOND_PROCESS, str(cache), url, json.dumps(options)],
                         check=True, capture_output=True, text=True, timeout=60)
    return json.loads(run.stdout)


def test_disk_hits_in_a_second_process(server, tmp_path):
    cache = tmp_path / "cache"
    url = server.url("gradient.jpg", case="metrics-disk")
    with pixload.Loader(disk_cache_dir=str(cache), disk_cache_bytes=8 << 20) as first:
        first.fetch_sync(url, size=(100, 75))
    original = in_second_process(cache, url)
    assert original["ok"] and original["tier"] == "DISK"
    assert original["disk_read_us"] > 0 and original["decode_us"] > 0 and original["received_bytes"] == 0
    variant = in_second_process(cache, url, size=[100, 75])
    assert variant["ok"] and variant["tier"] == "DISK_VARIANT"
    assert variant["disk_read_us"] > 0 and variant["decode_us"] == 0


def test_a_304_is_revalidated(server, tmp_path, queue):
    url = server.url("maxage1/gradient.jpg", case="metrics-304")
    options = dict(disk_cache_dir=str(tmp_path / "cache"), disk_cache_bytes=8 << 20)
    with pixload.Loader(**options) as first:
        first.fetch_sync(url)
    # The response said max-age=1 (and Expires, to the second): stale once 2 s passed.
    time.sleep(2.1)
    with pixload.Loader(**options) as loader:
        result = load(loader, queue, url)
    m = result.metrics
    assert result.ok and m.tier == pixload.Tier.REVALIDATED and m.http_status == 304
    assert m.received_bytes == 0 and m.disk_read_us > 0 and m.decode_us > 0


def test_merged_requests_say_joined(server, loader, queue):
    url = server.url("slow/gradient.jpg", case="metrics-merge")
    got = []
    loader.load(url, got.append, queue=queue)
    loader.load(url, got.append, queue=queue)
    drain(queue, lambda: len(got) == 2)
    assert sorted(r.metrics.joined for r in got) == [False, True]
    assert {r.metrics.tier for r in got} == {pixload.Tier.NETWORK}
    assert got[0].metrics.received_bytes == got[1].metrics.received_bytes > 0


def test_a_cancel_has_metrics_and_no_tier(server, loader, queue):
    got = []
    request = loader.load(server.url("slow/medium.jpg", case="metrics-cancel"), got.append, queue=queue)
    assert request.cancel()
    drain(queue, lambda: got)
    assert got[0].cancelled and got[0].metrics is not None
    assert got[0].metrics.tier == pixload.Tier.NONE and got[0].metrics.decode_us == 0


def test_table_rows_draw_their_placeholder_first(server, loader, queue):
    ph = pixload.Placeholder.blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj")
    calls = []

    def request_for_row(row):
        return {"url": server.url("slow/gradient.jpg", case=f"ph{row}"), "size": (80, 40), "placeholder": ph}

    with pixload.Table(loader, queue, 3, request_for_row, lambda row, r: calls.append((row, r))) as table:
        table.set_visible(0, 2)
        # Inside set_visible: one placeholder per visible row, 32x16 (the request's 2:1).
        assert [(row, r.placeholder, r.image.size) for row, r in calls] == [(0, True, (32, 16)), (1, True, (32, 16))]
        assert all(r.metrics is None for _, r in calls)
        drain(queue, lambda: len(calls) == 4)
    finals = [r for _, r in calls[2:]]
    assert all(r.ok and not r.placeholder and r.metrics.tier == pixload.Tier.NETWORK for r in finals)
    # A row the memory cache holds gets no placeholder.
    with pixload.Table(loader, queue, 3, request_for_row, lambda row, r: calls.append((row, r))) as table:
        before = len(calls)
        table.set_visible(0, 1)
        assert [(r.placeholder, r.metrics.tier) for _, r in calls[before:]] == [(False, pixload.Tier.MEMORY)]


def test_table_row_loading_as_it_comes_on_screen_draws_its_placeholder(server, loader, queue):
    # Row 1 is prefetched (still downloading from the slow server) while row 0 is on
    # screen; scrolled to, it gets its placeholder inside that set_visible, then its image.
    ph = pixload.Placeholder.blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj")
    calls = []

    def request_for_row(row):
        return {"url": server.url("slow/gradient.jpg", case=f"ph-prefetch{row}"), "size": (40, 40), "placeholder": ph}

    with pixload.Table(loader, queue, 3, request_for_row, lambda row, r: calls.append((row, r)),
                       prefetch_rows=1) as table:
        table.set_visible(0, 1, 1)
        assert table.stats().started == 2  # row 0, and row 1 prefetched
        assert [(row, r.placeholder) for row, r in calls] == [(0, True)]
        table.set_visible(1, 1, 1)
        assert [(row, r.placeholder) for row, r in calls] == [(0, True), (1, True)]
        drain(queue, lambda: any(row == 1 and not r.placeholder for row, r in calls))
    assert [(row, r.placeholder) for row, r in calls if row == 1] == [(1, True), (1, False)]
    assert calls[-1][1].ok and calls[-1][1].source != pixload.Source.MEMORY
