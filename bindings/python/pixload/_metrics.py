"""Request metrics (pxl_metrics, since 0.5.0): what one request cost, stage by stage.

Read inside the final callback (the C getter is valid only there) and kept on the
Result as `result.metrics`."""
import ctypes
import dataclasses
import enum

from . import _ffi
from ._ffi import lib


class Tier(enum.IntEnum):
    """Which tier answered (pxl_tier)."""
    NONE = 0
    MEMORY = 1
    DISK_VARIANT = 2
    DISK = 3
    REVALIDATED = 4
    NETWORK = 5
    FILE = 6
    DATA = 7
    FETCHER = 8


@dataclasses.dataclass(frozen=True)
class Metrics:
    """One request's costs: times in microseconds (`*_us`), sizes in bytes. A failed or
    cancelled request has what was measured up to then (0: not reached). `joined`: it
    shared a download or decode another request started (the figures are that work's)."""
    tier: Tier = Tier.NONE
    joined: bool = False
    slot_wait_us: int = 0
    dns_us: int = 0
    connect_us: int = 0
    tls_us: int = 0
    first_byte_us: int = 0
    transfer_us: int = 0
    disk_read_us: int = 0
    decode_us: int = 0
    process_us: int = 0
    queue_wait_us: int = 0
    received_bytes: int = 0
    http_status: int = 0
    http_version: int = 0  # 10, 11, 20, 30; 0: none
    redirects: int = 0
    connection_reused: bool = False
    decoded_bytes: int = 0
    delivered_bytes: int = 0
    worker_us: int = 0  # of decode_us: the confined decode worker's (pixload.h, "Isolation")
    isolated: bool = False
    other_us: int = 0  # intake to callback in no stage above (hand-offs, storing on disk)
    total_us: int = 0  # intake to callback: exactly the stages' sum plus other_us
    after_last_byte_us: int = 0  # the transfer's last byte to the callback (0: no transfer)


_COPIED = ("slot_wait_us", "dns_us", "connect_us", "tls_us", "first_byte_us", "transfer_us", "disk_read_us",
           "decode_us", "process_us", "queue_wait_us", "http_status", "http_version", "redirects",
           "decoded_bytes", "delivered_bytes", "worker_us", "other_us", "total_us",
           "after_last_byte_us")


_SIZE = ctypes.sizeof(_ffi.pxl_metrics)


def metrics_copy(result_p):
    """The pxl_metrics of the result a final callback is running for (one C call, the
    struct copied while that is allowed), or None (previews). `metrics_from_struct` makes
    the Metrics when asked: most hosts never look."""
    m = _ffi.pxl_metrics(struct_size=_SIZE)
    return m if lib.pxl_result_metrics(result_p, ctypes.byref(m)) == 0 else None


def metrics_from_c(result_p):
    """The metrics of the result a final callback is running for, or None (previews)."""
    m = metrics_copy(result_p)
    return None if m is None else metrics_from_struct(m)


def metrics_from_struct(m):
    """A Metrics from a pxl_metrics the library filled."""
    tier = Tier(m.tier) if m.tier in Tier._value2member_map_ else m.tier
    return Metrics(tier=tier, joined=bool(m.joined), received_bytes=m.bytes_received,
                   connection_reused=bool(m.connection_reused), isolated=bool(m.isolated),
                   **{name: getattr(m, name) for name in _COPIED})
