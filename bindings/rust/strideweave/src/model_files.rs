//! Model files as secondary tiers: a tensor of a `.npy`, `.safetensors` or
//! raw file opened as a read-only File carrier ([`Carrier::open_npy`],
//! [`Carrier::open_safetensors`], [`Carrier::open_safetensors_stack`], [`Carrier::open_gguf`],
//! [`Carrier::open_safetensors_stack_files`], [`Carrier::open_raw_tensor`])
//! with the TiledEvictable geometry that makes each tile one expert as the
//! file stores it ([`FileTensor`]), and tensors saved to `.safetensors` and
//! `.npy` ([`save_safetensors`], [`save_npy`]). See docs/model-files.md.
use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr;

use strideweave_sys as sys;

use crate::carrier::{file_desc, path_cstring, Carrier, FileOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::{call, rank_error};
use crate::policy::Policy;
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use crate::tiled::TiledEvictable;

/// How a file lays out a tensor's elements (`sw_file_order_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileOrder {
    /// C order, as NumPy, PyTorch and safetensors store tensors: the last
    /// index fastest.
    RowMajor,
    /// Fortran order: the first index fastest, as StrideWeave's dense layouts.
    FirstModeFastest,
    /// An order this crate does not name.
    Other(u32),
}

impl FileOrder {
    fn from_raw(raw: sys::sw_file_order_t) -> FileOrder {
        use sys::sw_file_order_t as C;
        match raw {
            C::SW_FILE_ORDER_ROW_MAJOR => FileOrder::RowMajor,
            C::SW_FILE_ORDER_FIRST_MODE_FASTEST => FileOrder::FirstModeFastest,
            other => FileOrder::Other(other.0),
        }
    }

    fn to_raw(self) -> sys::sw_file_order_t {
        use sys::sw_file_order_t as C;
        match self {
            FileOrder::RowMajor => C::SW_FILE_ORDER_ROW_MAJOR,
            FileOrder::FirstModeFastest => C::SW_FILE_ORDER_FIRST_MODE_FASTEST,
            FileOrder::Other(n) => sys::sw_file_order_t(n),
        }
    }
}

/// A tensor of a model file opened as a read-only File carrier, with what
/// the opener found (`sw_file_tensor_info_t`) and the geometry to use it
/// with.
///
/// A model file indexes its tensors row-major (the last index fastest);
/// StrideWeave's dense layouts are first mode fastest. So a row-major
/// `(E, O, I)` file is, as it lies, the tensor `(I, O, E)`: `logical_shape`
/// is that tensor's shape, `grid_shape` and `tile_shape` cut it into one
/// tile per index of the file's slowest mode (one expert), and
/// [`view`](Self::view) indexes it as the file does. Pass the full tensor
/// ([`TiledEvictable::full_tensor`]) to projection, scatter and ops; use the
/// view to read elements by the file's indices and to save.
///
/// ```no_run
/// use strideweave::{Carrier, Policy, Runtime};
///
/// # fn main() -> strideweave::Result<()> {
/// let rt = Runtime::new()?;
/// let names = ["model.layers.0.block_sparse_moe.experts.0.w1.weight",
///              "model.layers.0.block_sparse_moe.experts.1.w1.weight"];
/// let ft = Carrier::open_safetensors_stack(&rt, "model.safetensors", &names, &Default::default())?;
/// let tiled = ft.tiled(None, Policy::None)?; // grid (1, 1, E), tile (I, O, 1)
/// let full = tiled.full_tensor()?;             // (I, O, E)
/// let view = ft.view(&full)?;                  // (E, O, I): view.get(&[e, o, i])
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FileTensor {
    /// The read-only File carrier over the tensor's bytes.
    pub carrier: Carrier,
    /// The element type.
    pub dtype: DType,
    /// The shape as the file indexes it (NumPy's shape); a stack of tensors
    /// puts their count first.
    pub shape: Vec<i64>,
    /// How the file lays out the elements.
    pub order: FileOrder,
    /// The byte offset of element 0 in the file (for a stack over several
    /// files, in the first tensor's file).
    pub data_offset: u64,
    /// The bytes of all the elements.
    pub data_bytes: u64,
    /// The file regions the carrier reads: 1, or the number of stacked tensors.
    pub segments: usize,
    /// The full tensor's first-mode-fastest shape: `shape` reversed for a
    /// row-major file, `shape` itself for a Fortran-order one.
    pub logical_shape: Vec<i64>,
    /// Tiles per mode of the geometry giving each tile one index of the
    /// file's slowest mode (`(1, 1, E)` for a row-major `(E, O, I)` tensor).
    pub grid_shape: Vec<i64>,
    /// The extents of one tile of that geometry (`(I, O, 1)`).
    pub tile_shape: Vec<i64>,
    /// Mode `i` of the file's indexing is mode `permutation[i]` of the full
    /// tensor: [`Tensor::permute`] of a compact projection with it indexes
    /// the projection as the file does.
    pub permutation: Vec<usize>,
    /// The runtime the carrier belongs to (for [`tiled`](Self::tiled)'s
    /// default primary).
    runtime: Runtime,
}

impl FileTensor {
    fn from_info(runtime: &Runtime, carrier: Carrier, info: &sys::sw_file_tensor_info_t) -> Result<FileTensor> {
        let rank = info.rank.min(sys::SW_MAX_RANK as usize);
        Ok(FileTensor {
            dtype: DType::from_raw(info.dtype)?,
            shape: info.shape[..rank].to_vec(),
            order: FileOrder::from_raw(info.order),
            data_offset: info.data_offset,
            data_bytes: info.data_bytes,
            segments: info.segments,
            logical_shape: info.logical_shape[..rank].to_vec(),
            grid_shape: info.grid_shape[..rank].to_vec(),
            tile_shape: info.tile_shape[..rank].to_vec(),
            permutation: info.permutation[..rank].to_vec(),
            carrier,
            runtime: runtime.clone(),
        })
    }

    /// The number of modes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// A TiledEvictable over the file with this geometry: `primary` is an
    /// empty compute carrier of the file's dtype, or `None` for a new empty
    /// CPU one. Every tile starts in the file (secondary): promote or
    /// project to read them. STATE when the carrier is already a tier of
    /// another TiledEvictable.
    pub fn tiled(&self, primary: Option<&Carrier>, policy: impl Into<Policy>) -> Result<TiledEvictable> {
        let made;
        let primary = match primary {
            Some(p) => p,
            None => {
                made = Carrier::cpu(&self.runtime, self.dtype, 0)?;
                &made
            }
        };
        TiledEvictable::new(primary, &self.carrier, &self.grid_shape, &self.tile_shape, policy)
    }

    /// `tensor` (the full tensor of [`tiled`](Self::tiled), or any tensor of
    /// this rank) indexed as the file does (`sw_file_tensor_view`):
    /// `view.get(&[e, o, i])` is `numpy.load(path)[e, o, i]`. A layout
    /// permutation over the same carrier, no copy, not recorded for autograd
    /// (a fresh leaf). VALUE when the ranks differ.
    pub fn view(&self, tensor: &Tensor) -> Result<Tensor> {
        if self.permutation.len() > sys::SW_MAX_RANK as usize {
            return Err(rank_error("the permutation", self.permutation.len()));
        }
        let mut info = sys::sw_file_tensor_info_t::default();
        // SAFETY: info is a valid struct to fill.
        unsafe { sys::sw_file_tensor_info_init(&mut info) };
        info.rank = self.permutation.len();
        info.permutation[..info.rank].copy_from_slice(&self.permutation);
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_file_tensor_view(tensor.as_raw(), &info, &mut out) })?;
        // SAFETY: on success out is a new reference we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }
}

/// Runs an opener with a fresh info struct and takes over the carrier it made.
fn opened(
    runtime: &Runtime,
    open: impl FnOnce(*mut sys::sw_file_tensor_info_t, *mut *mut sys::sw_carrier_t) -> *mut sys::sw_error_t,
) -> Result<FileTensor> {
    let mut info = sys::sw_file_tensor_info_t::default();
    // SAFETY: info is a valid struct to fill.
    unsafe { sys::sw_file_tensor_info_init(&mut info) };
    let mut out = ptr::null_mut();
    call(|| open(&mut info, &mut out))?;
    // SAFETY: on success the opener wrote a new reference we own (released
    // again by the drop if the info cannot be read).
    let carrier = unsafe { Carrier::from_raw(out) };
    FileTensor::from_info(runtime, carrier, &info)
}

/// `what[i]` as C strings; VALUE for a NUL inside one.
fn c_strings<S: AsRef<str>>(items: &[S], what: &str) -> Result<Vec<CString>> {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| CString::new(s.as_ref()).map_err(|_| Error::value(format!("{what}[{i}] holds a NUL byte"))))
        .collect()
}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::value(format!("{what} holds a NUL byte")))
}

fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings.iter().map(|s| s.as_ptr()).collect()
}

impl Carrier {
    /// The array of a `.npy` file (format 1.0 or 2.0, C or Fortran order) as
    /// a read-only File carrier (`sw_carrier_open_npy`), with the geometry
    /// that makes each tile one index of the file's slowest mode. IO when
    /// the file cannot be opened or read, DATA_CORRUPT for a bad header,
    /// UNSUPPORTED for a dtype, version or rank StrideWeave cannot hold,
    /// VALUE for an array with no elements or of rank 0. `options` as for
    /// [`open_file`](Self::open_file) (`directory` unused).
    pub fn open_npy(runtime: &Runtime, path: impl AsRef<Path>, options: &FileOptions) -> Result<FileTensor> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_npy(runtime.as_raw(), path.as_ptr(), &desc, info, out)
        })
    }

    /// Tensor `name` of a `.safetensors` file as a read-only File carrier
    /// (`sw_carrier_open_safetensors`; `"__metadata__"` is ignored). Errors
    /// as [`open_npy`](Self::open_npy), and VALUE for a name the file lacks.
    pub fn open_safetensors(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        name: &str,
        options: &FileOptions,
    ) -> Result<FileTensor> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        let name = c_string(name, "the tensor name")?;
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_safetensors(runtime.as_raw(), path.as_ptr(), name.as_ptr(), &desc, info, out)
        })
    }

    /// Tensor `name` of a GGUF file (llama.cpp's format, versions 2 and 3)
    /// as a read-only File carrier (`sw_carrier_open_gguf`). ggml lists a
    /// tensor's dimensions `ne` fastest first, this library's
    /// first-mode-fastest order: [`FileTensor::shape`] is `ne` reversed
    /// (row-major) and [`FileTensor::logical_shape`] is `ne`, so a stacked
    /// expert tensor (`blk.L.ffn_up_exps.weight`, `ne` (n_embd, n_ff,
    /// n_expert)) tiles one expert per tile. Errors as
    /// [`open_safetensors`](Self::open_safetensors); DATA_CORRUPT for a lying
    /// header (offsets past the end, overlapping or misaligned tensors, a
    /// block that does not divide the first dimension, absurd counts);
    /// UNSUPPORTED for a ggml type StrideWeave has no dtype for (such as Q4_1
    /// and Q5_K; Q8_0, Q4_0, Q4_K, Q6_K and MXFP4 open as their dtypes).
    pub fn open_gguf(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        name: &str,
        options: &FileOptions,
    ) -> Result<FileTensor> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        let name = c_string(name, "the tensor name")?;
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_gguf(runtime.as_raw(), path.as_ptr(), name.as_ptr(), &desc, info, out)
        })
    }

    /// Several tensors of one `.safetensors` file, all of one dtype and shape
    /// `S`, as one read-only carrier over their regions in the order given
    /// (`sw_carrier_open_safetensors_stack`): the tensor of shape
    /// `(names.len(), *S)` that stacks them, tile `i` being `names[i]` (a
    /// Hugging Face checkpoint storing each expert as its own tensor).
    /// VALUE for a name the file lacks, tensors that differ in dtype or
    /// shape, a name given twice, or no names; otherwise errors as
    /// [`open_npy`](Self::open_npy).
    pub fn open_safetensors_stack<S: AsRef<str>>(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        names: &[S],
        options: &FileOptions,
    ) -> Result<FileTensor> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        let names = c_strings(names, "names")?;
        let list = pointers(&names);
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_safetensors_stack(
                runtime.as_raw(),
                path.as_ptr(),
                list.as_ptr(),
                list.len(),
                &desc,
                info,
                out,
            )
        })
    }

    /// The stack of [`open_safetensors_stack`](Self::open_safetensors_stack)
    /// over several `.safetensors` files, for a checkpoint sharded into
    /// files (`sw_carrier_open_safetensors_stack_files`): tensor `names[i]`
    /// of file `paths[i]`, tile `i` being that tensor. Paths may repeat and
    /// come in any order; each file is opened and its header read once.
    /// VALUE for slices of two lengths, a name its file lacks, tensors that
    /// differ in dtype or shape, one tensor of one file given twice, or no
    /// names; IO for a file that cannot be opened, DATA_CORRUPT for a bad
    /// header (each naming the file and the tensor at fault).
    pub fn open_safetensors_stack_files<P: AsRef<Path>, S: AsRef<str>>(
        runtime: &Runtime,
        paths: &[P],
        names: &[S],
        options: &FileOptions,
    ) -> Result<FileTensor> {
        if paths.len() != names.len() {
            return Err(Error::value(format!(
                "{} paths for {} tensor names: give one path per name",
                paths.len(),
                names.len()
            )));
        }
        let (desc, _dir) = file_desc(options)?;
        let files = paths.iter().map(|p| path_cstring(p.as_ref())).collect::<Result<Vec<_>>>()?;
        let names = c_strings(names, "names")?;
        let (file_list, name_list) = (pointers(&files), pointers(&names));
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_safetensors_stack_files(
                runtime.as_raw(),
                file_list.as_ptr(),
                name_list.as_ptr(),
                name_list.len(),
                &desc,
                info,
                out,
            )
        })
    }

    /// A raw tensor of `shape` and `dtype` at `byte_offset` of a file, laid
    /// out in `order`, as a read-only File carrier
    /// (`sw_carrier_open_raw_tensor`). IO when the file cannot be opened;
    /// VALUE for a region past the end of the file, a rank above
    /// `SW_MAX_RANK` or no elements.
    pub fn open_raw_tensor(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        dtype: DType,
        byte_offset: u64,
        shape: &[i64],
        order: FileOrder,
        options: &FileOptions,
    ) -> Result<FileTensor> {
        let (desc, _dir) = file_desc(options)?;
        let path = path_cstring(path.as_ref())?;
        opened(runtime, |info, out| unsafe {
            sys::sw_carrier_open_raw_tensor(
                runtime.as_raw(),
                path.as_ptr(),
                dtype.to_raw(),
                byte_offset,
                shape.as_ptr(),
                shape.len(),
                order.to_raw(),
                &desc,
                info,
                out,
            )
        })
    }
}

/// Saves tensors to a `.safetensors` file (`sw_save_safetensors`), in the
/// order given, each `(name, tensor)` with the tensor's shape and its own
/// indexing: what the safetensors readers give back as `tensor[c]` is
/// `tensor.get(c)` (save [`FileTensor::view`] to keep a file's `(E, O, I)`).
/// `metadata` pairs are written as the file's `"__metadata__"` (Hugging Face
/// writes `("format", "pt")`). A tensor of a TiledEvictable is read tile by
/// tile from the tier each tile is in, dirty values included, with no
/// promotion. The file is written under a temporary name beside `path` and
/// renamed over it at the end: a failure leaves nothing. VALUE for an empty,
/// duplicate or NUL-holding name, the name `"__metadata__"` or a duplicate
/// metadata key; IO when the file cannot be written.
pub fn save_safetensors(path: impl AsRef<Path>, tensors: &[(&str, &Tensor)], metadata: &[(&str, &str)]) -> Result<()> {
    let path = path_cstring(path.as_ref())?;
    let names = tensors
        .iter()
        .enumerate()
        .map(|(i, (n, _))| c_string(n, &format!("tensor name {i}")))
        .collect::<Result<Vec<_>>>()?;
    let keys = metadata.iter().map(|(k, _)| c_string(k, "a metadata key")).collect::<Result<Vec<_>>>()?;
    let values = metadata.iter().map(|(_, v)| c_string(v, "a metadata value")).collect::<Result<Vec<_>>>()?;
    let (name_list, key_list, value_list) = (pointers(&names), pointers(&keys), pointers(&values));
    let handles: Vec<*mut sys::sw_tensor_t> = tensors.iter().map(|(_, t)| t.as_raw()).collect();
    let mut desc = sys::sw_safetensors_save_desc_t::default();
    // SAFETY: desc is a valid struct to fill.
    unsafe { sys::sw_safetensors_save_desc_init(&mut desc) };
    if !metadata.is_empty() {
        desc.metadata_keys = key_list.as_ptr();
        desc.metadata_values = value_list.as_ptr();
        desc.metadata_count = metadata.len();
    }
    call(|| unsafe {
        sys::sw_save_safetensors(path.as_ptr(), name_list.as_ptr(), handles.as_ptr(), handles.len(), &desc)
    })
}

/// Saves one tensor to a `.npy` file (format 1.0, C order; `sw_save_npy`)
/// that `numpy.load` reads back with the tensor's shape and indexing;
/// written as [`save_safetensors`] writes. UNSUPPORTED for bf16, which NumPy
/// has no dtype for.
pub fn save_npy(path: impl AsRef<Path>, tensor: &Tensor) -> Result<()> {
    let path = path_cstring(path.as_ref())?;
    call(|| unsafe { sys::sw_save_npy(path.as_ptr(), tensor.as_raw()) })
}
