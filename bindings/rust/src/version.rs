//! The version of the library actually loaded, and whether this crate can use it.

use std::ffi::CStr;

use crate::sys;

/// The version of the library actually loaded, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: static storage, never NULL, ASCII.
    unsafe { CStr::from_ptr(sys::pxl_version()) }.to_str().unwrap_or("?")
}

/// `PXL_VERSION_NUM` (0xMMmmpp) of the library actually loaded.
pub fn version_num() -> u32 {
    unsafe { sys::pxl_version_num() }
}

/// Whether a library of this `PXL_VERSION_NUM` can be used by this crate: the same
/// major.minor as `sys::PXL_VERSION_NUM` (before 1.0 a minor release may break the ABI,
/// as 0.2.0 did with the table callbacks), any patch.
pub fn version_compatible(num: u32) -> bool {
    num >> 8 == sys::PXL_VERSION_NUM >> 8
}
