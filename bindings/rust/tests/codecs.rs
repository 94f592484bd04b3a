//! Loader::add_codec: a QOI codec written in Rust (the spec's decoder), its pixels checked
//! against the source and against the built-in PNG decoder's output of the same pixels,
//! at full size and as thumbnails; errors, removal, the format list, the codec dropped
//! after its last call. (bindings/python/tests/test_codecs.py is the same test.)
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pixload::{scheme, Codec, CodecHeader, CodecTarget, Error, Format, Loader, Mode, Request, Status};

const W: u32 = 64;
const H: u32 = 48;

fn source_pixels() -> Vec<u8> {
    let mut out = Vec::new();
    for y in 0..H {
        for x in 0..W {
            let alpha = if x > 4 { 255 } else { x * 60 };
            out.extend_from_slice(&[(x * 255 / (W - 1)) as u8, (y * 255 / (H - 1)) as u8, ((x * 5 + y * 3) % 256) as u8, alpha as u8]);
        }
    }
    out
}

/// QOI with QOI_OP_RGBA and QOI_OP_RUN only: valid per the spec, simple.
fn qoi_encode(rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut out = b"qoif".to_vec();
    out.extend_from_slice(&w.to_be_bytes());
    out.extend_from_slice(&h.to_be_bytes());
    out.extend_from_slice(&[4, 0]);
    let (mut prev, mut run) = ([0u8, 0, 0, 255], 0u8);
    let count = (w * h) as usize;
    for i in 0..count {
        let px = [rgba[4 * i], rgba[4 * i + 1], rgba[4 * i + 2], rgba[4 * i + 3]];
        if px == prev {
            run += 1;
            if run == 62 || i == count - 1 {
                out.push(0xC0 | (run - 1));
                run = 0;
            }
            continue;
        }
        if run > 0 {
            out.push(0xC0 | (run - 1));
            run = 0;
        }
        out.push(0xFF);
        out.extend_from_slice(&px);
        prev = px;
    }
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    out
}

fn corrupt(message: &str) -> Error {
    Error::new(Status::CorruptImage, 0, message)
}

/// The spec's decoder (every op), into `target` row by row.
fn qoi_decode(data: &[u8], target: &mut CodecTarget<'_>) -> Result<(), Error> {
    let mut index = [[0u8; 4]; 64];
    let [mut r, mut g, mut b, mut a] = [0u8, 0, 0, 255];
    let (mut p, end, mut run) = (14usize, data.len().saturating_sub(8), 0u8);
    for y in 0..target.height() {
        let row = target.row_mut(y);
        for x in 0..row.len() / 4 {
            if run > 0 {
                run -= 1;
            } else {
                if p >= end {
                    return Err(corrupt("truncated"));
                }
                let b1 = data[p];
                p += 1;
                let need = match b1 {
                    0xFE => 3,
                    0xFF => 4,
                    _ if b1 >> 6 == 2 => 1,
                    _ => 0,
                };
                if p + need > end {
                    return Err(corrupt("truncated"));
                }
                match b1 {
                    0xFE => [r, g, b] = [data[p], data[p + 1], data[p + 2]],
                    0xFF => [r, g, b, a] = [data[p], data[p + 1], data[p + 2], data[p + 3]],
                    _ => match b1 >> 6 {
                        0 => [r, g, b, a] = index[b1 as usize],
                        1 => {
                            r = r.wrapping_add((b1 >> 4) & 3).wrapping_sub(2);
                            g = g.wrapping_add((b1 >> 2) & 3).wrapping_sub(2);
                            b = b.wrapping_add(b1 & 3).wrapping_sub(2);
                        }
                        2 => {
                            let vg = (b1 & 0x3F).wrapping_sub(32);
                            let b2 = data[p];
                            r = r.wrapping_add(vg).wrapping_sub(8).wrapping_add(b2 >> 4);
                            g = g.wrapping_add(vg);
                            b = b.wrapping_add(vg).wrapping_sub(8).wrapping_add(b2 & 15);
                        }
                        _ => run = b1 & 0x3F,
                    },
                }
                p += need;
                let slot = (r as usize * 3 + g as usize * 5 + b as usize * 7 + a as usize * 11) % 64;
                index[slot] = [r, g, b, a];
            }
            row[4 * x..4 * x + 4].copy_from_slice(&[r, g, b, a]);
        }
    }
    Ok(())
}

struct Qoi {
    version: &'static str,
    decodes: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Qoi {
    fn new() -> Qoi {
        Qoi { version: "1.0", decodes: Arc::default(), dropped: Arc::default() }
    }
}

impl Drop for Qoi {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Codec for Qoi {
    fn id(&self) -> &str {
        "qoi"
    }
    fn version(&self) -> &str {
        self.version
    }
    fn sniff(&self, head: &[u8]) -> bool {
        head.starts_with(b"qoif")
    }
    fn read_header(&self, data: &[u8]) -> Result<CodecHeader, Error> {
        if data.len() < 22 {
            return Err(corrupt("too short"));
        }
        let be = |i: usize| u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
        Ok(CodecHeader { has_alpha: data[12] == 4, ..CodecHeader::new(be(4), be(8)) })
    }
    fn decode(&self, data: &[u8], target: &mut CodecTarget<'_>) -> Result<(), Error> {
        self.decodes.fetch_add(1, Ordering::SeqCst);
        qoi_decode(data, target)
    }
}

/// A PNG of `rgba` (zlib stored blocks: no compressor needed).
fn png_encode(rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= byte as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut raw = Vec::new();
    for row in rgba.chunks(w as usize * 4) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut zlib = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        zlib.push((i + 1 == blocks.len()) as u8);
        let n = block.len() as u16;
        zlib.extend_from_slice(&n.to_le_bytes());
        zlib.extend_from_slice(&(!n).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    let (mut s1, mut s2) = (1u32, 0u32);
    for &byte in &raw {
        s1 = (s1 + byte as u32) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    zlib.extend_from_slice(&((s2 << 16) | s1).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&w.to_be_bytes());
    header.extend_from_slice(&h.to_be_bytes());
    header.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A fresh folder for this test's files.
fn work_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pxl-rust-codecs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn url(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn file_loader() -> Loader {
    Loader::builder().allowed_schemes(scheme::FILE).codec_modules("").build().unwrap()
}

const BUILT_IN: [&str; 5] = ["jpeg", "png", "webp", "gif", "avif"];

#[test]
fn qoi_codec() {
    let dir = work_dir("qoi");
    let rgba = source_pixels();
    let (qoi, truncated, png) = (dir.join("a.qoi"), dir.join("t.qoi"), dir.join("a.png"));
    std::fs::write(&qoi, qoi_encode(&rgba, W, H)).unwrap();
    std::fs::write(&truncated, &qoi_encode(&rgba, W, H)[..200]).unwrap();
    std::fs::write(&png, png_encode(&rgba, W, H)).unwrap();

    let loader = file_loader();
    assert_eq!(loader.formats(), BUILT_IN);
    assert_eq!(loader.fetch(&Request::new(url(&qoi))).unwrap_err().status(), Status::NotAnImage);
    let codec = Qoi::new();
    let (decodes, dropped) = (codec.decodes.clone(), codec.dropped.clone());
    loader.add_codec(codec).unwrap();
    assert_eq!(loader.formats().last().map(String::as_str), Some("qoi"));
    let taken = Qoi::new();
    let taken_dropped = taken.dropped.clone();
    assert_eq!(loader.add_codec(taken).unwrap_err().status(), Status::InvalidArgument, "the id is taken");
    assert_eq!(taken_dropped.load(Ordering::SeqCst), 1, "a refused codec is dropped");

    let image = loader.fetch(&Request::new(url(&qoi))).unwrap();
    assert_eq!((image.width(), image.height()), (W, H));
    assert_eq!(image.pixels(), &rgba[..]);
    assert_eq!(decodes.load(Ordering::SeqCst), 1);

    // Thumbnails: the same pixels as the built-in PNG decoder's.
    for (size, mode) in [((20, 20), Mode::Fit), ((30, 30), Mode::Fill), ((0, 0), Mode::Fit)] {
        let request = |path: &Path| Request::new(url(path)).size(size.0, size.1).mode(mode).format(Format::Rgba8Premul);
        let a = loader.fetch(&request(&qoi)).unwrap();
        let b = loader.fetch(&request(&png)).unwrap();
        assert_eq!((a.width(), a.height()), (b.width(), b.height()));
        assert!(a.pixels() == b.pixels(), "{size:?} {mode:?}");
    }

    let error = loader.fetch(&Request::new(url(&truncated))).unwrap_err();
    assert_eq!(error.status(), Status::CorruptImage);
    assert!(error.message().contains("qoi: truncated"), "{error}");

    loader.remove_codec("qoi").unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped once removed");
    assert_eq!(loader.remove_codec("qoi").unwrap_err().status(), Status::NotFound);
    assert_eq!(loader.fetch(&Request::new(url(&qoi)).size(33, 33)).unwrap_err().status(), Status::NotAnImage);
    let last = Qoi::new();
    let last_dropped = last.dropped.clone();
    loader.add_codec(last).unwrap();
    assert_eq!(last_dropped.load(Ordering::SeqCst), 0);
    drop(loader);
    assert_eq!(last_dropped.load(Ordering::SeqCst), 1, "dropped with the loader");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A panic in a codec is caught at the C boundary and fails the request.
#[test]
fn a_panicking_codec_fails_the_request() {
    struct Panics;
    impl Codec for Panics {
        fn id(&self) -> &str {
            "panics"
        }
        fn version(&self) -> &str {
            "1"
        }
        fn sniff(&self, head: &[u8]) -> bool {
            head.starts_with(b"qoif")
        }
        fn read_header(&self, _: &[u8]) -> Result<CodecHeader, Error> {
            Ok(CodecHeader::new(4, 4))
        }
        fn decode(&self, _: &[u8], _: &mut CodecTarget<'_>) -> Result<(), Error> {
            panic!("on purpose");
        }
    }
    let dir = work_dir("panic");
    let path = dir.join("a.qoi");
    std::fs::write(&path, qoi_encode(&source_pixels(), W, H)).unwrap();
    let loader = file_loader();
    loader.add_codec(Panics).unwrap();
    let before = pixload::caught_panics();
    let error = loader.fetch(&Request::new(url(&path))).unwrap_err();
    assert_eq!(error.status(), Status::CorruptImage, "{error}");
    assert!(pixload::caught_panics() > before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The codec modules next to the library (make modules), as a Rust program finds them: an
/// SVG drawn at the size asked (a vector is not decoded small and scaled up), and a format
/// whose module is hidden failing with the package to install. Skipped (with a line saying
/// so) when the library under test has no modules beside it.
#[test]
fn svg_module() {
    let loader = Loader::builder().allowed_schemes(scheme::FILE).build().unwrap();
    if !loader.formats().iter().any(|f| f == "svg") {
        eprintln!("svg_module: skipped, no libpixload-svg next to the library (make modules)");
        return;
    }
    let dir = work_dir("svg");
    let svg = dir.join("a.svg");
    // 40x20 user units: left half red, right half blue.
    std::fs::write(
        &svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20"><rect width="20" height="20" fill="#ff0000"/><rect x="20" width="20" height="20" fill="#0000ff"/></svg>"##,
    )
    .unwrap();
    let image = loader.fetch(&Request::new(url(&svg)).size(400, 400)).unwrap();
    assert_eq!((image.width(), image.height()), (400, 200), "FIT on the intrinsic 40x20, drawn at 400x200");
    let px = |x: usize, y: usize| &image.pixels()[(y * image.stride() + x * 4)..][..4];
    assert_eq!(px(10, 100), [255, 0, 0, 255]);
    assert_eq!(px(390, 100), [0, 0, 255, 255]);
    // Drawn, not scaled up: the edge between the halves is sharp at 400 px wide.
    assert_eq!(px(199, 100), [255, 0, 0, 255]);
    assert_eq!(px(200, 100), [0, 0, 255, 255]);

    let none = Loader::builder().allowed_schemes(scheme::FILE).codec_modules("").build().unwrap();
    let error = none.fetch(&Request::new(url(&svg))).unwrap_err();
    assert_eq!(error.status(), Status::UnsupportedImage);
    assert!(error.to_string().contains("libpixload-svg"), "{error}");
}
