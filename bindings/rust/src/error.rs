//! Statuses and errors.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// A pixload status. The C enum is append-only: a status this crate does not know yet
/// arrives as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    Ok,
    InvalidArgument,
    MalformedUrl,
    SchemeNotAllowed,
    Dns,
    Connect,
    Tls,
    Timeout,
    Http,
    BodyTooLarge,
    NotAnImage,
    CorruptImage,
    TooManyPixels,
    Cancelled,
    LoaderClosed,
    Network,
    UnsupportedImage,
    NoMemory,
    NotFound,
    Io,
    TooManyRedirects,
    NotCached,
    /// A library the loader needs (libcurl) lacks a required feature.
    Unsupported,
    /// The isolated decode worker crashed, was killed by its sandbox, or ran out of memory or time (0.6.0).
    DecoderFailed,
    Unknown(u32),
}

const STATUSES: [Status; 24] = [
    Status::Ok,
    Status::InvalidArgument,
    Status::MalformedUrl,
    Status::SchemeNotAllowed,
    Status::Dns,
    Status::Connect,
    Status::Tls,
    Status::Timeout,
    Status::Http,
    Status::BodyTooLarge,
    Status::NotAnImage,
    Status::CorruptImage,
    Status::TooManyPixels,
    Status::Cancelled,
    Status::LoaderClosed,
    Status::Network,
    Status::UnsupportedImage,
    Status::NoMemory,
    Status::NotFound,
    Status::Io,
    Status::TooManyRedirects,
    Status::NotCached,
    Status::Unsupported,
    Status::DecoderFailed,
];

impl Status {
    pub fn from_raw(raw: sys::pxl_status) -> Status {
        STATUSES.get(raw as usize).copied().unwrap_or(Status::Unknown(raw))
    }

    pub fn to_raw(self) -> sys::pxl_status {
        match self {
            Status::Unknown(raw) => raw,
            known => STATUSES.iter().position(|s| *s == known).unwrap() as sys::pxl_status,
        }
    }

    /// The library's short English description ("cancelled").
    pub fn description(self) -> &'static str {
        // SAFETY: static storage, never NULL, also for unknown values.
        unsafe { CStr::from_ptr(sys::pxl_status_string(self.to_raw())) }.to_str().unwrap_or("?")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A failed call or a failed load: the status, the last HTTP status seen (0 if none) and
/// what went wrong, in English.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    http_status: i32,
    message: String,
}

impl Error {
    pub fn new(status: Status, http_status: i32, message: impl Into<String>) -> Error {
        Error { status, http_status, message: message.into() }
    }

    pub(crate) fn from_raw(raw: sys::pxl_status) -> Error {
        let status = Status::from_raw(raw);
        Error::new(status, 0, status.description())
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, 0, message)
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// The last HTTP status seen, 0 if none (file://, no response, a refused call).
    pub fn http_status(&self) -> i32 {
        self.http_status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_cancelled(&self) -> bool {
        self.status == Status::Cancelled
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let description = self.status.description();
        if self.message.is_empty() || self.message == description {
            f.write_str(description)?;
        } else {
            write!(f, "{description}: {}", self.message)?;
        }
        if self.http_status != 0 && !self.message.contains(&self.http_status.to_string()) {
            write!(f, " (HTTP {})", self.http_status)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

pub(crate) fn check(raw: sys::pxl_status) -> Result<(), Error> {
    if raw == sys::PXL_OK { Ok(()) } else { Err(Error::from_raw(raw)) }
}
