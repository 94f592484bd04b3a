//! Test support: the fixtures (Tests/capi/mkfixtures.c, compiled with gcc at test time)
//! served by a private nginx (scripts/nginx.sh) on a port scripts/free-port.sh finds
//! (or on the first free one of PXL_RUST_TEST_PORTS, "FIRST-LAST", when set), started once
//! per test binary and stopped at exit.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pixload::Queue;

pub const GRADIENT_W: u32 = 640;
pub const GRADIENT_H: u32 = 480;
pub const GRADIENT_B: i32 = 64;

/// Tests/capi/fixtures.h's formulas.
pub fn gradient_r(x: u32) -> i32 {
    (x * 255 / (GRADIENT_W - 1)) as i32
}
pub fn gradient_g(y: u32) -> i32 {
    (y * 255 / (GRADIENT_H - 1)) as i32
}

/// PXL_RUST_TEST_PORTS ("FIRST-LAST" or one port) when set, else the one port
/// scripts/free-port.sh (every test runner's helper) finds free.
pub fn ports() -> std::ops::RangeInclusive<u16> {
    let text = std::env::var("PXL_RUST_TEST_PORTS").unwrap_or_else(|_| {
        let script = repo_root().join("scripts/free-port.sh");
        let output = Command::new(&script).output().unwrap_or_else(|e| panic!("cannot run {script:?}: {e}"));
        assert!(output.status.success(), "{script:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    });
    let parse = |s: &str| s.trim().parse::<u16>().unwrap_or_else(|_| panic!("PXL_RUST_TEST_PORTS={text:?}: not FIRST-LAST"));
    match text.split_once('-') {
        Some((first, last)) => parse(first)..=parse(last),
        None => parse(&text)..=parse(&text),
    }
}

pub struct Server {
    pub base: String,
    pub www: PathBuf,
    pub access_log: PathBuf,
    work: PathBuf,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

static SERVER: OnceLock<Server> = OnceLock::new();
static WORK_DIR: OnceLock<PathBuf> = OnceLock::new();

extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn stop_server() {
    if let Some(work) = WORK_DIR.get() {
        let _ = Command::new(repo_root().join("scripts/nginx.sh")).arg("stop").arg(work.join("nginx")).output();
        let _ = std::fs::remove_dir_all(work);
    }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

pub fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        let root = repo_root();
        let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
        let out = Command::new("mktemp").arg("-d").arg(format!("{tmp}/pxl-rust.XXXXXX")).output().unwrap();
        let work = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        WORK_DIR.set(work.clone()).unwrap();
        unsafe { atexit(stop_server) };

        let mkfixtures = work.join("mkfixtures");
        run(Command::new("gcc")
            .args(["-std=c11", "-O1"])
            .arg(root.join("Tests/capi/mkfixtures.c"))
            .args(["-ljpeg", "-lpng", "-lwebp", "-lwebpmux", "-o"])
            .arg(&mkfixtures));
        let www = work.join("www");
        std::fs::create_dir_all(&www).unwrap();
        run(Command::new(&mkfixtures).arg(&www));

        // Another agent's or an aborted run's server may hold a port: take the next.
        let mut errors = String::new();
        let ports = ports();
        for port in ports.clone() {
            let output = Command::new(root.join("scripts/nginx.sh"))
                .arg("start")
                .arg(&www)
                .arg(port.to_string())
                .arg(work.join("nginx"))
                .output()
                .unwrap();
            if output.status.success() {
                return Server {
                    base: format!("http://127.0.0.1:{port}"),
                    www,
                    access_log: work.join("nginx/access.log"),
                    work,
                };
            }
            errors.push_str(&String::from_utf8_lossy(&output.stderr));
        }
        panic!("nginx started on none of the ports {ports:?}: {errors}");
    })
}

impl Server {
    /// A URL of a fixture, unique to `case` (so no test sees another's cache or log).
    pub fn url(&self, path: &str, case: &str) -> String {
        format!("{}/{}?run={}&case={}", self.base, path, std::process::id(), case)
    }

    /// How many times nginx logged this URL (its path and query).
    pub fn log_count(&self, url: &str) -> usize {
        let uri = &url[self.base.len()..];
        let log = std::fs::read_to_string(&self.access_log).unwrap_or_default();
        log.lines().filter(|line| line.split(' ').next() == Some(uri)).count()
    }

    pub fn fixture_size(&self, name: &str) -> u64 {
        std::fs::metadata(self.www.join(name)).unwrap().len()
    }
}

/// Dispatches `queue` until `done()` holds; panics after `timeout`.
pub fn drain_until(queue: &Queue, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        queue.dispatch();
        if done() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "condition not met within {timeout:?}");
        queue.wait(Some(left.min(Duration::from_millis(100))));
    }
}

/// Counts its drops: captured by a closure, it says when (and how often) the closure
/// was freed.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A small deterministic generator (xorshift), seeded per thread.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
