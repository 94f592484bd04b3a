//! Processors through the safe layer: builder methods, the chain in the cache key, a bad
//! step refused before any work.
mod common;

use common::*;
use pixload::{Loader, Mode, Processor, Request, Status};

#[test]
fn builder_methods_apply_the_chain() {
    let server = server();
    let loader = Loader::new().unwrap();
    let url = server.url("gradient.jpg", "rust-processors");
    let circle = Request::new(url.clone()).size(120, 80).mode(Mode::Fill).circle(Some((2.0, 0xffffffff))).blur(1.5);
    let image = loader.fetch(&circle).unwrap();
    assert_eq!((image.width(), image.height()), (80, 80));
    let rotated = loader.fetch(&Request::new(url.clone()).size(120, 80).mode(Mode::Fill).rotate(90).grayscale()).unwrap();
    assert_eq!((rotated.width(), rotated.height()), (80, 120));
    let p = &rotated.row(10)[40 * 4..40 * 4 + 4];
    assert!(p[0] == p[1] && p[1] == p[2]);
    let cropped = loader
        .fetch(&Request::new(url.clone()).size(120, 80).crop(10, 10, 20, 30).flip(true).tint(0x00ff0080))
        .unwrap();
    assert_eq!((cropped.width(), cropped.height()), (20, 30));
    let rounded = loader
        .fetch(&Request::new(url.clone()).size(120, 80).mode(Mode::Fill).rounded_corners_each([0.0, 10.0, 20.0, 30.0], None))
        .unwrap();
    assert_eq!(rounded.row(0)[119 * 4 + 3], 0, "the top-right corner is cut");
    assert_eq!(rounded.row(0)[3], 255, "the top-left one (radius 0) is not");
    // The chain is part of the key: the same request finds it, another chain does not.
    assert!(loader.lookup(&circle).unwrap().is_some());
    assert!(loader.lookup(&Request::new(url.clone()).size(120, 80).mode(Mode::Fill).circle(None)).unwrap().is_none());
    // Wrong whatever the image: refused at once.
    for bad in [Processor::Blur { sigma: 1000.0 }, Processor::Rotate { degrees: 45 }, Processor::Custom { id: "nobody".into() }] {
        let error = loader.fetch(&Request::new(url.clone()).process(bad)).unwrap_err();
        assert_eq!(error.status(), Status::InvalidArgument);
    }
}
