//! The safe layer against a real libpixload and a local nginx.
mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use pixload::{Error, Format, Image, Loader, Mode, Queue, Request, Slot, Status, Table, TableConfig, TlsVersion};

const LONG: Duration = Duration::from_secs(30);

type Outcome = Arc<Mutex<Vec<Result<Image, Error>>>>;

/// A closure that records its result and counts its own drop.
fn recorder(outcome: &Outcome, drops: &Arc<AtomicUsize>) -> impl FnOnce(Result<Image, Error>) + Send + 'static {
    let outcome = outcome.clone();
    let guard = DropCounter(drops.clone());
    move |result| {
        let _guard = guard;
        outcome.lock().unwrap().push(result);
    }
}

fn load_one(loader: &Loader, queue: &Queue, request: &Request) -> Result<Image, Error> {
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    loader.load(request, queue, recorder(&outcome, &drops)).expect("load refused");
    drain_until(queue, LONG, || !outcome.lock().unwrap().is_empty());
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure was freed once, when it ran");
    let mut results = outcome.lock().unwrap();
    assert_eq!(results.len(), 1);
    results.pop().unwrap()
}

#[test]
fn handles_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Image>();
    send_sync::<Loader>();
    send_sync::<Queue>();
    send_sync::<Error>();
    send::<Table>();
}

/// The safe layer hands out images, not sources: the source of a file:// load is read
/// through `sys` (pxl_result.source), on the safe layer's loader and queue. It is
/// PXL_SOURCE_FILE (0.6.0; NETWORK before), an http load's NETWORK, and the memory
/// cache's hit of the file MEMORY.
#[test]
fn file_url_source_through_sys() {
    use pixload::{scheme, sys};
    use std::ffi::{c_void, CString};
    use std::sync::atomic::AtomicU32;

    unsafe extern "C" fn record(_token: sys::pxl_token, result: *const sys::pxl_result, user_data: *mut c_void) {
        // SAFETY: user_data is the AtomicU32 below, alive until the callback ran.
        let (result, slot) = unsafe { (&*result, &*(user_data as *const AtomicU32)) };
        let value = if result.status == sys::PXL_OK { result.source } else { 1000 + result.status as u32 };
        slot.store(value, Ordering::SeqCst);
    }

    let server = server();
    let local = std::env::temp_dir().join(format!("pxl-file-source-{}.png", std::process::id()));
    std::fs::copy(server.www.join("alpha.png"), &local).unwrap();
    let loader = Loader::builder().allowed_schemes(scheme::FILE | scheme::HTTP).build().unwrap();
    let queue = Queue::new().unwrap();
    let file = format!("file://{}", local.display());
    let http = server.url("alpha.png", "file-source");
    let mut sources = Vec::new();
    for url in [&file, &file, &http] {
        let url = CString::new(url.as_str()).unwrap();
        let mut request: sys::pxl_request = unsafe { std::mem::zeroed() };
        unsafe { sys::pxl_request_init(&mut request) };
        request.url = url.as_ptr();
        let slot = AtomicU32::new(u32::MAX);
        let status = unsafe {
            sys::pxl_load(loader.as_ptr(), &request, queue.as_ptr(), Some(record),
                          &slot as *const AtomicU32 as *mut c_void, std::ptr::null_mut())
        };
        assert_eq!(status, sys::PXL_OK);
        drain_until(&queue, LONG, || slot.load(Ordering::SeqCst) != u32::MAX);
        sources.push(slot.load(Ordering::SeqCst));
    }
    let _ = std::fs::remove_file(&local);
    assert_eq!(sources, [sys::PXL_SOURCE_FILE, sys::PXL_SOURCE_MEMORY, sys::PXL_SOURCE_NETWORK]);
}

#[test]
fn version_matches_the_header() {
    assert_eq!(pixload::version(), pixload::sys::PXL_VERSION_STRING);
    assert_eq!(pixload::version_num(), pixload::sys::PXL_VERSION_NUM);
    assert_eq!(Status::Cancelled.description(), "cancelled");
    for format in [Format::Rgba8, Format::Rgba8Premul, Format::Bgra8Premul, Format::Rgb8, Format::Gray8] {
        let library = unsafe { pixload::sys::pxl_format_bytes_per_pixel(format.to_raw()) };
        assert_eq!(format.bytes_per_pixel(), library as usize, "{format:?}");
    }
    for raw in 0..=pixload::sys::PXL_E_UNSUPPORTED {
        assert_eq!(Status::from_raw(raw).to_raw(), raw);
        assert!(!matches!(Status::from_raw(raw), Status::Unknown(_)));
    }
    assert_eq!(Status::from_raw(999), Status::Unknown(999));
}

#[test]
fn gradient_pixels_match_the_formula() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let image = load_one(&loader, &queue, &Request::new(server.url("gradient.jpg", "pixels"))).unwrap();
    assert_eq!((image.width(), image.height()), (GRADIENT_W, GRADIENT_H));
    assert_eq!((image.original_width(), image.original_height()), (GRADIENT_W, GRADIENT_H));
    assert_eq!(image.format(), Format::Rgba8);
    assert!(image.stride() >= GRADIENT_W as usize * 4);
    assert_eq!(image.pixels().len(), image.stride() * GRADIENT_H as usize);
    // JPEG is lossy: within a few levels of the formula everywhere, on a 16-pixel grid.
    let mut worst = 0;
    for y in (0..GRADIENT_H).step_by(16) {
        let row = image.row(y);
        assert_eq!(row.len(), GRADIENT_W as usize * 4);
        for x in (0..GRADIENT_W).step_by(16) {
            let p = &row[x as usize * 4..x as usize * 4 + 4];
            let errors = [p[0] as i32 - gradient_r(x), p[1] as i32 - gradient_g(y), p[2] as i32 - GRADIENT_B];
            worst = errors.iter().map(|e| e.abs()).max().unwrap().max(worst);
            assert_eq!(p[3], 255, "opaque at ({x}, {y})");
        }
    }
    assert!(worst <= 8, "a pixel is {worst} levels off the gradient");

    // Fitted into 150x150 with 3-byte pixels: 150x113, the original size kept.
    let request = Request::new(server.url("gradient.jpg", "pixels")).size(150, 150).format(Format::Rgb8);
    let small = load_one(&loader, &queue, &request).unwrap();
    assert_eq!((small.width(), small.height(), small.format()), (150, 113, Format::Rgb8));
    assert_eq!((small.original_width(), small.original_height()), (GRADIENT_W, GRADIENT_H));
    let right = small.row(56)[149 * 3] as i32;
    let left = small.row(56)[0] as i32;
    assert!(right - left > 200, "red rises left to right: {left} .. {right}");

    // The image outlives its loader and queue, and crosses threads.
    drop(loader);
    drop(queue);
    let copy = small.clone();
    let sum = thread::spawn(move || copy.pixels().iter().map(|&b| b as u64).sum::<u64>()).join().unwrap();
    assert_eq!(sum, small.pixels().iter().map(|&b| b as u64).sum::<u64>());
}

#[test]
fn errors_carry_status_http_status_and_message() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();

    let missing = load_one(&loader, &queue, &Request::new(server.url("missing.jpg", "errors"))).unwrap_err();
    assert_eq!(missing.status(), Status::Http);
    assert_eq!(missing.http_status(), 404);
    assert!(missing.to_string().contains("404"), "{missing}");
    let as_std: &dyn std::error::Error = &missing;
    assert!(!as_std.to_string().is_empty());

    let corrupt = load_one(&loader, &queue, &Request::new(server.url("corrupt.jpg", "errors"))).unwrap_err();
    assert_eq!((corrupt.status(), corrupt.http_status()), (Status::CorruptImage, 200));
    assert!(!corrupt.message().is_empty());

    let html = load_one(&loader, &queue, &Request::new(server.url("not-an-image.jpg", "errors"))).unwrap_err();
    assert_eq!(html.status(), Status::NotAnImage);

    // Refused calls never run their closure, and free it before returning.
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let refused = [
        (Request::new("not a url"), Status::MalformedUrl),
        (Request::new("ftp://127.0.0.1/x.jpg"), Status::SchemeNotAllowed),
        (Request::new("http://127.0.0.1/a\0b"), Status::InvalidArgument),
        (Request::new(server.url("gradient.jpg", "errors")).flags(0x8000), Status::InvalidArgument),
    ];
    for (i, (request, status)) in refused.iter().enumerate() {
        let e = loader.load(request, &queue, recorder(&outcome, &drops)).unwrap_err();
        assert_eq!(e.status(), *status, "{request:?}");
        assert_eq!(drops.load(Ordering::SeqCst), i + 1);
    }
    drain_until(&queue, Duration::from_millis(300), || true);
    assert!(outcome.lock().unwrap().is_empty());

    let bad_config = Loader::builder().max_concurrent_downloads(0).build().unwrap_err();
    assert_eq!(bad_config.status(), Status::InvalidArgument);
}

#[test]
fn cancel_reports_cancelled_once_and_is_idempotent() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let url = server.url("slow/noise.jpg", "cancel");
    let token = loader.load(&Request::new(&url), &queue, recorder(&outcome, &drops)).unwrap();
    assert!(loader.cancel(token));
    assert!(!loader.cancel(token), "a second cancel finds nothing");
    drain_until(&queue, LONG, || drops.load(Ordering::SeqCst) == 1);
    let results = outcome.lock().unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].as_ref().unwrap_err().is_cancelled());
    drop(results);
    assert!(!loader.cancel(token), "finished");

    // An image already decoded and queued still ends CANCELLED when cancelled first.
    let outcome: Outcome = Default::default();
    let token = loader.load(&Request::new(server.url("gradient.jpg", "cancel-queued")), &queue, recorder(&outcome, &drops)).unwrap();
    let deadline = Instant::now() + LONG;
    while queue.pending() == 0 {
        assert!(Instant::now() < deadline);
        queue.wait(Some(Duration::from_millis(100)));
    }
    assert!(loader.cancel(token));
    assert_eq!(queue.dispatch(), 1);
    assert_eq!(outcome.lock().unwrap()[0].as_ref().unwrap_err().status(), Status::Cancelled);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert!(loader.stats().cancelled >= 2);
}

/// Many loads, some sharing URLs, two threads draining one queue and three cancelling
/// at random: every closure runs exactly once and is freed once, and a load whose
/// cancel succeeded never delivers an image.
#[test]
fn exactly_once_under_random_cancels_from_several_threads() {
    const LOADS: usize = 160;
    let server = server();
    let loader = Arc::new(Loader::builder().max_concurrent_downloads(4).build().unwrap());
    let queue = Queue::new().unwrap();
    let calls: Arc<Vec<AtomicUsize>> = Arc::new((0..LOADS).map(|_| AtomicUsize::new(0)).collect());
    let results: Arc<Mutex<Vec<Option<Status>>>> = Arc::new(Mutex::new(vec![None; LOADS]));
    let drops = Arc::new(AtomicUsize::new(0));
    let mut tokens = Vec::new();
    for i in 0..LOADS {
        // Three loads per fast URL (merged downloads and decodes); every eighth is slow.
        let url = if i % 8 == 7 {
            server.url("slow/medium.jpg", &format!("storm-slow-{i}"))
        } else {
            server.url("gradient.jpg", &format!("storm-{}", i % 40))
        };
        let request = Request::new(url).size(32 + (i % 3) as u32 * 16, 32).mode(Mode::Fill);
        let (calls, results, guard) = (calls.clone(), results.clone(), DropCounter(drops.clone()));
        let token = loader
            .load(&request, &queue, move |result| {
                let _guard = guard;
                calls[i].fetch_add(1, Ordering::SeqCst);
                results.lock().unwrap()[i] = Some(match result {
                    Ok(image) if image.width() == 32 + (i % 3) as u32 * 16 => Status::Ok,
                    Ok(_) => Status::Unknown(1000), // a wrong size: fails the check below
                    Err(e) => e.status(),
                });
            })
            .unwrap();
        tokens.push(token);
    }
    let tokens = Arc::new(tokens);
    let confirmed: Arc<Mutex<HashSet<usize>>> = Default::default();
    let stop = Arc::new(AtomicBool::new(false));

    let cancellers: Vec<_> = (0..3u64)
        .map(|seed| {
            let (loader, tokens, confirmed) = (loader.clone(), tokens.clone(), confirmed.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(seed + 1);
                // Spread over ~50 ms, so cancels land while downloading, decoding and
                // queued alike.
                for _ in 0..LOADS / 2 {
                    let i = rng.below(LOADS);
                    if loader.cancel(tokens[i]) {
                        assert!(confirmed.lock().unwrap().insert(i), "request {i} cancelled twice");
                    }
                    thread::sleep(Duration::from_micros(600));
                }
            })
        })
        .collect();
    let dispatchers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, stop, drops) = (queue.clone(), stop.clone(), drops.clone());
            thread::spawn(move || {
                let deadline = Instant::now() + LONG;
                while !stop.load(Ordering::SeqCst) && drops.load(Ordering::SeqCst) < LOADS {
                    assert!(Instant::now() < deadline, "{} of {LOADS} closures ran", drops.load(Ordering::SeqCst));
                    queue.wait(Some(Duration::from_millis(50)));
                    queue.dispatch();
                }
            })
        })
        .collect();
    for c in cancellers {
        c.join().unwrap();
    }
    // The slow loads nobody cancelled would take seconds: end them now. (Their cancel
    // fails only if a canceller got there first or they finished.)
    for i in (7..LOADS).step_by(8) {
        if loader.cancel(tokens[i]) {
            assert!(confirmed.lock().unwrap().insert(i), "request {i} cancelled twice");
        }
    }
    let deadline = Instant::now() + LONG;
    while drops.load(Ordering::SeqCst) < LOADS && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    queue.wakeup();
    for d in dispatchers {
        d.join().unwrap();
    }

    assert_eq!(drops.load(Ordering::SeqCst), LOADS, "every closure freed exactly once");
    let results = results.lock().unwrap();
    let confirmed = confirmed.lock().unwrap();
    for i in 0..LOADS {
        assert_eq!(calls[i].load(Ordering::SeqCst), 1, "request {i}");
        let status = results[i].unwrap();
        if confirmed.contains(&i) {
            assert_eq!(status, Status::Cancelled, "request {i}: cancel succeeded, then {status:?}");
        } else {
            // Never cancelled: a peer's cancel must not touch it (rule 4).
            assert_eq!(status, Status::Ok, "request {i}, not cancelled, ended {status:?}");
        }
    }
    assert!(!confirmed.is_empty(), "no cancel succeeded: the test tested nothing");
    assert!(results.iter().any(|s| *s == Some(Status::Ok)), "no load finished: the test tested nothing");
    drop(results);
    // Another load still works, on the same loader and queue.
    assert!(load_one(&loader, &queue, &Request::new(server.url("gradient.jpg", "storm-after"))).is_ok());
}

/// Starts `slow` loads that take seconds, plus one whose result waits in the queue.
fn start_in_flight(loader: &Loader, queue: &Queue, case: &str, slow: usize, outcome: &Outcome, drops: &Arc<AtomicUsize>) {
    let server = server();
    loader.load(&Request::new(server.url("gradient.jpg", case)), queue, recorder(outcome, drops)).unwrap();
    let deadline = Instant::now() + LONG;
    while queue.pending() == 0 {
        assert!(Instant::now() < deadline);
        queue.wait(Some(Duration::from_millis(100)));
    }
    for i in 0..slow {
        let url = server.url("slow/noise.jpg", &format!("{case}-{i}"));
        loader.load(&Request::new(url), queue, recorder(outcome, drops)).unwrap();
    }
}

fn assert_all_cancelled(outcome: &Outcome, n: usize) {
    let results = outcome.lock().unwrap();
    assert_eq!(results.len(), n);
    for r in results.iter() {
        assert_eq!(r.as_ref().unwrap_err().status(), Status::Cancelled);
    }
}

#[test]
fn dropping_a_queue_in_flight_runs_its_closures_cancelled() {
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    start_in_flight(&loader, &queue, "drop-queue", 3, &outcome, &drops);
    let clone = queue.clone();
    drop(queue);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "a clone keeps the queue");
    // The last clone goes on another thread: the closures run there, during the drop.
    let dropper = thread::spawn(move || {
        drop(clone);
        thread::current().id()
    });
    dropper.join().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    assert_all_cancelled(&outcome, 4);
    // The loader is fine without the queue.
    let other = Queue::new().unwrap();
    assert!(load_one(&loader, &other, &Request::new(server().url("gradient.jpg", "drop-queue-after"))).is_ok());
}

#[test]
fn dropping_a_loader_in_flight_cancels_through_the_queue() {
    // Then a dispatch runs the closures.
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    start_in_flight(&loader, &queue, "drop-loader", 3, &outcome, &drops);
    let started = Instant::now();
    drop(loader);
    assert!(started.elapsed() < Duration::from_secs(5), "the drop stops transfers, it does not wait for them");
    assert_eq!(drops.load(Ordering::SeqCst), 0, "no closure runs inside the loader's drop");
    assert_eq!(queue.pending(), 4);
    assert_eq!(queue.dispatch(), 4);
    assert_all_cancelled(&outcome, 4);
    assert_eq!(drops.load(Ordering::SeqCst), 4);

    // Then the queue's drop runs them.
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    start_in_flight(&loader, &queue, "drop-loader2", 3, &outcome, &drops);
    drop(loader);
    drop(queue);
    assert_all_cancelled(&outcome, 4);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

#[test]
fn a_loader_dropped_inside_its_own_callback_is_freed_after_the_dispatch() {
    let server = server();
    let loader = Arc::new(Loader::new().unwrap());
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let slow_url = server.url("slow/noise.jpg", "drop-in-callback");
    loader.load(&Request::new(&slow_url), &queue, recorder(&outcome, &drops)).unwrap();
    let last_reference = loader.clone();
    let dropped_inside = Arc::new(AtomicBool::new(false));
    let flag = dropped_inside.clone();
    loader
        .load(&Request::new(server.url("gradient.jpg", "drop-in-callback")), &queue, move |result| {
            drop(last_reference); // the last one: pxl_loader_free must wait
            flag.store(result.is_ok(), Ordering::SeqCst);
        })
        .unwrap();
    drop(loader);
    drain_until(&queue, LONG, || dropped_inside.load(Ordering::SeqCst));
    // The loader was freed when that dispatch returned: the slow load ends CANCELLED.
    drain_until(&queue, LONG, || drops.load(Ordering::SeqCst) == 1);
    assert_all_cancelled(&outcome, 1);
}

#[test]
fn a_loader_held_only_by_a_table_closure_is_freed_with_the_table() {
    let server = server();
    let loader = Arc::new(Loader::new().unwrap());
    let queue = Queue::new().unwrap();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    loader.load(&Request::new(server.url("slow/noise.jpg", "table-holds-loader")), &queue, recorder(&outcome, &drops)).unwrap();
    let held = loader.clone();
    let table = Table::new(&loader, &queue, &TableConfig::new(), 1, move |_| { let _ = &held; None }, |_, _| {}).unwrap();
    drop(loader);
    drop(table); // drops the closure holding the last reference: the loader goes too
    // Freeing the loader queues the slow load's CANCELLED at once (no dispatch needed,
    // so this sees the free inside the table's drop, not one in a later dispatch).
    let deadline = Instant::now() + Duration::from_secs(5);
    while queue.pending() == 0 {
        assert!(Instant::now() < deadline, "the loader was not freed with the table");
        queue.wait(Some(Duration::from_millis(100)));
    }
    assert_eq!(queue.dispatch(), 1);
    assert_all_cancelled(&outcome, 1);
}

#[test]
fn a_panicking_closure_is_caught_and_the_others_still_run() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let before = pixload::caught_panics();
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    loader
        .load(&Request::new(server.url("gradient.jpg", "panic")), &queue, move |_| {
            let _guard = guard;
            panic!("deliberate panic in a load closure");
        })
        .unwrap();
    loader.load(&Request::new(server.url("gradient.jpg", "panic")), &queue, recorder(&outcome, &drops)).unwrap();
    drain_until(&queue, LONG, || drops.load(Ordering::SeqCst) == 2);
    assert!(pixload::caught_panics() > before);
    assert!(outcome.lock().unwrap()[0].is_ok());
}

#[test]
fn queue_fd_wait_and_wakeup() {
    #[repr(C)]
    struct PollFd {
        fd: i32,
        events: i16,
        revents: i16,
    }
    extern "C" {
        fn poll(fds: *mut PollFd, count: u64, timeout_ms: i32) -> i32;
    }
    const POLLIN: i16 = 1;
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    assert!(queue.fd() >= 0);
    let mut fd = PollFd { fd: queue.fd(), events: POLLIN, revents: 0 };
    assert_eq!(unsafe { poll(&mut fd, 1, 0) }, 0, "not readable with nothing pending");

    // A wait with nothing pending returns 0 after a wakeup from another thread.
    let waiter = {
        let queue = queue.clone();
        thread::spawn(move || {
            let started = Instant::now();
            (queue.wait(None), started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(100));
    queue.wakeup();
    let (pending, took) = waiter.join().unwrap();
    assert_eq!(pending, 0);
    assert!(took < Duration::from_secs(10));
    assert_eq!(queue.wait(Some(Duration::from_millis(10))), 0, "a timeout with nothing pending");

    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    loader.load(&Request::new(server.url("gradient.jpg", "fd")), &queue, move |_| flag.store(true, Ordering::SeqCst)).unwrap();
    assert_eq!(unsafe { poll(&mut fd, 1, 30_000) }, 1, "readable once the result is pending");
    assert_eq!(queue.pending(), 1);
    assert_eq!(queue.dispatch(), 1);
    assert!(done.load(Ordering::SeqCst));
    assert_eq!(unsafe { poll(&mut fd, 1, 0) }, 0);
}

#[test]
fn progress_runs_before_the_result_and_reaches_the_size() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let size = server.fixture_size("medium.jpg");
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Default::default();
    let finished = Arc::new(AtomicBool::new(false));
    let late = Arc::new(AtomicBool::new(false));
    let (progress_seen, progress_finished, progress_late) = (seen.clone(), finished.clone(), late.clone());
    let request = Request::new(server.url("slow/medium.jpg", "progress")).size(64, 64).progress_interval(Duration::from_millis(20));
    let done_flag = finished.clone();
    loader
        .load_with_progress(
            &request,
            &queue,
            move |received, expected| {
                // A panic here would be caught at the C boundary: record instead.
                if progress_finished.load(Ordering::SeqCst) {
                    progress_late.store(true, Ordering::SeqCst);
                }
                progress_seen.lock().unwrap().push((received, expected));
            },
            move |result| {
                if result.is_ok() {
                    done_flag.store(true, Ordering::SeqCst);
                }
            },
        )
        .unwrap();
    drain_until(&queue, LONG, || finished.load(Ordering::SeqCst));
    assert!(!late.load(Ordering::SeqCst), "progress after the result");
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    assert!(seen.iter().all(|&(r, e)| e == size && r <= size), "{seen:?}");
}

#[test]
fn prefetch_lookup_and_bind() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let requests: Vec<Request> = (0..3)
        .map(|i| Request::new(server.url("gradient.jpg", &format!("prefetch-{i}"))).size(40, 40).mode(Mode::Fill))
        .collect();
    let prefetch = loader.prefetch(&requests);
    assert!(prefetch.result.is_ok());
    assert!(prefetch.tokens.iter().all(Option::is_some));
    let deadline = Instant::now() + LONG;
    while requests.iter().any(|r| loader.lookup(r).unwrap().is_none()) {
        assert!(Instant::now() < deadline, "prefetched images never reached the memory cache");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(queue.pending(), 0, "prefetches call nobody");
    let hit = loader.lookup(&requests[0]).unwrap().unwrap();
    assert_eq!((hit.width(), hit.height()), (40, 40));
    assert!(loader.lookup(&requests[0].clone().size(41, 40)).unwrap().is_none(), "another size is another entry");
    assert!(loader.memory_cache_count() >= 3);
    let stats = loader.stats();
    assert!(stats.requests >= 3 && stats.network_fetches >= 3, "{stats:?}");

    // A refusal among them: reported, and the others still accepted.
    let mixed = [Request::new("no url"), Request::new(server.url("gradient.jpg", "prefetch-mixed"))];
    let prefetch = loader.prefetch(&mixed);
    assert_eq!(prefetch.result.unwrap_err().status(), Status::MalformedUrl);
    assert!(prefetch.tokens[0].is_none() && prefetch.tokens[1].is_some());

    // bind: a cached image comes back at once, and the closure is dropped uncalled.
    let outcome: Outcome = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut slot = Slot::new();
    let now = loader.bind(&requests[1], &queue, &mut slot, recorder(&outcome, &drops)).unwrap();
    assert!(now.is_some() && slot.token().is_none());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // Not cached: a load starts; binding the slot again cancels it.
    let slow = Request::new(server.url("slow/noise.jpg", "bind"));
    assert!(loader.bind(&slow, &queue, &mut slot, recorder(&outcome, &drops)).unwrap().is_none());
    assert!(slot.token().is_some());
    assert!(loader.bind(&requests[2], &queue, &mut slot, recorder(&outcome, &drops)).unwrap().is_some());
    drain_until(&queue, LONG, || drops.load(Ordering::SeqCst) == 3);
    let results = outcome.lock().unwrap();
    assert_eq!(results.len(), 1, "only the replaced load called back");
    assert!(results[0].as_ref().unwrap_err().is_cancelled());
    drop(results);

    // Trimming empties the cache; held images stay valid.
    loader.memory_cache_trim(0);
    assert_eq!(loader.memory_cache_count(), 0);
    assert_eq!(hit.pixels().len(), hit.stride() * 40);
    loader.cache_remove(requests[0].url()).unwrap();
}

#[test]
fn table_delivers_visible_rows_and_prefetches_ahead() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let visible = Arc::new(Mutex::new(0..0i64));
    let delivered: Arc<Mutex<Vec<(i64, Result<Image, Error>)>>> = Default::default();
    let outside = Arc::new(AtomicUsize::new(0));
    let asked: Arc<Mutex<Vec<i64>>> = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let request_guard = DropCounter(drops.clone());
    let row_guard = DropCounter(drops.clone());
    let case = "table";
    let base = server.url("gradient.jpg", case);
    let missing = server.url("missing.jpg", case);
    let asked_in = asked.clone();
    let (visible_in, delivered_in, outside_in) = (visible.clone(), delivered.clone(), outside.clone());
    let mut table = Table::new(
        &loader,
        &queue,
        &TableConfig::new().prefetch_rows(8),
        200,
        move |row| {
            let _ = &request_guard;
            asked_in.lock().unwrap().push(row);
            match row {
                _ if row % 50 == 49 => None,
                7 => Some(Request::new(&missing)),
                _ => Some(Request::new(format!("{base}&row={row}")).size(48, 48).mode(Mode::Fill)),
            }
        },
        move |row, result| {
            let _ = &row_guard;
            if !visible_in.lock().unwrap().contains(&row) {
                outside_in.fetch_add(1, Ordering::SeqCst);
            }
            delivered_in.lock().unwrap().push((row, result));
        },
    )
    .unwrap();

    let show = |table: &mut Table, first: i64, count: u32, direction: i32| {
        *visible.lock().unwrap() = first..first + count as i64;
        table.set_visible(first, count, direction).unwrap();
    };
    show(&mut table, 0, 10, 1);
    drain_until(&queue, LONG, || delivered.lock().unwrap().len() == 10);
    {
        let results = delivered.lock().unwrap();
        let rows: HashSet<i64> = results.iter().map(|(row, _)| *row).collect();
        assert_eq!(rows, (0..10).collect());
        for (row, result) in results.iter() {
            match row {
                7 => assert_eq!(result.as_ref().unwrap_err().http_status(), 404),
                _ => assert_eq!(result.as_ref().unwrap().width(), 48),
            }
        }
    }
    assert!((10..18).all(|row| asked.lock().unwrap().contains(&row)), "rows ahead were prefetched");
    let stats = table.stats();
    assert!(stats.started >= 18 && stats.delivered == 9 && stats.failed == 1, "{stats:?}");

    // Rows 40..49 (49 has no image), then back to the top: cached rows arrive inside
    // set_visible, before it returns.
    show(&mut table, 40, 10, 1);
    drain_until(&queue, LONG, || delivered.lock().unwrap().len() == 19);
    delivered.lock().unwrap().clear();
    show(&mut table, 0, 6, -1);
    let rows: HashSet<i64> = delivered.lock().unwrap().iter().map(|(row, _)| *row).collect();
    assert_eq!(rows, (0..6).collect(), "memory-cached rows are delivered at once");
    assert!(table.stats().memory_hits >= 6);
    assert_eq!(outside.load(Ordering::SeqCst), 0, "a row delivered while not visible");

    table.set_row_count(20).unwrap();
    table.cancel_all();
    queue.dispatch();
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "both table closures freed with the table");
    drop(loader);
    assert!(delivered.lock().unwrap().iter().all(|(_, r)| !matches!(r, Err(e) if e.is_cancelled())));
}

#[test]
fn a_table_outlives_its_loader_and_keeps_its_queue() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let url = server.url("slow/noise.jpg", "table-order");
    let mut table = Table::new(&loader, &queue, &TableConfig::new(), 5, move |_| Some(Request::new(&url)), |_, _| {}).unwrap();
    table.set_visible(0, 5, 0).unwrap();
    drop(queue); // the table holds a clone
    drop(loader); // "tables and their loader may be freed in any order"
    table.set_visible(1, 3, 1).unwrap_or(());
    drop(table);
}

#[test]
fn the_example_loads_urls_and_prints_timings() {
    let server = server();
    let root = repo_root();
    let target = std::env::var("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| root.join("bindings/rust/target"));
    let mut command = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .args(["run", "--offline", "--quiet", "--manifest-path"])
        .arg(root.join("examples/rust/Cargo.toml"))
        .arg("--target-dir")
        .arg(target.join("example"))
        .arg("--")
        .args(["--size", "64"])
        .arg(server.url("gradient.jpg", "example-1"))
        .arg(server.url("alpha.png", "example"))
        .arg(server.url("missing.jpg", "example"));
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "one URL fails: {stdout}\n{stderr}");
    assert!(stdout.contains("64x48") && stdout.contains("64x43"), "{stdout}");
    assert!(stdout.contains("404"), "{stdout}");
    assert!(stdout.contains("2/3 images"), "{stdout}");
    assert!(stdout.contains(" ms"), "{stdout}");
}

#[test]
fn fetch_waits_for_one_image_or_its_error() {
    let server = server();
    let loader = Loader::new().unwrap();
    let image = loader.fetch(&Request::new(server.url("gradient.jpg", "fetch")).size(64, 64)).unwrap();
    assert_eq!((image.width(), image.height()), (64, 48));
    assert_eq!(image.pixels().len(), image.stride() * 48);
    let error = loader.fetch(&Request::new(server.url("missing.jpg", "fetch"))).unwrap_err();
    assert_eq!((error.status(), error.http_status()), (Status::Http, 404));
    // From another thread, with the loader shared.
    let loader = Arc::new(loader);
    let url = server.url("alpha.png", "fetch");
    let other = Arc::clone(&loader);
    let size = thread::spawn(move || other.fetch(&Request::new(url)).map(|i| i.width())).join().unwrap();
    assert!(size.unwrap() > 0);
}

#[test]
fn only_the_same_minor_release_is_accepted() {
    // Before 1.0 a minor release may change the ABI (0.2.0 reordered the table
    // callbacks' parameters; 0.3.0 grew structs; 0.4.0 added the frame functions the
    // bindings call; 0.5.0 the API of processors, fetchers, codecs and metrics; 0.6.0 a
    // result source, PXL_SOURCE_FILE): 0.6.x only.
    for ok in [0x000600, 0x000601, 0x0006FF] {
        assert!(pixload::version_compatible(ok), "{ok:#08x}");
    }
    for refused in [0x000100, 0x000500, 0x0005FF, 0x000700, 0x010600, 0] {
        assert!(!pixload::version_compatible(refused), "{refused:#08x}");
    }
    assert!(pixload::version_compatible(pixload::version_num()));
    assert_eq!(env!("CARGO_PKG_VERSION"), pixload::sys::PXL_VERSION_STRING, "Cargo.toml's version");
}

#[test]
fn init_size_fills_exactly_our_structs() {
    use pixload::sys;
    use std::mem::size_of;
    // A guard past each struct: *_init_size writes size bytes, never more.
    fn init<T>(init: unsafe extern "C" fn(*mut T, usize) -> sys::pxl_status) -> T {
        let size = size_of::<T>();
        let mut buffer = vec![0xA5u8; size + 64 + std::mem::align_of::<T>()];
        let offset = buffer.as_ptr().align_offset(std::mem::align_of::<T>());
        let p = unsafe { buffer.as_mut_ptr().add(offset) } as *mut T;
        assert_eq!(unsafe { init(p, size) }, sys::PXL_OK);
        assert!(buffer[offset + size..].iter().all(|&b| b == 0xA5), "written past the struct");
        assert_eq!(unsafe { *(p as *const usize) }, size, "struct_size is ours");
        unsafe { p.read() }
    }
    let config = init(sys::pxl_config_init_size);
    assert_eq!(config.log_level, sys::PXL_LOG_WARNING);
    assert!(config.log.is_none() && config.log_user_data.is_null());
    assert_eq!(config.disk_cache_max_age_s, 604_800);
    assert_eq!(config.disk_variant_max_side, 256);
    assert_eq!(config.tls_min_version, sys::PXL_TLS_1_2);
    assert!(config.ca_path.is_null() && config.proxy.is_null());
    assert_eq!(config.memory_cache_bytes, 64 << 20);
    let request = init(sys::pxl_request_init_size);
    assert_eq!(request.progress_interval_ms, 100);
    let table = init(sys::pxl_table_config_init_size);
    assert_eq!(table.prefetch_priority, sys::PXL_PRIORITY_PREFETCH);
    // Below 0.1.0's size: refused, nothing written.
    let mut small = vec![0xA5u8; sys::PXL_CONFIG_SIZE_0_1];
    let status = unsafe { sys::pxl_config_init_size(small.as_mut_ptr() as *mut sys::pxl_config, sys::PXL_CONFIG_SIZE_0_1 - 1) };
    assert_eq!(status, sys::PXL_E_INVALID_ARGUMENT);
    assert!(small.iter().all(|&b| b == 0xA5));
}

/// A directory path under a regular file: the disk cache cannot be created there.
fn unusable_cache_dir(case: &str) -> std::path::PathBuf {
    let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let file = std::path::Path::new(&tmp).join(format!("pxl-rust-log.{}.{case}", std::process::id()));
    std::fs::write(&file, "not a directory").unwrap();
    file.join("cache")
}

fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn an_unusable_disk_cache_is_logged_as_a_warning() {
    let server = server();
    let dir = unusable_cache_dir("warning");
    let lines: Arc<Mutex<Vec<(pixload::LogLevel, String, thread::ThreadId)>>> = Default::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let loader = {
        let lines = lines.clone();
        let guard = DropCounter(drops.clone());
        Loader::builder()
            .disk_cache_dir(&dir)
            .disk_cache_bytes(1 << 20)
            .log(move |level, message| {
                let _ = &guard;
                lines.lock().unwrap().push((level, message.to_string(), thread::current().id()));
            })
            .build()
            .unwrap()
    };
    let queue = Queue::new().unwrap();
    // Still loads, from the network: the loader turned memory-only.
    let image = load_one(&loader, &queue, &Request::new(server.url("gradient.jpg", "log-warning")).size(32, 32)).unwrap();
    assert_eq!((image.width(), image.height()), (32, 24));
    let logged = |lines: &[(pixload::LogLevel, String, thread::ThreadId)]| {
        lines.iter().find(|(_, m, _)| m.contains("without a disk cache")).cloned()
    };
    assert!(wait_for(LONG, || logged(&lines.lock().unwrap()).is_some()), "{:?}", lines.lock().unwrap());
    let (level, message, thread_id) = logged(&lines.lock().unwrap()).unwrap();
    assert_eq!(level, pixload::LogLevel::Warning);
    assert!(!message.ends_with('\n'));
    assert_ne!(thread_id, thread::current().id(), "logged on a library thread");
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the closure lives as long as the loader");
    drop(loader);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure is dropped with the loader");
    let _ = std::fs::remove_file(dir.parent().unwrap());
}

#[test]
fn a_panicking_log_closure_is_caught_and_log_level_filters() {
    let dir = unusable_cache_dir("panics");
    let calls = Arc::new(AtomicUsize::new(0));
    let before = pixload::caught_panics();
    let loader = {
        let calls = calls.clone();
        Loader::builder()
            .disk_cache_dir(&dir)
            .disk_cache_bytes(1 << 20)
            .log(move |_, _| {
                calls.fetch_add(1, Ordering::SeqCst);
                panic!("a broken logger");
            })
            .build()
            .unwrap()
    };
    loader.disk_cache_clear(); // opens the disk cache (and fails): the line is out by now
    assert!(wait_for(LONG, || calls.load(Ordering::SeqCst) > 0));
    assert!(pixload::caught_panics() > before);
    drop(loader);

    // log_level Error: the warning is not passed on.
    let silent = Arc::new(AtomicUsize::new(0));
    let loader = {
        let silent = silent.clone();
        Loader::builder()
            .disk_cache_dir(&dir)
            .disk_cache_bytes(1 << 20)
            .log_level(pixload::LogLevel::Error)
            .log(move |_, _| {
                silent.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap()
    };
    loader.disk_cache_clear();
    drop(loader);
    assert_eq!(silent.load(Ordering::SeqCst), 0);
    let _ = std::fs::remove_file(dir.parent().unwrap());
}

/// disk_variant_max_side (default 256): the thumbnail a first loader decoded comes back
/// from disk in a fresh one, the same pixels, counted as a variant hit; 0 turns it off.
#[test]
fn a_fresh_loader_reads_kept_thumbnails_from_disk() {
    let server = server();
    let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let dir = std::path::Path::new(&tmp).join(format!("pxl-rust-variants.{}", std::process::id()));
    let request = Request::new(server.url("gradient.jpg", "variants")).size(150, 150).mode(pixload::Mode::Fill);
    let loader = |max_side: u32| {
        Loader::builder().disk_cache_dir(&dir).disk_cache_bytes(8 << 20).disk_variant_max_side(max_side).build().unwrap()
    };
    let queue = Queue::new().unwrap();
    let first = loader(256);
    let decoded = load_one(&first, &queue, &request).unwrap().pixels().to_vec();
    drop(first); // joins the disk threads: the thumbnail is written
    for (max_side, hits) in [(256, 1), (0, 0)] {
        let fresh = loader(max_side);
        assert_eq!(load_one(&fresh, &queue, &request).unwrap().pixels(), &decoded[..]);
        let stats = fresh.stats();
        assert_eq!((stats.disk_hits, stats.variant_hits, stats.network_fetches), (1, hits, 0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn animated_gif_frames() {
    let server = server();
    std::fs::copy(repo_root().join("Tests/fixtures/gif-suite/dispose-restore-background.gif"),
                  server.www.join("anim.gif")).unwrap();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let animated = load_one(&loader, &queue, &Request::new(server.url("anim.gif", "animated")).animate(true)).unwrap();
    assert_eq!((animated.width(), animated.height()), (2, 2));
    assert_eq!((animated.frame_count(), animated.source_frame_count(), animated.loop_count()), (4, 4, 0));
    assert_eq!((0..5).map(|i| animated.frame_duration_ms(i)).collect::<Vec<_>>(),
               vec![Some(500), Some(500), Some(500), Some(500), None]);
    assert_eq!(animated.frame_pixels(0), Some(animated.pixels()));
    assert!(animated.frame_pixels(4).is_none());
    assert_ne!(animated.frame_pixels(0), animated.frame_pixels(1), "frames differ");
    let still = load_one(&loader, &queue, &Request::new(server.url("anim.gif", "animated"))).unwrap();
    assert_eq!((still.frame_count(), still.source_frame_count()), (1, 4));
    assert_eq!(still.pixels(), animated.pixels());
}

#[test]
fn a_cut_gif_is_incomplete_and_a_cut_png_fails() {
    let server = server();
    let gif = std::fs::read(repo_root().join("Tests/fixtures/gif-suite/large-codes.gif")).unwrap();
    std::fs::write(server.www.join("rs-cut.gif"), &gif[..gif.len() / 2]).unwrap();
    std::fs::write(server.www.join("rs-whole.gif"), &gif).unwrap();
    let png = std::fs::read(server.www.join("alpha.png")).unwrap();
    std::fs::write(server.www.join("rs-cut.png"), &png[..png.len() * 2 / 3]).unwrap();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let cut = load_one(&loader, &queue, &Request::new(server.url("rs-cut.gif", "incomplete"))).unwrap();
    assert!(cut.is_incomplete());
    let whole = load_one(&loader, &queue, &Request::new(server.url("rs-whole.gif", "incomplete"))).unwrap();
    assert!(!whole.is_incomplete());
    let error = load_one(&loader, &queue, &Request::new(server.url("rs-cut.png", "incomplete"))).unwrap_err();
    assert_eq!(error.status(), Status::CorruptImage);
}

/// 0.5.0's trust and proxy settings reach the library: a CA file or directory that cannot
/// be read fails the build; proxy "" and a minimum TLS version load over http; the TLS
/// counters are in the stats.
#[test]
fn tls_and_proxy_settings() {
    let missing = std::path::Path::new("/nonexistent/pixload-rust-ca.pem");
    let err = Loader::builder().ca_file(missing).build().err().expect("an unreadable ca_file is refused");
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = Loader::builder().ca_path("/nonexistent/pixload-rust-certs").build().err().expect("refused");
    assert_eq!(err.status(), Status::InvalidArgument);
    let loader = Loader::builder().proxy("").tls_min_version(TlsVersion::V1_3).max_retries(0).build().unwrap();
    let stats = loader.stats();
    assert_eq!((stats.tls_handshakes, stats.tls_resumed), (0, 0));
}
