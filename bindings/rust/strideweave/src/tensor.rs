//! Tensors: (carrier, offset, layout), and their autograd identity.
use std::ptr;

use strideweave_sys as sys;

use crate::carrier::Carrier;
use crate::dtype::{check_element, DType, Element};
use crate::error::{Error, Result};
use crate::ffi::{call, handle};
use crate::layout::Layout;
use crate::runtime::Runtime;

handle!(
    /// A tensor: element `c` lives at slot `offset + layout.index(c)` of its
    /// carrier; its shape is the layout's top-level extents, and values move
    /// in and out first mode fastest (coordinate `(i, j)` of an `(M, N)`
    /// tensor is element `i + M * j`). The handle is also the tensor's
    /// autograd identity: `requires_grad`, `grad` and the node that made it.
    Tensor,
    sys::sw_tensor_t,
    sw_tensor_retain,
    sw_tensor_release
);

// SAFETY: the header: "Carriers and tensors may be read from several
// threads at once" and reference counting is thread-safe, so a tensor may
// move to another thread.
unsafe impl Send for Tensor {}
// SAFETY: reads and ops (which only read their operands) may run on several
// threads at once (header, Threads: "Carriers and tensors may be read from
// several threads at once"; Operations: "Ops are thread-safe"), and
// backward runs ops' VJPs. What the header leaves to the caller, serialising
// writes, this binding does: set and write, and the calls that change a
// tensor's autograd identity (set_requires_grad, clear_grad), run under the
// write lock of the tensor's carrier (Carrier::serialised).
unsafe impl Sync for Tensor {}

/// The distribution of [`Tensor::random`] (`sw_random_distribution_t`)
/// with its two parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform in `[low, high)`.
    Uniform {
        /// The lower bound.
        low: f64,
        /// The upper bound, never drawn once rounded to the dtype.
        high: f64,
    },
    /// Normal (Box-Muller pairs).
    Normal {
        /// The mean.
        mean: f64,
        /// The standard deviation.
        stddev: f64,
    },
}

/// Options of [`Tensor::random`] (`sw_random_desc_t`). The generator is
/// counter based: element i (first mode fastest) of a given seed,
/// distribution and parameters is the same on every machine, for every
/// thread count and for any shape holding it at ordinal i (the values
/// differ from NumPy's and PyTorch's generators).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomOptions {
    /// The distribution; default uniform in `[0, 1)`.
    pub distribution: Distribution,
    /// A floating dtype (TYPE otherwise); default f32.
    pub dtype: DType,
    /// The seed; default 0.
    pub seed: u64,
}

impl Default for RandomOptions {
    fn default() -> RandomOptions {
        RandomOptions { distribution: Distribution::Uniform { low: 0.0, high: 1.0 }, dtype: DType::F32, seed: 0 }
    }
}

fn out_tensor(f: impl FnOnce(*mut *mut sys::sw_tensor_t) -> *mut sys::sw_error_t) -> Result<Tensor> {
    let mut out = ptr::null_mut();
    call(|| f(&mut out))?;
    // SAFETY: on success the call wrote a new tensor reference.
    Ok(unsafe { Tensor::from_raw(out) })
}

fn shape_len(extents: &[i64]) -> Result<usize> {
    let mut n: i64 = 1;
    for &e in extents {
        if e < 0 {
            return Err(Error::value(format!("shape {extents:?} has a negative extent")));
        }
        n = n.checked_mul(e).ok_or_else(|| Error::value(format!("shape {extents:?} overflows")))?;
    }
    Ok(n as usize)
}

impl Tensor {
    /// A tensor over `carrier` at `offset` with `layout`; INDEX unless every
    /// reachable slot lies inside the carrier.
    pub fn new(carrier: &Carrier, offset: i64, layout: &Layout) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_create(carrier.as_raw(), offset, layout.as_raw(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A dense CPU tensor of `shape` holding a copy of `values`, given first
    /// mode fastest. VALUE unless `values.len()` is the shape's element count.
    pub fn from_slice<T: Element>(runtime: &Runtime, shape: &[i64], values: &[T]) -> Result<Tensor> {
        let n = shape_len(shape)?;
        if values.len() != n {
            return Err(Error::value(format!(
                "Tensor::from_slice: shape {shape:?} holds {n} elements, {} were given",
                values.len()
            )));
        }
        let mut out = ptr::null_mut();
        call(|| unsafe {
            sys::sw_tensor_from_data(
                runtime.as_raw(),
                T::DTYPE.to_raw(),
                shape.as_ptr(),
                shape.len(),
                values.as_ptr().cast(),
                &mut out,
            )
        })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A dense zero-filled CPU tensor.
    pub fn zeros(runtime: &Runtime, dtype: DType, shape: &[i64]) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call(|| unsafe {
            sys::sw_tensor_zeros(runtime.as_raw(), dtype.to_raw(), shape.as_ptr(), shape.len(), &mut out)
        })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A dense CPU tensor with every element `value` (`sw_tensor_full`);
    /// VALUE when the value does not fit an integer or bool dtype exactly.
    pub fn full(runtime: &Runtime, dtype: DType, shape: &[i64], value: f64) -> Result<Tensor> {
        out_tensor(|o| unsafe {
            sys::sw_tensor_full(runtime.as_raw(), dtype.to_raw(), shape.as_ptr(), shape.len(), value, o)
        })
    }

    /// A rank-1 CPU tensor of `ceil((stop - start) / step)` elements, element
    /// i being `start + i * step` computed in f64 and converted to `dtype`
    /// (`sw_tensor_arange`). VALUE for step 0 or a non-finite argument.
    pub fn arange(runtime: &Runtime, dtype: DType, start: f64, stop: f64, step: f64) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_arange(runtime.as_raw(), dtype.to_raw(), start, stop, step, o) })
    }

    /// A dense CPU tensor of random values (`sw_tensor_random`; see
    /// [`RandomOptions`]). TYPE for a dtype that is not floating; VALUE for
    /// non-finite parameters, low > high or a negative stddev.
    pub fn random(runtime: &Runtime, shape: &[i64], options: &RandomOptions) -> Result<Tensor> {
        let mut desc = sys::sw_random_desc_t::default();
        unsafe { sys::sw_random_desc_init(&mut desc) };
        desc.dtype = options.dtype.to_raw();
        desc.seed = options.seed;
        match options.distribution {
            Distribution::Uniform { low, high } => {
                desc.distribution = sys::sw_random_distribution_t::SW_RANDOM_UNIFORM;
                desc.low = low;
                desc.high = high;
            }
            Distribution::Normal { mean, stddev } => {
                desc.distribution = sys::sw_random_distribution_t::SW_RANDOM_NORMAL;
                desc.mean = mean;
                desc.stddev = stddev;
            }
        }
        out_tensor(|o| unsafe { sys::sw_tensor_random(runtime.as_raw(), &desc, shape.as_ptr(), shape.len(), o) })
    }

    /// The carrier.
    pub fn carrier(&self) -> Result<Carrier> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_carrier(self.as_raw(), &mut out) })?;
        Ok(unsafe { Carrier::from_raw(out) })
    }

    /// The layout.
    pub fn layout(&self) -> Result<Layout> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_layout(self.as_raw(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// The offset of element 0's slot base.
    pub fn offset(&self) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_tensor_offset(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The element type.
    pub fn dtype(&self) -> Result<DType> {
        let mut d = sys::sw_dtype_t(0);
        call(|| unsafe { sys::sw_tensor_dtype(self.as_raw(), &mut d) })?;
        DType::from_raw(d)
    }

    /// The number of modes.
    pub fn rank(&self) -> Result<usize> {
        let mut n = 0;
        call(|| unsafe { sys::sw_tensor_rank(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The top-level extents.
    pub fn shape(&self) -> Result<Vec<i64>> {
        let rank = self.rank()?;
        let mut out = vec![0i64; rank];
        call(|| unsafe { sys::sw_tensor_shape(self.as_raw(), out.as_mut_ptr(), rank) })?;
        Ok(out)
    }

    /// The number of elements.
    pub fn numel(&self) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_tensor_numel(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The carrier's version.
    pub fn version(&self) -> Result<u64> {
        let mut v = 0;
        call(|| unsafe { sys::sw_tensor_version(self.as_raw(), &mut v) })?;
        Ok(v)
    }

    /// One element as an f64 (integers exact up to 2^53, bool as 0/1); one
    /// coordinate per mode (none for a rank-0 tensor).
    pub fn get(&self, coord: &[i64]) -> Result<f64> {
        let mut v = 0.0;
        let p = if coord.is_empty() { ptr::null() } else { coord.as_ptr() };
        call(|| unsafe { sys::sw_tensor_get(self.as_raw(), p, coord.len(), &mut v) })?;
        Ok(v)
    }

    /// The value of a one-element tensor of any rank; VALUE otherwise.
    pub fn item(&self) -> Result<f64> {
        let n = self.numel()?;
        if n != 1 {
            return Err(Error::value(format!("item() needs a one-element tensor; this one has {n} elements")));
        }
        self.get(&vec![0; self.rank()?])
    }

    /// Writes one element converted from an f64: one version step. VALUE if
    /// it does not fit an integer dtype or is not integral.
    pub fn set(&self, coord: &[i64], value: f64) -> Result<()> {
        let carrier = self.carrier()?;
        let p = if coord.is_empty() { ptr::null() } else { coord.as_ptr() };
        carrier.serialised(|| call(|| unsafe { sys::sw_tensor_set(self.as_raw(), p, coord.len(), value) }))
    }

    /// Copies every element, first mode fastest, into `out`. TYPE unless `T`
    /// is the dtype; VALUE unless `out` holds exactly `numel` elements.
    pub fn read<T: Element>(&self, out: &mut [T]) -> Result<()> {
        check_element::<T>(self.dtype()?, "the tensor")?;
        let n = self.numel()? as usize;
        if out.len() != n {
            return Err(Error::value(format!("the tensor has {n} elements; the buffer holds {}", out.len())));
        }
        T::read_into(out, |p, bytes| call(|| unsafe { sys::sw_tensor_read(self.as_raw(), p.cast(), bytes) }))
    }

    /// Every element, first mode fastest.
    pub fn to_vec<T: Element + Default>(&self) -> Result<Vec<T>> {
        let n = self.numel()? as usize;
        let mut v = vec![T::default(); n];
        self.read(&mut v)?;
        Ok(v)
    }

    /// Writes every element from `values` (first mode fastest): one version
    /// step. TYPE unless `T` is the dtype; VALUE for a wrong length or a
    /// layout that is not injective.
    pub fn write<T: Element>(&self, values: &[T]) -> Result<()> {
        check_element::<T>(self.dtype()?, "the tensor")?;
        let carrier = self.carrier()?;
        carrier.serialised(|| {
            call(|| unsafe {
                sys::sw_tensor_write(self.as_raw(), values.as_ptr().cast(), std::mem::size_of_val(values))
            })
        })
    }

    /// The view whose mode i is mode `perm[i]` (same carrier and offset);
    /// differentiable.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_permute(self.as_raw(), perm.as_ptr(), perm.len(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// The view with modes `axis0` and `axis1` swapped.
    pub fn transpose(&self, axis0: usize, axis1: usize) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_transpose(self.as_raw(), axis0, axis1, &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A tensor of `shape` holding these elements in first-mode-fastest
    /// order (NumPy's order='F'): a view when the layout allows one, else a
    /// dense copy (`sw_tensor_reshape`). One extent may be -1; VALUE when the
    /// element counts differ.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_reshape(self.as_raw(), shape.as_ptr(), shape.len(), o) })
    }

    /// [`reshape`](Self::reshape) that is always a view (`sw_tensor_view`):
    /// VALUE where the layout cannot be viewed so.
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_view(self.as_raw(), shape.as_ptr(), shape.len(), o) })
    }

    /// Modes `start_axis..=end_axis` merged into one (`sw_tensor_flatten`;
    /// negative counts from the end): `flatten(0, -1)` merges every mode.
    pub fn flatten(&self, start_axis: i64, end_axis: i64) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_flatten(self.as_raw(), start_axis, end_axis, o) })
    }

    /// The view with a mode of extent 1 before mode `axis` (in
    /// `[-rank - 1, rank]`; INDEX otherwise) (`sw_tensor_unsqueeze`).
    pub fn unsqueeze(&self, axis: i64) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_unsqueeze(self.as_raw(), axis, o) })
    }

    /// The view without the listed modes of extent 1, or without every mode
    /// of extent 1 when `axes` is empty (`sw_tensor_squeeze`).
    pub fn squeeze(&self, axes: &[i64]) -> Result<Tensor> {
        let p = if axes.is_empty() { ptr::null() } else { axes.as_ptr() };
        out_tensor(|o| unsafe { sys::sw_tensor_squeeze(self.as_raw(), p, axes.len(), o) })
    }

    /// The broadcast view of `shape` (`sw_tensor_expand`): modes of extent 1
    /// stretch with stride 0, new leading modes are added, -1 keeps an
    /// extent. In-place writes to it fail VALUE.
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_expand(self.as_raw(), shape.as_ptr(), shape.len(), o) })
    }

    /// The view of elements `start, start + step, ...` before `stop` along
    /// `axis`, as Python's `t[start:stop:step]` (`sw_tensor_slice`):
    /// negative bounds count from the end, both are clamped (`i64::MAX` is
    /// "to the end"), a negative step walks backwards. VALUE for step 0.
    pub fn slice(&self, axis: i64, start: i64, stop: i64, step: i64) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_slice(self.as_raw(), axis, start, stop, step, o) })
    }

    /// The view at `index` along `axis`, without that mode
    /// (`sw_tensor_select`; a negative index counts from the end).
    pub fn select(&self, axis: i64, index: i64) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_select(self.as_raw(), axis, index, o) })
    }

    /// This tensor (a new handle) when its layout is dense, else a dense
    /// copy (`sw_tensor_contiguous`).
    pub fn contiguous(&self) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_contiguous(self.as_raw(), o) })
    }

    /// A dense copy with its own carrier, always (`sw_tensor_clone`;
    /// differentiable). `Clone` only makes another handle to this tensor.
    pub fn copy(&self) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_clone(self.as_raw(), o) })
    }

    /// A view of the same values outside autograd (`sw_tensor_detach`).
    pub fn detach(&self) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_detach(self.as_raw(), o) })
    }

    /// The values converted to `dtype` (`sw_tensor_to_dtype`): this tensor
    /// (a new handle) when it has that dtype, else a dense copy.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        out_tensor(|o| unsafe { sys::sw_tensor_to_dtype(self.as_raw(), dtype.to_raw(), o) })
    }

    /// Writes `value` to every element (`sw_tensor_fill`): one version step;
    /// VALUE when it does not fit the dtype.
    pub fn fill(&self, value: f64) -> Result<()> {
        self.carrier()?.serialised(|| call(|| unsafe { sys::sw_tensor_fill(self.as_raw(), value) }))
    }

    /// Copies `source`, broadcast to this shape and converted to this dtype,
    /// into this tensor (`sw_tensor_copy_from`): one version step.
    pub fn copy_from(&self, source: &Tensor) -> Result<()> {
        self.carrier()?.serialised(|| call(|| unsafe { sys::sw_tensor_copy_from(self.as_raw(), source.as_raw()) }))
    }

    /// Starts moving this tensor's values into `destination` (see
    /// [`move_async`](crate::move_async)).
    pub fn move_to(&self, destination: &Carrier) -> Result<crate::AwaitMove> {
        crate::awaits::move_async(self, destination)
    }

    /// Exports a tensor on a host-addressable carrier (CPU, Host) as a
    /// legacy `DLManagedTensor*` sharing the carrier's memory
    /// (`sw_tensor_to_dlpack`); the export keeps the tensor alive until its
    /// deleter runs. Hand it to a DLPack consumer, which calls the deleter
    /// exactly once. The carrier must not be disposed while a consumer may
    /// read. UNSUPPORTED for carriers that are not host addressable or modes
    /// that are not one progression.
    pub fn to_dlpack(&self) -> Result<*mut std::ffi::c_void> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_to_dlpack(self.as_raw(), &mut out) })?;
        Ok(out)
    }

    /// The same as a `DLManagedTensorVersioned*` for a consumer reading
    /// DLPack up to `max_major.max_minor` (`sw_tensor_to_dlpack_versioned`);
    /// VALUE when `max_major` is 0.
    pub fn to_dlpack_versioned(&self, max_major: u32, max_minor: u32) -> Result<*mut std::ffi::c_void> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_to_dlpack_versioned(self.as_raw(), max_major, max_minor, &mut out) })?;
        Ok(out)
    }

    // ---- autograd ----

    /// Marks a leaf as requiring gradients. TYPE for non-float dtypes, VALUE
    /// for a tensor produced by a recorded op.
    pub fn set_requires_grad(&self, requires_grad: bool) -> Result<()> {
        self.carrier()?
            .serialised(|| call(|| unsafe { sys::sw_tensor_set_requires_grad(self.as_raw(), requires_grad) }))
    }

    /// `set_requires_grad(true)`, returning the tensor (for chaining).
    pub fn requires_grad_(self) -> Result<Tensor> {
        self.set_requires_grad(true)?;
        Ok(self)
    }

    /// Whether the tensor requires gradients.
    pub fn requires_grad(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_tensor_requires_grad(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// Whether the tensor was not produced by a recorded op.
    pub fn is_leaf(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_tensor_is_leaf(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// The accumulated gradient, if any. A TiledEvictable's gradient is a
    /// full tensor over a fresh TiledEvictable whose untouched tiles are
    /// implicit zeros.
    pub fn grad(&self) -> Result<Option<Tensor>> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tensor_grad(self.as_raw(), &mut out) })?;
        Ok(if out.is_null() { None } else { Some(unsafe { Tensor::from_raw(out) }) })
    }

    /// Drops the accumulated gradient.
    pub fn clear_grad(&self) -> Result<()> {
        self.carrier()?.serialised(|| call(|| unsafe { sys::sw_tensor_clear_grad(self.as_raw()) }))
    }

    /// Runs reverse mode from this tensor. `cotangent` has its shape and
    /// dtype, or is `None` for a one-element tensor. Saved versions are
    /// checked before any node runs (STATE "modified in-place"); leaf
    /// gradients accumulate. Without `retain_graph` a second backward
    /// through the graph fails STATE.
    pub fn backward(&self, cotangent: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        let c = cotangent.map_or(ptr::null_mut(), |c| c.as_raw());
        call(|| unsafe { sys::sw_backward(self.as_raw(), c, retain_graph) })
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape().ok())
            .field("dtype", &self.dtype().ok())
            .field("layout", &self.layout().ok())
            .finish()
    }
}

/// Whether grad mode is on for this thread (on by default; per thread).
pub fn is_grad_enabled() -> bool {
    // SAFETY: reads thread-local state.
    unsafe { sys::sw_is_grad_enabled() }
}

/// Sets this thread's grad mode; returns the previous one.
pub fn set_grad_enabled(enabled: bool) -> bool {
    // SAFETY: sets thread-local state.
    unsafe { sys::sw_set_grad_enabled(enabled) }
}

/// Grad mode off on this thread until dropped, then back as it was.
/// Not `Send`: grad mode is per thread.
pub struct NoGradGuard {
    previous: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NoGradGuard {
    /// Turns grad mode off.
    pub fn new() -> NoGradGuard {
        NoGradGuard { previous: set_grad_enabled(false), _not_send: std::marker::PhantomData }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        NoGradGuard::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.previous);
    }
}

/// Runs `f` with grad mode off on this thread (restored after, also on panic).
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoGradGuard::new();
    f()
}
