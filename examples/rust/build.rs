// The pixload crate found the library (PIXLOAD_LIB_DIR or pkg-config) and says where:
// give this program an rpath there, so it runs without LD_LIBRARY_PATH also when the
// library is not in the loader's default directories.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_PIXLOAD_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_PIXLOAD_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
