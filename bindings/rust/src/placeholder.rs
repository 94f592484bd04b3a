//! Placeholders (since 0.5.0): BlurHash and ThumbHash, decoded and encoded by libpixload,
//! synchronously on the caller's thread.

use std::ffi::c_void;

use crate::{sys, Error, Image};

/// The kind of a placeholder hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceholderKind {
    /// The BlurHash text (base 83).
    BlurHash,
    /// The ThumbHash's raw bytes.
    ThumbHash,
}

impl PlaceholderKind {
    pub(crate) fn raw(self) -> i32 {
        match self {
            PlaceholderKind::BlurHash => sys::PXL_PLACEHOLDER_BLURHASH as i32,
            PlaceholderKind::ThumbHash => sys::PXL_PLACEHOLDER_THUMBHASH as i32,
        }
    }
}

/// A placeholder hash: a BlurHash's text as bytes, or a ThumbHash's raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub kind: PlaceholderKind,
    pub data: Vec<u8>,
}

impl Placeholder {
    pub fn blurhash(text: &str) -> Placeholder {
        Placeholder { kind: PlaceholderKind::BlurHash, data: text.as_bytes().to_vec() }
    }

    pub fn thumbhash(bytes: &[u8]) -> Placeholder {
        Placeholder { kind: PlaceholderKind::ThumbHash, data: bytes.to_vec() }
    }

    /// An RGBA8 straight-alpha image of width x height (1..=256 each way). A malformed
    /// hash is [`Status::CorruptImage`](crate::Status::CorruptImage).
    pub fn decode(&self, width: u32, height: u32) -> Result<Image, Error> {
        let mut out = std::ptr::null_mut();
        let status = unsafe {
            sys::pxl_placeholder_decode(
                self.kind.raw(),
                self.data.as_ptr() as *const c_void,
                self.data.len(),
                width.min(i32::MAX as u32) as i32,
                height.min(i32::MAX as u32) as i32,
                &mut out,
            )
        };
        if status != sys::PXL_OK {
            return Err(Error::from_raw(status));
        }
        Ok(unsafe { Image::from_raw(out) }.expect("pxl_placeholder_decode returned PXL_OK without an image"))
    }

    /// Width / height as the hash records it (a ThumbHash's); 1.0 for a BlurHash.
    pub fn aspect_ratio(&self) -> Result<f64, Error> {
        let mut ratio = 0.0;
        let status = unsafe {
            sys::pxl_placeholder_aspect_ratio(self.kind.raw(), self.data.as_ptr() as *const c_void, self.data.len(), &mut ratio)
        };
        if status != sys::PXL_OK {
            return Err(Error::from_raw(status));
        }
        Ok(ratio)
    }

    fn encode(kind: PlaceholderKind, image: &Image, x: u32, y: u32) -> Result<Placeholder, Error> {
        let mut out = [0u8; sys::PXL_PLACEHOLDER_MAX_BYTES + 1];
        let mut length = 0usize;
        let status = unsafe {
            sys::pxl_placeholder_encode(kind.raw(), image.as_ptr(), x.min(100) as i32, y.min(100) as i32, out.as_mut_ptr(), out.len(), &mut length)
        };
        if status != sys::PXL_OK {
            return Err(Error::from_raw(status));
        }
        Ok(Placeholder { kind, data: out[..length].to_vec() })
    }

    /// The BlurHash of an image (any format) with `x` x `y` components (1..=9 each).
    pub fn encode_blurhash(image: &Image, x: u32, y: u32) -> Result<String, Error> {
        let hash = Placeholder::encode(PlaceholderKind::BlurHash, image, x, y)?;
        Ok(String::from_utf8_lossy(&hash.data).into_owned())
    }

    /// The ThumbHash of an image (any format), its raw bytes.
    pub fn encode_thumbhash(image: &Image) -> Result<Vec<u8>, Error> {
        Ok(Placeholder::encode(PlaceholderKind::ThumbHash, image, 0, 0)?.data)
    }
}
