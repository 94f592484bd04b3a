//! Completion queues.

use std::fmt;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::callbacks::{free_deferred_loaders, thread_key};
use crate::convert::millis;
use crate::error::check;
use crate::{sys, Error};

struct QueueInner {
    raw: NonNull<sys::pxl_queue>,
    /// One drainer (dispatch, wait, a table's free) at a time, as the header requires.
    drainer: Mutex<()>,
    /// thread_key() of the thread holding `drainer`, 0 for none.
    drainer_thread: AtomicUsize,
}

// SAFETY: fd, wakeup and pending are any-thread; draining is serialized by `drainer`.
unsafe impl Send for QueueInner {}
unsafe impl Sync for QueueInner {}

impl Drop for QueueInner {
    fn drop(&mut self) {
        // The last handle is gone, so nobody dispatches (that holds a handle) and this is
        // not inside one of this queue's callbacks (the dispatcher's handle would be
        // alive). The free runs the unfinished requests' closures, CANCELLED, here.
        unsafe { sys::pxl_queue_free(self.raw.as_ptr()) };
        free_deferred_loaders();
    }
}

/// A completion queue: every closure of a request runs on a thread that drains the
/// request's queue. A handle: clones share one queue, freed with the last clone.
///
/// One thread drains at a time ([`dispatch`](Queue::dispatch) and [`wait`](Queue::wait)
/// from another thread block until it is done); [`fd`](Queue::fd),
/// [`wakeup`](Queue::wakeup) and [`pending`](Queue::pending) never block.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<QueueInner>,
}

impl Queue {
    pub fn new() -> Result<Queue, Error> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::pxl_queue_new(&mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_raw(sys::PXL_E_NO_MEMORY))?;
        Ok(Queue { inner: Arc::new(QueueInner { raw, drainer: Mutex::new(()), drainer_thread: AtomicUsize::new(0) }) })
    }

    pub fn as_ptr(&self) -> *mut sys::pxl_queue {
        self.inner.raw.as_ptr()
    }

    /// An eventfd, readable while completions are pending. Owned by the queue: poll it,
    /// never read, write or close it.
    pub fn fd(&self) -> RawFd {
        unsafe { sys::pxl_queue_fd(self.as_ptr()) }
    }

    /// Completions waiting to be dispatched.
    pub fn pending(&self) -> usize {
        unsafe { sys::pxl_queue_pending(self.as_ptr()) }.max(0) as usize
    }

    /// Runs every pending closure on this thread; returns how many ran. Never blocks on
    /// the network. From inside one of this queue's own closures it does nothing.
    pub fn dispatch(&self) -> usize {
        self.dispatch_max(0)
    }

    /// Runs up to `max` pending closures (all of them when `max` is 0).
    pub fn dispatch_max(&self, max: usize) -> usize {
        let max = max.min(i32::MAX as usize) as i32;
        let ran = self.as_drainer(|raw| unsafe { sys::pxl_queue_dispatch(raw, max) }).unwrap_or(0);
        free_deferred_loaders();
        ran.max(0) as usize
    }

    /// Blocks until a completion is pending, [`wakeup`](Queue::wakeup) is called, or the
    /// timeout passes (`None`: no limit). Returns the number pending. Runs no closure.
    pub fn wait(&self, timeout: Option<Duration>) -> usize {
        let ms = timeout.map_or(-1, millis);
        self.as_drainer(|raw| unsafe { sys::pxl_queue_wait(raw, ms) }).unwrap_or(0).max(0) as usize
    }

    /// Makes a [`wait`](Queue::wait) in progress (or the next one) return early.
    pub fn wakeup(&self) {
        unsafe { sys::pxl_queue_wakeup(self.as_ptr()) }
    }

    /// Runs f as the queue's one drainer; None when this thread already drains it (f
    /// would be re-entered from one of the queue's callbacks).
    pub(crate) fn as_drainer<R>(&self, f: impl FnOnce(*mut sys::pxl_queue) -> R) -> Option<R> {
        let me = thread_key();
        if self.inner.drainer_thread.load(Ordering::SeqCst) == me {
            return None;
        }
        let _guard = self.inner.drainer.lock().unwrap_or_else(|e| e.into_inner());
        self.inner.drainer_thread.store(me, Ordering::SeqCst);
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::SeqCst);
            }
        }
        let _release = Release(&self.inner.drainer_thread);
        Some(f(self.as_ptr()))
    }

    pub(crate) fn drained_by_this_thread(&self) -> bool {
        self.inner.drainer_thread.load(Ordering::SeqCst) == thread_key()
    }
}

impl AsRawFd for Queue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").field("fd", &self.fd()).field("pending", &self.pending()).finish()
    }
}
