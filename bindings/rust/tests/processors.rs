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

#[test]
fn custom_processors_are_closures_registered_with_the_loader() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let server = server();
    let loader = Loader::new().unwrap();
    let url = server.url("gradient.jpg", "rust-custom-processors");
    // Dropped exactly when the library retires the registration.
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (guard, counter) = (Dropped(drops.clone()), calls.clone());
    loader
        .add_processor("invert", 1, move |frame| {
            let _ = &guard;
            counter.fetch_add(1, Ordering::SeqCst);
            for p in frame.pixels().chunks_exact_mut(4) {
                for c in 0..3 {
                    p[c] = p[3] - p[c];
                }
            }
            Ok(())
        })
        .unwrap();
    let plain = loader.fetch(&Request::new(url.clone()).size(64, 48)).unwrap();
    let inverted = loader.fetch(&Request::new(url.clone()).size(64, 48).custom("invert")).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(inverted.row(0)[0], 255 - plain.row(0)[0], "the gradient's dark corner, inverted");
    // A new size through resize; an error with its status and message; a panic caught.
    loader
        .add_processor("half", 1, |frame| {
            let (w, h) = (frame.width() / 2, frame.height() / 2);
            let (input, output) = frame.resize(w, h)?;
            for y in 0..h as usize {
                for x in 0..w as usize {
                    let from = (y * 2 * w as usize * 2 + x * 2) * 4;
                    output[(y * w as usize + x) * 4..][..4].copy_from_slice(&input[from..from + 4]);
                }
            }
            Ok(())
        })
        .unwrap();
    let half = loader.fetch(&Request::new(url.clone()).size(64, 48).custom("half")).unwrap();
    assert_eq!((half.width(), half.height()), (32, 24));
    assert_eq!(&half.row(1)[4..8], &plain.row(2)[8..12]);
    loader
        .add_processor("faceless", 1, |frame| {
            Err(pixload::Error::new(Status::UnsupportedImage, 0, format!("no faces in {}x{}", frame.width(), frame.height())))
        })
        .unwrap();
    let error = loader.fetch(&Request::new(url.clone()).size(64, 48).custom("faceless")).unwrap_err();
    assert_eq!((error.status(), error.message()), (Status::UnsupportedImage, "no faces in 64x48"));
    let panics = pixload::caught_panics();
    loader.add_processor("panics", 1, |_| panic!("a bug in the processor")).unwrap();
    let error = loader.fetch(&Request::new(url.clone()).size(64, 48).custom("panics")).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert_eq!(pixload::caught_panics(), panics + 1);
    // Replacing drops the old closure; removing drops the new one; requests then fail.
    let (guard2, drops2) = (Dropped(drops.clone()), drops.clone());
    loader
        .add_processor("invert", 2, move |_| {
            let _ = &guard2;
            let _ = &drops2;
            Ok(())
        })
        .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1, "version 1 dropped when replaced");
    loader.remove_processor("invert").unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(loader.remove_processor("invert").unwrap_err().status(), Status::NotFound);
    let error = loader.fetch(&Request::new(url.clone()).custom("invert")).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    // A refused registration never calls destroy (pixload.h, "Extensions"): the binding
    // drops the closure itself, once.
    let refused = Arc::new(());
    let held = refused.clone();
    let error = loader.add_processor("", 1, move |_| { let _ = &held; Ok(()) }).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert_eq!(Arc::strong_count(&refused), 1, "the refused closure was dropped");
    // Dropping the loader drops what is still registered.
    let (guard3, drops3) = (Dropped(drops.clone()), drops.clone());
    loader.add_processor("last", 1, move |_| { let _ = (&guard3, &drops3); Ok(()) }).unwrap();
    drop(loader);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}
