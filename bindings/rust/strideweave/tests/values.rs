//! Construction and geometry: layouts, carriers and tensors, values in and
//! out (slices, Vec, every element type), first mode fastest.
mod common;
use common::*;
use strideweave::*;

#[test]
fn dense_layouts_are_first_mode_fastest() {
    let l = Layout::dense(&[4, 4]).unwrap();
    assert_eq!(l.mode_strides().unwrap(), vec![1, 4]);
    assert_eq!(l.extents().unwrap(), vec![4, 4]);
    assert_eq!((l.size().unwrap(), l.cosize().unwrap()), (16, 16));
    assert_eq!(l.index(&[1, 2]).unwrap(), 9);
    assert_eq!(l.encode(&[1, 2]).unwrap(), 9);
    assert_eq!(l.decode(9).unwrap(), vec![1, 2]);
    assert_eq!(l, Layout::new(&[4, 4], &[1, 4]).unwrap());
    assert_eq!(l.to_string(), "(4,4):(1,4)");
}

#[test]
fn nested_layouts_parse_group_and_permute() {
    let l = Layout::parse("(4,(2,2)):(1,(4,8))").unwrap();
    assert_eq!(l.rank().unwrap(), 2);
    assert_eq!(l.extents().unwrap(), vec![4, 4]);
    assert_eq!(l.index(&[1, 3]).unwrap(), 1 + 4 + 8);
    assert!(l.is_injective().unwrap());
    let inner = Layout::new(&[2, 2], &[4, 8]).unwrap();
    let outer = Layout::new(&[4], &[1]).unwrap();
    assert_eq!(Layout::group(&[&outer, &inner]).unwrap(), l);
    assert_eq!(l.permute(&[1, 0]).unwrap().extents().unwrap(), vec![4, 4]);
    // A nested mode here is one progression (4, 8 = 2 * 4), so it has a stride.
    assert_eq!(l.mode_strides().unwrap(), vec![1, 4]);
    let jumpy = Layout::parse("(4,(2,2)):(1,(4,16))").unwrap();
    expect_code(jumpy.mode_strides(), ErrorCode::Unsupported);
    expect_code(Layout::parse("(4,2):(1)"), ErrorCode::Value);
    expect_code(Layout::new(&[4], &[1, 2]), ErrorCode::Value);
    expect_code(Layout::new(&[-1], &[1]), ErrorCode::Value);
    assert!(!Layout::new(&[4, 2], &[1, 1]).unwrap().is_injective().unwrap());
}

#[test]
fn tensors_over_carriers_read_and_write_first_mode_fastest() {
    let rt = Runtime::new().unwrap();
    let t = Tensor::from_slice(&rt, &[2, 3], &[0f32, 1., 2., 3., 4., 5.]).unwrap();
    assert_eq!(t.shape().unwrap(), vec![2, 3]);
    assert_eq!(t.get(&[1, 2]).unwrap(), 5.0); // i + 2 * j
    assert_eq!(t.get(&[0, 1]).unwrap(), 2.0);
    assert_eq!(t.dtype().unwrap(), DType::F32);
    assert_eq!(t.layout().unwrap(), Layout::dense(&[2, 3]).unwrap());
    let tt = t.transpose(0, 1).unwrap();
    assert_eq!(tt.shape().unwrap(), vec![3, 2]);
    assert_eq!(tt.to_vec::<f32>().unwrap(), vec![0., 2., 4., 1., 3., 5.]);
    let version = t.version().unwrap();
    t.set(&[0, 0], 7.0).unwrap();
    assert_eq!(t.version().unwrap(), version + 1);
    t.write(&[9f32; 6]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![9.0; 6]);
    assert_eq!(t.version().unwrap(), version + 2);
    // Dtype and length are checked before anything is read or written.
    expect_code(t.to_vec::<f64>(), ErrorCode::Type);
    expect_code(t.write(&[1f32; 5]), ErrorCode::Value);
    expect_code(t.get(&[2, 0]), ErrorCode::Index);
    expect_code(Tensor::from_slice(&rt, &[2, 2], &[1f32; 3]), ErrorCode::Value);

    let c = Carrier::cpu(&rt, DType::F64, 8).unwrap();
    assert_eq!((c.kind().unwrap(), c.size().unwrap(), c.dtype().unwrap()), (CarrierKind::Cpu, 8, DType::F64));
    c.write(2, &[1.5f64, 2.5]).unwrap();
    let view = Tensor::new(&c, 2, &Layout::new(&[2], &[1]).unwrap()).unwrap();
    assert_eq!(view.to_vec::<f64>().unwrap(), vec![1.5, 2.5]);
    assert!(view.carrier().unwrap().ptr_eq(&c));
    expect_code(Tensor::new(&c, 7, &Layout::dense(&[2]).unwrap()), ErrorCode::Index);
    expect_code(c.read(7, &mut [0f64; 2]), ErrorCode::Index);
}

#[test]
fn every_element_type_round_trips() {
    let rt = Runtime::new().unwrap();
    fn round<T: Element + Default + PartialEq + std::fmt::Debug>(rt: &Runtime, v: &[T]) {
        let t = Tensor::from_slice(rt, &[v.len() as i64], v).unwrap();
        assert_eq!(t.dtype().unwrap(), T::DTYPE);
        assert_eq!(t.to_vec::<T>().unwrap(), v);
        let c = Carrier::cpu_from(rt, v).unwrap();
        assert_eq!(c.to_vec::<T>(0, v.len()).unwrap(), v);
    }
    round(&rt, &[1.5f32, -2.0]);
    round(&rt, &[1.5f64, -2.0]);
    round(&rt, &[7i32, -3]);
    round(&rt, &[1i64 << 40, -3]);
    round(&rt, &[0u8, 255]);
    round(&rt, &[true, false, true]);
    round(&rt, &[F16Bits(0x3c00), F16Bits(0xc000)]);
    round(&rt, &[BF16Bits::from_f32(1.5), BF16Bits::from_f32(-2.0)]);
    assert_eq!(BF16Bits::from_f32(1.5).to_f32(), 1.5);
    let t = Tensor::from_slice(&rt, &[2], &[F16Bits(0x3c00), F16Bits(0xc000)]).unwrap();
    assert_eq!((t.get(&[0]).unwrap(), t.get(&[1]).unwrap()), (1.0, -2.0));
    expect_code(Tensor::zeros(&rt, DType::I32, &[2]).unwrap().set(&[0], 0.5), ErrorCode::Value);
}

#[cfg(feature = "half")]
#[test]
fn half_types_with_the_half_feature() {
    let rt = Runtime::new().unwrap();
    let v = [half::f16::from_f32(0.5), half::f16::from_f32(-4.0)];
    let t = Tensor::from_slice(&rt, &[2], &v).unwrap();
    assert_eq!(t.dtype().unwrap(), DType::F16);
    assert_eq!(t.to_vec::<half::f16>().unwrap(), v);
    assert_eq!(t.to_vec::<F16Bits>().unwrap()[0].0, v[0].to_bits());
    let b = [half::bf16::from_f32(3.0)];
    let t = Tensor::from_slice(&rt, &[1], &b).unwrap();
    assert_eq!((t.dtype().unwrap(), t.item().unwrap()), (DType::BF16, 3.0));
}

#[cfg(feature = "ndarray")]
#[test]
fn ndarray_copies_and_views_keep_first_mode_fastest_coordinates() {
    use ndarray::{array, ShapeBuilder};
    let rt = Runtime::new().unwrap();
    // A row-major array: element [i, j] goes to tensor element (i, j).
    let a = array![[1f32, 2., 3.], [4., 5., 6.]];
    let t = Tensor::from_ndarray(&rt, &a).unwrap();
    assert_eq!(t.shape().unwrap(), vec![2, 3]);
    for i in 0..2 {
        for j in 0..3 {
            assert_eq!(t.get(&[i as i64, j as i64]).unwrap(), a[[i, j]] as f64);
        }
    }
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1., 4., 2., 5., 3., 6.]);
    let back = t.to_ndarray::<f32>().unwrap();
    assert_eq!(back, a.clone().into_dyn());
    assert!(back.t().is_standard_layout()); // column-major: no transposition of values
                                            // A column-major array and a strided view copy the same way.
    let f = ndarray::Array2::from_shape_vec((2, 3).f(), vec![1f32, 4., 2., 5., 3., 6.]).unwrap();
    assert_eq!(Tensor::from_ndarray(&rt, &f).unwrap().to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    assert_eq!(Tensor::from_ndarray(&rt, &a.t()).unwrap().to_vec::<f32>().unwrap(), vec![1., 2., 3., 4., 5., 6.]);
    // A zero-copy view has the layout's strides: the transpose view of a
    // dense (2, 3) tensor has strides (2, 1).
    let tt = t.transpose(0, 1).unwrap();
    let view = unsafe { tt.ndarray_view::<f32>() }.unwrap();
    assert_eq!(view.shape(), &[3, 2]);
    assert_eq!(view.strides(), &[2, 1]);
    assert_eq!(view[[2, 1]], a[[1, 2]]);
    expect_code(unsafe { tt.ndarray_view::<f64>() }.map(|v| v.len()), ErrorCode::Type);
}

#[test]
fn a_vec_becomes_a_cpu_carrier_without_a_copy_and_is_dropped_with_it() {
    let rt = Runtime::new().unwrap();
    let values = vec![1f32, 2.0, 3.0, 4.0];
    let address = values.as_ptr() as usize;
    let c = Carrier::cpu_from_vec(&rt, values, false).unwrap();
    assert_eq!(c.host_pointer().unwrap() as usize, address); // no copy
    let t = Tensor::new(&c, 0, &Layout::dense(&[2, 2]).unwrap()).unwrap();
    assert_eq!(t.mul_scalar(2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    t.set(&[1, 1], 9.0).unwrap();
    assert_eq!(c.to_vec::<f32>(3, 1).unwrap(), vec![9.0]);
    // Read-only memory refuses public writes.
    let ro = Carrier::cpu_from_vec(&rt, vec![5i32, 6], true).unwrap();
    assert!(ro.is_read_only().unwrap());
    expect_code(ro.write(0, &[1i32]), ErrorCode::State);
    // The carrier drops the Vec when it lets the memory go (dispose here).
    let c = Carrier::cpu_from_vec(&rt, vec![0u8; 8], false).unwrap();
    c.dispose().unwrap();
    expect_code(c.to_vec::<u8>(0, 1), ErrorCode::State);
    drop(c);
}

/// DLPack's structs (third_party/dlpack/include/dlpack/dlpack.h), as a consumer sees them.
#[repr(C)]
struct DLTensor {
    data: *mut std::ffi::c_void,
    device: [i32; 2],
    ndim: i32,
    dtype: [u8; 4],
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut std::ffi::c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}
#[repr(C)]
struct DLManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut std::ffi::c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

fn expect_dl(t: &DLTensor, data: *mut std::ffi::c_void) {
    assert_eq!((t.data, t.ndim, t.byte_offset), (data, 2, 0));
    assert_eq!(t.dtype, [2, 32, 1, 0]); // kDLFloat, 32 bits, 1 lane
                                        // SAFETY: ndim entries each, valid while the export lives.
    let (shape, strides) =
        unsafe { (std::slice::from_raw_parts(t.shape, 2), std::slice::from_raw_parts(t.strides, 2)) };
    assert_eq!((shape, strides), (&[2i64, 3][..], &[1i64, 2][..])); // first mode fastest
}

#[test]
fn a_cpu_tensor_exports_to_dlpack() {
    let rt = Runtime::new().unwrap();
    let t = Tensor::from_slice(&rt, &[2, 3], &[0f32, 1., 2., 3., 4., 5.]).unwrap();
    let data = t.carrier().unwrap().host_pointer().unwrap();
    let m = t.to_dlpack().unwrap() as *mut DLManagedTensor;
    // SAFETY: the library wrote a DLManagedTensor; a consumer calls its deleter once.
    unsafe {
        expect_dl(&(*m).dl_tensor, data);
        ((*m).deleter.unwrap())(m);
    }
    let v = t.to_dlpack_versioned(1, 0).unwrap() as *mut DLManagedTensorVersioned;
    // SAFETY: as above, for the versioned struct.
    unsafe {
        assert_eq!(((*v).version, (*v).flags), ([1, 0], 0));
        expect_dl(&(*v).dl_tensor, data);
        ((*v).deleter.unwrap())(v);
    }
    expect_code(t.to_dlpack_versioned(0, 0), ErrorCode::Value);
    let z = Carrier::zstd(&rt, DType::F32, 4, &Default::default()).unwrap();
    let zt = Tensor::new(&z, 0, &Layout::dense(&[4]).unwrap()).unwrap();
    expect_code(zt.to_dlpack(), ErrorCode::Unsupported);
}
