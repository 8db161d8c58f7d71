//! TiledEvictable: one logical tensor cut into tiles that live in a primary
//! (compute) tier or a secondary (storage) tier, move asynchronously under a
//! residency policy, and are gathered into compact tensors by projection.
use std::ops::Deref;
use std::ptr;
use std::sync::Arc;

use strideweave_sys as sys;

use crate::awaits::{Await, AwaitMove, AwaitProjection, AwaitResidency, AwaitUpdate};
use crate::carrier::{Carrier, CarrierKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::ops::UnaryOp;
use crate::policy::{Policy, PolicyShared, PolicyVtable, ResidencyPolicy};
use crate::tensor::Tensor;
use crate::tiles::{TileSelection, TileSet, Tiles};

/// Where a tile's value lives (`sw_tile_location_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileLocation {
    /// In the primary (compute) tier.
    Primary,
    /// In the secondary (storage) tier only.
    Secondary,
    /// A valid implicit zero (gradients' untouched tiles).
    Implicit,
    /// No value yet: not readable until promoted from a valid tier or written.
    Invalid,
    /// A location this crate does not name.
    Other(u32),
}

/// A tile's residency metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileState {
    /// Where its value lives.
    pub location: TileLocation,
    /// Whether it holds a readable value.
    pub valid: bool,
    /// A primary value not yet written to the secondary tier.
    pub dirty: bool,
}

/// Which tiles [`TiledEvictable::tiles`] lists (`sw_tile_set_kind_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileSetKind {
    /// Primary-resident tiles.
    Primary,
    /// Tiles in the secondary tier only.
    Secondary,
    /// Valid tiles.
    Valid,
    /// Dirty tiles.
    Dirty,
}

/// How a scatter or update combines compact values with the existing ones.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    /// Store the compact values.
    #[default]
    Replace,
    /// Add the compact values (an optimiser step).
    Add,
}

impl Reduction {
    fn to_raw(self) -> sys::sw_scatter_reduction_t {
        match self {
            Reduction::Replace => sys::sw_scatter_reduction_t::SW_SCATTER_REPLACE,
            Reduction::Add => sys::sw_scatter_reduction_t::SW_SCATTER_ADD,
        }
    }
}

/// Options of [`TiledEvictable::expert_ffn`] (`sw_expert_ffn_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpertFfnOptions {
    /// The activation of the gate product: [`UnaryOp::Silu`] (the default:
    /// SwiGLU, as Mixtral, Qwen-MoE and DeepSeek-MoE), [`UnaryOp::Gelu`]
    /// (GeGLU), [`UnaryOp::Relu`], [`UnaryOp::Sigmoid`] or
    /// [`UnaryOp::Tanh`]; any other op is VALUE.
    pub activation: UnaryOp,
    /// The result's dtype: `None` for the experts'; `Some(DType::F32)` with
    /// f16 or bf16 experts keeps each expert's output and the gated sum
    /// unrounded. Anything else is TYPE.
    pub out_dtype: Option<DType>,
}

impl Default for ExpertFfnOptions {
    fn default() -> ExpertFfnOptions {
        ExpertFfnOptions { activation: UnaryOp::Silu, out_dtype: None }
    }
}

/// A TiledEvictable carrier (kind [`CarrierKind::Tiled`]) with its tiled
/// surface; it derefs to its [`Carrier`] (dtype, size, version, dispose...).
///
/// Geometry: logical shape `grid_shape * tile_shape` mode by mode; tile `k`
/// (first grid mode fastest) holds its values contiguously, first mode
/// fastest, and the tiers store tiles one after another in that order, so a
/// weights file holding one expert after another is a secondary tier as it
/// is. Both tiers are claimed by the TiledEvictable and disposed with it.
/// Requests from several threads are serialised internally and each commits
/// as a whole or not at all.
#[derive(Clone)]
pub struct TiledEvictable {
    carrier: Carrier,
    policy: Option<Arc<dyn ResidencyPolicy>>,
    shared: Option<Arc<PolicyShared>>,
}

impl Deref for TiledEvictable {
    type Target = Carrier;
    fn deref(&self) -> &Carrier {
        &self.carrier
    }
}

fn shape_of(
    carrier: &Carrier,
    rank: usize,
    get: unsafe extern "C" fn(*const sys::sw_carrier_t, *mut i64, usize) -> *mut sys::sw_error_t,
) -> Result<Vec<i64>> {
    let mut out = vec![0i64; rank];
    call(|| unsafe { get(carrier.as_raw(), out.as_mut_ptr(), rank) })?;
    Ok(out)
}

/// An await handle a C call has written, released unless adopted: a policy
/// panic re-raised after the call returned (by `call` or by `after`) unwinds
/// through it, and the reference would otherwise be lost.
struct PendingAwait(*mut sys::sw_await_t);

impl PendingAwait {
    fn take(&mut self) -> *mut sys::sw_await_t {
        std::mem::replace(&mut self.0, ptr::null_mut())
    }
}

impl Drop for PendingAwait {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the library gave us this reference and nobody adopted it.
            unsafe { sys::sw_await_release(self.0) };
        }
    }
}

impl TiledEvictable {
    /// A TiledEvictable over `primary` (an empty or full-extent compute
    /// carrier: CPU or Vulkan) and `secondary` (an empty or full-extent
    /// storage carrier: host, file, zstd or remote) of one dtype. A full
    /// primary makes every tile primary, a full secondary every tile
    /// secondary, both full primary and dirty, both empty every tile
    /// invalid. TYPE for wrong kinds or dtypes, VALUE for shapes, STATE for
    /// disposed or owned tiers; on failure no tier is claimed.
    pub fn new(
        primary: &Carrier,
        secondary: &Carrier,
        grid_shape: &[i64],
        tile_shape: &[i64],
        policy: impl Into<Policy>,
    ) -> Result<TiledEvictable> {
        if grid_shape.len() != tile_shape.len() {
            return Err(Error::value(format!(
                "TiledEvictable: grid_shape {grid_shape:?} and tile_shape {tile_shape:?} differ in rank"
            )));
        }
        let policy = policy.into();
        let vt = PolicyVtable::new(&policy)?;
        let mut out = ptr::null_mut();
        let made = call(|| unsafe {
            sys::sw_tiled_create(
                primary.as_raw(),
                secondary.as_raw(),
                grid_shape.as_ptr(),
                tile_shape.as_ptr(),
                grid_shape.len(),
                vt.as_ref().map_or(ptr::null(), |v| &v.vtable),
                &mut out,
            )
        });
        if let Err(e) = made {
            if let Some(v) = vt {
                v.abandon();
            }
            return Err(e);
        }
        Ok(TiledEvictable {
            carrier: unsafe { Carrier::from_raw(out) },
            policy: match policy {
                Policy::Custom(p) => Some(p),
                _ => None,
            },
            shared: vt.and_then(|v| v.shared),
        })
    }

    /// The TiledEvictable behind `carrier` (a gradient's or a scatter
    /// result's carrier, say); TYPE for another kind.
    pub fn from_carrier(carrier: Carrier) -> Result<TiledEvictable> {
        match carrier.kind()? {
            CarrierKind::Tiled => Ok(TiledEvictable { carrier, policy: None, shared: None }),
            other => Err(Error::type_(format!("expected a TiledEvictable carrier, got a {other:?} carrier"))),
        }
    }

    /// The TiledEvictable carrying `tensor`; TYPE for another kind.
    pub fn of(tensor: &Tensor) -> Result<TiledEvictable> {
        TiledEvictable::from_carrier(tensor.carrier()?)
    }

    /// The carrier.
    pub fn carrier(&self) -> &Carrier {
        &self.carrier
    }

    /// The Rust policy it was created with, if any (`None` for the LRU
    /// policy, no policy, or a wrapper made by [`from_carrier`](Self::from_carrier)).
    pub fn policy(&self) -> Option<&Arc<dyn ResidencyPolicy>> {
        self.policy.as_ref()
    }

    /// Whether a residency policy was given at creation.
    pub fn has_policy(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_tiled_has_policy(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    fn after(&self) {
        if let Some(s) = &self.shared {
            s.rethrow();
        }
    }

    fn adopt<T: crate::awaits::AwaitOutput>(&self, raw: *mut sys::sw_await_t) -> Await<T> {
        Await::adopt(raw, self.shared.clone())
    }

    /// The full logical tensor: the dense layout of the logical shape at offset 0.
    pub fn full_tensor(&self) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tiled_full_tensor(self.as_raw(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// The number of modes.
    pub fn rank(&self) -> Result<usize> {
        let mut n = 0;
        call(|| unsafe { sys::sw_tiled_rank(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// Tiles per mode.
    pub fn grid_shape(&self) -> Result<Vec<i64>> {
        shape_of(&self.carrier, self.rank()?, sys::sw_tiled_grid_shape)
    }

    /// Elements per tile, per mode.
    pub fn tile_shape(&self) -> Result<Vec<i64>> {
        shape_of(&self.carrier, self.rank()?, sys::sw_tiled_tile_shape)
    }

    /// The logical shape, `grid_shape * tile_shape` mode by mode.
    pub fn logical_shape(&self) -> Result<Vec<i64>> {
        Ok(self.grid_shape()?.iter().zip(self.tile_shape()?).map(|(g, t)| g * t).collect())
    }

    /// The primary tier.
    pub fn primary(&self) -> Result<Carrier> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tiled_primary(self.as_raw(), &mut out) })?;
        Ok(unsafe { Carrier::from_raw(out) })
    }

    /// The secondary tier.
    pub fn secondary(&self) -> Result<Carrier> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tiled_secondary(self.as_raw(), &mut out) })?;
        Ok(unsafe { Carrier::from_raw(out) })
    }

    /// One tile's residency metadata.
    pub fn tile_state(&self, coord: &[i64]) -> Result<TileState> {
        let mut s = sys::sw_tile_state_t::default();
        unsafe { sys::sw_tile_state_init(&mut s) };
        call(|| unsafe { sys::sw_tiled_tile_state(self.as_raw(), coord.as_ptr(), coord.len(), &mut s) })?;
        use sys::sw_tile_location_t as L;
        let location = match s.location {
            L::SW_TILE_PRIMARY => TileLocation::Primary,
            L::SW_TILE_SECONDARY => TileLocation::Secondary,
            L::SW_TILE_IMPLICIT => TileLocation::Implicit,
            L::SW_TILE_INVALID => TileLocation::Invalid,
            other => TileLocation::Other(other.0),
        };
        Ok(TileState { location, valid: s.valid, dirty: s.dirty })
    }

    /// The tiles of one kind.
    pub fn tiles(&self, kind: TileSetKind) -> Result<TileSet> {
        use sys::sw_tile_set_kind_t as K;
        let k = match kind {
            TileSetKind::Primary => K::SW_TILES_PRIMARY,
            TileSetKind::Secondary => K::SW_TILES_SECONDARY,
            TileSetKind::Valid => K::SW_TILES_VALID,
            TileSetKind::Dirty => K::SW_TILES_DIRTY,
        };
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tiled_tiles(self.as_raw(), k, &mut out) })?;
        Ok(unsafe { TileSet::from_raw(out) })
    }

    /// Primary-resident tiles.
    pub fn primary_tiles(&self) -> Result<TileSet> {
        self.tiles(TileSetKind::Primary)
    }

    /// Tiles in the secondary tier only.
    pub fn secondary_tiles(&self) -> Result<TileSet> {
        self.tiles(TileSetKind::Secondary)
    }

    /// Valid tiles.
    pub fn valid_tiles(&self) -> Result<TileSet> {
        self.tiles(TileSetKind::Valid)
    }

    /// Dirty tiles.
    pub fn dirty_tiles(&self) -> Result<TileSet> {
        self.tiles(TileSetKind::Dirty)
    }

    fn residency(
        &self,
        tiles: &dyn Tiles,
        start: unsafe extern "C" fn(
            *mut sys::sw_carrier_t,
            *const sys::sw_tile_set_t,
            *mut *mut sys::sw_await_t,
        ) -> *mut sys::sw_error_t,
    ) -> Result<AwaitResidency> {
        let set = tiles.to_tile_set()?;
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe { start(self.as_raw(), set.as_raw(), &mut out.0) });
        self.after();
        r?;
        Ok(self.adopt(out.take()))
    }

    /// Starts making every tile valid on primary; no autograd node. VALUE
    /// for a rank or range mismatch, STATE for a disposed carrier, an
    /// invalid tile, or a tile covered by another incomplete residency
    /// request. Commits atomically; idempotent.
    pub fn promote_async(&self, tiles: &impl Tiles) -> Result<AwaitResidency> {
        self.residency(tiles, sys::sw_tiled_promote_async)
    }

    /// `promote_async` for tiles expected to be needed soon (the next
    /// layer's predicted experts): the same request and errors, but its
    /// reads from a file tier yield to those of requests something waits
    /// for (`sw_tiled_prefetch_async`).
    pub fn prefetch_async(&self, tiles: &impl Tiles) -> Result<AwaitResidency> {
        self.residency(tiles, sys::sw_tiled_prefetch_async)
    }

    /// Starts evicting the tiles: dirty values are written to the secondary
    /// tier first, and work that still needs a tile is waited for. Errors
    /// as for promote, and STATE for a dirty tile with a read-only secondary.
    pub fn evict_async(&self, tiles: &impl Tiles) -> Result<AwaitResidency> {
        self.residency(tiles, sys::sw_tiled_evict_async)
    }

    /// `promote_async(tiles)?.wait()`.
    pub fn promote(&self, tiles: &impl Tiles) -> Result<()> {
        let set = tiles.to_tile_set()?;
        let r = call(|| unsafe { sys::sw_tiled_promote(self.as_raw(), set.as_raw()) });
        self.after();
        r
    }

    /// `evict_async(tiles)?.wait()`.
    pub fn evict(&self, tiles: &impl Tiles) -> Result<()> {
        let set = tiles.to_tile_set()?;
        let r = call(|| unsafe { sys::sw_tiled_evict(self.as_raw(), set.as_raw()) });
        self.after();
        r
    }

    /// Starts gathering the selected tiles of the full tensor `tensor`
    /// (backed by this carrier, tile-footprint compatible) into a compact
    /// dense tensor of shape `compact_grid_shape * tile_shape`, tiles in
    /// selection order. `destination`: `None` for a fresh carrier of the
    /// primary tier's kind, else an empty or large enough, live, mutable
    /// one. Differentiable: with grad mode on and `tensor` requiring grad
    /// the result records one gather node. Errors before any work: TYPE
    /// (another carrier's tensor, wrong destination kind or dtype), VALUE
    /// (selection rank or range, destination too small, footprints), STATE
    /// (disposed, conflicting residency request, invalid tile).
    pub fn project(
        &self,
        tensor: &Tensor,
        selection: &TileSelection,
        destination: Option<&Carrier>,
    ) -> Result<AwaitProjection> {
        let dest = destination.map_or(ptr::null_mut(), |d| d.as_raw());
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe {
            sys::sw_tiled_project(self.as_raw(), tensor.as_raw(), selection.as_raw(), dest, &mut out.0)
        });
        self.after();
        r?;
        Ok(self.adopt(out.take()))
    }

    /// Starts the expert-indexed matmul (`sw_tiled_expert_matmul`), the
    /// mixture-of-experts primitive, on this TiledEvictable of one expert
    /// per tile: grid (1, 1, E), tile (K, N, 1), tile `e` holding expert
    /// `e`'s (K, N) matrix W_e first mode fastest (a row-major (E, N, K)
    /// weights file, one `nn.Linear(K, N)` per expert, as it lies).
    /// `experts` is its [`full_tensor`](Self::full_tensor); `ids` a CPU
    /// (T, k) i32 or i64 tensor naming token t's j-th expert; `x` a CPU
    /// tensor of the experts' dtype, (T, K) shared by a token's choices or
    /// (T, k, K) one row per choice. The await's result is a CPU tensor:
    /// without `gates`, (T, k, N) with `y[t, j, :] = x[t, (j,) :] @ W_{ids[t, j]}`;
    /// with `gates` (a CPU float (T, k) tensor), (T, N), the gate-weighted
    /// sum over j. Products (and the gated sum) accumulate in f32 (f64 for
    /// f64) and are rounded once to `out_dtype`: `None` for the experts'
    /// dtype, `Some(DType::F32)` for the f32 sums of f16/bf16 experts.
    ///
    /// It is a projection: the policy is consulted with the experts used
    /// (purpose PROJECTION), missing experts are read from the secondary
    /// tier while resident ones compute on their tile memory in place, and
    /// the used experts stay pinned until the commit (evictions wait,
    /// disposal is STATE). Differentiable in `experts`, `x` and `gates`.
    /// Errors before any work, with no state changed: TYPE (non-CPU or
    /// wrong-dtype x, ids, gates or `out_dtype`; experts not of this
    /// carrier), VALUE (geometry, a view instead of the full tensor,
    /// shapes), INDEX (an id outside [0, E), naming token and slot),
    /// UNSUPPORTED (a non-CPU primary tier), STATE (disposed, an expert
    /// owned by a residency request, an invalid expert tile).
    ///
    /// ```
    /// use strideweave::{Carrier, DType, Policy, Runtime, Tensor, TiledEvictable};
    ///
    /// # fn main() -> strideweave::Result<()> {
    /// let rt = Runtime::new()?;
    /// // Two experts of K = 2 inputs, N = 1 output: W_0 = [1, 2], W_1 = [3, 4].
    /// let file = Carrier::host(&rt, DType::F32, 4)?;
    /// file.write(0, &[1f32, 2., 3., 4.])?;
    /// let cpu = Carrier::cpu(&rt, DType::F32, 0)?;
    /// let experts = TiledEvictable::new(&cpu, &file, &[1, 1, 2], &[2, 1, 1], Policy::None)?;
    /// let w = experts.full_tensor()?;
    /// let x = Tensor::from_slice(&rt, &[1, 2], &[1f32, 10.])?; // one token
    /// let ids = Tensor::from_slice(&rt, &[1, 2], &[1i32, 0])?; // routed to experts 1 and 0
    /// let each = experts.expert_matmul(&w, &x, &ids, None, None)?.wait()?;
    /// assert_eq!(each.to_vec::<f32>()?, vec![43., 21.]); // (1, 2, 1)
    /// let gates = Tensor::from_slice(&rt, &[1, 2], &[0.5f32, 0.25])?;
    /// let mixed = experts.expert_matmul(&w, &x, &ids, Some(&gates), None)?.wait()?;
    /// assert_eq!(mixed.to_vec::<f32>()?, vec![26.75]); // (1, 1)
    /// # Ok(())
    /// # }
    /// ```
    pub fn expert_matmul(
        &self,
        experts: &Tensor,
        x: &Tensor,
        ids: &Tensor,
        gates: Option<&Tensor>,
        out_dtype: Option<DType>,
    ) -> Result<AwaitProjection> {
        let mut desc = sys::sw_matmul_desc_t::default();
        unsafe { sys::sw_matmul_desc_init(&mut desc) };
        if let Some(d) = out_dtype {
            desc.out_dtype = d.to_raw();
        }
        let gates = gates.map_or(ptr::null_mut(), |g| g.as_raw());
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe {
            sys::sw_tiled_expert_matmul(
                self.as_raw(),
                experts.as_raw(),
                x.as_raw(),
                ids.as_raw(),
                gates,
                &desc,
                &mut out.0,
            )
        });
        self.after();
        r?;
        Ok(self.adopt(out.take()))
    }

    /// Starts the gated expert feed-forward (`sw_tiled_expert_ffn`), a
    /// mixture-of-experts layer's experts in one call: for token t's j-th
    /// choice e = ids[t, j],
    /// `a = x[t] @ Gate_e`, `b = x[t] @ Up_e`, `h = act(a) * b`, `Y[t, j] = h @ Down_e`
    /// (Mixtral's `w2(silu(w1 x) * w3 x)`: gate is w1, up w3, down w2).
    /// `gate`, `up` and `down` are each a TiledEvictable of one expert per
    /// tile with its [`full_tensor`](Self::full_tensor): gate and up grid
    /// (1, 1, E) and tile (H, F, 1), down grid (1, 1, E) and tile (F, H, 1)
    /// (a row-major (E, F, H) gate or up file and (E, H, F) down file as
    /// they lie), all of one float dtype with a CPU primary tier. `x` is a
    /// CPU tensor of the experts' dtype, (T, H) shared by a token's choices
    /// or (T, k, H) one row per choice; `ids` a CPU (T, k) i32 or i64
    /// tensor. The await's result is a CPU tensor: without `gates`, Y
    /// (T, k, H); with `gates` (a CPU float (T, k) tensor), (T, H), the sum
    /// over j of `gates[t, j] * Y[t, j]`. Values are rounded where the
    /// unfused layer rounds them (three [`expert_matmul`](Self::expert_matmul)
    /// calls, the activation's [`UnaryOp`] and `sw_binary` MUL): a, b,
    /// act(a) and h to the experts' dtype, each Y[t, j] to the result's
    /// dtype, and the gated sum (in f32, f64 for f64 experts, over j in
    /// order) once. `options`: the activation ([`UnaryOp::Silu`] by
    /// default) and the result's dtype, see [`ExpertFfnOptions`].
    ///
    /// It is a projection on each of the three, as
    /// [`expert_matmul`](Self::expert_matmul) is on one: each policy is
    /// consulted with the experts used (purpose PROJECTION), each one's used
    /// experts stay pinned until its request commits (evictions wait,
    /// disposing it is STATE); the three requests commit together, once all
    /// three did their work, or none does (a failed call changes nothing),
    /// and the await completes only once all three are terminal; and
    /// each expert's products run on its tile memory in
    /// place as soon as its inputs are there (a missing expert's gate, up
    /// and down tiles are read in that order, each product starting as its
    /// tile lands). When every expert used is resident in all three and no
    /// plan moves anything, the call computes on the calling thread and its
    /// await is already done on return. With grad mode on and an experts
    /// tensor, `x` or `gates` requiring grad, the call computes the unfused
    /// layer itself (blocking) and records its nodes. Errors before any
    /// work, with no state changed: TYPE (non-CPU or wrong-dtype x, ids,
    /// gates or `out_dtype`; experts of different dtypes; an experts tensor
    /// not of its TiledEvictable), VALUE (geometry, naming the
    /// TiledEvictable at fault; a view instead of the full tensor; shapes;
    /// an activation outside the five), INDEX (an id outside [0, E), naming
    /// token and slot), UNSUPPORTED (a non-CPU primary tier), STATE
    /// (disposed, an expert owned by a residency request, an invalid
    /// expert tile).
    ///
    /// ```
    /// use strideweave::{Carrier, DType, ExpertFfnOptions, Policy, Runtime, Tensor, TiledEvictable, UnaryOp};
    ///
    /// # fn main() -> strideweave::Result<()> {
    /// let rt = Runtime::new()?;
    /// // Two experts, H = 2, F = 1: tile e of gate and up is expert e's (2, 1)
    /// // matrix, tile e of down its (1, 2) matrix.
    /// let tiled = |values: &[f32], tile: &[i64]| -> strideweave::Result<(TiledEvictable, Tensor)> {
    ///     let file = Carrier::host(&rt, DType::F32, values.len())?;
    ///     file.write(0, values)?;
    ///     let cpu = Carrier::cpu(&rt, DType::F32, 0)?;
    ///     let te = TiledEvictable::new(&cpu, &file, &[1, 1, 2], tile, Policy::None)?;
    ///     let full = te.full_tensor()?;
    ///     Ok((te, full))
    /// };
    /// let (gate, gate_w) = tiled(&[1., 2., -1., 1.], &[2, 1, 1])?;
    /// let (up, up_w) = tiled(&[1., 1., 2., 0.], &[2, 1, 1])?;
    /// let (down, down_w) = tiled(&[1., -1., 2., 3.], &[1, 2, 1])?;
    /// let x = Tensor::from_slice(&rt, &[1, 2], &[1f32, 10.])?; // one token
    /// let ids = Tensor::from_slice(&rt, &[1, 2], &[1i32, 0])?; // routed to experts 1 and 0
    /// let relu = ExpertFfnOptions { activation: UnaryOp::Relu, ..Default::default() };
    /// let (g, u, d) = ((&gate, &gate_w), (&up, &up_w), (&down, &down_w));
    /// let each = TiledEvictable::expert_ffn(g, u, d, &x, &ids, None, &relu)?.wait()?;
    /// // Expert 1: a = 9, b = 2, h = 18, Y = [36, 54]; expert 0: a = 21, b = 11, h = 231, Y = [231, -231].
    /// assert_eq!(each.shape()?, vec![1, 2, 2]); // (T, k, H)
    /// assert_eq!(each.to_vec::<f32>()?, vec![36., 231., 54., -231.]);
    /// let gates = Tensor::from_slice(&rt, &[1, 2], &[0.5f32, 0.25])?;
    /// let mixed = TiledEvictable::expert_ffn(g, u, d, &x, &ids, Some(&gates), &relu)?.wait()?;
    /// assert_eq!(mixed.to_vec::<f32>()?, vec![75.75, -30.75]); // (T, H)
    /// # Ok(())
    /// # }
    /// ```
    pub fn expert_ffn(
        gate: (&TiledEvictable, &Tensor),
        up: (&TiledEvictable, &Tensor),
        down: (&TiledEvictable, &Tensor),
        x: &Tensor,
        ids: &Tensor,
        gates: Option<&Tensor>,
        options: &ExpertFfnOptions,
    ) -> Result<AwaitProjection> {
        Self::expert_ffn_of(gate, Some(up), down, x, ids, gates, options)
    }

    /// [`expert_ffn`](Self::expert_ffn) in the fused form of Hugging Face
    /// transformers 5 (`sw_tiled_expert_ffn` with `up` and `up_experts`
    /// NULL): `gate_up` is one TiledEvictable of grid (1, 1, E) and tile
    /// (H, 2F, 1) with its full tensor (`gate_up_proj`, torch shape
    /// (E, 2F, H), as it lies), whose expert e holds Gate_e in its first F
    /// output features and Up_e in the next F (`gate, up = (x @
    /// gate_up_proj[e].T).chunk(2, dim=-1)`); `down` is as for
    /// [`expert_ffn`](Self::expert_ffn) (`down_proj`, (E, H, F)). Both
    /// products are computed on the halves of the one gate_up tile in place,
    /// equal bit for bit to [`expert_ffn`](Self::expert_ffn) over the two
    /// halves as separate TiledEvictables, and the call is two requests
    /// (gate_up, then down) instead of three; everything else is as there.
    /// A second tile extent that is odd is VALUE.
    ///
    /// ```
    /// use strideweave::{Carrier, DType, ExpertFfnOptions, Policy, Runtime, Tensor, TiledEvictable, UnaryOp};
    ///
    /// # fn main() -> strideweave::Result<()> {
    /// let rt = Runtime::new()?;
    /// let tiled = |values: &[f32], tile: &[i64]| -> strideweave::Result<(TiledEvictable, Tensor)> {
    ///     let file = Carrier::host(&rt, DType::F32, values.len())?;
    ///     file.write(0, values)?;
    ///     let cpu = Carrier::cpu(&rt, DType::F32, 0)?;
    ///     let te = TiledEvictable::new(&cpu, &file, &[1, 1, 2], tile, Policy::None)?;
    ///     let full = te.full_tensor()?;
    ///     Ok((te, full))
    /// };
    /// // expert_ffn's example with its gate and up stacked: tile e is expert
    /// // e's (2, 1) gate matrix, then its (2, 1) up matrix.
    /// let (gate_up, gate_up_w) = tiled(&[1., 2., 1., 1., -1., 1., 2., 0.], &[2, 2, 1])?;
    /// let (down, down_w) = tiled(&[1., -1., 2., 3.], &[1, 2, 1])?;
    /// let x = Tensor::from_slice(&rt, &[1, 2], &[1f32, 10.])?;
    /// let ids = Tensor::from_slice(&rt, &[1, 2], &[1i32, 0])?;
    /// let relu = ExpertFfnOptions { activation: UnaryOp::Relu, ..Default::default() };
    /// let (gu, d) = ((&gate_up, &gate_up_w), (&down, &down_w));
    /// let each = TiledEvictable::expert_ffn_fused(gu, d, &x, &ids, None, &relu)?.wait()?;
    /// assert_eq!(each.to_vec::<f32>()?, vec![36., 231., 54., -231.]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn expert_ffn_fused(
        gate_up: (&TiledEvictable, &Tensor),
        down: (&TiledEvictable, &Tensor),
        x: &Tensor,
        ids: &Tensor,
        gates: Option<&Tensor>,
        options: &ExpertFfnOptions,
    ) -> Result<AwaitProjection> {
        Self::expert_ffn_of(gate_up, None, down, x, ids, gates, options)
    }

    /// `sw_tiled_expert_ffn`, with up NULL (the fused form) when `up` is None.
    fn expert_ffn_of(
        gate: (&TiledEvictable, &Tensor),
        up: Option<(&TiledEvictable, &Tensor)>,
        down: (&TiledEvictable, &Tensor),
        x: &Tensor,
        ids: &Tensor,
        gates: Option<&Tensor>,
        options: &ExpertFfnOptions,
    ) -> Result<AwaitProjection> {
        let mut desc = sys::sw_expert_ffn_desc_t::default();
        unsafe { sys::sw_expert_ffn_desc_init(&mut desc) };
        desc.activation = options.activation.to_raw();
        if let Some(d) = options.out_dtype {
            desc.out_dtype = d.to_raw();
        }
        let g = gates.map_or(ptr::null_mut(), |g| g.as_raw());
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe {
            sys::sw_tiled_expert_ffn(
                gate.0.as_raw(),
                gate.1.as_raw(),
                up.map_or(ptr::null_mut(), |u| u.0.as_raw()),
                up.map_or(ptr::null_mut(), |u| u.1.as_raw()),
                down.0.as_raw(),
                down.1.as_raw(),
                x.as_raw(),
                ids.as_raw(),
                g,
                &desc,
                &mut out.0,
            )
        });
        let carriers: Vec<&TiledEvictable> =
            [Some(gate.0), up.map(|u| u.0), Some(down.0)].into_iter().flatten().collect();
        for te in &carriers {
            te.after();
        }
        r?;
        // The await re-raises a panic of any of their policies.
        let mut policies: Vec<Arc<PolicyShared>> = Vec::new();
        for s in carriers.iter().filter_map(|te| te.shared.as_ref()) {
            if !policies.iter().any(|p| Arc::ptr_eq(p, s)) {
                policies.push(s.clone());
            }
        }
        Ok(Await::adopt_policies(out.take(), policies))
    }

    /// Starts writing `compact` (a tensor of the primary tier's kind, the
    /// selected region's shape and the dtype) at the selected tiles of a
    /// fresh TiledEvictable with `template`'s geometry and tier kinds; the
    /// await's result is its full tensor. Replace takes compact's values,
    /// Add adds them to the template's. The selected tiles commit together
    /// valid and dirty with one version step; the others are invalid.
    /// Neither input changes. Differentiable.
    pub fn scatter(
        &self,
        compact: &Tensor,
        template: &Tensor,
        selection: &TileSelection,
        reduction: Reduction,
    ) -> Result<AwaitMove> {
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe {
            sys::sw_tiled_scatter(
                self.as_raw(),
                compact.as_raw(),
                template.as_raw(),
                selection.as_raw(),
                reduction.to_raw(),
                &mut out.0,
            )
        });
        self.after();
        r?;
        Ok(self.adopt(out.take()))
    }

    /// Starts writing `compact` into the selected tiles of this carrier
    /// itself (Replace stores, Add adds: an optimiser step). A public write
    /// of the full tensor `tensor`: one version step; the tiles become
    /// primary, valid and dirty. STATE while a selected tile is in use by
    /// pending work or covered by a residency request. No autograd.
    pub fn update_async(
        &self,
        tensor: &Tensor,
        compact: &Tensor,
        selection: &TileSelection,
        reduction: Reduction,
    ) -> Result<AwaitUpdate> {
        let mut out = PendingAwait(ptr::null_mut());
        let r = call(|| unsafe {
            sys::sw_tiled_update_async(
                self.as_raw(),
                tensor.as_raw(),
                compact.as_raw(),
                selection.as_raw(),
                reduction.to_raw(),
                &mut out.0,
            )
        });
        self.after();
        r?;
        Ok(self.adopt(out.take()))
    }
}

impl std::fmt::Debug for TiledEvictable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiledEvictable")
            .field("grid_shape", &self.grid_shape().ok())
            .field("tile_shape", &self.tile_shape().ok())
            .field("dtype", &self.dtype().ok())
            .finish()
    }
}
