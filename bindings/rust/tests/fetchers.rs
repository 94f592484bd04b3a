//! Fetchers with Rust closures, and data: URIs.
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pixload::{scheme, Fetch, FetcherOptions, Loader, Queue, Request, Status};

/// An in-memory "archive" served by a thread of its own; `starts` counts fetcher starts.
#[test]
fn a_closure_fetcher_serves_merged_requests_once() {
    let server = common::server();
    let mut archive = HashMap::new();
    archive.insert("gradient.jpg".to_string(), std::fs::read(server.www.join("gradient.jpg")).unwrap());
    let archive = Arc::new(archive);
    let starts = Arc::new(AtomicUsize::new(0));
    let (send, receive) = mpsc::channel::<Fetch>();
    let release = Arc::new(Mutex::new(receive));
    let loader = Loader::new().unwrap();
    let counted = starts.clone();
    loader
        .add_fetcher("mem", FetcherOptions::default(), move |fetch| {
            counted.fetch_add(1, Ordering::SeqCst);
            send.send(fetch).unwrap();
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let queue = Queue::new().unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    for width in [20, 40, 60, 20] {
        let results = results.clone();
        loader
            .load(&Request::new("mem:gradient.jpg").size(width, 0), &queue, move |r| {
                results.lock().unwrap().push(r.map(|image| image.width()))
            })
            .unwrap();
    }
    // Every request merged into the one fetch, which the "archive" thread now serves.
    let fetch = release.lock().unwrap().recv_timeout(Duration::from_secs(5)).unwrap();
    let bytes = &archive[fetch.url().strip_prefix("mem:").unwrap()];
    for piece in bytes.chunks(1000) {
        fetch.write(piece).unwrap();
    }
    assert!(fetch.finish());
    common::drain_until(&queue, Duration::from_secs(10), || results.lock().unwrap().len() == 4);
    let mut widths: Vec<u32> = results.lock().unwrap().iter().map(|r| *r.as_ref().unwrap()).collect();
    widths.sort();
    assert_eq!(widths, vec![20, 20, 40, 60]);
    assert_eq!(starts.load(Ordering::SeqCst), 1);
    // A refused fetcher is never destroyed by the library (pixload.h, "Extensions"): the
    // binding drops the closure itself, once.
    let refused = Arc::new(());
    let held = refused.clone();
    assert!(loader.add_fetcher("http", FetcherOptions::default(), move |_| { let _ = &held; }).is_err());
    assert_eq!(Arc::strong_count(&refused), 1, "the refused closure was dropped");
    assert!(loader.remove_fetcher("mem"));
    assert!(!loader.remove_fetcher("mem"));
}

/// A fetch the library gives up on (timeout) is cancelled: the closure set by on_cancel
/// runs, later writes are refused; a dropped Fetch ends its request.
#[test]
fn cancels_timeouts_and_dropped_fetches() {
    let loader = Loader::builder().timeout(Duration::from_millis(200)).build().unwrap();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let cancels = Arc::new(AtomicUsize::new(0));
    let (k, c) = (kept.clone(), cancels.clone());
    loader
        .add_fetcher("app", FetcherOptions::default(), move |fetch| {
            if fetch.url() == "app:drop" {
                return; // dropped unfinished: the request ends
            }
            let c = c.clone();
            fetch.on_cancel(move || {
                c.fetch_add(1, Ordering::SeqCst);
            });
            k.lock().unwrap().push(fetch);
        })
        .unwrap();
    let error = loader.fetch(&Request::new("app:never")).unwrap_err();
    assert_eq!(error.status(), Status::Timeout);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while cancels.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
    let fetch = kept.lock().unwrap().pop().unwrap();
    assert!(fetch.is_cancelled());
    assert_eq!(fetch.write(b"late").unwrap_err().status(), Status::Cancelled);
    assert!(!fetch.finish());
    assert_eq!(loader.fetch(&Request::new("app:drop")).unwrap_err().status(), Status::Cancelled);
}

#[test]
fn data_uris_behind_the_allow_list() {
    let server = common::server();
    let png = std::fs::read(server.www.join("alpha.png")).unwrap();
    let uri: String = "data:,".to_string() + &png.iter().map(|b| format!("%{b:02X}")).collect::<String>();
    let plain = Loader::new().unwrap();
    assert_eq!(plain.fetch(&Request::new(&uri)).unwrap_err().status(), Status::SchemeNotAllowed);
    let loader = Loader::builder().allowed_schemes(scheme::HTTP | scheme::DATA).build().unwrap();
    let image = loader.fetch(&Request::new(&uri)).unwrap();
    assert_eq!((image.width(), image.height()), (300, 200));
}
