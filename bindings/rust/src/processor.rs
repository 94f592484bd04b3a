//! Processors (pixload.h, "Processors"): steps applied to a request's image after the
//! resize, in order, on the library's decoder threads. Part of the cache keys; requests
//! sharing a chain prefix share its work. Added to a [`Request`](crate::Request) with
//! its builder methods (`circle`, `rounded_corners`, `blur`, ...) or [`Request::process`];
//! custom processors are closures registered with [`Loader::add_processor`]
//! (custom_processor.rs).
//!
//! [`Request::process`]: crate::Request::process
//! [`Loader::add_processor`]: crate::Loader::add_processor

use std::ffi::CString;

use crate::sys;

/// A straight-alpha colour, 0xRRGGBBAA.
pub type Rgba = u32;

/// One step of a chain.
#[derive(Debug, Clone, PartialEq)]
pub enum Processor {
    /// The centred min(w, h) square cut to its disc; optional border (width, colour) drawn
    /// inside it.
    Circle { border: Option<(f64, Rgba)> },
    /// Corners rounded by radii (top-left, top-right, bottom-right, bottom-left), in output
    /// pixels; optional border.
    RoundedCorners { radii: [f64; 4], border: Option<(f64, Rgba)> },
    /// A Gaussian blur of standard deviation `sigma` output pixels (0 ..= 250).
    Blur { sigma: f64 },
    /// The rectangle of the image as it is at this step.
    Crop { x: i32, y: i32, width: i32, height: i32 },
    /// Clockwise by 90, 180 or 270 degrees.
    Rotate { degrees: i32 },
    /// Mirror left-right, or top-bottom when `vertical`.
    Flip { vertical: bool },
    /// Luma with the GRAY8 format's weights; alpha kept.
    Grayscale,
    /// The colour composited source-atop: covers the pixels, keeps their alpha.
    Tint { color: Rgba },
    /// A processor registered with the loader under this id (`pxl_loader_add_processor`).
    Custom { id: String },
}

impl Processor {
    /// The C step; an id is kept alive in `ids` while the step is in use.
    pub(crate) fn to_raw(&self, ids: &mut Vec<CString>) -> Result<sys::pxl_processor, crate::Error> {
        // SAFETY: pxl_processor is plain data; all zero is "nothing set" (id NULL).
        let mut step: sys::pxl_processor = unsafe { std::mem::zeroed() };
        let border = |step: &mut sys::pxl_processor, border: &Option<(f64, Rgba)>| {
            if let Some((width, color)) = border {
                step.border_width = *width;
                step.color = *color;
            }
        };
        match self {
            Processor::Circle { border: b } => {
                step.kind = sys::PXL_PROCESS_CIRCLE as i32;
                border(&mut step, b);
            }
            Processor::RoundedCorners { radii, border: b } => {
                step.kind = sys::PXL_PROCESS_ROUND as i32;
                [step.radius_tl, step.radius_tr, step.radius_br, step.radius_bl] = *radii;
                border(&mut step, b);
            }
            Processor::Blur { sigma } => {
                step.kind = sys::PXL_PROCESS_BLUR as i32;
                step.sigma = *sigma;
            }
            Processor::Crop { x, y, width, height } => {
                step.kind = sys::PXL_PROCESS_CROP as i32;
                (step.x, step.y, step.width, step.height) = (*x, *y, *width, *height);
            }
            Processor::Rotate { degrees } => {
                step.kind = sys::PXL_PROCESS_ROTATE as i32;
                step.degrees = *degrees;
            }
            Processor::Flip { vertical } => {
                step.kind = sys::PXL_PROCESS_FLIP as i32;
                step.vertical = *vertical as i32;
            }
            Processor::Grayscale => step.kind = sys::PXL_PROCESS_GRAY as i32,
            Processor::Tint { color } => {
                step.kind = sys::PXL_PROCESS_TINT as i32;
                step.color = *color;
            }
            Processor::Custom { id } => {
                step.kind = sys::PXL_PROCESS_CUSTOM as i32;
                let id = crate::convert::c_string("a processor id", id)?;
                step.id = id.as_ptr();
                ids.push(id);
            }
        }
        Ok(step)
    }
}
