//! pixload-timings: loads image URLs in parallel and prints how long each took.
//!
//!     cargo run --release -- [--size N] [--format rgba8|rgb8|gray8] URL...
//!
//! All loads start at once on one loader; their results come back on this thread
//! through one queue, in the order they finish. Exits 1 if any URL failed.
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant;

use pixload::{Format, Loader, Mode, Queue, Request};

fn usage() -> ExitCode {
    eprintln!("usage: pixload-timings [--size N] [--format rgba8|rgb8|gray8] URL...");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut size = 0u32;
    let mut format = Format::Rgba8;
    let mut urls = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--size" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => size = n,
                None => return usage(),
            },
            "--format" => {
                format = match args.next().as_deref() {
                    Some("rgba8") => Format::Rgba8,
                    Some("rgb8") => Format::Rgb8,
                    Some("gray8") => Format::Gray8,
                    _ => return usage(),
                }
            }
            "-h" | "--help" => return usage(),
            _ => urls.push(arg),
        }
    }
    if urls.is_empty() {
        return usage();
    }

    let loader = match Loader::new() {
        Ok(loader) => loader,
        Err(e) => {
            eprintln!("pixload-timings: {e}");
            return ExitCode::FAILURE;
        }
    };
    let queue = Queue::new().expect("pixload queue");
    // Closures must be Send: they report through a channel, read on this thread.
    let (sender, results) = mpsc::channel();
    let started = Instant::now();
    let mut expected = 0;
    for (index, url) in urls.iter().enumerate() {
        let request = Request::new(url.as_str()).size(size, size).mode(Mode::Fit).format(format);
        let sender = sender.clone();
        let begun = Instant::now();
        match loader.load(&request, &queue, move |result| {
            let _ = sender.send((index, begun.elapsed(), result));
        }) {
            Ok(_) => expected += 1,
            Err(e) => {
                println!("FAIL  {:>9}  {:>8}  {url}: {e}", "-", "-");
            }
        }
    }
    drop(sender);

    let mut loaded = 0;
    let mut received = 0;
    while received < expected {
        queue.wait(None);
        queue.dispatch();
        for (index, took, result) in results.try_iter() {
            received += 1;
            let ms = took.as_secs_f64() * 1000.0;
            match result {
                Ok(image) => {
                    loaded += 1;
                    let dims = format!("{}x{}", image.width(), image.height());
                    println!("OK    {dims:>9}  {ms:>5.1} ms  {}", urls[index]);
                }
                Err(e) => println!("FAIL  {:>9}  {ms:>5.1} ms  {}: {e}", "-", urls[index]),
            }
        }
    }
    let total = started.elapsed().as_secs_f64() * 1000.0;
    let stats = loader.stats();
    println!(
        "{loaded}/{} images in {total:.1} ms ({} downloads, {} bytes, {} from memory)",
        urls.len(),
        stats.network_fetches,
        stats.bytes_downloaded,
        stats.memory_hits
    );
    if loaded == urls.len() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
