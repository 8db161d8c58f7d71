//! Finds libstrideweave and tells cargo how to link it.
//!
//! In order:
//! 1. `STRIDEWEAVE_LIB_DIR`: a directory holding `libstrideweave.so` (a build
//!    tree's `runtime/`, say); linked from there.
//! 2. pkg-config: `strideweave.pc`, or the build tree's uninstalled
//!    `strideweave-uninstalled.pc` when `PKG_CONFIG_PATH` holds
//!    `<build>/meson-uninstalled` (pkg-config prefers an `-uninstalled`
//!    file it finds).
//!
//! The directory found is passed on to dependents as `DEP_STRIDEWEAVE_LIBDIR`
//! (this crate `links = "strideweave"`), so `strideweave`'s tests and
//! examples get an rpath to the library they were linked against.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=STRIDEWEAVE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let libdir = if let Some(dir) = env::var_os("STRIDEWEAVE_LIB_DIR") {
        let dir = PathBuf::from(dir);
        if !dir.join("libstrideweave.so").exists() && !dir.join("libstrideweave.dylib").exists() {
            panic!("STRIDEWEAVE_LIB_DIR={} holds no libstrideweave shared library", dir.display());
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=dylib=strideweave");
        dir
    } else {
        match pkg_config::Config::new().atleast_version("0.2").probe("strideweave") {
            Ok(lib) => lib.link_paths.first().cloned().unwrap_or_default(),
            Err(e) => panic!(
                "libstrideweave not found: set STRIDEWEAVE_LIB_DIR to the directory holding \
                 libstrideweave.so, or PKG_CONFIG_PATH to a directory holding strideweave.pc \
                 (a meson build tree's meson-uninstalled/ has strideweave-uninstalled.pc).\n{e}"
            ),
        }
    };
    if !libdir.as_os_str().is_empty() {
        println!("cargo:libdir={}", libdir.display());
        // This crate's own tests run against the same library.
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", libdir.display());
    }
}
