//! The tensor surface's wrappers: each reaches its C function with its
//! arguments in order, hands back new handles, and maps the library's
//! errors. The values the functions compute are the C suites'; the ones here
//! only tell the arguments apart.
mod common;
use common::*;
use strideweave::*;

/// (2, 3), first mode fastest: element (i, j) is i + 2 * j.
fn t23(rt: &Runtime) -> Tensor {
    Tensor::from_slice(rt, &[2, 3], &[0f32, 1., 2., 3., 4., 5.]).unwrap()
}

#[test]
fn factories_fill_range_and_draw() {
    let rt = Runtime::new().unwrap();
    assert_eq!(Tensor::full(&rt, DType::I32, &[2, 2], 7.0).unwrap().to_vec::<i32>().unwrap(), vec![7; 4]);
    let a = Tensor::arange(&rt, DType::F64, 1.0, 2.0, 0.25).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.0, 1.25, 1.5, 1.75]);
    expect_code(Tensor::full(&rt, DType::I32, &[2], 2.5), ErrorCode::Value);
    expect_code(Tensor::arange(&rt, DType::F32, 0.0, 1.0, 0.0), ErrorCode::Value);

    let o = RandomOptions { distribution: Distribution::Uniform { low: 2.0, high: 3.0 }, dtype: DType::F64, seed: 9 };
    let r = Tensor::random(&rt, &[3, 4], &o).unwrap();
    assert_eq!((r.dtype().unwrap(), r.shape().unwrap()), (DType::F64, vec![3, 4]));
    let v = r.to_vec::<f64>().unwrap();
    assert_eq!(v, Tensor::random(&rt, &[12], &o).unwrap().to_vec::<f64>().unwrap()); // the ordinal, not the shape
    assert_ne!(v, Tensor::random(&rt, &[12], &RandomOptions { seed: 10, ..o }).unwrap().to_vec::<f64>().unwrap());
    assert!(v.iter().all(|x| (2.0..3.0).contains(x)), "{v:?}");
    let normal = RandomOptions { distribution: Distribution::Normal { mean: 5.0, stddev: 0.0 }, ..Default::default() };
    let n = Tensor::random(&rt, &[4], &normal).unwrap();
    assert_eq!(n.to_vec::<f32>().unwrap(), vec![5.0; 4]); // stddev 0: the mean, in the default f32
    expect_code(Tensor::random(&rt, &[2], &RandomOptions { dtype: DType::I32, ..Default::default() }), ErrorCode::Type);
    let backwards = RandomOptions { distribution: Distribution::Uniform { low: 1.0, high: 0.0 }, ..Default::default() };
    expect_code(Tensor::random(&rt, &[2], &backwards), ErrorCode::Value);
}

#[test]
fn views_share_the_carrier_and_copies_do_not() {
    let rt = Runtime::new().unwrap();
    let t = t23(&rt);
    let r = t.reshape(&[3, -1]).unwrap();
    assert_eq!(r.shape().unwrap(), vec![3, 2]);
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5.]); // first mode fastest
    assert_eq!(t.view(&[6]).unwrap().shape().unwrap(), vec![6]);
    assert_eq!(t.flatten(0, -1).unwrap().shape().unwrap(), vec![6]);
    let u = t.unsqueeze(0).unwrap();
    assert_eq!(u.shape().unwrap(), vec![1, 2, 3]);
    assert_eq!(u.squeeze(&[]).unwrap().shape().unwrap(), vec![2, 3]);
    assert_eq!(u.squeeze(&[0]).unwrap().shape().unwrap(), vec![2, 3]);
    assert_eq!(u.expand(&[4, 2, 3]).unwrap().shape().unwrap(), vec![4, 2, 3]);
    let sl = t.slice(1, 2, i64::MAX, 1).unwrap();
    assert_eq!(sl.to_vec::<f32>().unwrap(), vec![4., 5.]);
    assert_eq!(t.slice(1, -1, i64::MIN, -2).unwrap().to_vec::<f32>().unwrap(), vec![4., 5., 0., 1.]);
    assert_eq!(t.select(0, 1).unwrap().to_vec::<f32>().unwrap(), vec![1., 3., 5.]);
    let (c, k, d) = (t.contiguous().unwrap(), t.copy().unwrap(), t.detach().unwrap());
    let (h, same) = (t.to_dtype(DType::F64).unwrap(), t.to_dtype(DType::F32).unwrap());
    assert_eq!(h.to_vec::<f64>().unwrap(), vec![0., 1., 2., 3., 4., 5.]);

    t.set(&[0, 2], 40.0).unwrap(); // element 4: seen by the views, not by the copies
    for view in [&r, &c, &d, &same] {
        assert_eq!(view.to_vec::<f32>().unwrap()[4], 40.0);
    }
    assert_eq!(sl.get(&[0, 0]).unwrap(), 40.0);
    assert_eq!((k.get(&[0, 2]).unwrap(), h.get(&[0, 2]).unwrap()), (4.0, 4.0));

    let v0 = k.version().unwrap();
    k.fill(2.0).unwrap();
    assert_eq!(k.to_vec::<f32>().unwrap(), vec![2.0; 6]);
    let col = Tensor::from_slice(&rt, &[2, 1], &[-1f32, -2.]).unwrap();
    k.copy_from(&col).unwrap(); // broadcast along the second mode
    assert_eq!(k.to_vec::<f32>().unwrap(), vec![-1., -2., -1., -2., -1., -2.]);
    assert_eq!(k.version().unwrap(), v0 + 2);

    expect_code(t.reshape(&[4, 2]), ErrorCode::Value);
    expect_code(t.select(0, 2), ErrorCode::Index);
    expect_code(t.unsqueeze(4), ErrorCode::Index);
    expect_code(t.slice(0, 0, 2, 0), ErrorCode::Value);
    expect_code(t.expand(&[4, 3]), ErrorCode::Value);
    expect_code(Tensor::zeros(&rt, DType::I32, &[2]).unwrap().fill(0.5), ErrorCode::Value);
    expect_code(u.expand(&[4, 2, 3]).unwrap().fill(1.0), ErrorCode::Value); // reaches slots twice
}

#[test]
fn unary_binary_scalar_and_in_place_ops_reach_their_codes() {
    let rt = Runtime::new().unwrap();
    let a = Tensor::from_slice(&rt, &[3], &[-4f32, 1., 9.]).unwrap();
    let b = Tensor::from_slice(&rt, &[3], &[2f32, 1., 3.]).unwrap();
    let f = |t: Result<Tensor>| t.unwrap().to_vec::<f32>().unwrap();
    let bools = |t: Result<Tensor>| {
        let t = t.unwrap();
        assert_eq!(t.dtype().unwrap(), DType::Bool);
        t.to_vec::<bool>().unwrap()
    };
    assert_eq!(f(a.neg()), vec![4., -1., -9.]);
    assert_eq!(f(a.abs()), vec![4., 1., 9.]);
    assert_eq!(f(b.sqrt())[2], 3f32.sqrt());
    assert!((f(b.rsqrt())[0] - 0.5f32.sqrt()).abs() < 1e-6);
    let z = Tensor::zeros(&rt, DType::F32, &[3]).unwrap();
    assert_eq!(f(z.exp()), vec![1.; 3]);
    assert_eq!(f(z.exp().unwrap().log()), vec![0.; 3]);
    assert_eq!(f(a.sub(&b)), vec![-6., 0., 6.]);
    assert_eq!(f(a.div(&b)), vec![-2., 1., 3.]);
    assert_eq!(f(a.pow(&b)), vec![16., 1., 729.]);
    assert_eq!(f(a.maximum(&b)), vec![2., 1., 9.]);
    assert_eq!(f(a.minimum(&b)), vec![-4., 1., 3.]);
    let cmp = [
        (BinaryOp::Eq, [false, true, false]),
        (BinaryOp::Ne, [true, false, true]),
        (BinaryOp::Lt, [true, false, false]),
        (BinaryOp::Le, [true, true, false]),
        (BinaryOp::Gt, [false, false, true]),
        (BinaryOp::Ge, [false, true, true]),
    ];
    for (op, want) in cmp {
        assert_eq!(bools(a.binary(op, &b)), want.to_vec(), "{op:?}");
    }
    assert_eq!(f(a.scalar(ScalarOp::Sub, 1.0)), vec![-5., 0., 8.]);
    assert_eq!(f(Tensor::scalar_left(ScalarOp::Sub, 1.0, &a)), vec![5., 0., -8.]); // 1 - a
    assert_eq!(f(a.scalar(ScalarOp::Div, 2.0)), vec![-2., 0.5, 4.5]);
    assert_eq!(f(b.scalar(ScalarOp::Pow, 2.0)), vec![4., 1., 9.]);
    assert_eq!(f(a.scalar(ScalarOp::Mul, 2.0)), vec![-8., 2., 18.]);
    assert_eq!(bools(a.scalar(ScalarOp::Ge, 1.0)), vec![false, true, true]);
    let i = Tensor::from_slice(&rt, &[3], &[1i32, 2, 3]).unwrap();
    expect_code(i.scalar(ScalarOp::Add, 0.5), ErrorCode::Value); // the weak scalar takes the dtype
    let cond = a.binary(BinaryOp::Gt, &b).unwrap();
    assert_eq!(f(Tensor::where_(&cond, &a, &b)), vec![2., 1., 9.]);
    expect_code(Tensor::where_(&a, &a, &b), ErrorCode::Type);

    let c = a.copy().unwrap();
    let v = c.version().unwrap();
    c.binary_inplace(BinaryOp::Add, &b).unwrap();
    c.binary_inplace(BinaryOp::Sub, &b).unwrap();
    c.scalar_inplace(ScalarOp::Add, 1.0).unwrap();
    c.scalar_inplace(ScalarOp::Mul, 2.0).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![-6., 4., 20.]);
    assert_eq!(c.version().unwrap(), v + 4);
    expect_code(c.binary_inplace(BinaryOp::Matmul, &b), ErrorCode::Value);
    expect_code(Tensor::zeros(&rt, DType::I32, &[3]).unwrap().binary_inplace(BinaryOp::Add, &b), ErrorCode::Type);
}

#[test]
fn reductions_softmax_and_topk() {
    let rt = Runtime::new().unwrap();
    let t = t23(&rt);
    assert_eq!(t.mean(&[1], false).unwrap().to_vec::<f32>().unwrap(), vec![2., 3.]);
    let mx = t.reduce(ReduceOp::Max, &[], true).unwrap();
    assert_eq!((mx.shape().unwrap(), mx.get(&[0, 0]).unwrap()), (vec![1, 1], 5.0));
    assert_eq!(t.reduce(ReduceOp::Min, &[0], false).unwrap().to_vec::<f32>().unwrap(), vec![0., 2., 4.]);
    assert_eq!(t.reduce(ReduceOp::Sum, &[], false).unwrap().item().unwrap(), 15.0);
    let am = t.argmax(1).unwrap();
    assert_eq!((am.dtype().unwrap(), am.to_vec::<i64>().unwrap()), (DType::I64, vec![2, 2]));
    let (values, indices) = t.reduce_index(ReduceOp::Min, -1, true).unwrap();
    assert_eq!(values.shape().unwrap(), vec![2, 1]);
    assert_eq!((values.to_vec::<f32>().unwrap(), indices.to_vec::<i64>().unwrap()), (vec![0., 1.], vec![0, 0]));
    expect_code(t.reduce_index(ReduceOp::Sum, 0, false), ErrorCode::Value);
    expect_code(t.mean(&[2], false), ErrorCode::Index);

    let x = Tensor::from_slice(&rt, &[2, 2], &[0f32, 0., 1., 1.]).unwrap();
    assert_eq!(x.softmax(0).unwrap().to_vec::<f32>().unwrap(), vec![0.5; 4]);
    let ls = x.log_softmax(1).unwrap().get(&[0, 0]).unwrap();
    assert!((ls - (1.0 / (1.0 + std::f64::consts::E)).ln()).abs() < 1e-6, "{ls}");
    expect_code(Tensor::zeros(&rt, DType::I32, &[2]).unwrap().softmax(0), ErrorCode::Type);

    let v = Tensor::from_slice(&rt, &[4], &[3f32, 9., 1., 9.]).unwrap();
    let (top, at) = v.topk(3, 0).unwrap();
    assert_eq!(top.to_vec::<f32>().unwrap(), vec![9., 9., 3.]);
    assert_eq!(at.to_vec::<i64>().unwrap(), vec![1, 3, 0]); // ties: the lower index
    expect_code(v.topk(5, 0), ErrorCode::Value);
}

#[test]
fn index_ops_and_joins() {
    let rt = Runtime::new().unwrap();
    let t = t23(&rt);
    let idx = Tensor::from_slice(&rt, &[2], &[2i64, 0]).unwrap();
    let cols = t.index_select(1, &idx).unwrap();
    assert_eq!(cols.to_vec::<f32>().unwrap(), vec![4., 5., 0., 1.]);
    let g = Tensor::from_slice(&rt, &[2, 1], &[1i32, 0]).unwrap();
    assert_eq!(t.gather(0, &g).unwrap().to_vec::<f32>().unwrap(), vec![1., 0.]);
    let src = Tensor::full(&rt, DType::F32, &[2, 2], 10.0).unwrap();
    assert_eq!(t.index_add(1, &idx, &src).unwrap().to_vec::<f32>().unwrap(), vec![10., 11., 2., 3., 14., 15.]);
    let g = Tensor::from_slice(&rt, &[1, 2], &[1i64, 1]).unwrap();
    let ones = Tensor::full(&rt, DType::F32, &[1, 2], 1.0).unwrap();
    assert_eq!(t.scatter_add(0, &g, &ones).unwrap().to_vec::<f32>().unwrap(), vec![0., 2., 2., 4., 4., 5.]);
    expect_code(t.index_select(1, &Tensor::from_slice(&rt, &[1], &[3i64]).unwrap()), ErrorCode::Index);
    expect_code(t.index_select(1, &Tensor::zeros(&rt, DType::F32, &[1]).unwrap()), ErrorCode::Type);

    let c = Tensor::cat(&[&t, &cols], 1).unwrap();
    assert_eq!(c.shape().unwrap(), vec![2, 5]);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5., 4., 5., 0., 1.]);
    assert_eq!(Tensor::stack(&[&t, &t], 0).unwrap().shape().unwrap(), vec![2, 2, 3]);
    let i = Tensor::arange(&rt, DType::I32, 0.0, 2.0, 1.0).unwrap();
    let d = Tensor::arange(&rt, DType::F64, 2.0, 3.0, 1.0).unwrap();
    let mixed = Tensor::cat(&[&i, &d], 0).unwrap();
    assert_eq!((mixed.dtype().unwrap(), mixed.to_vec::<f64>().unwrap()), (DType::F64, vec![0., 1., 2.])); // promoted
    expect_code(Tensor::cat(&[], 0), ErrorCode::Value);
    expect_code(Tensor::stack(&[&t, &cols], 0), ErrorCode::Value);
}

#[test]
fn file_segments_read_pieces_in_order() {
    let rt = Runtime::new().unwrap();
    let dir = std::env::temp_dir().join(format!("sw-segments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("w.bin");
    let bytes: Vec<u8> = (0..8).flat_map(|i| (i as f32 * 10.0).to_ne_bytes()).collect();
    std::fs::write(&file, bytes).unwrap();
    let pieces = [
        FileSegment { byte_offset: 24, count: 2 },
        FileSegment { byte_offset: 0, count: 1 },
        FileSegment { byte_offset: 8, count: 0 },
        FileSegment { byte_offset: 4, count: 2 },
    ];
    for options in [FileOptions::default(), FileOptions { direct_io: true, ..Default::default() }] {
        let c = Carrier::open_file_segments(&rt, DType::F32, &file, &pieces, &options).unwrap();
        assert_eq!(c.size().unwrap(), 5);
        let mut v = [0f32; 5];
        c.read(0, &mut v).unwrap();
        assert_eq!(v, [60., 70., 0., 10., 20.]);
        expect_code(c.write(0, &[1f32]), ErrorCode::State);
    }
    let past = [FileSegment { byte_offset: 28, count: 2 }];
    let m =
        expect_code(Carrier::open_file_segments(&rt, DType::F32, &file, &past, &Default::default()), ErrorCode::Value);
    assert!(m.contains("segment"), "{m}");
    let missing = dir.join("none");
    expect_code(Carrier::open_file_segments(&rt, DType::F32, &missing, &[], &Default::default()), ErrorCode::Io);
    std::fs::remove_dir_all(&dir).unwrap();
}
