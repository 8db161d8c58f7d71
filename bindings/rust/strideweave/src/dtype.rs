//! Element types: [`DType`] and the Rust types that hold them ([`Element`]).
use std::fmt;

use strideweave_sys as sys;

use crate::error::{static_str, Error, Result};

/// A tensor's element type (`sw_dtype_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half precision, 16 bits ([`F16Bits`], or `half::f16` with the
    /// `half` feature).
    F16,
    /// bfloat16, 16 bits ([`BF16Bits`], or `half::bf16` with the `half`
    /// feature).
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean, one byte holding 0 or 1.
    Bool,
    /// GGUF Q8_0 blocks: 32 elements in 34 bytes along the first mode.
    Q8_0,
    /// GGUF Q4_0 blocks: 32 elements in 18 bytes.
    Q4_0,
    /// GGUF Q4_K blocks: 256 elements in 144 bytes.
    Q4K,
    /// GGUF Q6_K blocks: 256 elements in 210 bytes.
    Q6K,
    /// GGUF MXFP4 blocks: 32 elements in 17 bytes.
    Mxfp4,
}

impl DType {
    /// The C value.
    pub fn to_raw(self) -> sys::sw_dtype_t {
        use sys::sw_dtype_t as C;
        match self {
            DType::F32 => C::SW_DTYPE_F32,
            DType::F64 => C::SW_DTYPE_F64,
            DType::F16 => C::SW_DTYPE_F16,
            DType::BF16 => C::SW_DTYPE_BF16,
            DType::I32 => C::SW_DTYPE_I32,
            DType::I64 => C::SW_DTYPE_I64,
            DType::U8 => C::SW_DTYPE_U8,
            DType::Bool => C::SW_DTYPE_BOOL,
            DType::Q8_0 => C::SW_DTYPE_Q8_0,
            DType::Q4_0 => C::SW_DTYPE_Q4_0,
            DType::Q4K => C::SW_DTYPE_Q4_K,
            DType::Q6K => C::SW_DTYPE_Q6_K,
            DType::Mxfp4 => C::SW_DTYPE_MXFP4,
        }
    }

    /// The dtype of a C value; TYPE for one this crate does not know.
    pub fn from_raw(raw: sys::sw_dtype_t) -> Result<DType> {
        use sys::sw_dtype_t as C;
        Ok(match raw {
            C::SW_DTYPE_F32 => DType::F32,
            C::SW_DTYPE_F64 => DType::F64,
            C::SW_DTYPE_F16 => DType::F16,
            C::SW_DTYPE_BF16 => DType::BF16,
            C::SW_DTYPE_I32 => DType::I32,
            C::SW_DTYPE_I64 => DType::I64,
            C::SW_DTYPE_U8 => DType::U8,
            C::SW_DTYPE_BOOL => DType::Bool,
            C::SW_DTYPE_Q8_0 => DType::Q8_0,
            C::SW_DTYPE_Q4_0 => DType::Q4_0,
            C::SW_DTYPE_Q4_K => DType::Q4K,
            C::SW_DTYPE_Q6_K => DType::Q6K,
            C::SW_DTYPE_MXFP4 => DType::Mxfp4,
            other => return Err(Error::type_(format!("unknown dtype number {}", other.0))),
        })
    }

    /// Bytes per element; 0 for a block-quantized dtype, whose elements
    /// share their block's bytes ([`DType::block`]).
    pub fn size(self) -> usize {
        // SAFETY: a pure function of its argument.
        unsafe { sys::sw_dtype_size(self.to_raw()) }
    }

    /// Elements and bytes of one storage unit: a quantized dtype's block,
    /// (1, size) for the others.
    pub fn block(self) -> (usize, usize) {
        // SAFETY: pure functions of their argument.
        unsafe { (sys::sw_dtype_block_elements(self.to_raw()), sys::sw_dtype_block_bytes(self.to_raw())) }
    }

    /// The library's name: "f32", "bf16", ..., "q8_0", "mxfp4".
    pub fn name(self) -> &'static str {
        // SAFETY: returns static storage.
        unsafe { static_str(sys::sw_dtype_name(self.to_raw())) }
    }

    /// Whether the dtype is a floating-point one (autograd takes these).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bits of an f16 value, for reading and writing f16 tensors without
/// the `half` crate.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16Bits(pub u16);

/// The bits of a bfloat16 value (the upper half of an f32's bits), for
/// reading and writing bf16 tensors without the `half` crate.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BF16Bits(pub u16);

impl BF16Bits {
    /// `value` rounded to the nearest bfloat16 (ties to even).
    pub fn from_f32(value: f32) -> BF16Bits {
        let bits = value.to_bits();
        BF16Bits((bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16)
    }

    /// The f32 this bfloat16 stands for, exactly.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values are the elements of one [`DType`], bit for bit:
/// `f32`, `f64`, `i32`, `i64`, `u8`, `bool`, [`F16Bits`], [`BF16Bits`] (and
/// `half::f16`, `half::bf16` with the `half` feature). Reads and writes
/// check the tensor's or carrier's dtype against `DTYPE` (TYPE otherwise).
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The dtype this type holds.
    const DTYPE: DType;

    /// Fills `out` through `read`, which copies `out.len()` elements as
    /// raw bytes to the pointer it is given.
    #[doc(hidden)]
    fn read_into(out: &mut [Self], read: impl FnOnce(*mut u8, usize) -> Result<()>) -> Result<()> {
        read(out.as_mut_ptr().cast(), std::mem::size_of_val(out))
    }
}

macro_rules! element {
    ($t:ty, $d:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    };
}
element!(f32, F32);
element!(f64, F64);
element!(i32, I32);
element!(i64, I64);
element!(u8, U8);
element!(F16Bits, F16);
element!(BF16Bits, BF16);
#[cfg(feature = "half")]
element!(half::f16, F16);
#[cfg(feature = "half")]
element!(half::bf16, BF16);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;

    // A Rust bool must be 0 or 1: the bytes are read as u8 and compared.
    fn read_into(out: &mut [bool], read: impl FnOnce(*mut u8, usize) -> Result<()>) -> Result<()> {
        let mut bytes = vec![0u8; out.len()];
        read(bytes.as_mut_ptr(), bytes.len())?;
        for (o, b) in out.iter_mut().zip(bytes) {
            *o = b != 0;
        }
        Ok(())
    }
}

/// TYPE unless `T` holds `dtype`.
pub(crate) fn check_element<T: Element>(dtype: DType, what: &str) -> Result<()> {
    if T::DTYPE == dtype {
        Ok(())
    } else {
        Err(Error::type_(format!("{what} holds {dtype}, not {} ({})", T::DTYPE, std::any::type_name::<T>())))
    }
}
