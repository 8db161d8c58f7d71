//! Gives this crate's tests and examples an rpath to the libstrideweave that
//! strideweave-sys linked them against (`DEP_STRIDEWEAVE_LIBDIR`), so
//! `cargo test` and `cargo run --example` run against the build tree's
//! library without LD_LIBRARY_PATH. Libraries and binaries of dependents
//! get no rpath: they find the installed library as usual.
fn main() {
    if let Ok(dir) = std::env::var("DEP_STRIDEWEAVE_LIBDIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{dir}");
    }
}
