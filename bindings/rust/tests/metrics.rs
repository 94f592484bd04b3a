//! Request metrics and placeholders (0.5.0) through the Rust binding.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use pixload::{Error, Image, Loader, Metrics, Placeholder, PlaceholderKind, Queue, Request, Status, Tier};

type Measured = Arc<Mutex<Vec<(Result<Image, Error>, Metrics)>>>;

fn load_measured(loader: &Loader, queue: &Queue, request: &Request) -> (Result<Image, Error>, Metrics) {
    let outcome: Measured = Default::default();
    let sink = outcome.clone();
    loader.load_measured(request, queue, move |result, metrics| sink.lock().unwrap().push((result, metrics))).unwrap();
    drain_until(queue, Duration::from_secs(30), || !outcome.lock().unwrap().is_empty());
    let result = outcome.lock().unwrap().pop().unwrap();
    result
}

#[test]
fn metrics_name_the_network_then_the_memory_cache() {
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let request = Request::new(server.url("gradient.jpg", "metrics"));
    let (image, network) = load_measured(&loader, &queue, &request);
    let image = image.unwrap();
    assert_eq!(network.tier, Tier::Network);
    assert_eq!(network.http_status, 200);
    assert!(network.received_bytes > 0);
    assert!(network.decode_us > 0);
    assert_eq!(network.delivered_bytes, (image.stride() * image.height() as usize) as u64);
    let (_, memory) = load_measured(&loader, &queue, &request);
    assert_eq!(memory.tier, Tier::Memory);
    assert_eq!((memory.received_bytes, memory.decode_us), (0, 0));
}

#[test]
fn placeholders_round_trip_and_refuse_malformed_hashes() {
    let blur = Placeholder::blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj");
    let image = blur.decode(32, 24).unwrap();
    assert_eq!((image.width(), image.height()), (32, 24));
    assert_eq!(blur.aspect_ratio().unwrap(), 1.0);
    let again = Placeholder::encode_blurhash(&image, 4, 3).unwrap();
    assert_eq!(again.len(), 28);
    let thumb = Placeholder::encode_thumbhash(&image).unwrap();
    let decoded = Placeholder::thumbhash(&thumb).decode(32, 24).unwrap();
    assert_eq!(decoded.width(), 32);
    assert!((Placeholder::thumbhash(&thumb).aspect_ratio().unwrap() - 32.0 / 24.0).abs() < 0.5);
    let broken = Placeholder::blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdn");
    assert_eq!(broken.decode(32, 32).unwrap_err().status(), Status::CorruptImage);
    let short = Placeholder { kind: PlaceholderKind::ThumbHash, data: thumb[..thumb.len() - 1].to_vec() };
    assert_eq!(short.decode(32, 32).unwrap_err().status(), Status::CorruptImage);
    assert_eq!(blur.decode(0, 32).unwrap_err().status(), Status::InvalidArgument);
}
