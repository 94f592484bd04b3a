//! Finds libpixload: PIXLOAD_LIB_DIR (and PIXLOAD_INCLUDE_DIR) when set, else
//! `pkg-config --libs --cflags pixload`. No crates: pkg-config runs as a program.
//!
//! Emits the link search path and `-lpixload`, an rpath for this crate's tests and
//! examples (so `cargo test` needs no LD_LIBRARY_PATH), `PIXLOAD_HEADER_DIR` for the
//! header test, and `cargo:lib_dir` for dependents (DEP_PIXLOAD_LIB_DIR).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PIXLOAD_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PIXLOAD_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let (lib_dirs, mut include_dirs) = match env::var_os("PIXLOAD_LIB_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = absolute(Path::new(&dir), &manifest_dir);
            if !dir.join("libpixload.so").exists() && !dir.join("libpixload.so.0").exists() {
                panic!("PIXLOAD_LIB_DIR={} holds no libpixload.so", dir.display());
            }
            (vec![dir], Vec::new())
        }
        _ => pkg_config(),
    };

    if let Some(dir) = env::var_os("PIXLOAD_INCLUDE_DIR").filter(|d| !d.is_empty()) {
        include_dirs.insert(0, absolute(Path::new(&dir), &manifest_dir));
    }
    // A build tree or a prefix keeps the header next to lib/; a checkout has it in
    // include/ two levels up.
    for lib in &lib_dirs {
        if let Some(parent) = lib.parent() {
            include_dirs.push(parent.join("include"));
        }
    }
    include_dirs.push(manifest_dir.join("../../include"));

    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=pixload");
    if let Some(dir) = lib_dirs.first() {
        println!("cargo:lib_dir={}", dir.display());
    }
    match include_dirs.iter().find(|d| d.join("pixload.h").exists()) {
        Some(dir) => {
            println!("cargo:include={}", dir.display());
            println!("cargo:rustc-env=PIXLOAD_HEADER_DIR={}", dir.display());
        }
        None => println!("cargo:rustc-env=PIXLOAD_HEADER_DIR="),
    }
}

fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() { path.to_path_buf() } else { base.join(path) }
}

/// The -L and -I directories `pkg-config --libs --cflags pixload` prints.
fn pkg_config() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program).args(["--libs", "--cflags", "pixload"]).output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => panic!(
            "`{program} --libs --cflags pixload` failed: {}\n\
             Install pixload (`make install`), add the directory of pixload.pc to \
             PKG_CONFIG_PATH, or set PIXLOAD_LIB_DIR to the directory of libpixload.so.",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run {program} ({e}): install pkg-config, or set PIXLOAD_LIB_DIR to the \
             directory of libpixload.so"
        ),
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let mut libs = Vec::new();
    let mut includes = Vec::new();
    for word in text.split_whitespace() {
        if let Some(dir) = word.strip_prefix("-L") {
            libs.push(PathBuf::from(dir));
        } else if let Some(dir) = word.strip_prefix("-I") {
            includes.push(PathBuf::from(dir));
        }
    }
    // pkg-config drops -L for the system's default directories: the linker and the
    // loader find the library there by themselves.
    (libs, includes)
}
