"""No growth in memory over 10,000 loads through every path of the bindings."""
import asyncio
import ctypes
import gc
import os

import pixload

from conftest import drain

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    """Resident memory after the collector and glibc have given back what is free: what
    the allocators merely keep (per-thread arenas, free chunks; more of it the busier the
    machine) is not growth."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def test_no_memory_growth_over_10000_loads(server):
    # A small memory cache (300 images): every other load is one of 100 hot URLs (memory
    # hits), the others sweep 1,400 more (a network fetch and a decode each, evicting).
    counter = iter(range(10**9))

    def next_url():
        i = next(counter)
        n = (i // 2) % 100 if i % 2 else 100 + (i // 2 * 11) % 1400
        return server.url("gradient.jpg", case="memory", i=n)

    with pixload.Loader(memory_cache_count=300) as loader:
        def batch(n):
            """n loads: 80% asyncio, 10% callbacks on a Queue, 10% fetch_sync; every image
            viewed and dropped."""
            async def run_async(k):
                images = await asyncio.gather(*(loader.fetch(next_url(), size=(16, 16)) for _ in range(k)))
                assert all(len(im.pixels) == 12 * 16 * 4 for im in images)

            asyncio.run(run_async(n * 8 // 10))
            results = []
            with pixload.Queue() as queue:
                for _ in range(n // 10):
                    loader.load(next_url(), lambda r: results.append(r.unwrap().pixels[0]), queue=queue,
                                size=(16, 16))
                drain(queue, lambda: len(results) == n // 10)
            for _ in range(n - n * 8 // 10 - n // 10):
                assert loader.fetch_sync(next_url(), size=(16, 16)).size == (16, 12)

        for _ in range(2):  # warm-up: 2,000 loads fill the cache, the allocators, the pools
            batch(1000)
        gc.collect()
        before = rss_bytes()
        for _ in range(10):
            batch(1000)
        gc.collect()
        after = rss_bytes()
        stats = loader.stats()
    growth = after - before
    print(f"\n  RSS after 2,000 warm-up loads: {before / 2**20:.1f} MiB; after 10,000 more: "
          f"{after / 2**20:.1f} MiB; growth {growth / 2**10:.0f} KiB "
          f"({growth / 10000:.1f} B/load). network fetches {stats.network_fetches}, memory hits "
          f"{stats.memory_hits}, merged {stats.coalesced}, requests {stats.requests}")
    assert stats.requests == 12000
    assert stats.network_fetches > 2000 and stats.memory_hits > 1000  # really both kinds
    assert pixload.pending_callbacks() == 0
    # 10,000 leaked Python Results + Images alone would be several MiB; 100 bytes a load
    # is 1 MiB. Allow 4 MiB of allocator noise.
    assert growth < 4 * 2**20
