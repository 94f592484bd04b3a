//! Decoded images and their pixel formats.

use std::fmt;
use std::ptr::NonNull;

use crate::sys;

/// Pixel formats of decoded images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// R,G,B,A with straight alpha.
    #[default]
    Rgba8,
    /// R,G,B,A, colour premultiplied by alpha.
    Rgba8Premul,
    /// B,G,R,A premultiplied: Cairo ARGB32 and Skia N32 on little-endian machines.
    Bgra8Premul,
    /// R,G,B; alpha dropped.
    Rgb8,
    /// Luma; alpha dropped.
    Gray8,
}

impl Format {
    pub fn from_raw(raw: sys::pxl_format) -> Option<Format> {
        Some(match raw {
            sys::PXL_FORMAT_RGBA8 => Format::Rgba8,
            sys::PXL_FORMAT_RGBA8_PREMUL => Format::Rgba8Premul,
            sys::PXL_FORMAT_BGRA8_PREMUL => Format::Bgra8Premul,
            sys::PXL_FORMAT_RGB8 => Format::Rgb8,
            sys::PXL_FORMAT_GRAY8 => Format::Gray8,
            _ => return None,
        })
    }

    pub fn to_raw(self) -> sys::pxl_format {
        match self {
            Format::Rgba8 => sys::PXL_FORMAT_RGBA8,
            Format::Rgba8Premul => sys::PXL_FORMAT_RGBA8_PREMUL,
            Format::Bgra8Premul => sys::PXL_FORMAT_BGRA8_PREMUL,
            Format::Rgb8 => sys::PXL_FORMAT_RGB8,
            Format::Gray8 => sys::PXL_FORMAT_GRAY8,
        }
    }

    pub fn bytes_per_pixel(self) -> usize {
        match self {
            Format::Rgba8 | Format::Rgba8Premul | Format::Bgra8Premul => 4,
            Format::Rgb8 => 3,
            Format::Gray8 => 1,
        }
    }
}

/// An immutable, reference-counted decoded image. Cloning adds a reference; dropping
/// releases one. The memory cache holds its own, so a trim never frees pixels held here.
pub struct Image {
    raw: NonNull<sys::pxl_image>,
}

// SAFETY: a pxl_image is immutable and its reference count is thread-safe (header,
// "Threads": a pxl_image may be read from any thread).
unsafe impl Send for Image {}
unsafe impl Sync for Image {}

impl Image {
    /// Takes a new reference to a borrowed image (a callback's).
    ///
    /// # Safety
    /// `raw` must be NULL or a live image.
    pub unsafe fn retain(raw: *mut sys::pxl_image) -> Option<Image> {
        // SAFETY: per the caller.
        NonNull::new(unsafe { sys::pxl_image_retain(raw) }).map(|raw| Image { raw })
    }

    /// Adopts a reference the caller owns (pxl_lookup's, pxl_bind's).
    ///
    /// # Safety
    /// `raw` must be NULL or an owned reference to a live image.
    pub unsafe fn from_raw(raw: *mut sys::pxl_image) -> Option<Image> {
        NonNull::new(raw).map(|raw| Image { raw })
    }

    pub fn as_ptr(&self) -> *mut sys::pxl_image {
        self.raw.as_ptr()
    }

    pub fn width(&self) -> u32 {
        unsafe { sys::pxl_image_width(self.raw.as_ptr()) as u32 }
    }

    pub fn height(&self) -> u32 {
        unsafe { sys::pxl_image_height(self.raw.as_ptr()) as u32 }
    }

    /// Bytes per row, at least `width * format.bytes_per_pixel()`.
    pub fn stride(&self) -> usize {
        unsafe { sys::pxl_image_stride(self.raw.as_ptr()) as usize }
    }

    pub fn format(&self) -> Format {
        let raw = unsafe { sys::pxl_image_format(self.raw.as_ptr()) };
        // An image has the format its request asked for, and requests only take Format.
        Format::from_raw(raw).unwrap_or_else(|| panic!("pixload returned an unknown pixel format {raw}"))
    }

    /// The source's size after EXIF orientation, before any scaling.
    pub fn original_width(&self) -> u32 {
        unsafe { sys::pxl_image_original_width(self.raw.as_ptr()) as u32 }
    }

    pub fn original_height(&self) -> u32 {
        unsafe { sys::pxl_image_original_height(self.raw.as_ptr()) as u32 }
    }

    /// All rows: row y starts at `y * stride()`.
    pub fn pixels(&self) -> &[u8] {
        let len = unsafe { sys::pxl_image_byte_count(self.raw.as_ptr()) };
        let data = unsafe { sys::pxl_image_pixels(self.raw.as_ptr()) };
        if data.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: stride * height bytes, immutable, valid while this reference is held.
        unsafe { std::slice::from_raw_parts(data, len) }
    }

    /// Frames of an animation (requested with [`Request::animate`]); 1 for a still image.
    ///
    /// [`Request::animate`]: crate::Request::animate
    pub fn frame_count(&self) -> u32 {
        unsafe { sys::pxl_image_frame_count(self.raw.as_ptr()) as u32 }
    }

    /// Frames of the source: more than `frame_count` without [`Request::animate`], or
    /// past `PXL_ANIMATION_MAX_BYTES` (then only the first frame is kept).
    ///
    /// [`Request::animate`]: crate::Request::animate
    pub fn source_frame_count(&self) -> u32 {
        unsafe { sys::pxl_image_source_frame_count(self.raw.as_ptr()) as u32 }
    }

    /// How often the animation plays; 0 = forever (also for a still image).
    pub fn loop_count(&self) -> u32 {
        unsafe { sys::pxl_image_loop_count(self.raw.as_ptr()) as u32 }
    }

    /// The source's data ended early and its decoder filled in the rest (a cut JPEG's
    /// gray blocks, a cut GIF's transparent rows): pixload.h, "Images whose data ended
    /// early". A cut PNG, WebP or AVIF fails instead.
    pub fn is_incomplete(&self) -> bool {
        unsafe { sys::pxl_image_incomplete(self.raw.as_ptr()) != 0 }
    }

    /// Frame `index`'s duration in milliseconds as the file says it; None out of range.
    pub fn frame_duration_ms(&self, index: u32) -> Option<u32> {
        let ms = unsafe { sys::pxl_image_frame_duration_ms(self.raw.as_ptr(), index.min(i32::MAX as u32) as i32) };
        (ms >= 0).then_some(ms as u32)
    }

    /// Frame `index`'s rows, laid out as [`Image::pixels`] (frame 0 is `pixels()`); None
    /// out of range.
    pub fn frame_pixels(&self, index: u32) -> Option<&[u8]> {
        let data = unsafe { sys::pxl_image_frame_pixels(self.raw.as_ptr(), index.min(i32::MAX as u32) as i32) };
        let len = unsafe { sys::pxl_image_byte_count(self.raw.as_ptr()) };
        if data.is_null() {
            return None;
        }
        // SAFETY: every frame has the image's stride * height bytes, immutable, valid
        // while this reference is held.
        Some(unsafe { std::slice::from_raw_parts(data, len) })
    }

    /// Row y without the stride's padding; panics when y >= height.
    pub fn row(&self, y: u32) -> &[u8] {
        assert!(y < self.height(), "row {y} of an image {} high", self.height());
        let start = y as usize * self.stride();
        &self.pixels()[start..start + self.width() as usize * self.format().bytes_per_pixel()]
    }
}

impl Clone for Image {
    fn clone(&self) -> Image {
        // SAFETY: self holds a reference, so the image is live.
        unsafe { Image::retain(self.raw.as_ptr()) }.expect("pxl_image_retain returned NULL")
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        unsafe { sys::pxl_image_release(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("width", &self.width())
            .field("height", &self.height())
            .field("stride", &self.stride())
            .field("format", &self.format())
            .field("original", &(self.original_width(), self.original_height()))
            .finish()
    }
}
