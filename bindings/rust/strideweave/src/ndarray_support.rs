//! Tensors to and from `ndarray` arrays (feature `ndarray`), respecting
//! StrideWeave's first-mode-fastest order: element `[i, j]` of the array is
//! element `(i, j)` of the tensor, never a silent transposition. Copies are
//! column-major (`.f()`) arrays; [`Tensor::ndarray_view`] is a zero-copy
//! view of a CPU tensor with its own strides.
use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};

use crate::carrier::CarrierKind;
use crate::dtype::{check_element, Element};
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::Runtime;
use crate::tensor::Tensor;

fn usize_shape(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&e| e as usize).collect()
}

impl Tensor {
    /// A dense CPU tensor holding a copy of `array`, whatever its memory
    /// order: `tensor.get([i, j]) == array[[i, j]]`.
    pub fn from_ndarray<T: Element, S: ndarray::Data<Elem = T>, D: ndarray::Dimension>(
        runtime: &Runtime,
        array: &ndarray::ArrayBase<S, D>,
    ) -> Result<Tensor> {
        let shape: Vec<i64> = array.shape().iter().map(|&e| e as i64).collect();
        // Reversing the axes makes logical (row-major) iteration walk the
        // original first mode fastest.
        let view = array.view().reversed_axes();
        match view.as_slice() {
            Some(values) => Tensor::from_slice(runtime, &shape, values),
            None => {
                let values: Vec<T> = view.iter().copied().collect();
                Tensor::from_slice(runtime, &shape, &values)
            }
        }
    }

    /// A copy of every element as a column-major array of the tensor's shape.
    pub fn to_ndarray<T: Element + Default>(&self) -> Result<ArrayD<T>> {
        let shape = usize_shape(&self.shape()?);
        let values = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(&shape).f(), values).map_err(|e| Error::value(e.to_string()))
    }

    /// A zero-copy view of a CPU tensor whose modes each walk one
    /// arithmetic progression with nonnegative strides, with those strides
    /// (no transposition: `[i, j]` is element `(i, j)`). UNSUPPORTED for
    /// other carriers or layouts; TYPE unless `T` is the dtype.
    ///
    /// # Safety
    /// The view reads the carrier's memory directly (`host_pointer`): while
    /// it lives, the carrier must not be disposed (no `dispose`, no move out
    /// of it) nor written (no `write`, `set`, moves into it, or ops writing
    /// it), on any thread.
    pub unsafe fn ndarray_view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        check_element::<T>(self.dtype()?, "the tensor")?;
        let carrier = self.carrier()?;
        if carrier.kind()? != CarrierKind::Cpu {
            return Err(Error::new(ErrorCode::Unsupported, "ndarray_view needs a tensor on a CPU carrier"));
        }
        let strides = self.layout()?.mode_strides()?;
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::new(ErrorCode::Unsupported, "ndarray_view: negative strides"));
        }
        let shape = usize_shape(&self.shape()?);
        let base = carrier.host_pointer()? as *const T;
        let strides: Vec<usize> = strides.iter().map(|&s| s as usize).collect();
        // SAFETY: the tensor's reachable slots lie inside the carrier
        // (sw_tensor_create checks it), the strides are the layout's, and
        // the caller keeps the memory alive and unwritten.
        Ok(unsafe {
            ArrayViewD::from_shape_ptr(IxDyn(&shape).strides(IxDyn(&strides)), base.add(self.offset()? as usize))
        })
    }
}
