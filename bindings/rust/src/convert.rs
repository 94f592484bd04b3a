//! Rust values to the C API's strings and integers.

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr;
use std::time::Duration;

use crate::Error;

pub(crate) fn c_string(what: &str, text: &str) -> Result<CString, Error> {
    CString::new(text).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

pub(crate) fn path_string(what: &str, path: &Path) -> Result<CString, Error> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

pub(crate) fn millis(duration: Duration) -> i32 {
    duration.as_millis().min(i32::MAX as u128) as i32
}

pub(crate) fn clamp_i32(value: u32) -> i32 {
    value.min(i32::MAX as u32) as i32
}

/// A NULL-terminated array of pointers into `lines`, valid while `lines` lives.
pub(crate) fn header_pointers(lines: &[CString]) -> Vec<*const c_char> {
    lines.iter().map(|l| l.as_ptr()).chain(std::iter::once(ptr::null())).collect()
}
