//! Operations. Each C op is one entry of an enum ([`UnaryOp`], [`BinaryOp`],
//! [`ScalarOp`], [`ReduceOp`]) mapped to its C function (or, for an op
//! without a function of its own, its `sw_unary_op_t`, `sw_binary_op_t` or
//! `sw_reduce_op_t`) in one `match`: adding a C op with the same signature
//! is a variant, its arm, and (optionally) a named method. The ops of
//! their own shape (softmax, topk, the index ops, cat, stack, where) are
//! methods of [`Tensor`].
//!
//! Mixed dtypes promote as PyTorch does (bool < integer < floating, the
//! wider type within a category); f16 and bf16 compute in f32 and round
//! once.
//!
//! Results are fresh dense tensors on the compute carrier kind of the
//! inputs; elementwise ops broadcast NumPy style; with grad mode on and an
//! input requiring grad, the result records one autograd node. A tensor of
//! a TiledEvictable is accepted by every op here as its full logical value,
//! except the unary ops reached through `sw_unary` (all but relu), which
//! fail UNSUPPORTED on one: project the tiles first.
use std::ptr;

use strideweave_sys as sys;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::tensor::Tensor;

type UnaryFn = unsafe extern "C" fn(*mut sys::sw_tensor_t, *mut *mut sys::sw_tensor_t) -> *mut sys::sw_error_t;
type BinaryFn = unsafe extern "C" fn(
    *mut sys::sw_tensor_t,
    *mut sys::sw_tensor_t,
    *mut *mut sys::sw_tensor_t,
) -> *mut sys::sw_error_t;
type ScalarFn = unsafe extern "C" fn(*mut sys::sw_tensor_t, f64, *mut *mut sys::sw_tensor_t) -> *mut sys::sw_error_t;

/// Ops of one tensor: `sw_<op>(a, &out)` where the op has a function of
/// its own, else `sw_unary(op, a, &out)`. Floating results of integer and
/// bool inputs are f32; f16 and bf16 are computed in f32 and rounded once.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// max(a, 0), elementwise (`sw_relu`).
    Relu,
    /// -a (`SW_UNARY_NEG`).
    Neg,
    /// |a| (`SW_UNARY_ABS`).
    Abs,
    /// e^a (`SW_UNARY_EXP`).
    Exp,
    /// The natural logarithm (`SW_UNARY_LOG`).
    Log,
    /// The square root (`SW_UNARY_SQRT`).
    Sqrt,
    /// 1 / sqrt(a) (`SW_UNARY_RSQRT`).
    Rsqrt,
    /// a * sigmoid(a) (`SW_UNARY_SILU`).
    Silu,
    /// a * Phi(a), the exact (erf) form: PyTorch's `approximate='none'` (`SW_UNARY_GELU`).
    Gelu,
    /// 1 / (1 + e^-a) (`SW_UNARY_SIGMOID`).
    Sigmoid,
    /// tanh(a) (`SW_UNARY_TANH`).
    Tanh,
}

impl UnaryOp {
    /// The op's `sw_unary_op_t`.
    pub(crate) fn to_raw(self) -> sys::sw_unary_op_t {
        use sys::sw_unary_op_t as U;
        match self {
            UnaryOp::Relu => U::SW_UNARY_RELU,
            UnaryOp::Neg => U::SW_UNARY_NEG,
            UnaryOp::Abs => U::SW_UNARY_ABS,
            UnaryOp::Exp => U::SW_UNARY_EXP,
            UnaryOp::Log => U::SW_UNARY_LOG,
            UnaryOp::Sqrt => U::SW_UNARY_SQRT,
            UnaryOp::Rsqrt => U::SW_UNARY_RSQRT,
            UnaryOp::Silu => U::SW_UNARY_SILU,
            UnaryOp::Gelu => U::SW_UNARY_GELU,
            UnaryOp::Sigmoid => U::SW_UNARY_SIGMOID,
            UnaryOp::Tanh => U::SW_UNARY_TANH,
        }
    }

    /// The op's own C function, if it has one (`sw_unary` otherwise).
    fn function(self) -> Option<UnaryFn> {
        match self {
            UnaryOp::Relu => Some(sys::sw_relu),
            _ => None,
        }
    }
}

/// Ops of two tensors: `sw_<op>(a, b, &out)` where the op has a function of
/// its own, else `sw_binary(op, a, b, &out)`. Elementwise ones broadcast
/// NumPy style; comparisons give bool.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b, broadcasting (bool + bool is or).
    Add,
    /// a * b elementwise, broadcasting.
    ElementwiseMul,
    /// `mul(tensor, tensor)`: elementwise_mul.
    Mul,
    /// NumPy matmul: (..., M, K) @ (..., K, N), batch modes broadcast.
    Matmul,
    /// a - b (`SW_BINARY_SUB`; TYPE for two bools).
    Sub,
    /// True division (`SW_BINARY_DIV`): integer and bool operands give f32.
    Div,
    /// a ^ b (`SW_BINARY_POW`; integers exact).
    Pow,
    /// The larger, NaN if either is (`SW_BINARY_MAXIMUM`).
    Maximum,
    /// The smaller, NaN if either is (`SW_BINARY_MINIMUM`).
    Minimum,
    /// a == b (`SW_BINARY_EQ`; NaN is unequal to everything).
    Eq,
    /// a != b (`SW_BINARY_NE`).
    Ne,
    /// a < b (`SW_BINARY_LT`).
    Lt,
    /// a <= b (`SW_BINARY_LE`).
    Le,
    /// a > b (`SW_BINARY_GT`).
    Gt,
    /// a >= b (`SW_BINARY_GE`).
    Ge,
}

impl BinaryOp {
    /// The op's `sw_binary_op_t`, if it has one (all but `Matmul`).
    pub(crate) fn to_raw(self) -> Option<sys::sw_binary_op_t> {
        use sys::sw_binary_op_t as B;
        Some(match self {
            BinaryOp::Add => B::SW_BINARY_ADD,
            BinaryOp::ElementwiseMul | BinaryOp::Mul => B::SW_BINARY_MUL,
            BinaryOp::Matmul => return None,
            BinaryOp::Sub => B::SW_BINARY_SUB,
            BinaryOp::Div => B::SW_BINARY_DIV,
            BinaryOp::Pow => B::SW_BINARY_POW,
            BinaryOp::Maximum => B::SW_BINARY_MAXIMUM,
            BinaryOp::Minimum => B::SW_BINARY_MINIMUM,
            BinaryOp::Eq => B::SW_BINARY_EQ,
            BinaryOp::Ne => B::SW_BINARY_NE,
            BinaryOp::Lt => B::SW_BINARY_LT,
            BinaryOp::Le => B::SW_BINARY_LE,
            BinaryOp::Gt => B::SW_BINARY_GT,
            BinaryOp::Ge => B::SW_BINARY_GE,
        })
    }

    /// The op's own C function, if it has one (`sw_binary` otherwise).
    fn function(self) -> Option<BinaryFn> {
        match self {
            BinaryOp::Add => Some(sys::sw_add),
            BinaryOp::ElementwiseMul => Some(sys::sw_elementwise_mul),
            BinaryOp::Mul => Some(sys::sw_mul),
            BinaryOp::Matmul => Some(sys::sw_matmul),
            _ => None,
        }
    }
}

/// Ops of a tensor and a weak scalar that takes the tensor's dtype (as a
/// Python number does in PyTorch: f16 + 0.1 stays f16; VALUE when it cannot,
/// such as 2.5 for an integer tensor): `sw_mul_scalar` for `Mul`, else
/// `sw_binary_scalar(op, ...)`; [`Tensor::scalar_left`] puts the scalar on
/// the left (`sw_scalar_binary`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarOp {
    /// tensor * scalar (`sw_mul_scalar`).
    Mul,
    /// tensor + scalar.
    Add,
    /// tensor - scalar.
    Sub,
    /// tensor / scalar (an integer or bool tensor computes in f32).
    Div,
    /// tensor ^ scalar.
    Pow,
    /// max(tensor, scalar).
    Maximum,
    /// min(tensor, scalar).
    Minimum,
    /// tensor == scalar, bool.
    Eq,
    /// tensor != scalar, bool.
    Ne,
    /// tensor < scalar, bool.
    Lt,
    /// tensor <= scalar, bool.
    Le,
    /// tensor > scalar, bool.
    Gt,
    /// tensor >= scalar, bool.
    Ge,
}

impl ScalarOp {
    /// The op's `sw_binary_op_t`.
    pub(crate) fn to_raw(self) -> sys::sw_binary_op_t {
        use sys::sw_binary_op_t as B;
        match self {
            ScalarOp::Mul => B::SW_BINARY_MUL,
            ScalarOp::Add => B::SW_BINARY_ADD,
            ScalarOp::Sub => B::SW_BINARY_SUB,
            ScalarOp::Div => B::SW_BINARY_DIV,
            ScalarOp::Pow => B::SW_BINARY_POW,
            ScalarOp::Maximum => B::SW_BINARY_MAXIMUM,
            ScalarOp::Minimum => B::SW_BINARY_MINIMUM,
            ScalarOp::Eq => B::SW_BINARY_EQ,
            ScalarOp::Ne => B::SW_BINARY_NE,
            ScalarOp::Lt => B::SW_BINARY_LT,
            ScalarOp::Le => B::SW_BINARY_LE,
            ScalarOp::Gt => B::SW_BINARY_GT,
            ScalarOp::Ge => B::SW_BINARY_GE,
        }
    }

    /// The op's own C function, if it has one (`sw_binary_scalar` otherwise).
    fn function(self) -> Option<ScalarFn> {
        match self {
            ScalarOp::Mul => Some(sys::sw_mul_scalar),
            _ => None,
        }
    }
}

/// Reductions (`sw_reduce_op_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum (integer and bool sums are i64).
    Sum,
    /// The mean (floating dtypes only: TYPE otherwise).
    Mean,
    /// The maximum (NaN if any is).
    Max,
    /// The minimum (NaN if any is).
    Min,
}

impl ReduceOp {
    fn to_raw(self) -> sys::sw_reduce_op_t {
        use sys::sw_reduce_op_t as R;
        match self {
            ReduceOp::Sum => R::SW_REDUCE_SUM,
            ReduceOp::Mean => R::SW_REDUCE_MEAN,
            ReduceOp::Max => R::SW_REDUCE_MAX,
            ReduceOp::Min => R::SW_REDUCE_MIN,
        }
    }
}

fn pair(
    f: impl FnOnce(*mut *mut sys::sw_tensor_t, *mut *mut sys::sw_tensor_t) -> *mut sys::sw_error_t,
) -> Result<(Tensor, Tensor)> {
    let (mut a, mut b) = (ptr::null_mut(), ptr::null_mut());
    call(|| f(&mut a, &mut b))?;
    // SAFETY: on success the op wrote two new tensor references.
    Ok(unsafe { (Tensor::from_raw(a), Tensor::from_raw(b)) })
}

fn result(f: impl FnOnce(*mut *mut sys::sw_tensor_t) -> *mut sys::sw_error_t) -> Result<Tensor> {
    let mut out = ptr::null_mut();
    call(|| f(&mut out))?;
    // SAFETY: on success the op wrote a new tensor reference.
    Ok(unsafe { Tensor::from_raw(out) })
}

impl Tensor {
    /// Applies a one-tensor op.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        match op.function() {
            Some(f) => result(|out| unsafe { f(self.as_raw(), out) }),
            None => result(|out| unsafe { sys::sw_unary(op.to_raw(), self.as_raw(), out) }),
        }
    }

    /// Applies a two-tensor op.
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        match (op.function(), op.to_raw()) {
            (Some(f), _) => result(|out| unsafe { f(self.as_raw(), other.as_raw(), out) }),
            (None, Some(raw)) => result(|out| unsafe { sys::sw_binary(raw, self.as_raw(), other.as_raw(), out) }),
            (None, None) => unreachable!("every binary op has a function or an sw_binary_op_t"),
        }
    }

    /// Applies a tensor-scalar op (`self op scalar`).
    pub fn scalar(&self, op: ScalarOp, scalar: f64) -> Result<Tensor> {
        match op.function() {
            Some(f) => result(|out| unsafe { f(self.as_raw(), scalar, out) }),
            None => result(|out| unsafe { sys::sw_binary_scalar(op.to_raw(), self.as_raw(), scalar, out) }),
        }
    }

    /// `scalar op tensor`, the weak scalar on the left (`sw_scalar_binary`).
    pub fn scalar_left(op: ScalarOp, scalar: f64, tensor: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_scalar_binary(op.to_raw(), scalar, tensor.as_raw(), out) })
    }

    /// `self op= other` in place (`sw_binary_inplace`): `other` broadcast to
    /// this shape (VALUE otherwise), the result converted to this dtype (TYPE
    /// when its category is higher: an i32 tensor += an f32 one); one version
    /// step. VALUE for `Matmul`, which has no in-place form.
    pub fn binary_inplace(&self, op: BinaryOp, other: &Tensor) -> Result<()> {
        let raw = op.to_raw().ok_or_else(|| Error::value(format!("{op:?} has no in-place form")))?;
        self.carrier()?.serialised(|| call(|| unsafe { sys::sw_binary_inplace(raw, self.as_raw(), other.as_raw()) }))
    }

    /// `self op= scalar` in place (`sw_binary_scalar_inplace`); one version step.
    pub fn scalar_inplace(&self, op: ScalarOp, scalar: f64) -> Result<()> {
        self.carrier()?
            .serialised(|| call(|| unsafe { sys::sw_binary_scalar_inplace(op.to_raw(), self.as_raw(), scalar) }))
    }

    /// `condition ? a : b` elementwise, the three broadcast together
    /// (`sw_where`); TYPE unless `condition` is bool.
    pub fn where_(condition: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_where(condition.as_raw(), a.as_raw(), b.as_raw(), out) })
    }

    /// Reduces over `axes` (`sw_reduce`; an empty `axes` reduces every
    /// axis; negative counts from the end; duplicates VALUE, out of range
    /// INDEX). With `keepdims` the reduced modes stay with extent 1.
    pub fn reduce(&self, op: ReduceOp, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        let p = if axes.is_empty() { ptr::null() } else { axes.as_ptr() };
        result(|out| unsafe { sys::sw_reduce(op.to_raw(), self.as_raw(), p, axes.len(), keepdims, out) })
    }

    /// The mean over `axes` (every axis when empty); floating dtypes only.
    pub fn mean(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, axes, keepdims)
    }

    /// The max ([`ReduceOp::Max`]) or min ([`ReduceOp::Min`]; VALUE for the
    /// others) along `axis` and the i64 index of the first element reaching
    /// it (`sw_reduce_index`), as (values, indices).
    pub fn reduce_index(&self, op: ReduceOp, axis: i64, keepdims: bool) -> Result<(Tensor, Tensor)> {
        pair(|values, indices| unsafe {
            sys::sw_reduce_index(op.to_raw(), self.as_raw(), axis, keepdims, values, indices)
        })
    }

    /// The i64 index of the first maximum along `axis`.
    pub fn argmax(&self, axis: i64) -> Result<Tensor> {
        Ok(self.reduce_index(ReduceOp::Max, axis, false)?.1)
    }

    /// `exp(a - max) / sum(exp(a - max))` along `axis` (`sw_softmax`);
    /// floating dtypes only (TYPE).
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_softmax(self.as_raw(), axis, out) })
    }

    /// The logarithm of [`softmax`](Self::softmax), computed as
    /// `(a - max) - log(sum(exp(a - max)))` (`sw_log_softmax`).
    pub fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_log_softmax(self.as_raw(), axis, out) })
    }

    /// The `k` largest values along `axis`, sorted descending (ties by the
    /// lower index, NaN the largest), and their i64 indices (`sw_topk`), as
    /// (values, indices). VALUE for `k` outside `[0, extent]`; TYPE for bool.
    pub fn topk(&self, k: i64, axis: i64) -> Result<(Tensor, Tensor)> {
        pair(|values, indices| unsafe { sys::sw_topk(self.as_raw(), k, axis, values, indices) })
    }

    /// Rows along `axis` picked by `index`, an i32 or i64 tensor of rank 0
    /// or 1 (`sw_index_select`). INDEX for an index outside `[0, extent)`.
    pub fn index_select(&self, axis: i64, index: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_index_select(self.as_raw(), axis, index.as_raw(), out) })
    }

    /// `out[c] = self[c with c[axis] = index[c]]` (`sw_gather`); the result
    /// has index's shape.
    pub fn gather(&self, axis: i64, index: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_gather(self.as_raw(), axis, index.as_raw(), out) })
    }

    /// A copy with `source`'s rows added at the rows `index` picks
    /// (`sw_index_add`); repeated indices accumulate.
    pub fn index_add(&self, axis: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_index_add(self.as_raw(), axis, index.as_raw(), source.as_raw(), out) })
    }

    /// A copy with `source[c]` added at `c` with `c[axis] = index[c]`
    /// (`sw_scatter_add`); repeated indices accumulate.
    pub fn scatter_add(&self, axis: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_scatter_add(self.as_raw(), axis, index.as_raw(), source.as_raw(), out) })
    }

    /// The tensors joined along an existing `axis` (`sw_cat`: one rank, the
    /// same extents elsewhere), promoted to one dtype. VALUE for none, shapes
    /// that differ or rank-0 tensors.
    pub fn cat(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let raw: Vec<*mut sys::sw_tensor_t> = tensors.iter().map(|t| t.as_raw()).collect();
        result(|out| unsafe { sys::sw_cat(raw.as_ptr(), raw.len(), axis, out) })
    }

    /// The tensors of one shape stacked along a new `axis` (`sw_stack`; axis
    /// in `[-rank - 1, rank]`), promoted to one dtype. VALUE for none or
    /// shapes that differ.
    pub fn stack(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let raw: Vec<*mut sys::sw_tensor_t> = tensors.iter().map(|t| t.as_raw()).collect();
        result(|out| unsafe { sys::sw_stack(raw.as_ptr(), raw.len(), axis, out) })
    }

    /// self * scalar, the scalar taking the tensor's dtype.
    pub fn mul_scalar(&self, scalar: f64) -> Result<Tensor> {
        self.scalar(ScalarOp::Mul, scalar)
    }

    /// scalar * self (`sw_scalar_mul`: the scalar on the left).
    pub fn scalar_mul(scalar: f64, tensor: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_scalar_mul(scalar, tensor.as_raw(), out) })
    }

    /// self @ other with the result in `out_dtype` (`sw_matmul_ex`):
    /// `Some(DType::F32)` with f16 or bf16 operands gives the f32 sums.
    pub fn matmul_ex(&self, other: &Tensor, out_dtype: Option<DType>) -> Result<Tensor> {
        let mut desc = sys::sw_matmul_desc_t::default();
        unsafe { sys::sw_matmul_desc_init(&mut desc) };
        if let Some(d) = out_dtype {
            desc.out_dtype = d.to_raw();
        }
        result(|out| unsafe { sys::sw_matmul_ex(self.as_raw(), other.as_raw(), &desc, out) })
    }

    /// Sums over `axes` (negative counts from the end; duplicates VALUE, out
    /// of range INDEX); an empty `axes` sums every axis. With `keepdims` the
    /// reduced modes stay with extent 1.
    pub fn reduce_sum(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        let p = if axes.is_empty() { ptr::null() } else { axes.as_ptr() };
        result(|out| unsafe { sys::sw_reduce_sum(self.as_raw(), p, axes.len(), keepdims, out) })
    }

    /// The sum of every element (a rank-0 tensor).
    pub fn sum(&self) -> Result<Tensor> {
        self.reduce_sum(&[], false)
    }
}

/// The named methods of the enum ops: `name => Variant` makes
/// `pub fn name(&self[, other]) -> Result<Tensor>` calling
/// [`Tensor::unary`] or [`Tensor::binary`] with that variant, its doc
/// comment given before it.
macro_rules! named_ops {
    (unary: $($(#[$doc:meta])* $name:ident => $op:ident,)*) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(&self) -> Result<Tensor> {
                self.unary(UnaryOp::$op)
            })*
        }
    };
    (binary: $($(#[$doc:meta])* $name:ident => $op:ident,)*) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, other)
            })*
        }
    };
}

named_ops! {
    unary:
        /// -self.
        neg => Neg,
        /// |self|.
        abs => Abs,
        /// e^self.
        exp => Exp,
        /// The natural logarithm.
        log => Log,
        /// The square root.
        sqrt => Sqrt,
        /// 1 / sqrt(self).
        rsqrt => Rsqrt,
        /// max(self, 0).
        relu => Relu,
        /// self * sigmoid(self), elementwise.
        silu => Silu,
        /// self * Phi(self), elementwise: the exact (erf) GELU.
        gelu => Gelu,
        /// 1 / (1 + e^-self), elementwise.
        sigmoid => Sigmoid,
        /// tanh(self), elementwise.
        tanh => Tanh,
}

named_ops! {
    binary:
        /// self - other, broadcasting.
        sub => Sub,
        /// self / other, true division, broadcasting.
        div => Div,
        /// self ^ other, broadcasting.
        pow => Pow,
        /// The elementwise larger of self and other.
        maximum => Maximum,
        /// The elementwise smaller of self and other.
        minimum => Minimum,
        /// self + other.
        add => Add,
        /// self * other, elementwise.
        elementwise_mul => ElementwiseMul,
        /// `mul(self, other)`: elementwise_mul of two tensors.
        mul => Mul,
        /// self @ other, NumPy style; the result has the operands' dtype.
        matmul => Matmul,
}
