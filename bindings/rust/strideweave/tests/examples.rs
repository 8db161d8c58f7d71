//! The Rust MoE example against the C demo it mirrors: on the same small
//! configurations both print the same hits per batch and the same checksum
//! (timings of course differ). The C demo is `build/examples/c/moe_offload`
//! of the build tree (or $STRIDEWEAVE_C_DEMO); without it the comparison
//! prints SKIP, unless $STRIDEWEAVE_REQUIRE_C_DEMO is set (the test command
//! sets it), which makes a missing demo a failure.
use std::path::{Path, PathBuf};
use std::process::Command;

fn rust_example() -> PathBuf {
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/moe_offload
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples").join("moe_offload");
    assert!(path.exists(), "the example is not built at {} (cargo test builds examples)", path.display());
    path
}

fn c_demo() -> Option<PathBuf> {
    let path = std::env::var_os("STRIDEWEAVE_C_DEMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../build/examples/c/moe_offload"));
    if path.exists() {
        Some(path)
    } else if std::env::var_os("STRIDEWEAVE_REQUIRE_C_DEMO").is_some() {
        panic!("the C demo is not built at {}", path.display());
    } else {
        eprintln!("SKIP: the C demo is not built at {}; nothing compared", path.display());
        None
    }
}

struct Run {
    hits: Vec<(String, String)>, // (run, hit rate) per batch, from --csv
    checksum: String,
    stdout: String,
}

fn run(program: &Path, args: &[&str], tag: &str) -> Run {
    let csv = std::env::temp_dir().join(format!("strideweave-moe-{tag}-{}.csv", std::process::id()));
    let out = Command::new(program).args(args).arg("--csv").arg(&csv).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} failed: {}\n{stdout}{}",
        program.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(&csv).unwrap();
    let _ = std::fs::remove_file(&csv);
    let mut lines = rows.lines();
    assert_eq!(lines.next(), Some("run,batch,latency_ms,wait_ms,hit_rate"));
    let hits = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_owned(), f[4].to_owned())
        })
        .collect();
    let checksum = stdout
        .split("(checksum ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no checksum in:\n{stdout}"))
        .to_owned();
    Run { hits, checksum, stdout }
}

fn table_hit_rates(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| ["offloaded ", "resident ", "naive "].iter().any(|r| l.starts_with(r)))
        .filter_map(|l| l.split_whitespace().nth(2).filter(|rate| rate.ends_with('%')).map(str::to_owned))
        .collect()
}

fn compare(args: &[&str], tag: &str) {
    let Some(demo) = c_demo() else { return };
    let c = run(&demo, args, &format!("c-{tag}"));
    let r = run(&rust_example(), args, &format!("rust-{tag}"));
    assert!(r.stdout.contains("outputs identical across runs"), "{}", r.stdout);
    assert!(!c.hits.is_empty(), "the C demo wrote no per-batch rows:\n{}", c.stdout);
    assert_eq!(r.hits.len(), c.hits.len());
    assert_eq!(r.hits, c.hits, "hits per batch differ");
    assert_eq!(table_hit_rates(&r.stdout), table_hit_rates(&c.stdout), "hit rates differ");
    assert_eq!(r.checksum, c.checksum, "checksums differ");
}

#[test]
fn the_rust_example_prints_the_c_demos_hits_and_checksum() {
    compare(
        &[
            "--experts",
            "8",
            "--dim",
            "64",
            "--topk",
            "2",
            "--tokens",
            "4",
            "--batches",
            "6",
            "--tier",
            "host",
            "--quiet",
        ],
        "host",
    );
}

#[test]
fn the_same_with_bf16_weights_on_the_zstd_tier_and_no_policy() {
    compare(
        &[
            "--experts",
            "8",
            "--dim",
            "32",
            "--topk",
            "2",
            "--tokens",
            "4",
            "--batches",
            "6",
            "--tier",
            "zstd",
            "--dtype",
            "bf16",
            "--quiet",
        ],
        "zstd",
    );
    compare(
        &["--experts", "8", "--dim", "32", "--tokens", "4", "--batches", "6", "--policy", "none", "--quiet"],
        "file",
    );
}

#[test]
fn the_same_on_a_vulkan_primary_where_a_device_is_present() {
    let args = [
        "--experts",
        "8",
        "--dim",
        "32",
        "--topk",
        "2",
        "--tokens",
        "4",
        "--batches",
        "4",
        "--compute",
        "vulkan",
        "--quiet",
    ];
    let probe = Command::new(rust_example()).args(args).output().unwrap();
    if probe.status.code() == Some(77) {
        eprintln!("SKIP: no Vulkan device: {}", String::from_utf8_lossy(&probe.stderr).trim());
        return;
    }
    compare(&args, "vulkan");
}

#[test]
fn the_rust_example_trains_and_its_updates_survive_eviction() {
    let out = Command::new(rust_example())
        .args(["--experts", "12", "--dim", "32", "--tokens", "16", "--batches", "40", "--train", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("training verified") && stdout.contains("every byte identical"), "{stdout}");
}

#[test]
fn the_rust_example_rejects_bad_options() {
    let out = Command::new(rust_example()).args(["--topk", "9", "--experts", "8"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: moe_offload"));
}

#[test]
fn the_quickstart_page_is_the_quickstart_example_and_prints_what_it_says() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/quickstart-rust.md"))
        .unwrap();
    let code = doc.split("```rust\n").nth(1).unwrap().split("```").next().unwrap();
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart.rs")).unwrap();
    assert_eq!(code, example, "docs/quickstart-rust.md and examples/quickstart.rs differ");
    let printed = doc.split("It prints:\n\n```text\n").nth(1).unwrap().split("```").next().unwrap();
    let exe = rust_example().with_file_name("quickstart");
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), printed);
}
