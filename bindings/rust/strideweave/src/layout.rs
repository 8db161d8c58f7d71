//! Layouts: CuTe-style (shape, stride) trees, first mode fastest.
use std::ffi::CString;
use std::fmt;
use std::ptr;

use strideweave_sys as sys;

use crate::error::{Error, Result};
use crate::ffi::{call, handle};

handle!(
    /// A layout: congruent (shape, stride) trees; index(coord) is the sum
    /// over leaves of coordinate times stride, a nested mode's coordinate
    /// decoded first mode fastest into its leaves. Written as text:
    /// `"(4,(2,2)):(1,(4,8))"`. Immutable.
    Layout,
    sys::sw_layout_t,
    sw_layout_retain,
    sw_layout_release
);

// SAFETY: the header: "Layouts are immutable and fully thread-safe."
unsafe impl Send for Layout {}
// SAFETY: as above.
unsafe impl Sync for Layout {}

impl Layout {
    /// A flat layout with one leaf mode per entry; extents >= 0, strides
    /// any value (negative allowed). An empty shape is a scalar.
    pub fn new(shape: &[i64], stride: &[i64]) -> Result<Layout> {
        if shape.len() != stride.len() {
            return Err(Error::value(format!(
                "Layout::new: shape has {} modes and stride {}",
                shape.len(),
                stride.len()
            )));
        }
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_layout_create(shape.as_ptr(), stride.as_ptr(), shape.len(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// The dense first-mode-fastest layout: stride i is the product of the
    /// extents before i (`dense(&[4, 4])` has strides `(1, 4)`).
    pub fn dense(extents: &[i64]) -> Result<Layout> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_layout_dense(extents.as_ptr(), extents.len(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// Parses `"shape:stride"` text such as `"(4,(2,2)):(1,(4,8))"` or
    /// `"8:1"`; VALUE naming the position otherwise.
    pub fn parse(text: &str) -> Result<Layout> {
        let text = CString::new(text).map_err(|_| Error::value("Layout::parse: text holds a NUL byte"))?;
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_layout_parse(text.as_ptr(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// A layout whose mode i is `modes[i]` (the single mode of a rank-1
    /// layout, else the tuple of its modes): how nested layouts are built.
    pub fn group(modes: &[&Layout]) -> Result<Layout> {
        let raw: Vec<*const sys::sw_layout_t> = modes.iter().map(|m| m.as_raw() as *const _).collect();
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_layout_group(raw.as_ptr(), raw.len(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// The layout whose mode i is mode `perm[i]` of this one.
    pub fn permute(&self, perm: &[usize]) -> Result<Layout> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_layout_permute(self.as_raw(), perm.as_ptr(), perm.len(), &mut out) })?;
        Ok(unsafe { Layout::from_raw(out) })
    }

    /// The number of top-level modes.
    pub fn rank(&self) -> Result<usize> {
        let mut n = 0;
        call(|| unsafe { sys::sw_layout_rank(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The extent of each top-level mode (the shape).
    pub fn extents(&self) -> Result<Vec<i64>> {
        let rank = self.rank()?;
        let mut out = vec![0i64; rank];
        call(|| unsafe { sys::sw_layout_extents(self.as_raw(), out.as_mut_ptr(), rank) })?;
        Ok(out)
    }

    /// The number of coordinates.
    pub fn size(&self) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_layout_size(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// One past the largest index reached (0 for an empty layout).
    pub fn cosize(&self) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_layout_cosize(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// Whether distinct coordinates reach distinct indices.
    pub fn is_injective(&self) -> Result<bool> {
        let mut b = false;
        call(|| unsafe { sys::sw_layout_is_injective(self.as_raw(), &mut b) })?;
        Ok(b)
    }

    /// index(coord): one coordinate per top-level mode, or one per leaf.
    pub fn index(&self, coord: &[i64]) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_layout_index(self.as_raw(), coord.as_ptr(), coord.len(), &mut n) })?;
        Ok(n)
    }

    /// The first-mode-fastest ordinal of a per-mode coordinate.
    pub fn encode(&self, coord: &[i64]) -> Result<i64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_layout_encode(self.as_raw(), coord.as_ptr(), coord.len(), &mut n) })?;
        Ok(n)
    }

    /// The per-mode coordinate of a first-mode-fastest ordinal.
    pub fn decode(&self, ordinal: i64) -> Result<Vec<i64>> {
        let rank = self.rank()?;
        let mut out = vec![0i64; rank];
        call(|| unsafe { sys::sw_layout_decode(self.as_raw(), ordinal, out.as_mut_ptr(), rank) })?;
        Ok(out)
    }

    /// The per-mode element strides when every top-level mode walks one
    /// arithmetic progression (every flat layout does; a nested mode may);
    /// UNSUPPORTED naming the mode otherwise. A mode of extent 0 or 1 has
    /// stride 0 here.
    pub fn mode_strides(&self) -> Result<Vec<i64>> {
        let extents = self.extents()?;
        let mut coord = vec![0i64; extents.len()];
        let base = self.index(&coord)?;
        let mut strides = Vec::with_capacity(extents.len());
        for (m, &n) in extents.iter().enumerate() {
            let mut stride = 0;
            for k in 1..n {
                coord[m] = k;
                let step = self.index(&coord)? - base;
                if k == 1 {
                    stride = step;
                } else if step != stride * k {
                    return Err(Error::new(
                        crate::ErrorCode::Unsupported,
                        format!("mode {m} of layout {self} is not one arithmetic progression"),
                    ));
                }
            }
            coord[m] = 0;
            strides.push(stride);
        }
        Ok(strides)
    }
}

impl PartialEq for Layout {
    fn eq(&self, other: &Layout) -> bool {
        let mut b = false;
        call(|| unsafe { sys::sw_layout_equal(self.as_raw(), other.as_raw(), &mut b) }).is_ok() && b
    }
}
impl Eq for Layout {}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut len = 0usize;
        // Learns the length; with no buffer the call may fail VALUE, having
        // written the length all the same.
        let _ = call(|| unsafe { sys::sw_layout_to_string(self.as_raw(), ptr::null_mut(), 0, &mut len) });
        let mut buf = vec![0u8; len + 1];
        if call(|| unsafe { sys::sw_layout_to_string(self.as_raw(), buf.as_mut_ptr().cast(), buf.len(), &mut len) })
            .is_err()
        {
            return f.write_str("<layout>");
        }
        buf.truncate(len);
        f.write_str(&String::from_utf8_lossy(&buf))
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Layout({self})")
    }
}
