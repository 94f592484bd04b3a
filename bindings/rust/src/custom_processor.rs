//! Custom processors (pixload.h, "Processors"): closures registered with
//! [`Loader::add_processor`] under the id a [`Processor::Custom`] step names, called on
//! the library's decoder threads with each [`Frame`] to change.
//!
//! [`Processor::Custom`]: crate::Processor::Custom

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::convert::c_string;
use crate::error::check;
use crate::{sys, Error, Loader, Status};

/// One frame handed to a custom processor: premultiplied RGBA8, rows of `width * 4`
/// bytes, the frame's own copy. Change [`pixels`](Frame::pixels) in place, or ask for an
/// output of another size with [`resize`](Frame::resize).
pub struct Frame<'a> {
    raw: &'a mut sys::pxl_processor_frame,
}

impl Frame<'_> {
    pub fn width(&self) -> u32 {
        self.raw.width as u32
    }

    pub fn height(&self) -> u32 {
        self.raw.height as u32
    }

    /// 0 for a still image; an animation's frames come one call each.
    pub fn index(&self) -> u32 {
        self.raw.frame_index as u32
    }

    /// 1 for a still image.
    pub fn count(&self) -> u32 {
        self.raw.frame_count as u32
    }

    /// The frame's pixels (the output's, after a resize).
    pub fn pixels(&mut self) -> &mut [u8] {
        let len = self.raw.stride as usize * self.raw.height as usize;
        // SAFETY: the library's frame buffer of stride * height bytes, ours until the call
        // returns; `&mut self` keeps any other slice of it from existing.
        unsafe { std::slice::from_raw_parts_mut(self.raw.pixels, len) }
    }

    /// Gives the frame a new, zeroed output of `width` x `height`; returns the input (of
    /// the size before) and the output. Err for a size under 1 or over the loader's
    /// `max_pixels`, or no memory (the frame is unchanged).
    pub fn resize(&mut self, width: u32, height: u32) -> Result<(&[u8], &mut [u8]), Error> {
        let (w, h) = (i32::try_from(width), i32::try_from(height));
        let (Ok(w), Ok(h)) = (w, h) else { return Err(Error::invalid("processor output size out of range")) };
        // SAFETY: inside the callback, on its own frame (the header's rule).
        let out = unsafe { sys::pxl_processor_frame_resize(self.raw, w, h) };
        if out.is_null() {
            return Err(Error::invalid(format!("no {width}x{height} output for this frame")));
        }
        let input_len = self.raw.input_width as usize * self.raw.input_height as usize * 4;
        let out_len = self.raw.stride as usize * self.raw.height as usize;
        // SAFETY: after a resize input and output are two buffers, both live until the call
        // returns; the borrows end with `&mut self`'s.
        unsafe {
            Ok((std::slice::from_raw_parts(self.raw.input, input_len), std::slice::from_raw_parts_mut(out, out_len)))
        }
    }

    /// True once no request needs the result (cancelled, unregistered, loader dropped):
    /// long work polls it and returns `Err` with [`Status::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        // SAFETY: the library's flag, live and 4-byte aligned during the call; another thread
        // raises it with an atomic store, so it is read with an atomic load (pixload.h).
        unsafe { (*(self.raw.cancelled as *const std::sync::atomic::AtomicI32)).load(std::sync::atomic::Ordering::Acquire) != 0 }
    }
}

type ProcessFn = Box<dyn Fn(&mut Frame) -> Result<(), Error> + Send + Sync>;

unsafe extern "C" fn on_process(
    frame: *mut sys::pxl_processor_frame,
    message: *mut c_char,
    message_size: usize,
    user_data: *mut c_void,
) -> sys::pxl_status {
    // SAFETY: user_data is add_processor's Box<ProcessFn>, alive until on_destroy; frame is
    // the library's for this call.
    let process = unsafe { &*(user_data as *const ProcessFn) };
    let frame = unsafe { &mut *frame };
    let outcome = catch_unwind(AssertUnwindSafe(|| process(&mut Frame { raw: frame })));
    let error = match outcome {
        Ok(Ok(())) => return sys::PXL_OK,
        Ok(Err(error)) => error,
        Err(payload) => {
            std::mem::forget(payload); // dropping it may panic in turn
            crate::callbacks::count_panic("a custom processor");
            Error::invalid("the custom processor panicked") // as Python's raising one
        }
    };
    let text = error.message().as_bytes();
    let n = text.len().min(message_size.saturating_sub(1));
    if message_size > 0 {
        // SAFETY: message holds message_size bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), message as *mut u8, n);
            *message.add(n) = 0;
        }
    }
    match error.status() {
        Status::Ok => sys::PXL_E_INVALID_ARGUMENT,
        status => status.to_raw(),
    }
}

unsafe extern "C" fn on_destroy(user_data: *mut c_void) {
    // SAFETY: called once, when no call of the processor runs.
    drop(unsafe { Box::from_raw(user_data as *mut ProcessFn) });
}

impl Loader {
    /// Registers `process` under `id`, which requests name with
    /// [`Request::custom`](crate::Request::custom). It runs on the library's decoder
    /// threads, possibly several frames at once: `Ok(())` keeps the frame as it left it;
    /// `Err` ends the requests that need the step with that error (a panic is caught and
    /// becomes [`Status::InvalidArgument`]). `version` is part of the cache keys: bump it when the output
    /// changes. Registering an id again replaces the old closure, dropped once no call of
    /// it runs (also on [`remove_processor`](Loader::remove_processor) and when the loader
    /// is dropped).
    pub fn add_processor<F>(&self, id: &str, version: u32, process: F) -> Result<(), Error>
    where
        F: Fn(&mut Frame) -> Result<(), Error> + Send + Sync + 'static,
    {
        let id = c_string("a processor id", id)?;
        let data = Box::into_raw(Box::new(Box::new(process) as ProcessFn));
        // SAFETY: a live loader; after PXL_OK on_destroy gets data back exactly once; a
        // refusal never calls destroy (pixload.h, "Extensions", as 0.5.0), so the box is ours.
        let status = unsafe {
            sys::pxl_loader_add_processor(self.as_ptr(), id.as_ptr(), version, Some(on_process), data as *mut c_void,
                                          Some(on_destroy))
        };
        if status != sys::PXL_OK {
            drop(unsafe { Box::from_raw(data) });
        }
        check(status)
    }

    /// Retires the processor `id`: later requests naming it fail, accepted ones that have
    /// not run it end cancelled, a call under way sees [`Frame::is_cancelled`]. Its
    /// closure is dropped once no call runs. Err with [`Status::NotFound`] when none is
    /// registered. Not from inside the processor itself.
    pub fn remove_processor(&self, id: &str) -> Result<(), Error> {
        let id = c_string("a processor id", id)?;
        // SAFETY: a live loader.
        check(unsafe { sys::pxl_loader_remove_processor(self.as_ptr(), id.as_ptr()) })
    }
}
