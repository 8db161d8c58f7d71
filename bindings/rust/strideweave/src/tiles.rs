//! Tile values: [`TileSet`], [`TileSelection`], [`ResidencyPlan`].
use std::fmt;
use std::ptr;

use strideweave_sys as sys;

use crate::error::{Error, Result};
use crate::ffi::{call, handle};

handle!(
    /// An immutable finite set of full-rank tile coordinates, ordered first
    /// coordinate fastest (sorted by reversed tuple). Need not be a
    /// Cartesian product: `{(0,0), (0,1), (1,0)}` is a valid cache set.
    TileSet,
    sys::sw_tile_set_t,
    sw_tile_set_retain,
    sw_tile_set_release
);
handle!(
    /// An immutable ordered Cartesian product of per-axis tile coordinates,
    /// enumerated first mode fastest: the tiles one projection or scatter
    /// gathers into, or writes from, one compact tensor.
    TileSelection,
    sys::sw_tile_selection_t,
    sw_tile_selection_retain,
    sw_tile_selection_release
);
handle!(
    /// One immutable residency decision: three disjoint tile sets to
    /// promote, retain and evict.
    ResidencyPlan,
    sys::sw_residency_plan_t,
    sw_residency_plan_retain,
    sw_residency_plan_release
);

// SAFETY (all three): the header: "Immutable, thread-safe values", and
// reference counting is thread-safe for every handle.
unsafe impl Send for TileSet {}
// SAFETY: see above.
unsafe impl Sync for TileSet {}
// SAFETY: see above.
unsafe impl Send for TileSelection {}
// SAFETY: see above.
unsafe impl Sync for TileSelection {}
// SAFETY: see above.
unsafe impl Send for ResidencyPlan {}
// SAFETY: see above.
unsafe impl Sync for ResidencyPlan {}

impl TileSet {
    /// A set of coordinates given in any order: VALUE for mixed ranks, a
    /// negative entry or a duplicate.
    pub fn new<C: AsRef<[i64]>>(coordinates: impl IntoIterator<Item = C>) -> Result<TileSet> {
        let mut flat = Vec::new();
        let mut rank = None;
        let mut count = 0usize;
        for c in coordinates {
            let c = c.as_ref();
            match rank {
                None => rank = Some(c.len()),
                Some(r) if r != c.len() => {
                    return Err(Error::value(format!("TileSet: coordinates of ranks {r} and {} mixed", c.len())))
                }
                _ => {}
            }
            flat.extend_from_slice(c);
            count += 1;
        }
        let rank = rank.unwrap_or(0);
        if count > 0 && rank == 0 {
            return Err(Error::value("TileSet: a coordinate has no entries"));
        }
        let mut out = ptr::null_mut();
        let p = if flat.is_empty() { ptr::null() } else { flat.as_ptr() };
        call(|| unsafe { sys::sw_tile_set_create(p, count, rank, &mut out) })?;
        Ok(unsafe { TileSet::from_raw(out) })
    }

    /// The empty, rank-agnostic set.
    pub fn empty() -> TileSet {
        TileSet::new(std::iter::empty::<[i64; 0]>()).expect("the empty tile set")
    }

    /// The number of coordinates.
    pub fn len(&self) -> usize {
        let mut n = 0;
        call(|| unsafe { sys::sw_tile_set_count(self.as_raw(), &mut n) }).map(|_| n).unwrap_or(0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rank of its coordinates (0 for the empty set).
    pub fn rank(&self) -> usize {
        let mut n = 0;
        call(|| unsafe { sys::sw_tile_set_rank(self.as_raw(), &mut n) }).map(|_| n).unwrap_or(0)
    }

    /// Every coordinate, in the set's order (first coordinate fastest).
    pub fn coordinates(&self) -> Vec<Vec<i64>> {
        let (count, rank) = (self.len(), self.rank());
        let mut flat = vec![0i64; count * rank];
        if count > 0
            && call(|| unsafe { sys::sw_tile_set_coordinates(self.as_raw(), flat.as_mut_ptr(), flat.len()) }).is_err()
        {
            return Vec::new();
        }
        flat.chunks(rank.max(1)).take(count).map(|c| c.to_vec()).collect()
    }

    /// Whether `coord` is in the set.
    pub fn contains(&self, coord: &[i64]) -> bool {
        self.coordinates().iter().any(|c| c == coord)
    }
}

impl PartialEq for TileSet {
    fn eq(&self, other: &TileSet) -> bool {
        let mut b = false;
        call(|| unsafe { sys::sw_tile_set_equal(self.as_raw(), other.as_raw(), &mut b) }).is_ok() && b
    }
}
impl Eq for TileSet {}

impl fmt::Debug for TileSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TileSet({:?})", self.coordinates())
    }
}

impl TileSelection {
    /// `per_axis[i]` holds axis i's coordinates in the caller's order.
    /// VALUE for no axes, more than `SW_MAX_RANK`, an empty axis, a
    /// duplicate within an axis or a negative coordinate.
    pub fn new<A: AsRef<[i64]>>(per_axis: impl IntoIterator<Item = A>) -> Result<TileSelection> {
        let axes: Vec<Vec<i64>> = per_axis.into_iter().map(|a| a.as_ref().to_vec()).collect();
        let pointers: Vec<*const i64> = axes.iter().map(|a| a.as_ptr()).collect();
        let counts: Vec<usize> = axes.iter().map(|a| a.len()).collect();
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tile_selection_create(pointers.as_ptr(), counts.as_ptr(), axes.len(), &mut out) })?;
        Ok(unsafe { TileSelection::from_raw(out) })
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        let mut n = 0;
        call(|| unsafe { sys::sw_tile_selection_rank(self.as_raw(), &mut n) }).map(|_| n).unwrap_or(0)
    }

    /// The selected count per axis.
    pub fn compact_grid_shape(&self) -> Vec<i64> {
        let rank = self.rank();
        let mut out = vec![0i64; rank];
        let _ = call(|| unsafe { sys::sw_tile_selection_compact_grid_shape(self.as_raw(), out.as_mut_ptr(), rank) });
        out
    }

    /// The coordinates of each axis, in the caller's order.
    pub fn per_axis(&self) -> Vec<Vec<i64>> {
        self.compact_grid_shape()
            .iter()
            .enumerate()
            .map(|(axis, &n)| {
                let mut out = vec![0i64; n as usize];
                let _ =
                    call(|| unsafe { sys::sw_tile_selection_axis(self.as_raw(), axis, out.as_mut_ptr(), out.len()) });
                out
            })
            .collect()
    }

    /// The number of selected tiles (the product of the per-axis counts).
    pub fn len(&self) -> usize {
        let mut n = 0;
        call(|| unsafe { sys::sw_tile_selection_count(self.as_raw(), &mut n) }).map(|_| n).unwrap_or(0)
    }

    /// Never true: every axis holds at least one coordinate.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every selected source coordinate, first mode fastest: compact tile
    /// `c` is source tile `(per_axis[i][c[i]])`.
    pub fn coordinates(&self) -> Vec<Vec<i64>> {
        let (count, rank) = (self.len(), self.rank());
        let mut flat = vec![0i64; count * rank];
        let _ = call(|| unsafe { sys::sw_tile_selection_coordinates(self.as_raw(), flat.as_mut_ptr(), flat.len()) });
        flat.chunks(rank.max(1)).take(count).map(|c| c.to_vec()).collect()
    }

    /// The selected tiles as a [`TileSet`].
    pub fn tile_set(&self) -> Result<TileSet> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_tile_selection_tile_set(self.as_raw(), &mut out) })?;
        Ok(unsafe { TileSet::from_raw(out) })
    }
}

impl PartialEq for TileSelection {
    fn eq(&self, other: &TileSelection) -> bool {
        let mut b = false;
        call(|| unsafe { sys::sw_tile_selection_equal(self.as_raw(), other.as_raw(), &mut b) }).is_ok() && b
    }
}
impl Eq for TileSelection {}

impl fmt::Debug for TileSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TileSelection({:?})", self.per_axis())
    }
}

/// What residency requests take: a [`TileSet`], or a [`TileSelection`] as
/// its tile set.
pub trait Tiles {
    /// The tiles as a set.
    fn to_tile_set(&self) -> Result<TileSet>;
}

impl Tiles for TileSet {
    fn to_tile_set(&self) -> Result<TileSet> {
        Ok(self.clone())
    }
}

impl Tiles for TileSelection {
    fn to_tile_set(&self) -> Result<TileSet> {
        self.tile_set()
    }
}

impl ResidencyPlan {
    /// A plan; `None` fields are empty sets. VALUE if a tile occurs in two
    /// fields or the fields disagree on rank.
    pub fn new(promote: Option<&TileSet>, retain: Option<&TileSet>, evict: Option<&TileSet>) -> Result<ResidencyPlan> {
        let raw = |s: Option<&TileSet>| s.map_or(ptr::null(), |s| s.as_raw() as *const _);
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_residency_plan_create(raw(promote), raw(retain), raw(evict), &mut out) })?;
        Ok(unsafe { ResidencyPlan::from_raw(out) })
    }

    /// A plan promoting `tiles` and nothing else.
    pub fn promote_only(tiles: &TileSet) -> Result<ResidencyPlan> {
        ResidencyPlan::new(Some(tiles), None, None)
    }

    fn field(
        &self,
        get: unsafe extern "C" fn(
            *const sys::sw_residency_plan_t,
            *mut *mut sys::sw_tile_set_t,
        ) -> *mut sys::sw_error_t,
    ) -> TileSet {
        let mut out = ptr::null_mut();
        match call(|| unsafe { get(self.as_raw(), &mut out) }) {
            Ok(()) => unsafe { TileSet::from_raw(out) },
            Err(_) => TileSet::empty(),
        }
    }

    /// The tiles to make primary before the request consumes them.
    pub fn promote(&self) -> TileSet {
        self.field(sys::sw_residency_plan_promote)
    }

    /// The tiles to keep primary until the request is terminal.
    pub fn retain(&self) -> TileSet {
        self.field(sys::sw_residency_plan_retain_set)
    }

    /// The tiles to evict once no work needs them.
    pub fn evict(&self) -> TileSet {
        self.field(sys::sw_residency_plan_evict)
    }
}

impl PartialEq for ResidencyPlan {
    fn eq(&self, other: &ResidencyPlan) -> bool {
        self.promote() == other.promote() && self.retain() == other.retain() && self.evict() == other.evict()
    }
}
impl Eq for ResidencyPlan {}

impl fmt::Debug for ResidencyPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResidencyPlan")
            .field("promote", &self.promote())
            .field("retain", &self.retain())
            .field("evict", &self.evict())
            .finish()
    }
}
