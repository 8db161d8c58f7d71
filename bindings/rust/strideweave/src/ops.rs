//! Operations. Each C op is one entry of an enum ([`UnaryOp`], [`BinaryOp`])
//! mapped to its C function (or, for a unary op without a function of its
//! own, its `sw_unary_op_t`) in one `match`: adding a C op with the same
//! signature is a variant, its arm, and (optionally) a named method.
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
use crate::error::Result;
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

/// Ops of two tensors (`sw_<op>(a, b, &out)`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b, broadcasting.
    Add,
    /// a * b elementwise, broadcasting.
    ElementwiseMul,
    /// `mul(tensor, tensor)`: elementwise_mul.
    Mul,
    /// NumPy matmul: (..., M, K) @ (..., K, N), batch modes broadcast.
    Matmul,
}

impl BinaryOp {
    fn function(self) -> BinaryFn {
        match self {
            BinaryOp::Add => sys::sw_add,
            BinaryOp::ElementwiseMul => sys::sw_elementwise_mul,
            BinaryOp::Mul => sys::sw_mul,
            BinaryOp::Matmul => sys::sw_matmul,
        }
    }
}

/// Ops of a tensor and a weak scalar that takes the tensor's dtype.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarOp {
    /// tensor * scalar (`sw_mul_scalar`).
    Mul,
}

impl ScalarOp {
    fn function(self) -> ScalarFn {
        match self {
            ScalarOp::Mul => sys::sw_mul_scalar,
        }
    }
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
        result(|out| unsafe { (op.function())(self.as_raw(), other.as_raw(), out) })
    }

    /// Applies a tensor-scalar op.
    pub fn scalar(&self, op: ScalarOp, scalar: f64) -> Result<Tensor> {
        result(|out| unsafe { (op.function())(self.as_raw(), scalar, out) })
    }

    /// self + other.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Add, other)
    }

    /// self * other, elementwise.
    pub fn elementwise_mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::ElementwiseMul, other)
    }

    /// `mul(self, other)`: elementwise_mul of two tensors.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, other)
    }

    /// self * scalar, the scalar taking the tensor's dtype.
    pub fn mul_scalar(&self, scalar: f64) -> Result<Tensor> {
        self.scalar(ScalarOp::Mul, scalar)
    }

    /// scalar * self (`sw_scalar_mul`: the scalar on the left).
    pub fn scalar_mul(scalar: f64, tensor: &Tensor) -> Result<Tensor> {
        result(|out| unsafe { sys::sw_scalar_mul(scalar, tensor.as_raw(), out) })
    }

    /// max(self, 0).
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Relu)
    }

    /// self * sigmoid(self), elementwise.
    pub fn silu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Silu)
    }

    /// self * Phi(self), elementwise: the exact (erf) GELU.
    pub fn gelu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Gelu)
    }

    /// 1 / (1 + e^-self), elementwise.
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sigmoid)
    }

    /// tanh(self), elementwise.
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Tanh)
    }

    /// self @ other, NumPy style; the result has the operands' dtype.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Matmul, other)
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
