//! Safe Rust bindings of libpixload: asynchronous image loading and caching for table-
//! and grid-style user interfaces.
//!
//! A [`Loader`] downloads, decodes and caches on threads of its own; every result comes
//! back through a [`Queue`] that the host drains on a thread of its choice
//! ([`Queue::dispatch`], after [`Queue::wait`] or when [`Queue::fd`] is readable).
//! A load's closure runs exactly once, on the draining thread: with an [`Image`], an
//! [`Error`], or an error whose status is [`Status::Cancelled`].
//!
//! ```no_run
//! let loader = pixload::Loader::new()?;
//! let queue = pixload::Queue::new()?;
//! let request = pixload::Request::new("http://127.0.0.1:8080/photo.jpg").size(150, 150);
//! loader.load(&request, &queue, |result| match result {
//!     Ok(image) => println!("{}x{}", image.width(), image.height()),
//!     Err(e) => eprintln!("{e}"),
//! })?;
//! while queue.dispatch() == 0 { queue.wait(None); }
//! # Ok::<(), pixload::Error>(())
//! ```
//!
//! Lifetimes follow the header's rules: dropping a [`Queue`] (its last clone) runs the
//! closures of its unfinished requests with `Cancelled` on the dropping thread; dropping
//! a [`Loader`] cancels its requests, whose closures then run at their queue's next
//! dispatch or drop. No closure is ever lost, called twice or freed twice, and no panic
//! unwinds into C: a panicking closure is caught, reported on stderr and counted
//! ([`caught_panics`]).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod sys;

mod animation;
mod callbacks;
mod codec;
mod config;
mod convert;
mod custom_processor;
mod error;
mod fetcher;
mod hook;
mod image;
mod loader;
mod processor;
mod metrics;
mod placeholder;
mod queue;
mod request;
mod table;
mod version;

pub use animation::{Animation, AnimationFrame, AnimationStats};
pub use callbacks::caught_panics;
pub use codec::{Codec, CodecHeader, CodecTarget};
pub use config::{scheme, Isolation, LoaderBuilder, LogLevel, TlsVersion};
pub use error::{Error, Status};
pub use fetcher::{Fetch, FetcherOptions};
pub use hook::HookCall;
pub use image::{Format, Image};
pub use loader::{Loader, Stats};
pub use custom_processor::Frame;
pub use processor::{Processor, Rgba};
pub use metrics::{Metrics, Tier};
pub use placeholder::{Placeholder, PlaceholderKind};
pub use queue::Queue;
pub use request::{priority, Mode, Prefetch, Request, Slot, Token};
pub use table::{RowUpdate, Table, TableConfig, TableStats};
pub use version::{version, version_compatible, version_num};
