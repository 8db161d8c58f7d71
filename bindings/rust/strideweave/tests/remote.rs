//! The remote carrier through the safe crate, against redis-server processes
//! of the test's own on unix sockets in temporary directories. The C suite
//! tests the carrier's semantics and failures; this tests the binding: every
//! option reaches the library, the carrier serves a TiledEvictable exactly
//! as a host tier does, and the library's refusals keep their codes. A
//! missing redis-server fails these tests: it does not skip. Every request
//! has a deadline and every server start a time limit, so each test ends.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::expect_code;
use strideweave::{
    Carrier, CarrierKind, DType, ErrorCode, Policy, Reduction, RemoteOptions, Runtime, TileSelection, TileSet,
    TiledEvictable,
};

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sw-remote-rust-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A redis-server on a unix socket in a new directory: no persistence,
/// noeviction, protected mode, `requirepass` if given. Dropping it stops it
/// and removes the directory.
struct Server {
    child: Child,
    socket: PathBuf,
    password: Option<String>,
    dir: TempDir,
}

/// The path of redis-server, or a failure: these tests need it.
fn redis_server() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join("redis-server")).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("redis-server is not on the PATH; the remote tests need it (tools/install_deps.sh installs it)")
    })
}

impl Server {
    fn start(password: Option<&str>) -> Server {
        let binary = redis_server();
        let dir = TempDir::new("server");
        let socket = dir.0.join("redis.sock");
        let mut cmd = Command::new(binary);
        cmd.args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir.0)
            .args(["--protected-mode", "yes", "--maxmemory-policy", "noeviction", "--logfile"])
            .arg(dir.0.join("redis.log"))
            .args(["--daemonize", "no"]);
        if let Some(p) = password {
            cmd.args(["--requirepass", p]);
        }
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let mut server = Server { child, socket, password: password.map(str::to_owned), dir };
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if server.try_command(&["PING"]).is_ok_and(|r| r == "+PONG") {
                return server;
            }
            let exited = server.child.try_wait().unwrap().is_some();
            if exited || Instant::now() > until {
                panic!(
                    "redis-server did not answer PING within 10 s (see {})",
                    server.dir.0.join("redis.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Runs one command (after AUTH when the server has a password); the
    /// first line of its reply: "+PONG", ":3", "-ERR ...".
    fn try_command(&self, args: &[&str]) -> std::io::Result<String> {
        let stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = stream;
        let auth;
        let mut commands: Vec<&[&str]> = Vec::new();
        if let Some(p) = &self.password {
            auth = ["AUTH", p.as_str()];
            commands.push(&auth);
        }
        commands.push(args);
        let mut line = String::new();
        for c in commands {
            let mut out = format!("*{}\r\n", c.len());
            for a in c {
                out += &format!("${}\r\n{a}\r\n", a.len());
            }
            writer.write_all(out.as_bytes())?;
            line.clear();
            reader.read_line(&mut line)?;
        }
        Ok(line.trim_end().to_owned())
    }

    /// The number of keys, once it is `want` or after 5 s.
    fn dbsize(&self, want: i64) -> i64 {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let n: i64 = self.try_command(&["DBSIZE"]).unwrap()[1..].parse().unwrap();
            if n == want || Instant::now() > until {
                return n;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Nothing it holds needs saving: SIGKILL, and reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Options over `server` with a deadline that keeps each request bounded.
fn options(server: &Server, namespace: &str) -> RemoteOptions {
    RemoteOptions { deadline: Some(Duration::from_secs(10)), ..RemoteOptions::new([server.endpoint()], namespace) }
}

const GRID: [i64; 2] = [4, 3];
const TILE: [i64; 2] = [8, 5];
const PER_TILE: usize = 40;
const N: usize = 12 * PER_TILE;

/// Tiles by ordinal (first mode fastest) in GRID.
fn ordinals(ks: &[i64]) -> TileSet {
    TileSet::new(ks.iter().map(|k| [k % GRID[0], k / GRID[0]])).unwrap()
}

/// A fixed sequence of evictions, a projection, an in-place update, a
/// prefetch and promotions on a TiledEvictable whose primary is seeded and
/// whose secondary is `secondary` (empty); every value it saw, in order.
fn run_sequence(rt: &Runtime, secondary: &Carrier) -> Vec<f32> {
    let seed: Vec<f32> = (0..N).map(|i| i as f32 * 0.37 - 5.5).collect();
    let primary = Carrier::cpu_from(rt, &seed).unwrap();
    let te = TiledEvictable::new(&primary, secondary, &GRID, &TILE, Policy::None).unwrap();
    drop(primary);
    let full = te.full_tensor().unwrap();
    let mut seen = Vec::new();
    // Dirty evictions, one block each.
    te.evict(&ordinals(&[0, 2, 5, 7, 11])).unwrap();
    assert_eq!(te.secondary_tiles().unwrap(), ordinals(&[0, 2, 5, 7, 11]));
    // A projection over evicted and resident tiles, added back in place
    // (promoting the evicted ones).
    let s = TileSelection::new([&[0, 2, 3][..], &[1, 2]]).unwrap();
    let compact = te.project(&full, &s, None).unwrap().wait().unwrap();
    seen.extend(compact.to_vec::<f32>().unwrap());
    te.update_async(&full, &compact, &s, Reduction::Add).unwrap().wait().unwrap();
    seen.extend(full.to_vec::<f32>().unwrap());
    // Everything evicted, read from the tier, prefetched in part, promoted.
    te.evict(&te.valid_tiles().unwrap()).unwrap();
    assert!(te.primary_tiles().unwrap().is_empty());
    seen.extend(te.secondary().unwrap().to_vec::<f32>(0, N).unwrap());
    te.prefetch_async(&ordinals(&[1, 4, 9])).unwrap().wait().unwrap();
    assert_eq!(te.primary_tiles().unwrap(), ordinals(&[1, 4, 9]));
    te.promote(&te.valid_tiles().unwrap()).unwrap();
    seen.extend(full.to_vec::<f32>().unwrap());
    seen
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_remote_tier_serves_a_tiled_evictable_as_a_host_tier_does() {
    let rt = Runtime::new().unwrap();
    let want = run_sequence(&rt, &Carrier::host(&rt, DType::F32, 0).unwrap());
    let server = Server::start(None);
    for chunked in [false, true] {
        let o = RemoteOptions {
            block_elements: PER_TILE,                  // one block per tile
            chunk_bytes: if chunked { 24 } else { 0 }, // several GETRANGE / SETRANGE commands a block, or one
            requests_in_flight: if chunked { 3 } else { 0 },
            ..options(&server, &format!("rust-tiled-{chunked}"))
        };
        let remote = Carrier::remote(&rt, DType::F32, 0, &o).unwrap();
        assert_eq!(remote.kind().unwrap(), CarrierKind::Remote);
        let got = run_sequence(&rt, &remote);
        drop(remote);
        assert_eq!(bits(&got), bits(&want), "chunked {chunked}");
        // The namespace was the carrier's: releasing it deleted its keys.
        assert_eq!(server.dbsize(0), 0);
    }
}

#[test]
fn a_persistent_namespace_is_opened_again_and_checked() {
    let rt = Runtime::new().unwrap();
    let server = Server::start(None);
    let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 + 1.0).collect();
    let seed = RemoteOptions { block_elements: 64, persistent: true, ..options(&server, "rust-seeded") };
    {
        let c = Carrier::remote(&rt, DType::F32, values.len(), &seed).unwrap();
        assert_eq!(c.stored_bytes().unwrap(), 4000);
        c.write(0, &values).unwrap();
    }
    // Persistent: the keys outlive the carrier (header, CRCs, 16 blocks).
    assert_eq!(server.dbsize(18), 18);
    let open = options(&server, "rust-seeded"); // block_elements 0: the header's
    let o = Carrier::open_remote(&rt, DType::F32, values.len(), &open).unwrap();
    assert_eq!(o.kind().unwrap(), CarrierKind::Remote);
    assert_eq!(bits(&o.to_vec::<f32>(0, values.len()).unwrap()), bits(&values));
    assert!(!o.is_read_only().unwrap());
    drop(o);
    // Read-only: writes are refused by the library.
    let ro = Carrier::open_remote(&rt, DType::F32, values.len(), &RemoteOptions { read_only: true, ..open.clone() })
        .unwrap();
    assert!(ro.is_read_only().unwrap());
    expect_code(ro.write(0, &[1.0f32]), ErrorCode::State);
    drop(ro);
    // Another block size, dtype, size, placement seed or endpoint count is
    // refused with VALUE, naming the field.
    let refused = |dtype: DType, size: usize, o: &RemoteOptions, field: &str| {
        let m = expect_code(Carrier::open_remote(&rt, dtype, size, o), ErrorCode::Value);
        assert!(m.contains(field), "{m}");
    };
    refused(DType::F32, 1000, &RemoteOptions { block_elements: 32, ..open.clone() }, "block_elements");
    refused(DType::F64, 1000, &open, "dtype");
    refused(DType::F32, 999, &open, "size");
    refused(DType::F32, 1000, &RemoteOptions { placement_seed: 7, ..open.clone() }, "placement_seed");
    refused(DType::F32, 1000, &RemoteOptions { endpoints: vec![server.endpoint(); 2], ..open.clone() }, "endpoints");
    // A namespace the server does not hold: IO naming the server.
    let m = expect_code(Carrier::open_remote(&rt, DType::F32, 1000, &options(&server, "rust-nothing")), ErrorCode::Io);
    assert!(m.contains(&server.socket.display().to_string()), "{m}");
    // Creating it again is a conflict; persistent is for creating only,
    // read_only for opening only.
    let m = expect_code(Carrier::remote(&rt, DType::F32, 1000, &open), ErrorCode::State);
    assert!(m.contains("already exists"), "{m}");
    expect_code(Carrier::open_remote(&rt, DType::F32, 1000, &seed), ErrorCode::Value);
    expect_code(
        Carrier::remote(&rt, DType::F32, 4, &RemoteOptions { read_only: true, ..options(&server, "rust-ro") }),
        ErrorCode::Value,
    );
    // Opening never deletes: the keys are all there.
    assert_eq!(server.dbsize(18), 18);
}

#[test]
fn an_opened_namespace_serves_a_tiled_evictable() {
    let rt = Runtime::new().unwrap();
    let server = Server::start(None);
    let seed = RemoteOptions { block_elements: PER_TILE, persistent: true, ..options(&server, "rust-te") };
    let a = run_sequence(&rt, &Carrier::host(&rt, DType::F32, 0).unwrap());
    let b = run_sequence(&rt, &Carrier::remote(&rt, DType::F32, 0, &seed).unwrap());
    assert_eq!(bits(&a), bits(&b));
    // The persistent tier holds the sequence's last values, tile after tile:
    // open it read-only under a new TiledEvictable and promote.
    let want = &a[a.len() - N..];
    let open = RemoteOptions { read_only: true, ..options(&server, "rust-te") };
    let tier = Carrier::open_remote(&rt, DType::F32, N, &open).unwrap();
    let te =
        TiledEvictable::new(&Carrier::cpu(&rt, DType::F32, 0).unwrap(), &tier, &GRID, &TILE, Policy::None).unwrap();
    assert_eq!(te.secondary_tiles().unwrap(), te.valid_tiles().unwrap());
    let full = te.full_tensor().unwrap();
    te.promote(&te.valid_tiles().unwrap()).unwrap();
    assert_eq!(bits(&full.to_vec::<f32>().unwrap()), bits(want));
    // A projection equals the same projection over a host tier of the same values.
    let s = TileSelection::new([&[3, 1][..], &[2]]).unwrap();
    let got = te.project(&full, &s, None).unwrap().wait().unwrap().to_vec::<f32>().unwrap();
    let host = Carrier::host(&rt, DType::F32, N).unwrap();
    host.write(0, &tier.to_vec::<f32>(0, N).unwrap()).unwrap();
    let reference =
        TiledEvictable::new(&Carrier::cpu(&rt, DType::F32, 0).unwrap(), &host, &GRID, &TILE, Policy::None).unwrap();
    let rfull = reference.full_tensor().unwrap();
    let expected = reference.project(&rfull, &s, None).unwrap().wait().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(bits(&got), bits(&expected));
}

#[test]
fn a_namespace_has_one_writer() {
    let rt = Runtime::new().unwrap();
    let server = Server::start(None);
    let open = RemoteOptions { block_elements: 64, ..options(&server, "rust-lease") };
    let reader = RemoteOptions { read_only: true, ..open.clone() };
    let w = Carrier::remote(
        &rt,
        DType::F32,
        256,
        &RemoteOptions { persistent: true, lease: Some(Duration::from_secs(120)), ..open.clone() },
    )
    .unwrap();
    // The lease reached the library: its key lives up to 2 minutes, not
    // the default 15 s.
    let ttl: i64 = server.try_command(&["PTTL", "rust-lease:w"]).unwrap()[1..].parse().unwrap();
    assert!(ttl > 15_000 && ttl <= 120_000, "PTTL {ttl}");
    // A second writer is refused, naming the holder (host:pid:id).
    let m = expect_code(Carrier::open_remote(&rt, DType::F32, 256, &open), ErrorCode::State);
    assert!(m.contains("has a writer already"), "{m}");
    assert!(m.contains("rust-lease:w"), "{m}");
    assert!(m.contains(&format!(":{}:", std::process::id())), "{m}");
    // Readers are not writers: one opens beside the writer and reads what
    // it wrote.
    let r = Carrier::open_remote(&rt, DType::F32, 256, &reader).unwrap();
    w.write(3, &[2.5f32]).unwrap();
    assert_eq!(r.to_vec::<f32>(3, 1).unwrap(), [2.5]);
    drop(r);
    // Releasing the writer ended its lease: the next writer takes it.
    drop(w);
    assert_eq!(server.try_command(&["GET", "rust-lease:w"]).unwrap(), "$-1");
    let w = Carrier::open_remote(&rt, DType::F32, 256, &open).unwrap();
    assert!(!w.is_read_only().unwrap());
    drop(w);
    // The binding's own checks of the lease.
    let m = expect_code(
        Carrier::open_remote(&rt, DType::F32, 256, &RemoteOptions { lease: Some(Duration::ZERO), ..open.clone() }),
        ErrorCode::Value,
    );
    assert!(m.contains("lease"), "{m}");
    expect_code(
        Carrier::open_remote(
            &rt,
            DType::F32,
            256,
            &RemoteOptions { lease: Some(Duration::from_secs(5_000_000)), ..open.clone() },
        ),
        ErrorCode::Value,
    );
}

#[test]
fn read_replicas_serve_a_reader_whose_endpoint_is_down() {
    let rt = Runtime::new().unwrap();
    let server = Server::start(None);
    let values: Vec<f32> = (0..N).map(|i| i as f32 * 0.25 - 3.0).collect();
    // The endpoint is a socket nobody listens on; the live server is named
    // as its replica.
    let down = format!("unix://{}", server.dir.0.join("down.sock").display());
    let replicas = vec![(down.clone(), vec![server.endpoint()])];
    let seed = RemoteOptions { block_elements: PER_TILE, ..options(&server, "rust-rep") };
    let writer = Carrier::remote(&rt, DType::F32, N, &seed).unwrap();
    writer.write(0, &values).unwrap();
    // The writer is alive: the reader opens read-only, through the replica.
    let base = RemoteOptions { deadline: Some(Duration::from_secs(10)), ..RemoteOptions::new([&down], "rust-rep") };
    let ro = RemoteOptions { read_only: true, replicas: replicas.clone(), ..base.clone() };
    let tier = Carrier::open_remote(&rt, DType::F32, N, &ro).unwrap();
    assert_eq!(bits(&tier.to_vec::<f32>(0, N).unwrap()), bits(&values));
    // Promotions read it too, as they read a host tier of the same values.
    let host = Carrier::host(&rt, DType::F32, N).unwrap();
    host.write(0, &values).unwrap();
    let te =
        TiledEvictable::new(&Carrier::cpu(&rt, DType::F32, 0).unwrap(), &tier, &GRID, &TILE, Policy::None).unwrap();
    let reference =
        TiledEvictable::new(&Carrier::cpu(&rt, DType::F32, 0).unwrap(), &host, &GRID, &TILE, Policy::None).unwrap();
    let (full, rfull) = (te.full_tensor().unwrap(), reference.full_tensor().unwrap());
    te.promote(&te.valid_tiles().unwrap()).unwrap();
    reference.promote(&reference.valid_tiles().unwrap()).unwrap();
    assert_eq!(bits(&full.to_vec::<f32>().unwrap()), bits(&rfull.to_vec::<f32>().unwrap()));
    drop((full, te, tier));
    // Without the replica the endpoint is down: IO naming it.
    let m = expect_code(
        Carrier::open_remote(&rt, DType::F32, N, &RemoteOptions { read_only: true, ..base.clone() }),
        ErrorCode::Io,
    );
    assert!(m.contains("down.sock"), "{m}");
    // Replicas serve only read-only carriers.
    let m = expect_code(
        Carrier::open_remote(&rt, DType::F32, N, &RemoteOptions { replicas: replicas.clone(), ..base.clone() }),
        ErrorCode::Value,
    );
    assert!(m.contains("read replicas serve only"), "{m}");
    let m = expect_code(
        Carrier::remote(
            &rt,
            DType::F32,
            N,
            &RemoteOptions { replicas: replicas.clone(), namespace: "rust-rep2".into(), ..base.clone() },
        ),
        ErrorCode::Value,
    );
    assert!(m.contains("read replicas serve only"), "{m}");
    // A key that is not one of the endpoints: the binding's own check,
    // naming it.
    let elsewhere = vec![("unix:///elsewhere.sock".to_owned(), vec![server.endpoint()])];
    let m = expect_code(
        Carrier::open_remote(
            &rt,
            DType::F32,
            N,
            &RemoteOptions { read_only: true, replicas: elsewhere, ..base.clone() },
        ),
        ErrorCode::Value,
    );
    assert!(m.contains("unix:///elsewhere.sock"), "{m}");
    let nul = vec![(down.clone(), vec!["unix:///x\0y".to_owned()])];
    expect_code(
        Carrier::open_remote(&rt, DType::F32, N, &RemoteOptions { read_only: true, replicas: nul, ..base }),
        ErrorCode::Value,
    );
    drop(writer);
}

/// A password file of `mode` holding `password`, in `dir`.
fn password_file(dir: &Path, name: &str, password: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn credentials_are_checked() {
    let rt = Runtime::new().unwrap();
    let server = Server::start(Some("right-horse-battery"));
    let dir = TempDir::new("pw");
    let right = password_file(&dir.0, "right", "right-horse-battery", 0o600);
    let wrong = password_file(&dir.0, "wrong", "wrong-staple", 0o600);
    let open = password_file(&dir.0, "open", "right-horse-battery", 0o644);
    let base = RemoteOptions { block_elements: 128, ..options(&server, "rust-auth") };
    // No password: the server refuses the commands.
    let m = expect_code(Carrier::remote(&rt, DType::F32, 512, &base), ErrorCode::Io);
    assert!(m.contains("NOAUTH"), "{m}");
    // A wrong one, never printed.
    let m = expect_code(
        Carrier::remote(&rt, DType::F32, 512, &RemoteOptions { password_file: Some(wrong), ..base.clone() }),
        ErrorCode::Io,
    );
    assert!(m.contains("refused the credentials of user 'default'"), "{m}");
    assert!(!m.contains("wrong-staple"), "{m}");
    // A password file others may read is refused before use.
    let m = expect_code(
        Carrier::remote(&rt, DType::F32, 512, &RemoteOptions { password_file: Some(open), ..base.clone() }),
        ErrorCode::Value,
    );
    assert!(m.contains("mode 0644"), "{m}");
    // A user without a password file.
    expect_code(
        Carrier::remote(&rt, DType::F32, 512, &RemoteOptions { user: Some("someone".into()), ..base.clone() }),
        ErrorCode::Value,
    );
    // The right one, for the default user named explicitly.
    let good = RemoteOptions { user: Some("default".into()), password_file: Some(right), ..base.clone() };
    let c = Carrier::remote(&rt, DType::F32, 512, &good).unwrap();
    let values: Vec<f32> = (0..512).map(|i| i as f32 + 9.0).collect();
    c.write(0, &values).unwrap();
    assert_eq!(bits(&c.to_vec::<f32>(0, 512).unwrap()), bits(&values));
    drop(c);
    assert_eq!(server.dbsize(0), 0);
}

#[test]
fn transport_rules_and_option_checks() {
    let rt = Runtime::new().unwrap();
    let remote = |o: RemoteOptions| Carrier::remote(&rt, DType::F32, 64, &o);
    // Plaintext TCP to a host that is not a loopback address, unless allowed.
    let m = expect_code(remote(RemoteOptions::new(["redis://10.1.2.3:6379"], "t")), ErrorCode::Value);
    assert!(m.contains("not a loopback address"), "{m}");
    expect_code(remote(RemoteOptions::new(["redis://0.0.0.0:1"], "t")), ErrorCode::Value);
    // Allowed, such an endpoint is connected to: port 1 of 0.0.0.0 (this
    // machine) refuses at once.
    let allowed = RemoteOptions {
        allow_plaintext: true,
        deadline: Some(Duration::from_millis(500)),
        ..RemoteOptions::new(["redis://0.0.0.0:1"], "t")
    };
    let e = remote(allowed).unwrap_err();
    assert!(matches!(e.code(), ErrorCode::Io | ErrorCode::Timeout), "{e}");
    // No TLS in this build; at least one endpoint.
    expect_code(remote(RemoteOptions::new(["rediss://127.0.0.1:6380"], "t")), ErrorCode::Unsupported);
    expect_code(remote(RemoteOptions::new(Vec::<String>::new(), "t")), ErrorCode::Value);
    expect_code(remote(RemoteOptions::default()), ErrorCode::Value);
    // The binding's own checks.
    let sock = || RemoteOptions::new(["unix:///nonexistent/redis.sock"], "t");
    expect_code(remote(RemoteOptions { deadline: Some(Duration::ZERO), ..sock() }), ErrorCode::Value);
    expect_code(remote(RemoteOptions { deadline: Some(Duration::from_secs(5_000_000)), ..sock() }), ErrorCode::Value);
    expect_code(remote(RemoteOptions { namespace: "a\0b".into(), ..sock() }), ErrorCode::Value);
    expect_code(remote(RemoteOptions::new(["unix:///x\0y"], "t")), ErrorCode::Value);
}
