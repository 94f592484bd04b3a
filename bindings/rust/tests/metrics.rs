//! Request metrics and placeholders (0.5.0) through the Rust binding.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use pixload::{Error, Image, Loader, Metrics, Mode, Placeholder, PlaceholderKind, Queue, Request, Status, Tier};

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

#[test]
fn table_rows_get_their_placeholder_first_then_their_image() {
    use pixload::{RowUpdate, Table, TableConfig};
    let server = server();
    let loader = Loader::new().unwrap();
    let queue = Queue::new().unwrap();
    let hash = Placeholder::blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj");
    let expected = hash.decode(32, 16).unwrap();
    // (row, a placeholder?, its size, a placeholder's pixels)
    type Seen = Arc<Mutex<Vec<(i64, bool, (u32, u32), Vec<u8>)>>>;
    let seen: Seen = Default::default();
    let sink = seen.clone();
    let base = server.url("slow/gradient.jpg", "table-placeholder");
    let mut table = Table::with_placeholders(
        &loader,
        &queue,
        &TableConfig::new(),
        4,
        move |row| Some(Request::new(format!("{base}&row={row}")).size(80, 40).mode(Mode::Fill).placeholder(hash.clone())),
        move |row, update| {
            let (placeholder, image) = match update {
                RowUpdate::Placeholder(image) => (true, image),
                RowUpdate::Final(result) => (false, result.unwrap()),
            };
            let pixels = if placeholder { image.pixels().to_vec() } else { Vec::new() };
            sink.lock().unwrap().push((row, placeholder, (image.width(), image.height()), pixels));
        },
    )
    .unwrap();
    table.set_visible(0, 2, 0).unwrap();
    // Inside set_visible: each visible row's placeholder, 32x16 (the request's 2:1), the
    // hash decoded as Placeholder::decode decodes it.
    {
        let seen = seen.lock().unwrap();
        let rows: Vec<(i64, bool, (u32, u32))> = seen.iter().map(|(row, p, size, _)| (*row, *p, *size)).collect();
        assert_eq!(rows, vec![(0, true, (32, 16)), (1, true, (32, 16))]);
        assert!(seen.iter().all(|(_, _, _, pixels)| pixels.as_slice() == expected.pixels()));
    }
    drain_until(&queue, Duration::from_secs(30), || seen.lock().unwrap().len() == 4);
    let finals: Vec<(i64, bool, (u32, u32))> = seen.lock().unwrap()[2..].iter().map(|(row, p, size, _)| (*row, *p, *size)).collect();
    assert!(finals.iter().all(|(_, placeholder, size)| !placeholder && *size == (80, 40)), "{finals:?}");

    // Off screen and back: the memory cache holds row 0, which comes at once, without a
    // placeholder. Table::new's closure never sees placeholders.
    table.set_visible(0, 0, 0).unwrap();
    seen.lock().unwrap().clear();
    table.set_visible(0, 1, 0).unwrap();
    let rows: Vec<(i64, bool, (u32, u32))> = seen.lock().unwrap().iter().map(|(row, p, size, _)| (*row, *p, *size)).collect();
    assert_eq!(rows, vec![(0, false, (80, 40))]);
    drop(table);
    let finals: Arc<Mutex<Vec<i64>>> = Default::default();
    let sink = finals.clone();
    let base = server.url("slow/gradient.jpg", "table-placeholder-new");
    let hash = Placeholder::blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj");
    let mut table = Table::new(
        &loader,
        &queue,
        &TableConfig::new(),
        2,
        move |row| Some(Request::new(format!("{base}&row={row}")).size(80, 40).mode(Mode::Fill).placeholder(hash.clone())),
        move |row, result| {
            result.unwrap();
            sink.lock().unwrap().push(row);
        },
    )
    .unwrap();
    table.set_visible(0, 2, 0).unwrap();
    assert!(finals.lock().unwrap().is_empty(), "Table::new's closure got a placeholder");
    drain_until(&queue, Duration::from_secs(30), || finals.lock().unwrap().len() == 2);
}
