//! Request metrics (pxl_metrics, since 0.5.0): what one request cost, stage by stage.
//! [`Loader::load_measured`](crate::Loader::load_measured) hands them to its closure.

use crate::sys;

/// Which tier answered (pxl_tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tier {
    #[default]
    None,
    Memory,
    DiskVariant,
    Disk,
    Revalidated,
    Network,
    File,
    Data,
    Fetcher,
    /// A value this version does not know.
    Other(u32),
}

impl Tier {
    pub fn from_raw(raw: i32) -> Tier {
        match raw as sys::pxl_tier {
            sys::PXL_TIER_NONE => Tier::None,
            sys::PXL_TIER_MEMORY => Tier::Memory,
            sys::PXL_TIER_DISK_VARIANT => Tier::DiskVariant,
            sys::PXL_TIER_DISK => Tier::Disk,
            sys::PXL_TIER_REVALIDATED => Tier::Revalidated,
            sys::PXL_TIER_NETWORK => Tier::Network,
            sys::PXL_TIER_FILE => Tier::File,
            sys::PXL_TIER_DATA => Tier::Data,
            sys::PXL_TIER_FETCHER => Tier::Fetcher,
            other => Tier::Other(other),
        }
    }
}

/// One request's costs: times in microseconds (`*_us`), sizes in bytes. A failed or
/// cancelled request has what was measured up to then (0: not reached). `joined`: it
/// shared a download or decode another request started (the figures are that work's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metrics {
    pub tier: Tier,
    pub joined: bool,
    pub slot_wait_us: u64,
    pub dns_us: u64,
    pub connect_us: u64,
    pub tls_us: u64,
    pub first_byte_us: u64,
    pub transfer_us: u64,
    pub disk_read_us: u64,
    pub decode_us: u64,
    pub process_us: u64,
    pub queue_wait_us: u64,
    pub received_bytes: u64,
    pub http_status: i32,
    /// 10, 11, 20, 30 for HTTP/1.0, 1.1, 2, 3; 0: none.
    pub http_version: i32,
    pub redirects: i32,
    pub connection_reused: bool,
    pub decoded_bytes: u64,
    pub delivered_bytes: u64,
    /// Of `decode_us`: the confined decode worker's (pixload.h, "Isolation").
    pub worker_us: u64,
    /// The decode ran in a confined worker.
    pub isolated: bool,
    /// From intake to the callback in no other stage field (hand-offs, storing on disk).
    pub other_us: u64,
    /// From intake to the callback: exactly the stage fields' sum plus `other_us`.
    pub total_us: u64,
    /// From the transfer's last byte to the callback starting (0: no transfer).
    pub after_last_byte_us: u64,
}

impl Metrics {
    /// The metrics of `result`, None for a result without (a preview, a placeholder).
    ///
    /// # Safety
    /// `result` is the pointer a library callback running now on this thread received.
    pub unsafe fn from_result(result: *const sys::pxl_result) -> Option<Metrics> {
        let mut m = sys::pxl_metrics { struct_size: std::mem::size_of::<sys::pxl_metrics>(), ..Default::default() };
        if unsafe { sys::pxl_result_metrics(result, &mut m) } != sys::PXL_OK {
            return None;
        }
        Some(Metrics {
            tier: Tier::from_raw(m.tier),
            joined: m.joined != 0,
            slot_wait_us: m.slot_wait_us,
            dns_us: m.dns_us,
            connect_us: m.connect_us,
            tls_us: m.tls_us,
            first_byte_us: m.first_byte_us,
            transfer_us: m.transfer_us,
            disk_read_us: m.disk_read_us,
            decode_us: m.decode_us,
            process_us: m.process_us,
            queue_wait_us: m.queue_wait_us,
            received_bytes: m.bytes_received,
            http_status: m.http_status,
            http_version: m.http_version,
            redirects: m.redirects,
            connection_reused: m.connection_reused != 0,
            decoded_bytes: m.decoded_bytes,
            delivered_bytes: m.delivered_bytes,
            worker_us: m.worker_us,
            isolated: m.isolated != 0,
            other_us: m.other_us,
            total_us: m.total_us,
            after_last_byte_us: m.after_last_byte_us,
        })
    }
}
