//! The model-file openers and savers through Rust: files written byte by
//! byte here, opened as FileTensors, their TiledEvictables promoted and
//! projected with exact values, stacks over one and two files, the options
//! passed through (and what a carrier reports of them, `file_io`), ownership
//! of the carrier, the string marshalling (exact UTF-8, NUL checks) and the
//! error kinds. The C suite (tests/c/test_model_files.c) proves the parsers
//! themselves.
mod common;
use std::path::{Path, PathBuf};

use common::*;
use strideweave::*;

const E: i64 = 4;
const O: i64 = 2;
const I: i64 = 3;

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("strideweave-model-files-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The weight at [e, o, i] of the test experts.
fn w(e: i64, o: i64, i: i64) -> f32 {
    (100 * e + 10 * o + i) as f32
}

/// Little-endian f32 bytes of experts `which`, each (O, I) row-major.
fn experts(which: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &e in which {
        for o in 0..O {
            for i in 0..I {
                out.extend_from_slice(&w(e, o, i).to_le_bytes());
            }
        }
    }
    out
}

/// An npy 1.0 file: magic, version, header length, the dictionary padded
/// to 64 bytes, data.
fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let len = dict.len() + 1;
    let pad = (64 - (10 + len) % 64) % 64;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&((len + pad) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

/// A safetensors file: the header's length (8 bytes, little-endian), the
/// JSON header, data.
fn safetensors(json: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The JSON entries of f32 tensors `names`, each of `shape`, one after
/// another from byte `start` of the data.
fn entries(start: i64, shape: &[i64], names: &[&str]) -> String {
    let bytes = shape.iter().product::<i64>() * 4;
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let k = k as i64;
            format!(
                "\"{n}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                dims.join(","),
                start + k * bytes,
                start + (k + 1) * bytes
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Expert names with a non-ASCII tail, a character outside the BMP
/// included (exact UTF-8).
fn expert(e: i64) -> String {
    format!("layers.0.experts.{e}.w1.\u{fc}\u{20ac}\u{1d53c}")
}

fn experts_npy(s: &Scratch) -> PathBuf {
    s.write(
        "experts.npy",
        &npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 3), }", &experts(&[0, 1, 2, 3])),
    )
}

/// A file holding "w", all experts as one (E, O, I) tensor, then each
/// expert as its own.
fn model(s: &Scratch) -> PathBuf {
    let names: Vec<String> = (0..E).map(expert).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let json = format!(
        "{{\"__metadata__\":{{\"format\":\"pt\"}},{},{}}}",
        entries(0, &[E, O, I], &["w"]),
        entries(E * O * I * 4, &[O, I], &names)
    );
    let mut data = experts(&[0, 1, 2, 3]);
    data.extend(experts(&[0, 1, 2, 3]));
    s.write("model.safetensors", &safetensors(&json, &data))
}

/// Checks the geometry the openers give a row-major (count, O, I) tensor.
#[track_caller]
fn row_major(ft: &FileTensor, count: i64) {
    assert_eq!(ft.dtype, DType::F32);
    assert_eq!(ft.rank(), 3);
    assert_eq!(ft.shape, vec![count, O, I]);
    assert_eq!(ft.order, FileOrder::RowMajor);
    assert_eq!(ft.data_bytes, (count * O * I * 4) as u64);
    assert_eq!(ft.logical_shape, vec![I, O, count]);
    assert_eq!(ft.grid_shape, vec![1, 1, count]);
    assert_eq!(ft.tile_shape, vec![I, O, 1]);
    assert_eq!(ft.permutation, vec![2, 1, 0]);
    assert_eq!(ft.carrier.kind().unwrap(), CarrierKind::File);
    assert!(ft.carrier.is_read_only().unwrap());
    assert_eq!(ft.carrier.size().unwrap(), (count * O * I) as usize);
}

/// Projects tiles `chosen` and checks the compact tensor, permuted to file
/// order: tile k holds expert `expert_of_tile[k]`.
#[track_caller]
fn projects_experts(ft: &FileTensor, chosen: &[i64], expert_of_tile: &[i64]) {
    let tiled = ft.tiled(None, Policy::None).unwrap();
    let full = tiled.full_tensor().unwrap();
    let selection = TileSelection::new([&[0][..], &[0], chosen]).unwrap();
    let compact = tiled.project(&full, &selection, None).unwrap().wait().unwrap();
    assert_eq!(compact.shape().unwrap(), vec![I, O, chosen.len() as i64]);
    let experts = compact.permute(&ft.permutation).unwrap();
    assert_eq!(experts.shape().unwrap(), vec![chosen.len() as i64, O, I]);
    for (s, &tile) in chosen.iter().enumerate() {
        for o in 0..O {
            for i in 0..I {
                let got = experts.get(&[s as i64, o, i]).unwrap();
                assert_eq!(got, w(expert_of_tile[tile as usize], o, i) as f64, "at ({s}, {o}, {i})");
            }
        }
    }
}

const ALL: [i64; 4] = [0, 1, 2, 3];

fn no_options() -> FileOptions {
    FileOptions::default()
}

#[test]
fn an_npy_file_opens_with_the_expert_geometry_and_its_tiles_promote_and_project() {
    let s = Scratch::new("npy");
    let rt = Runtime::new().unwrap();
    let path = experts_npy(&s);
    let ft = Carrier::open_npy(&rt, &path, &no_options()).unwrap();
    row_major(&ft, E);
    assert_eq!((ft.data_offset, ft.segments), (128, 1));
    let tiled = ft.tiled(None, Policy::None).unwrap();
    let full = tiled.full_tensor().unwrap();
    let view = ft.view(&full).unwrap();
    assert_eq!(full.shape().unwrap(), vec![I, O, E]);
    assert_eq!(view.shape().unwrap(), vec![E, O, I]);
    assert_eq!(tiled.tile_state(&[0, 0, 3]).unwrap().location, TileLocation::Secondary);
    tiled.promote(&TileSet::new([[0, 0, 3]]).unwrap()).unwrap();
    assert_eq!(tiled.tile_state(&[0, 0, 3]).unwrap().location, TileLocation::Primary);
    assert_eq!(view.get(&[3, 1, 2]).unwrap(), 312.0);
    assert_eq!(full.get(&[2, 1, 3]).unwrap(), 312.0);
    assert_eq!(view.get(&[0, 1, 2]).unwrap(), 12.0); // tile 0 still in the file
    let again = Carrier::open_npy(&rt, &path, &no_options()).unwrap();
    projects_experts(&again, &[3, 1], &ALL);
}

#[test]
fn a_safetensors_tensor_and_a_stack_of_named_tensors_open() {
    let s = Scratch::new("safetensors");
    let rt = Runtime::new().unwrap();
    let path = model(&s);
    let ft = Carrier::open_safetensors(&rt, &path, "w", &no_options()).unwrap();
    row_major(&ft, E);
    assert_eq!(ft.segments, 1);
    projects_experts(&ft, &[2, 0, 3], &ALL);
    // A stack in another order than the file's: tile k is names[k]; String
    // and &str names both work.
    let names = vec![expert(2), expert(0), expert(3)];
    let ft = Carrier::open_safetensors_stack(&rt, &path, &names, &no_options()).unwrap();
    row_major(&ft, 3);
    assert_eq!(ft.segments, 3);
    projects_experts(&ft, &[0, 2, 1], &[2, 0, 3]);
    // One tensor of the stack alone: (O, I), one tile.
    let ft = Carrier::open_safetensors(&rt, &path, &expert(1), &no_options()).unwrap();
    assert_eq!((ft.shape.clone(), ft.logical_shape.clone()), (vec![O, I], vec![I, O]));
    let full = ft.tiled(None, Policy::None).unwrap().full_tensor().unwrap();
    assert_eq!(ft.view(&full).unwrap().get(&[1, 2]).unwrap(), 112.0);
}

#[test]
fn a_stack_over_two_shard_files_opens() {
    let s = Scratch::new("shards");
    let rt = Runtime::new().unwrap();
    let (e0, e1, e2, e3) = (expert(0), expert(1), expert(2), expert(3));
    let a = s.write(
        "model-00001-of-00002.safetensors",
        &safetensors(&format!("{{{}}}", entries(0, &[O, I], &[&e0, &e2])), &experts(&[0, 2])),
    );
    let b = s.write(
        "model-00002-of-00002.safetensors",
        &safetensors(&format!("{{{}}}", entries(0, &[O, I], &[&e1, &e3])), &experts(&[1, 3])),
    );
    let names = [e0.as_str(), &e1, &e2, &e3];
    let paths = [&a, &b, &a, &b];
    let ft = Carrier::open_safetensors_stack_files(&rt, &paths, &names, &no_options()).unwrap();
    row_major(&ft, E);
    assert_eq!(ft.segments, E as usize);
    projects_experts(&ft, &[3, 0, 1, 2], &ALL);
    // The options reach the carrier: direct I/O (falling back where
    // refused), small requests.
    let options = FileOptions { direct_io: true, chunk_bytes: 4096, requests_in_flight: 2, ..Default::default() };
    let ft = Carrier::open_safetensors_stack_files(&rt, &paths, &names, &options).unwrap();
    projects_experts(&ft, &[1, 3], &ALL);
    let message =
        expect_code(Carrier::open_safetensors_stack_files(&rt, &[&a, &b], &names, &options), ErrorCode::Value);
    assert!(message.contains("2 paths for 4 tensor names"), "{message}");
    // A name its file lacks: the library's VALUE, naming the file.
    let message =
        expect_code(Carrier::open_safetensors_stack_files(&rt, &[&b, &a], &names[..2], &options), ErrorCode::Value);
    assert!(message.contains("model-00002-of-00002.safetensors"), "{message}");
}

#[test]
fn a_raw_tensor_opens_in_either_order() {
    let s = Scratch::new("raw");
    let rt = Runtime::new().unwrap();
    let mut bytes = vec![0u8; 16];
    bytes.extend(experts(&ALL));
    let raw = s.write("w.bin", &bytes);
    let ft =
        Carrier::open_raw_tensor(&rt, &raw, DType::F32, 16, &[E, O, I], FileOrder::RowMajor, &no_options()).unwrap();
    row_major(&ft, E);
    assert_eq!(ft.data_offset, 16);
    projects_experts(&ft, &[1], &ALL);
    // The same bytes read first mode fastest: (I, O, E) is the full tensor itself.
    let ft =
        Carrier::open_raw_tensor(&rt, &raw, DType::F32, 16, &[I, O, E], FileOrder::FirstModeFastest, &no_options())
            .unwrap();
    assert_eq!(ft.order, FileOrder::FirstModeFastest);
    assert_eq!((ft.logical_shape.clone(), ft.permutation.clone()), (vec![I, O, E], vec![0, 1, 2]));
    assert_eq!(ft.grid_shape, vec![1, 1, E]);
    let full = ft.tiled(None, Policy::None).unwrap().full_tensor().unwrap();
    assert_eq!(ft.view(&full).unwrap().get(&[2, 1, 3]).unwrap(), 312.0);
    expect_code(
        Carrier::open_raw_tensor(&rt, &raw, DType::F32, 32, &[E, O, I], FileOrder::RowMajor, &no_options()),
        ErrorCode::Value,
    );
    expect_code(
        Carrier::open_raw_tensor(&rt, &raw, DType::F32, 16, &[E, O, I], FileOrder::Other(7), &no_options()),
        ErrorCode::Value,
    );
}

/// O_DIRECT of `<fcntl.h>`, whose value depends on the architecture (`None`
/// where this file does not know it).
const O_DIRECT: Option<i32> = if cfg!(any(target_arch = "x86_64", target_arch = "x86", target_arch = "riscv64")) {
    Some(0o40000)
} else if cfg!(any(target_arch = "aarch64", target_arch = "arm")) {
    Some(0o200000)
} else {
    None
};

/// Whether the file system opens `path` with O_DIRECT (where it refuses,
/// carriers read buffered); `None` when that cannot be asked here.
fn opens_with_o_direct(path: &Path) -> Option<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    O_DIRECT.map(|flag| std::fs::OpenOptions::new().read(true).custom_flags(flag).open(path).is_ok())
}

/// The experts raw after a 16-byte header.
fn raw(s: &Scratch) -> PathBuf {
    let mut bytes = vec![0u8; 16];
    bytes.extend(experts(&ALL));
    s.write("w.bin", &bytes)
}

#[test]
fn a_buffered_file_carrier_moves_its_bytes_with_the_defaults() {
    let s = Scratch::new("io-defaults");
    let rt = Runtime::new().unwrap();
    let scratch =
        Carrier::file(&rt, DType::F32, 16, &FileOptions { directory: Some(s.0.clone()), ..no_options() }).unwrap();
    let ft = Carrier::open_npy(&rt, experts_npy(&s), &no_options()).unwrap();
    for c in [&scratch, &ft.carrier] {
        let io = c.file_io().unwrap();
        assert_eq!((io.chunk_bytes, io.requests_in_flight, io.direct_io), (4194304, 4, false));
        assert_eq!(io.source, IoProfileSource::Default);
        assert_eq!(io.device_read_bytes_per_second, 0.0);
    }
    let io = scratch.file_io().unwrap();
    scratch.dispose().unwrap();
    assert_eq!(scratch.file_io().unwrap(), io); // still answers
}

#[test]
fn a_file_carrier_moves_its_bytes_as_its_options_say() {
    let s = Scratch::new("io-options");
    let rt = Runtime::new().unwrap();
    let raw = raw(&s);
    for direct_io in [false, true] {
        let options =
            FileOptions { directory: Some(s.0.clone()), direct_io, chunk_bytes: 1 << 20, requests_in_flight: 3 };
        let scratch = Carrier::file(&rt, DType::F32, 1024, &options).unwrap();
        let ft =
            Carrier::open_raw_tensor(&rt, &raw, DType::F32, 16, &[E, O, I], FileOrder::RowMajor, &options).unwrap();
        for c in [&scratch, &ft.carrier] {
            let io = c.file_io().unwrap();
            assert_eq!((io.chunk_bytes, io.requests_in_flight), (1048576, 3));
            assert_eq!(io.source, IoProfileSource::Default);
            assert_eq!(io.device_read_bytes_per_second, 0.0);
            if !direct_io {
                assert!(!io.direct_io);
            }
        }
    }
}

#[test]
fn a_direct_io_file_carrier_reads_through_o_direct_where_the_file_system_allows_it() {
    let s = Scratch::new("io-direct");
    let rt = Runtime::new().unwrap();
    let raw = raw(&s);
    let options =
        FileOptions { directory: Some(s.0.clone()), direct_io: true, chunk_bytes: 1 << 20, requests_in_flight: 3 };
    let scratch = Carrier::file(&rt, DType::F32, 1024, &options).unwrap();
    let ft = Carrier::open_raw_tensor(&rt, &raw, DType::F32, 16, &[E, O, I], FileOrder::RowMajor, &options).unwrap();
    match opens_with_o_direct(&raw) {
        Some(true) => {}
        Some(false) => {
            eprintln!("SKIP: the file system of {} refuses O_DIRECT: its carriers read buffered", s.0.display());
            return;
        }
        None => {
            eprintln!("SKIP: O_DIRECT's value on this architecture is not known here; direct I/O not checked");
            return;
        }
    }
    assert!(scratch.file_io().unwrap().direct_io);
    assert!(ft.carrier.file_io().unwrap().direct_io);
}

#[test]
fn only_a_file_carrier_has_file_io() {
    let rt = Runtime::new().unwrap();
    let others = [
        Carrier::cpu(&rt, DType::F32, 4).unwrap(),
        Carrier::host(&rt, DType::F32, 4).unwrap(),
        Carrier::zstd(&rt, DType::F32, 4, &ZstdOptions::default()).unwrap(),
    ];
    let tiled = seeded_file(&rt, &[0.0; 4], &[2], &[2], Policy::None);
    for result in others.iter().map(Carrier::file_io).chain([tiled.file_io()]) {
        let message = expect_code(result, ErrorCode::Type);
        assert!(message.contains("not a File carrier"), "{message}");
    }
}

/// A GGUF v3 file holding the experts as llama.cpp stacks them, ne (I, O,
/// E), and a Q4_1 tensor (a ggml type StrideWeave has no dtype for).
fn gguf(s: &Scratch) -> PathBuf {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(2u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    let name = b"blk.0.ffn_up_exps.weight";
    b.extend((name.len() as u64).to_le_bytes());
    b.extend(name);
    b.extend(3u32.to_le_bytes());
    for d in [I, O, E] {
        b.extend((d as u64).to_le_bytes());
    }
    b.extend(0u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.push(b'q');
    b.extend(1u32.to_le_bytes());
    b.extend(32u64.to_le_bytes());
    b.extend(3u32.to_le_bytes());
    b.extend(((E * O * I * 4) as u64).to_le_bytes());
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b.extend(experts(&ALL));
    b.extend([0u8; 20]);
    s.write("experts.gguf", &b)
}

#[test]
fn a_gguf_stacked_expert_tensor_opens_one_expert_per_tile() {
    let s = Scratch::new("gguf");
    let rt = Runtime::new().unwrap();
    let path = gguf(&s);
    let options = FileOptions { direct_io: true, ..FileOptions::default() };
    let ft = Carrier::open_gguf(&rt, &path, "blk.0.ffn_up_exps.weight", &options).unwrap();
    row_major(&ft, E);
    assert_eq!(ft.segments, 1);
    projects_experts(&ft, &[3, 0], &ALL);
    let message = expect_code(Carrier::open_gguf(&rt, &path, "q", &no_options()), ErrorCode::Unsupported);
    assert!(message.contains("unsupported dtype: ggml type Q4_1"), "{message}");
    expect_code(Carrier::open_gguf(&rt, &path, "nope", &no_options()), ErrorCode::Value);
    let npy = experts_npy(&s);
    let message = expect_code(Carrier::open_gguf(&rt, &npy, "w", &no_options()), ErrorCode::DataCorrupt);
    assert!(message.contains("not a GGUF file"), "{message}");
}

#[test]
fn errors_arrive_as_their_kinds() {
    let s = Scratch::new("errors");
    let rt = Runtime::new().unwrap();
    let missing = s.path("missing.safetensors");
    expect_code(Carrier::open_npy(&rt, &missing, &no_options()), ErrorCode::Io);
    expect_code(Carrier::open_safetensors(&rt, &missing, "w", &no_options()), ErrorCode::Io);
    let mut bad = b"\x93NUMPX".to_vec();
    bad.extend([0u8; 128]);
    let bad_magic = s.write("bad.npy", &bad);
    let message = expect_code(Carrier::open_npy(&rt, &bad_magic, &no_options()), ErrorCode::DataCorrupt);
    assert!(message.contains("bad.npy"), "{message}");
    let mut bad = vec![0xff, 0x7f, 0, 0, 0, 0, 0, 0];
    bad.extend(b"{}");
    let bad_length = s.write("bad.safetensors", &bad);
    expect_code(Carrier::open_safetensors(&rt, &bad_length, "w", &no_options()), ErrorCode::DataCorrupt);
    expect_code(
        Carrier::open_safetensors_stack_files(&rt, &[&bad_length], &["w"], &no_options()),
        ErrorCode::DataCorrupt,
    );
    let path = model(&s);
    let message = expect_code(Carrier::open_safetensors(&rt, &path, "nope", &no_options()), ErrorCode::Value);
    assert!(message.contains("nope"), "{message}");
    expect_code(Carrier::open_safetensors_stack(&rt, &path, &["w", "nope"], &no_options()), ErrorCode::Value);
    expect_code(Carrier::open_safetensors_stack::<&str>(&rt, &path, &[], &no_options()), ErrorCode::Value);
    expect_code(Carrier::open_safetensors_stack(&rt, &path, &[expert(0), expert(0)], &no_options()), ErrorCode::Value);
    let i8s = s.write(
        "i8.safetensors",
        &safetensors("{\"q\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", &[0, 0]),
    );
    expect_code(Carrier::open_safetensors(&rt, &i8s, "q", &no_options()), ErrorCode::Unsupported);
    // Checks of the Rust side: a NUL inside a string.
    let message = expect_code(Carrier::open_safetensors(&rt, &path, "w\0", &no_options()), ErrorCode::Value);
    assert!(message.contains("NUL"), "{message}");
    expect_code(Carrier::open_safetensors_stack(&rt, &path, &["w", "x\0y"], &no_options()), ErrorCode::Value);
    expect_code(Carrier::open_npy(&rt, Path::new("a\0b.npy"), &no_options()), ErrorCode::Value);
    // A view of another rank.
    let ft = Carrier::open_safetensors(&rt, &path, "w", &no_options()).unwrap();
    let flat = Tensor::from_slice(&rt, &[2], &[1f32, 2.0]).unwrap();
    expect_code(ft.view(&flat), ErrorCode::Value);
}

#[test]
fn the_tiled_evictable_keeps_the_file_and_the_view_outlives_everything() {
    let s = Scratch::new("ownership");
    let rt = Runtime::new().unwrap();
    let path = experts_npy(&s);
    let ft = Carrier::open_npy(&rt, &path, &no_options()).unwrap();
    let tiled = ft.tiled(None, Policy::None).unwrap();
    assert!(ft.carrier.is_owned().unwrap());
    expect_code(ft.tiled(None, Policy::None), ErrorCode::State); // already a tier of `tiled`
    assert!(tiled.secondary().unwrap().ptr_eq(&ft.carrier));
    let full = tiled.full_tensor().unwrap();
    let view = ft.view(&full).unwrap();
    let permutation = ft.permutation.clone();
    drop((ft, tiled, full, rt));
    assert_eq!(view.get(&[3, 1, 2]).unwrap(), 312.0); // the view holds the TiledEvictable and its file
    assert_eq!(permutation, vec![2, 1, 0]);
    drop(view);
    // A primary of the caller's and the LRU policy; a FileTensor clone shares the carrier.
    let rt = Runtime::new().unwrap();
    let ft = Carrier::open_npy(&rt, &path, &no_options()).unwrap();
    let copy = ft.clone();
    assert!(copy.carrier.ptr_eq(&ft.carrier));
    let cpu = Carrier::cpu(&rt, DType::F32, 0).unwrap();
    let te = copy.tiled(Some(&cpu), LruPolicy::new(2).unwrap()).unwrap();
    assert!(te.has_policy().unwrap());
    assert!(te.primary().unwrap().ptr_eq(&cpu));
    let f = te.full_tensor().unwrap();
    let compact =
        te.project(&f, &TileSelection::new([&[0][..], &[0], &[2, 3, 1]]).unwrap(), None).unwrap().wait().unwrap();
    assert_eq!(compact.get(&[2, 1, 2]).unwrap(), w(1, 1, 2) as f64);
    assert!(!te.primary_tiles().unwrap().contains(&[0, 0, 0]));
}

#[test]
fn tensors_save_and_open_again() {
    let s = Scratch::new("save");
    let rt = Runtime::new().unwrap();
    let ft = Carrier::open_npy(&rt, experts_npy(&s), &no_options()).unwrap();
    let full = ft.tiled(None, Policy::None).unwrap().full_tensor().unwrap();
    let view = ft.view(&full).unwrap();
    let gate = Tensor::from_slice(&rt, &[3, 2], &[1f32, 2., 3., 4., 5., 6.]).unwrap();
    let name = "experts.\u{fc}\u{1d53c}";
    let out = s.path("out.safetensors");
    save_safetensors(&out, &[(name, &view), ("gate", &gate)], &[("format", "pt")]).unwrap();
    let header = String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned();
    assert!(header.contains("\"__metadata__\"") && header.contains("\"format\":\"pt\""), "{header}");
    let back = Carrier::open_safetensors(&rt, &out, name, &no_options()).unwrap();
    row_major(&back, E);
    projects_experts(&back, &[0, 3], &ALL);
    let back = Carrier::open_safetensors(&rt, &out, "gate", &no_options()).unwrap();
    assert_eq!(back.shape, vec![3, 2]);
    let g = back.view(&back.tiled(None, Policy::None).unwrap().full_tensor().unwrap()).unwrap();
    for r in 0..3 {
        for c in 0..2 {
            assert_eq!(g.get(&[r, c]).unwrap(), gate.get(&[r, c]).unwrap());
        }
    }
    // Without metadata.
    save_safetensors(s.path("plain.safetensors"), &[("gate", &gate)], &[]).unwrap();
    assert_eq!(
        Carrier::open_safetensors(&rt, s.path("plain.safetensors"), "gate", &no_options()).unwrap().shape,
        vec![3, 2]
    );
    let npy_path = s.path("experts-again.npy");
    save_npy(&npy_path, &view).unwrap();
    let back = Carrier::open_npy(&rt, &npy_path, &no_options()).unwrap();
    row_major(&back, E);
    projects_experts(&back, &[2], &ALL);
    expect_code(save_safetensors(s.path("dup.safetensors"), &[("__metadata__", &gate)], &[]), ErrorCode::Value);
    expect_code(save_safetensors(s.path("nul.safetensors"), &[("a\0", &gate)], &[]), ErrorCode::Value);
    expect_code(save_npy(s.path("no/such/dir/x.npy"), &gate), ErrorCode::Io);
    let bf16 = Tensor::zeros(&rt, DType::BF16, &[2]).unwrap();
    expect_code(save_npy(s.path("bf16.npy"), &bf16), ErrorCode::Unsupported);
    assert!(!s.path("bf16.npy").exists());
}
