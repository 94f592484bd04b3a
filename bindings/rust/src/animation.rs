//! Animation players (`pxl_animation`, 0.6.0): an animated image played frame by frame,
//! each frame decoded when it falls due into a small ring, so memory does not grow with
//! the frame count.
//!
//! [`Loader::animate`](crate::Loader::animate) gives an [`Animation`], an iterator that
//! blocks until each frame is due (the first as soon as it is decoded), skips the frames
//! the caller was too slow for, and ends after the animation's loop count (never, for one
//! that loops forever: stop iterating). It drives a queue of its own on the iterating
//! thread, so it is for a thread that may block (a player thread, a script), not a UI
//! thread; a UI drives `sys::pxl_animation_frame_at` from its frame clock instead.

use std::cell::RefCell;
use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::callbacks::call_user;
use crate::error::check;
use crate::{sys, Error, Image, Loader, Queue, Request};

/// One frame of a playing animation.
#[derive(Debug, Clone)]
pub struct AnimationFrame {
    /// The frame at the request's size, format and processors.
    pub image: Image,
    /// Its index in the source (0-based).
    pub index: i32,
    /// How long it shows, as the file says it.
    pub duration_ms: i32,
    /// Frames passed over before it because the caller fell behind.
    pub skipped: i32,
}

/// What a player did (`pxl_animation_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnimationStats {
    pub frames_decoded: u64,
    pub frames_skipped: u64,
    pub frames_shown: u64,
    /// Decoded frames' bytes held now, and at most.
    pub ring_bytes: u64,
    pub peak_ring_bytes: u64,
    pub loops_played: i32,
}

/// What the player's events said so far (written by `on_event` on the iterating thread,
/// inside its own dispatch).
#[derive(Default)]
struct Events {
    loaded: Option<Result<(), Error>>,
    frame_count: i32,
    loop_count: i32,
    ended: bool,
    failure: Option<Error>,
}

/// An animation playing (see the module's documentation). Dropping it frees the player.
pub struct Animation<'a> {
    raw: NonNull<sys::pxl_animation>,
    queue: Queue,
    events: Box<RefCell<Events>>,
    last: Option<(i32, i64)>,
    done: bool,
    final_stats: Option<AnimationStats>,
    _loader: &'a Loader,
}

fn clock_ms() -> i64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as i64
}

unsafe extern "C" fn on_event(_animation: *mut sys::pxl_animation, event: *const sys::pxl_animation_event,
                              user_data: *mut c_void) {
    call_user("an animation event", || {
        // SAFETY: user_data is the Box<RefCell<Events>> of a player not yet freed (no
        // event runs after pxl_animation_free returns); event is valid during the call.
        let events = unsafe { &*(user_data as *const RefCell<Events>) };
        let event = unsafe { &*event };
        let message = if event.message.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(event.message) }.to_string_lossy().into_owned()
        };
        let mut events = events.borrow_mut();
        match event.kind as sys::pxl_animation_event_kind {
            sys::PXL_ANIMATION_LOADED => {
                events.frame_count = event.frame_count;
                events.loop_count = event.loop_count;
                events.loaded = Some(if event.status == sys::PXL_OK {
                    Ok(())
                } else {
                    Err(Error::new(crate::Status::from_raw(event.status), 0, message))
                });
            }
            sys::PXL_ANIMATION_ENDED => events.ended = true,
            sys::PXL_ANIMATION_FAILED => {
                events.failure = Some(Error::new(crate::Status::from_raw(event.status), 0, message))
            }
            _ => {}
        }
    });
}

impl<'a> Animation<'a> {
    pub(crate) fn start(loader: &'a Loader, request: &Request) -> Result<Animation<'a>, Error> {
        let queue = Queue::new()?;
        let raw_request = request.to_raw()?;
        let events: Box<RefCell<Events>> = Box::default();
        let mut raw = ptr::null_mut();
        check(unsafe {
            sys::pxl_animation_load(loader.as_ptr(), &raw_request.raw, queue.as_ptr(), Some(on_event),
                                    &*events as *const RefCell<Events> as *mut c_void, &mut raw)
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_raw(sys::PXL_E_NO_MEMORY))?;
        Ok(Animation { raw, queue, events, last: None, done: false, final_stats: None, _loader: loader })
    }

    /// The source's frame count (0 until it has loaded).
    pub fn frame_count(&self) -> i32 {
        self.events.borrow().frame_count
    }

    /// How often it plays: 0 forever, n times in all (0 until it has loaded).
    pub fn loop_count(&self) -> i32 {
        self.events.borrow().loop_count
    }

    /// Stops decoding; the playhead stays where it is.
    pub fn pause(&self) {
        unsafe { sys::pxl_animation_pause(self.raw.as_ptr()) }
    }

    /// Continues from where [`pause`](Animation::pause) left it.
    pub fn resume(&self) {
        unsafe { sys::pxl_animation_resume(self.raw.as_ptr(), clock_ms()) }
    }

    pub fn stats(&self) -> AnimationStats {
        if let Some(stats) = self.final_stats {
            return stats;
        }
        let mut raw: sys::pxl_animation_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::pxl_animation_stats>();
        unsafe { sys::pxl_animation_stats_get(self.raw.as_ptr(), &mut raw) };
        AnimationStats {
            frames_decoded: raw.frames_decoded,
            frames_skipped: raw.frames_skipped,
            frames_shown: raw.frames_shown,
            ring_bytes: raw.ring_bytes,
            peak_ring_bytes: raw.peak_ring_bytes,
            loops_played: raw.loops_played,
        }
    }

    fn pump(&self, timeout: Duration) {
        if self.queue.dispatch() == 0 {
            self.queue.wait(Some(timeout));
            self.queue.dispatch();
        }
    }

    fn finish(&mut self) {
        self.final_stats = Some(self.stats());
        self.done = true;
    }
}

impl Iterator for Animation<'_> {
    type Item = Result<AnimationFrame, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let loaded = self.events.borrow().loaded.clone();
            match loaded {
                Some(Ok(())) => break,
                Some(Err(e)) => {
                    self.finish();
                    return Some(Err(e));
                }
                None => self.pump(Duration::from_millis(500)),
            }
        }
        loop {
            let mut info: sys::pxl_animation_frame = unsafe { std::mem::zeroed() };
            info.struct_size = std::mem::size_of::<sys::pxl_animation_frame>();
            let image = unsafe { Image::from_raw(sys::pxl_animation_frame_at(self.raw.as_ptr(), clock_ms(), &mut info)) };
            let key = (info.index, info.due_ms);
            if let Some(image) = image {
                if self.last != Some(key) {
                    self.last = Some(key);
                    if info.ended != 0 || info.next_due_ms < 0 {
                        self.finish(); // the last frame: the next call ends
                    }
                    return Some(Ok(AnimationFrame {
                        image,
                        index: info.index,
                        duration_ms: info.duration_ms,
                        skipped: info.skipped,
                    }));
                }
            }
            let (ended, failure) = {
                let mut events = self.events.borrow_mut();
                (events.ended, events.failure.take())
            };
            if let Some(e) = failure {
                self.finish();
                return Some(Err(e));
            }
            if info.ended != 0 || (ended && info.next_due_ms < 0) {
                self.finish();
                return None;
            }
            // Until the next frame is due, or is decoded when it is late (FRAME_READY).
            let wait = if info.next_due_ms < 0 { 500 } else { (info.next_due_ms - clock_ms()).clamp(1, 500) };
            self.pump(Duration::from_millis(wait as u64));
        }
    }
}

impl Drop for Animation<'_> {
    fn drop(&mut self) {
        // No event runs after it returns: `events` may go with the struct.
        unsafe { sys::pxl_animation_free(self.raw.as_ptr()) };
    }
}

impl Loader {
    /// Plays `request`'s animation (see [`Animation`]): frames at the request's size,
    /// format and processors, decoded on demand into the player's ring
    /// (`pxl_config.animation_ring_frames`). A still image gives one frame. The load's
    /// error comes as the first item.
    pub fn animate(&self, request: &Request) -> Result<Animation<'_>, Error> {
        Animation::start(self, request)
    }
}
