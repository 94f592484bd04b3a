"""Tables and prefetching."""
import collections

import pytest

import pixload

from conftest import drain


class Host:
    """Plays the UI: knows which rows it shows and records every on_row call."""

    def __init__(self, server, case, rows=200):
        self.server = server
        self.case = case
        self.rows = rows
        self.visible = range(0)
        self.delivered = collections.Counter()
        self.results = {}
        self.not_visible = []
        self.asked = []
        self.in_set_visible = False
        self.sync_rows = []

    def request_for_row(self, row):
        self.asked.append(row)
        if row % 50 == 49:
            return None  # such a row has no image
        if row == 7:
            return {"url": self.server.url("missing.jpg", case=self.case), "format": "rgb8"}
        return self.server.url("gradient.jpg", case=self.case, row=row)

    def on_row(self, row, result):
        if row not in self.visible:
            self.not_visible.append(row)
        self.delivered[row] += 1
        self.results[row] = result
        if self.in_set_visible:
            self.sync_rows.append(row)

    def show(self, table, first, count, direction):
        self.visible = range(first, first + count)
        self.in_set_visible = True
        try:
            table.set_visible(first, count, direction)
        finally:
            self.in_set_visible = False


def test_table_loads_visible_rows_and_prefetches(server, loader, queue):
    host = Host(server, "table")
    with pixload.Table(loader, queue, host.rows, host.request_for_row, host.on_row,
                       size=(48, 48), mode="fill", prefetch_rows=8) as table:
        host.show(table, 0, 10, +1)
        drain(queue, lambda: len(host.delivered) == 10)
        assert set(host.delivered) == set(range(10)) and set(host.delivered.values()) == {1}
        assert host.results[0].ok and host.results[0].image.size == (48, 48)
        assert host.results[7].status == pixload.Status.HTTP and host.results[7].http_status == 404
        assert set(range(10, 18)) <= set(host.asked)  # prefetched ahead in the direction
        stats = table.stats()
        assert stats.started >= 18 and stats.delivered == 9 and stats.failed == 1

        host.show(table, 40, 10, +1)  # row 49 has no image
        drain(queue, lambda: len(host.delivered) == 19)
        assert set(host.delivered) == set(range(10)) | set(range(40, 49))

        host.delivered.clear()
        host.show(table, 0, 6, -1)  # back: rows already in memory arrive inside set_visible
        assert set(host.sync_rows) == set(range(6)) - {7}
        assert table.stats().memory_hits >= 6
        assert not host.not_visible
        table.cancel_all()
        queue.dispatch()
    assert table.closed
    assert pixload._table._tables == {}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # raises 2..n are reported
def test_table_request_fn_exception_is_raised_by_set_visible(server, loader, queue):
    def bad_request(row):
        raise RuntimeError(f"row {row}")

    with pixload.Table(loader, queue, 10, bad_request, lambda row, result: None) as table:
        with pytest.raises(RuntimeError, match="row"):
            table.set_visible(0, 3)
        with pytest.raises(pixload.InvalidArgumentError):
            table.set_visible(0, 70000)


def test_closing_the_queue_closes_its_tables(server, loader):
    queue = pixload.Queue()
    table = pixload.Table(loader, queue, 10, lambda row: server.url("slow/medium.jpg", case="tq", r=row),
                          lambda row, result: None)
    table.set_visible(0, 3)
    queue.close()
    assert table.closed
    with pytest.raises(ValueError):
        table.set_visible(0, 3)


def test_prefetch_warms_the_memory_cache_with_one_download_each(server, queue):
    # Connections for all 20 at once: a load that found its prefetch still waiting for a
    # connection would stop a running prefetch to start (pixload.h, priorities), and that
    # one would be downloaded again; here every load joins a running prefetch or hits.
    with pixload.Loader(max_concurrent_downloads=20, max_downloads_per_host=20) as loader:
        check_prefetch_then_load(server, loader)


def check_prefetch_then_load(server, loader):
    urls = [server.url("gradient.jpg", case="prefetch", i=i) for i in range(20)]
    requests = loader.prefetch(urls, size=(30, 30), priority=pixload.PRIORITY_PREFETCH)
    assert len(requests) == 20 and all(r is not None and r.token for r in requests)
    # Loading the same images now joins the prefetches or hits the memory cache: never a
    # second download.
    for url in urls:
        assert loader.fetch_sync(url, size=(30, 30)).size == (30, 23)
    stats = loader.stats()
    assert stats.network_fetches == 20
    assert stats.coalesced + stats.memory_hits >= 20
    assert all(len(server.requests_for(f"/gradient.jpg?case=prefetch&i={i} ")) == 1 for i in range(20))


def test_prefetch_mixed_items_refusals_and_cancel(server, loader):
    slow = server.url("slow/noise.jpg", case="prefetch-cancel")
    requests = loader.prefetch([slow, "not a url", {"url": server.url("alpha.png"), "format": "gray8"}])
    assert requests[1] is None and requests[0] and requests[2]
    assert requests[0].cancel() and not requests[0].cancel()
    with pytest.raises(pixload.InvalidArgumentError):
        loader.prefetch(["http://127.0.0.1/x.jpg"], size=(-5, 1))
