//! Animation players (0.6.0) through the Rust binding: Loader::animate's iterator.
mod common;

use std::time::Instant;

use common::*;
use pixload::{Loader, Request, Status};

// anim.webp (Tests/capi/mkfixtures.c): 3 frames of 300x200, 100 ms each, loop count 2.
#[test]
fn animate_plays_every_frame_at_its_duration_then_ends() {
    let server = server();
    let loader = Loader::new().unwrap();
    let request = Request::new(server.url("anim.webp", "player")).size(60, 40);
    let all_at_once = loader.fetch(&request.clone().animate(true)).unwrap();
    let started = Instant::now();
    let mut animation = loader.animate(&request).unwrap();
    let mut played = Vec::new();
    let mut skipped = 0;
    for frame in animation.by_ref() {
        let frame = frame.unwrap();
        assert_eq!((frame.image.width(), frame.image.height()), (60, 40));
        assert_eq!(frame.duration_ms, 100);
        // Each frame is the same as PXL_FLAG_ANIMATE's frame of that index.
        assert_eq!(frame.image.pixels(), all_at_once.frame_pixels(frame.index as u32).unwrap());
        skipped += frame.skipped;
        played.push(frame.index);
    }
    let elapsed = started.elapsed().as_millis();
    assert_eq!((animation.frame_count(), animation.loop_count()), (3, 2));
    assert_eq!(played.len() as i32 + skipped, 6, "{played:?}");
    assert_eq!((played[0], *played.last().unwrap()), (0, 2));
    assert!(elapsed >= 450, "two loops of three 100 ms frames shown in {elapsed} ms");
    let stats = animation.stats();
    assert_eq!(stats.frames_shown as usize, played.len());
    assert!(stats.peak_ring_bytes > 0 && stats.peak_ring_bytes <= 3 * 60 * 40 * 4, "{stats:?}");
    assert!(animation.next().is_none());
}

#[test]
fn animate_reports_the_load_error_first() {
    let server = server();
    let loader = Loader::new().unwrap();
    let mut animation = loader.animate(&Request::new(server.url("missing-animation.webp", "player-404"))).unwrap();
    let error = animation.next().unwrap().unwrap_err();
    assert_eq!(error.status(), Status::Http);
    assert!(animation.next().is_none());
}
