//! Carriers: flat runs of slots of one dtype, with a version counter,
//! ownership claims and dispose.
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr;
use std::time::Duration;

use strideweave_sys as sys;

use crate::device::Device;
use crate::dtype::{check_element, DType, Element};
use crate::error::{Error, Result};
use crate::ffi::{call, handle, serialised_write};
use crate::runtime::Runtime;

handle!(
    /// A carrier: `size` physical slots of one dtype with a version counter
    /// (+1 per public write), an ownership state (claimed by in-flight work
    /// or a composite: not publicly mutable) and dispose (frees the values;
    /// the handle keeps answering size, dtype and kind).
    ///
    /// A TiledEvictable is a carrier too; [`TiledEvictable`] wraps one with
    /// its tiled surface.
    ///
    /// [`TiledEvictable`]: crate::TiledEvictable
    Carrier,
    sys::sw_carrier_t,
    sw_carrier_retain,
    sw_carrier_release
);

// SAFETY: the header: "Reference counting is thread-safe for every handle"
// and "Carriers and tensors may be read from several threads at once", so a
// handle may move to and be used from any thread.
unsafe impl Send for Carrier {}
// SAFETY: reads may run on several threads at once (header, Threads). The
// one thing the header leaves to the caller, serialising "concurrent writes
// to the same carrier", this binding does itself: every public write it
// makes (write, dispose, tensor set and write, the claim a move makes) runs
// under a lock keyed by the carrier (ffi::serialised_write), so `&Carrier`
// may be shared freely. A TiledEvictable serialises its requests internally.
unsafe impl Sync for Carrier {}

/// What a carrier is (`sw_carrier_kind_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CarrierKind {
    /// CPU memory, the default compute carrier.
    Cpu,
    /// Plain host memory, a secondary tier.
    Host,
    /// A file, a secondary tier.
    File,
    /// zstd-compressed host memory, a secondary tier.
    Zstd,
    /// Device-local memory of a Vulkan device, a compute carrier.
    Vulkan,
    /// A TiledEvictable.
    Tiled,
    /// Blocks on Valkey or Redis servers, a secondary tier ([`Carrier::remote`]).
    Remote,
    /// A kind this crate does not name.
    Other(u32),
}

impl CarrierKind {
    fn from_raw(raw: sys::sw_carrier_kind_t) -> CarrierKind {
        use sys::sw_carrier_kind_t as C;
        match raw {
            C::SW_CARRIER_CPU => CarrierKind::Cpu,
            C::SW_CARRIER_HOST => CarrierKind::Host,
            C::SW_CARRIER_FILE => CarrierKind::File,
            C::SW_CARRIER_ZSTD => CarrierKind::Zstd,
            C::SW_CARRIER_VULKAN => CarrierKind::Vulkan,
            C::SW_CARRIER_TILED => CarrierKind::Tiled,
            C::SW_CARRIER_REMOTE => CarrierKind::Remote,
            other => CarrierKind::Other(other.0),
        }
    }
}

/// Options of a file carrier (`sw_file_carrier_desc_t`).
#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    /// Where a new carrier's file is created; `None`: $TMPDIR or /tmp.
    pub directory: Option<std::path::PathBuf>,
    /// Open with O_DIRECT where the file system allows it.
    pub direct_io: bool,
    /// Bytes per read or write request; 0 = 4 MiB, or with direct I/O the
    /// best measured for the file's device where one is known
    /// ([`Carrier::file_io`] says which).
    pub chunk_bytes: usize,
    /// Requests in flight per transfer; 0 = 4, or as `chunk_bytes`.
    pub requests_in_flight: u32,
}

/// Where a file carrier's device profile came from (`sw_io_profile_source_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoProfileSource {
    /// No measure of the device: the defaults.
    Default,
    /// Measured by this process when the carrier opened.
    Probed,
    /// Measured earlier: by this process, or read from the cache file.
    Cached,
    /// A source this crate does not name.
    Other(u32),
}

impl IoProfileSource {
    fn from_raw(raw: sys::sw_io_profile_source_t) -> IoProfileSource {
        use sys::sw_io_profile_source_t as S;
        match raw {
            S::SW_IO_PROFILE_DEFAULT => IoProfileSource::Default,
            S::SW_IO_PROFILE_PROBED => IoProfileSource::Probed,
            S::SW_IO_PROFILE_CACHED => IoProfileSource::Cached,
            other => IoProfileSource::Other(other.0),
        }
    }
}

/// How a file carrier moves its bytes (`sw_file_carrier_io_t`), as
/// [`Carrier::file_io`] reports it. [`FileOptions`] left 0 take the device
/// profile's values: for a carrier reading through O_DIRECT, the best pair
/// measured for its device (once, by a short probe when a large enough
/// read-only file is opened, then kept in a cache file); otherwise 4 MiB and
/// 4. Options set override it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FileIo {
    /// Bytes per request its transfers use.
    pub chunk_bytes: usize,
    /// Requests in flight per transfer.
    pub requests_in_flight: u32,
    /// Whether every file of the carrier reads through O_DIRECT.
    pub direct_io: bool,
    /// Where the device profile came from.
    pub source: IoProfileSource,
    /// The `st_dev` of the carrier's (first) file.
    pub device: u64,
    /// The profile's measured read rate; 0 when not measured.
    pub device_read_bytes_per_second: f64,
}

/// `count` slots at byte `byte_offset` of a file: one piece of
/// [`Carrier::open_file_segments`] (`sw_file_segment_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileSegment {
    /// Where the piece starts.
    pub byte_offset: u64,
    /// Slots.
    pub count: usize,
}

/// Options of a zstd carrier (`sw_zstd_carrier_desc_t`).
#[derive(Clone, Debug)]
pub struct ZstdOptions {
    /// zstd level; default 1.
    pub level: i32,
    /// Elements per independently compressed frame; 0 = 1 Mi.
    pub frame_elements: usize,
    /// Byte-shuffle filter: `None` auto (on for float dtypes), else on/off.
    pub shuffle: Option<bool>,
}

impl Default for ZstdOptions {
    fn default() -> ZstdOptions {
        ZstdOptions { level: 1, frame_elements: 0, shuffle: None }
    }
}

/// Where a remote carrier's blocks live and how it reaches them
/// (`sw_remote_carrier_desc_t`): what [`Carrier::remote`] and
/// [`Carrier::open_remote`] take.
///
/// [`RemoteOptions::new`] names the servers and the namespace; every other
/// field starts at its default and may be set with struct update syntax:
///
/// ```
/// use strideweave::RemoteOptions;
/// use std::time::Duration;
///
/// let o = RemoteOptions {
///     block_elements: 4096,
///     deadline: Some(Duration::from_secs(2)),
///     ..RemoteOptions::new(["unix:///run/strideweave/redis.sock"], "experts")
/// };
/// assert_eq!(o.endpoints.len(), 1);
/// ```
///
/// Every client of a namespace lists the same servers in the same order:
/// block `i` is placed by rendezvous hashing of `(placement_seed, i)` over
/// the endpoints' positions. A `redis://` host that is not a loopback
/// address is refused (VALUE) unless `allow_plaintext`: the connection
/// would be unencrypted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteOptions {
    /// The servers, `unix:///path/to.sock` or `redis://host[:port]` (port
    /// 6379 by default); at least one.
    pub endpoints: Vec<String>,
    /// The namespace of every key of the carrier; not empty, no spaces.
    pub namespace: String,
    /// The ACL user for AUTH; `None`: `default`. Needs `password_file`.
    pub user: Option<String>,
    /// A file whose first line is the password; `None`: no AUTH. Neither
    /// its group nor others may read or write it (VALUE otherwise).
    pub password_file: Option<PathBuf>,
    /// Allow `redis://` to a host that is not a loopback address.
    pub allow_plaintext: bool,
    /// [`Carrier::open_remote`] only: refuse writes (STATE).
    pub read_only: bool,
    /// Slots per block. Creating: 0 = 262144. Opening: 0 = the header's;
    /// any other value must be the header's.
    pub block_elements: usize,
    /// Seeds the placement of blocks on endpoints; opening: must be the
    /// header's.
    pub placement_seed: u64,
    /// The deadline of every request, rounded up to a whole millisecond;
    /// `None` = 5 s.
    pub deadline: Option<Duration>,
    /// Bytes per GETRANGE or SETRANGE command; 0 = 1 MiB.
    pub chunk_bytes: usize,
    /// Commands in flight per transfer; 0 = 4.
    pub requests_in_flight: u32,
    /// [`Carrier::remote`] only: the namespace outlives the carrier (a
    /// seeded tier other clients open); by default disposing or releasing
    /// the carrier deletes its keys.
    pub persistent: bool,
    /// Read replicas: pairs of an endpoint (one of `endpoints`, VALUE
    /// otherwise) and the servers holding a copy of its blocks, such as a
    /// redis-server started with `replicaof` that endpoint. Reads go to a
    /// block's endpoint first and, when it cannot be reached or its
    /// connection is lost mid-read, to its replicas in order. A replica can
    /// lag its endpoint, so replicas serve only [`Carrier::open_remote`]
    /// with `read_only` (VALUE otherwise). Empty: none.
    pub replicas: Vec<(String, Vec<String>)>,
    /// The time to live of the namespace's writer lease, rounded up to a
    /// whole millisecond; `None` = 15 s. A carrier that can write (made by
    /// [`Carrier::remote`], or opened without `read_only`) holds the lease,
    /// renewed while it lives: a second writer is refused (STATE, naming
    /// the holder).
    pub lease: Option<Duration>,
}

impl RemoteOptions {
    /// Options over `endpoints` and `namespace`, every other field at its
    /// default: no AUTH, loopback or unix sockets only, the library's block
    /// size, deadline, chunk size, requests in flight and lease, placement
    /// seed 0, writable, no replicas, deleted with the carrier.
    pub fn new<I, S>(endpoints: I, namespace: impl Into<String>) -> RemoteOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RemoteOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            namespace: namespace.into(),
            ..RemoteOptions::default()
        }
    }
}

/// The C strings a `sw_remote_carrier_desc_t` points into; alive while it is used.
struct RemoteStrings {
    _endpoints: Vec<CString>,
    pointers: Vec<*const std::ffi::c_char>,
    namespace: CString,
    user: Option<CString>,
    password_file: Option<CString>,
    _replicas: Vec<CString>,
    replica_pointers: Vec<*const std::ffi::c_char>,
    replica_of: Vec<usize>,
}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::value(format!("{what} holds a NUL byte")))
}

/// A duration as the desc's milliseconds: 0 for `None` (the library's
/// default, `default` here only for the message), else rounded up.
fn millis(d: Option<Duration>, what: &str, default: &str) -> Result<u32> {
    match d {
        None => Ok(0),
        Some(d) if d.is_zero() => Err(Error::value(format!("the {what} is zero; None means the default ({default})"))),
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            u32::try_from(ms).map_err(|_| Error::value(format!("the {what} {d:?} exceeds u32::MAX milliseconds")))
        }
    }
}

fn remote_desc(options: &RemoteOptions) -> Result<(sys::sw_remote_carrier_desc_t, RemoteStrings)> {
    let endpoints = options
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| c_string(e, &format!("endpoints[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let pointers = endpoints.iter().map(|e| e.as_ptr()).collect();
    // The replicas as the desc's two arrays: the servers, and the index in
    // `endpoints` of the endpoint each one copies.
    let mut replicas = Vec::new();
    let mut replica_of = Vec::new();
    for (endpoint, servers) in &options.replicas {
        let Some(at) = options.endpoints.iter().position(|e| e == endpoint) else {
            return Err(Error::value(format!(
                "replicas: {endpoint:?} is not one of the endpoints {:?}",
                options.endpoints
            )));
        };
        for (i, server) in servers.iter().enumerate() {
            replicas.push(c_string(server, &format!("replicas[{endpoint:?}][{i}]"))?);
            replica_of.push(at);
        }
    }
    let replica_pointers = replicas.iter().map(|r| r.as_ptr()).collect();
    let strings = RemoteStrings {
        pointers,
        _endpoints: endpoints,
        namespace: c_string(&options.namespace, "the namespace")?,
        user: options.user.as_deref().map(|u| c_string(u, "the user")).transpose()?,
        password_file: options.password_file.as_deref().map(path_cstring).transpose()?,
        replica_pointers,
        _replicas: replicas,
        replica_of,
    };
    let deadline_ms = millis(options.deadline, "deadline", "5 s")?;
    let lease_ms = millis(options.lease, "lease", "15 s")?;
    let mut desc = sys::sw_remote_carrier_desc_t::default();
    unsafe { sys::sw_remote_carrier_desc_init(&mut desc) };
    desc.endpoints = if strings.pointers.is_empty() { ptr::null() } else { strings.pointers.as_ptr() };
    desc.endpoint_count = strings.pointers.len();
    desc.key_namespace = strings.namespace.as_ptr();
    desc.user = strings.user.as_ref().map_or(ptr::null(), |u| u.as_ptr());
    desc.password_file = strings.password_file.as_ref().map_or(ptr::null(), |p| p.as_ptr());
    desc.allow_plaintext = options.allow_plaintext;
    desc.read_only = options.read_only;
    desc.block_elements = options.block_elements;
    desc.placement_seed = options.placement_seed;
    desc.deadline_ms = deadline_ms;
    desc.chunk_bytes = options.chunk_bytes;
    desc.requests_in_flight = options.requests_in_flight;
    desc.persistent = options.persistent;
    if !strings.replica_pointers.is_empty() {
        desc.replica_endpoints = strings.replica_pointers.as_ptr();
        desc.replica_of = strings.replica_of.as_ptr();
        desc.replica_count = strings.replica_pointers.len();
    }
    desc.lease_ms = lease_ms;
    Ok((desc, strings))
}

pub(crate) fn path_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::value("a path holds a NUL byte"))
}

pub(crate) fn file_desc(options: &FileOptions) -> Result<(sys::sw_file_carrier_desc_t, Option<CString>)> {
    let mut desc = sys::sw_file_carrier_desc_t::default();
    unsafe { sys::sw_file_carrier_desc_init(&mut desc) };
    let dir = options.directory.as_deref().map(path_cstring).transpose()?;
    desc.directory = dir.as_ref().map_or(ptr::null(), |d| d.as_ptr());
    desc.direct_io = options.direct_io;
    desc.chunk_bytes = options.chunk_bytes;
    desc.requests_in_flight = options.requests_in_flight;
    Ok((desc, dir))
}

macro_rules! new_carrier {
    ($call:expr) => {{
        let mut out: *mut sys::sw_carrier_t = ptr::null_mut();
        let out_ref = &mut out;
        call(|| unsafe { $call(out_ref) })?;
        // SAFETY: on success the call wrote a new reference we own.
        Ok(unsafe { Carrier::from_raw(out) })
    }};
}

impl Carrier {
    /// A zero-filled CPU carrier of `size` slots (0: an empty carrier, which
    /// a move or projection allocates to fit).
    pub fn cpu(runtime: &Runtime, dtype: DType, size: usize) -> Result<Carrier> {
        new_carrier!(|o| sys::sw_carrier_create_cpu(runtime.as_raw(), dtype.to_raw(), size, o))
    }

    /// A CPU carrier holding a copy of `values`.
    pub fn cpu_from<T: Element>(runtime: &Runtime, values: &[T]) -> Result<Carrier> {
        new_carrier!(|o| sys::sw_carrier_create_cpu_from(
            runtime.as_raw(),
            T::DTYPE.to_raw(),
            values.as_ptr().cast(),
            values.len(),
            o
        ))
    }

    /// A CPU carrier whose slots are `values` itself, without a copy
    /// (`sw_carrier_create_cpu_external`): the carrier owns the `Vec` and
    /// drops it when it lets the memory go (on dispose, a move out of it, a
    /// TiledEvictable taking it as a primary seed, or its last release), on
    /// whichever thread that happens. With `read_only`, public writes and
    /// moves into it fail STATE. An empty `Vec` makes an empty carrier that
    /// stays empty.
    pub fn cpu_from_vec<T: Element>(runtime: &Runtime, values: Vec<T>, read_only: bool) -> Result<Carrier> {
        unsafe extern "C" fn release<T>(user_data: *mut std::ffi::c_void) {
            // SAFETY: user_data is the Box<Vec<T>> given below; the library
            // calls release exactly once. Dropping must not unwind into C.
            let boxed = unsafe { Box::from_raw(user_data as *mut Vec<T>) };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(boxed)));
        }
        let mut boxed = Box::new(values);
        let mut desc = sys::sw_external_memory_desc_t::default();
        unsafe { sys::sw_external_memory_desc_init(&mut desc) };
        desc.bytes = std::mem::size_of_val(boxed.as_slice());
        desc.data = if desc.bytes == 0 { ptr::null_mut() } else { boxed.as_mut_ptr().cast() };
        desc.read_only = read_only;
        desc.release = Some(release::<T>);
        let user_data = Box::into_raw(boxed);
        desc.user_data = user_data.cast();
        let mut out = ptr::null_mut();
        match call(|| unsafe {
            sys::sw_carrier_create_cpu_external(runtime.as_raw(), T::DTYPE.to_raw(), &desc, &mut out)
        }) {
            // SAFETY: a new reference; the carrier owns the Vec from now on.
            Ok(()) => Ok(unsafe { Carrier::from_raw(out) }),
            Err(e) => {
                // SAFETY: on failure release is not called: the Vec is ours again.
                drop(unsafe { Box::from_raw(user_data) });
                Err(e)
            }
        }
    }

    /// Zeroed plain host memory: a secondary tier, not a compute carrier.
    pub fn host(runtime: &Runtime, dtype: DType, size: usize) -> Result<Carrier> {
        new_carrier!(|o| sys::sw_carrier_create_host(runtime.as_raw(), dtype.to_raw(), size, o))
    }

    /// A zero-filled carrier backed by a new file (removed when the carrier
    /// is disposed or destroyed). IO when the file cannot be created.
    pub fn file(runtime: &Runtime, dtype: DType, size: usize, options: &FileOptions) -> Result<Carrier> {
        let (desc, _dir) = file_desc(options)?;
        new_carrier!(|o| sys::sw_carrier_create_file(runtime.as_raw(), dtype.to_raw(), size, &desc, o))
    }

    /// A read-only carrier over `size` elements at `byte_offset` of an
    /// existing file (a weights file), never written or removed. IO if it
    /// cannot be opened, VALUE if the region passes its end.
    pub fn open_file(
        runtime: &Runtime,
        dtype: DType,
        path: impl AsRef<Path>,
        byte_offset: u64,
        size: usize,
        options: &FileOptions,
    ) -> Result<Carrier> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        new_carrier!(|o| sys::sw_carrier_open_file(
            runtime.as_raw(),
            dtype.to_raw(),
            path.as_ptr(),
            byte_offset,
            size,
            &desc,
            o
        ))
    }

    /// A read-only File carrier whose slots are the segments' slots, segment
    /// after segment (`sw_carrier_open_file_segments`): the segments may lie
    /// anywhere in the file, in any order, and may be empty; the file is
    /// never written or removed. VALUE for a segment passing the end of the
    /// file (naming it); IO if it cannot be opened.
    pub fn open_file_segments(
        runtime: &Runtime,
        dtype: DType,
        path: impl AsRef<Path>,
        segments: &[FileSegment],
        options: &FileOptions,
    ) -> Result<Carrier> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        let raw: Vec<sys::sw_file_segment_t> =
            segments.iter().map(|s| sys::sw_file_segment_t { byte_offset: s.byte_offset, count: s.count }).collect();
        new_carrier!(|o| sys::sw_carrier_open_file_segments(
            runtime.as_raw(),
            dtype.to_raw(),
            path.as_ptr(),
            raw.as_ptr(),
            raw.len(),
            &desc,
            o
        ))
    }

    /// A zero-filled carrier of zstd-compressed frames with checksums: a
    /// corrupt frame reads as DATA_CORRUPT, never as garbage.
    pub fn zstd(runtime: &Runtime, dtype: DType, size: usize, options: &ZstdOptions) -> Result<Carrier> {
        let mut desc = sys::sw_zstd_carrier_desc_t::default();
        unsafe { sys::sw_zstd_carrier_desc_init(&mut desc) };
        desc.level = options.level;
        desc.frame_elements = options.frame_elements;
        desc.shuffle = match options.shuffle {
            None => -1,
            Some(false) => 0,
            Some(true) => 1,
        };
        new_carrier!(|o| sys::sw_carrier_create_zstd(runtime.as_raw(), dtype.to_raw(), size, &desc, o))
    }

    /// A zero-filled carrier of `size` slots in a new namespace on Valkey
    /// or Redis servers (`sw_carrier_create_remote`): a secondary tier whose
    /// blocks are one string key each, with a CRC-32C checked on every read.
    /// Its header and every block are written. Unless
    /// [`RemoteOptions::persistent`], the carrier owns its keys: disposing
    /// or releasing it deletes them. Size 0 makes an empty carrier, which a
    /// TiledEvictable or a move fills.
    ///
    /// Choose [`RemoteOptions::block_elements`] equal to the tile size of
    /// the TiledEvictable it serves: every promotion and eviction is then
    /// one block.
    ///
    /// # Errors
    ///
    /// STATE when the namespace already has a header on one of the servers
    /// or another writer holds its lease ("has a writer already", naming
    /// the holder); IO (TIMEOUT past the deadline) naming the server when
    /// one cannot be reached or refuses the credentials or a command; VALUE
    /// for a bad endpoint (a `redis://` one to a host that is not a loopback
    /// address without `allow_plaintext`), namespace or password file, or
    /// `read_only` or `replicas` set; UNSUPPORTED for `rediss://` and in
    /// builds without hiredis.
    pub fn remote(runtime: &Runtime, dtype: DType, size: usize, options: &RemoteOptions) -> Result<Carrier> {
        let (desc, _strings) = remote_desc(options)?;
        new_carrier!(|o| sys::sw_carrier_create_remote(runtime.as_raw(), dtype.to_raw(), size, &desc, o))
    }

    /// A carrier over an existing namespace on Valkey or Redis servers
    /// (`sw_carrier_open_remote`), seeded by [`Carrier::remote`] with
    /// [`RemoteOptions::persistent`] or by `python -m strideweave.remote
    /// seed`. Every server's header must match `dtype`, `size`, the block
    /// size (unless `block_elements` is 0), the endpoint count and the
    /// placement seed. The carrier never deletes the keys. Unless
    /// `read_only`, it takes the namespace's writer lease.
    ///
    /// # Errors
    ///
    /// VALUE when a header differs (naming the field and the server), for a
    /// bad endpoint, namespace or password file, `persistent` set, or
    /// `replicas` without `read_only` or naming a server that is not one of
    /// the endpoints; STATE when, without `read_only`, another writer holds
    /// the namespace's lease ("has a writer already", naming the holder); IO
    /// when a server has no header, cannot be reached, or refuses the
    /// credentials or a command; TIMEOUT past the deadline; UNSUPPORTED for
    /// `rediss://` and in builds without hiredis.
    pub fn open_remote(runtime: &Runtime, dtype: DType, size: usize, options: &RemoteOptions) -> Result<Carrier> {
        let (desc, _strings) = remote_desc(options)?;
        new_carrier!(|o| sys::sw_carrier_open_remote(runtime.as_raw(), dtype.to_raw(), size, &desc, o))
    }

    /// A zero-filled compute carrier in device-local memory of a Vulkan
    /// device. TYPE when `device` is not a Vulkan device, UNSUPPORTED in
    /// builds without Vulkan.
    pub fn vulkan(runtime: &Runtime, device: &Device, dtype: DType, size: usize) -> Result<Carrier> {
        new_carrier!(|o| sys::sw_carrier_create_vulkan(runtime.as_raw(), device.as_raw(), dtype.to_raw(), size, o))
    }

    /// The carrier's kind.
    pub fn kind(&self) -> Result<CarrierKind> {
        let mut k = sys::sw_carrier_kind_t(0);
        call(|| unsafe { sys::sw_carrier_kind(self.as_raw(), &mut k) })?;
        Ok(CarrierKind::from_raw(k))
    }

    /// The element type.
    pub fn dtype(&self) -> Result<DType> {
        let mut d = sys::sw_dtype_t(0);
        call(|| unsafe { sys::sw_carrier_dtype(self.as_raw(), &mut d) })?;
        DType::from_raw(d)
    }

    /// The number of slots (still answers after dispose).
    pub fn size(&self) -> Result<usize> {
        let mut n = 0;
        call(|| unsafe { sys::sw_carrier_size(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The version: +1 per successful public write.
    pub fn version(&self) -> Result<u64> {
        let mut v = 0;
        call(|| unsafe { sys::sw_carrier_version(self.as_raw(), &mut v) })?;
        Ok(v)
    }

    /// Live and not owned: public writes would be accepted.
    pub fn is_mutable(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_carrier_is_mutable(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// Refuses public writes for good (an opened file, read-only memory).
    pub fn is_read_only(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_carrier_is_read_only(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// Claimed by in-flight work or by a composite carrier.
    pub fn is_owned(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_carrier_is_owned(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// Whether [`dispose`](Self::dispose) ran (or a move disposed it).
    pub fn is_disposed(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_carrier_is_disposed(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// Copies `out.len()` slots starting at `first_slot` into `out`. TYPE
    /// unless `T` is the carrier's dtype, INDEX outside the carrier, STATE
    /// once disposed.
    pub fn read<T: Element>(&self, first_slot: usize, out: &mut [T]) -> Result<()> {
        check_element::<T>(self.dtype()?, "the carrier")?;
        let n = out.len();
        T::read_into(out, |p, _| call(|| unsafe { sys::sw_carrier_read(self.as_raw(), first_slot, n, p.cast()) }))
    }

    /// `count` slots starting at `first_slot`, as a `Vec`.
    pub fn to_vec<T: Element + Default>(&self, first_slot: usize, count: usize) -> Result<Vec<T>> {
        let mut v = vec![T::default(); count];
        self.read(first_slot, &mut v)?;
        Ok(v)
    }

    /// Writes `values` at `first_slot`: one version step. STATE when owned,
    /// read-only or disposed.
    pub fn write<T: Element>(&self, first_slot: usize, values: &[T]) -> Result<()> {
        check_element::<T>(self.dtype()?, "the carrier")?;
        self.serialised(|| {
            call(|| unsafe { sys::sw_carrier_write(self.as_raw(), first_slot, values.len(), values.as_ptr().cast()) })
        })
    }

    /// Frees the carrier's values; idempotent. STATE while it is owned (a
    /// TiledEvictable with pending work refuses too: wait first). Disposing
    /// a TiledEvictable disposes both tiers.
    pub fn dispose(&self) -> Result<()> {
        self.serialised(|| call(|| unsafe { sys::sw_carrier_dispose(self.as_raw()) }))
    }

    /// Bytes the carrier's storage occupies now (compressed bytes for zstd,
    /// file bytes for file).
    pub fn stored_bytes(&self) -> Result<u64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_carrier_stored_bytes(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// How a File carrier moves its bytes (`sw_file_carrier_io`): the chunk
    /// size and requests in flight its transfers use, whether it reads
    /// through O_DIRECT, and where the settings came from. Still answers
    /// after dispose; TYPE for another kind of carrier.
    pub fn file_io(&self) -> Result<FileIo> {
        let mut io = sys::sw_file_carrier_io_t::default();
        unsafe { sys::sw_file_carrier_io_init(&mut io) };
        call(|| unsafe { sys::sw_file_carrier_io(self.as_raw(), &mut io) })?;
        Ok(FileIo {
            chunk_bytes: io.chunk_bytes,
            requests_in_flight: io.requests_in_flight,
            direct_io: io.direct_io,
            source: IoProfileSource::from_raw(io.source),
            device: io.device,
            device_read_bytes_per_second: io.device_read_bytes_per_second,
        })
    }

    /// The host address of slot 0 of a CPU carrier, for zero-copy interop.
    /// Valid until the carrier is disposed (a finished move out of it
    /// disposes it) or released; it does not hold the storage against a
    /// concurrent dispose, and writes through it bypass the version
    /// counter. Dereferencing it is the caller's `unsafe`. UNSUPPORTED for
    /// carriers whose memory is not host addressable.
    pub fn host_pointer(&self) -> Result<*mut std::ffi::c_void> {
        let mut p = ptr::null_mut();
        call(|| unsafe { sys::sw_carrier_host_pointer(self.as_raw(), &mut p) })?;
        Ok(p)
    }

    /// Runs `f` holding this carrier's write lock (not for TiledEvictables,
    /// which serialise their requests themselves and whose writes may call
    /// a residency policy back).
    pub(crate) fn serialised<R>(&self, f: impl FnOnce() -> R) -> R {
        if matches!(self.kind(), Ok(CarrierKind::Tiled)) {
            f()
        } else {
            serialised_write(self.as_raw(), f)
        }
    }
}

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.kind().ok();
        let dtype = self.dtype().ok();
        let size = self.size().ok();
        f.debug_struct("Carrier").field("kind", &kind).field("dtype", &dtype).field("size", &size).finish()
    }
}
