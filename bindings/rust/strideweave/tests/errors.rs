//! Every error code reaches Rust as its own ErrorCode, with the library's
//! message; unknown codes are kept, never read as success.
#![cfg(feature = "testing")]
mod common;
use common::*;
use strideweave::testing::{fake_failure, Fault};
use strideweave::*;

#[test]
fn codes_are_pinned_and_named() {
    let all = [
        (ErrorCode::Type, 1, "TYPE"),
        (ErrorCode::Value, 2, "VALUE"),
        (ErrorCode::State, 3, "STATE"),
        (ErrorCode::Unsupported, 4, "UNSUPPORTED"),
        (ErrorCode::Index, 5, "INDEX"),
        (ErrorCode::OutOfMemory, 6, "OUT_OF_MEMORY"),
        (ErrorCode::Io, 7, "IO"),
        (ErrorCode::DataCorrupt, 8, "DATA_CORRUPT"),
        (ErrorCode::DeviceLost, 9, "DEVICE_LOST"),
        (ErrorCode::StaleHandle, 10, "STALE_HANDLE"),
        (ErrorCode::Timeout, 11, "TIMEOUT"),
        (ErrorCode::Cancelled, 12, "CANCELLED"),
        (ErrorCode::Internal, 13, "INTERNAL"),
    ];
    for (code, number, name) in all {
        assert_eq!(code.to_raw().0, number);
        assert_eq!(ErrorCode::from_raw(sys::sw_error_code_t(number)), code);
        assert_eq!(code.name(), name);
    }
    // A code added later arrives as Other with its number.
    assert_eq!(ErrorCode::from_raw(sys::sw_error_code_t(77)), ErrorCode::Other(77));
    assert_eq!(ErrorCode::Other(77).name(), "UNKNOWN");
    let e = Error::new(ErrorCode::Value, "bad shape");
    assert_eq!(e.to_string(), "VALUE: bad shape");
}

#[test]
fn an_error_handed_to_the_library_keeps_its_code_and_an_unknown_one_is_internal() {
    let round = |e: Error| unsafe { Error::from_raw(e.to_raw()) };
    assert_eq!(round(Error::new(ErrorCode::Io, "disk")), Error::new(ErrorCode::Io, "disk"));
    let e = round(Error::new(ErrorCode::Other(99), "later"));
    assert_eq!((e.code(), e.message()), (ErrorCode::Internal, "invalid error code 99: later"));
}

#[test]
fn library_errors_arrive_as_their_kind() {
    let rt = Runtime::new().unwrap();
    let f32s = Tensor::from_slice(&rt, &[2], &[1f32, 2.0]).unwrap();
    let f64s = Tensor::from_slice(&rt, &[2], &[1f64, 2.0]).unwrap();
    // TYPE: operands of two dtypes.
    expect_code(f32s.add(&f64s), ErrorCode::Type);
    // VALUE: shapes that do not broadcast; a bad layout.
    expect_code(f32s.add(&Tensor::zeros(&rt, DType::F32, &[3]).unwrap()), ErrorCode::Value);
    expect_code(Layout::dense(&[-2]), ErrorCode::Value);
    // STATE: a write to a claimed carrier; a second backward.
    let c = Carrier::cpu(&rt, DType::F32, 2).unwrap();
    c.testing_claim().unwrap();
    expect_code(c.write(0, &[1f32]), ErrorCode::State);
    expect_code(c.dispose(), ErrorCode::State);
    c.testing_unclaim().unwrap();
    let x = Tensor::from_slice(&rt, &[2], &[1f32, 2.0]).unwrap().requires_grad_().unwrap();
    let loss = x.mul(&x).unwrap().sum().unwrap();
    loss.backward(None, false).unwrap();
    expect_code(loss.backward(None, false), ErrorCode::State);
    // STATE "modified in-place": a saved tensor written before backward.
    let y = Tensor::from_slice(&rt, &[2], &[1f32, 2.0]).unwrap().requires_grad_().unwrap();
    let saved = Tensor::from_slice(&rt, &[2], &[3f32, 4.0]).unwrap();
    let loss = y.elementwise_mul(&saved).unwrap().sum().unwrap();
    saved.write(&[5f32, 6.0]).unwrap();
    assert!(expect_code(loss.backward(None, false), ErrorCode::State).contains("modified in-place"));
    // UNSUPPORTED: the host pointer of a compressed carrier.
    expect_code(Carrier::zstd(&rt, DType::F32, 4, &Default::default()).unwrap().host_pointer(), ErrorCode::Unsupported);
    // INDEX: a coordinate out of range.
    expect_code(f32s.get(&[2]), ErrorCode::Index);
    expect_code(f32s.reduce_sum(&[3], false), ErrorCode::Index);
}

#[test]
fn resource_errors_arrive_as_their_kind_and_change_nothing() {
    let rt = Runtime::new().unwrap();
    // OUT_OF_MEMORY: an injected allocation failure, then a retry succeeds.
    rt.inject_fault(Fault::Allocation, 1).unwrap();
    let msg = expect_code(Carrier::cpu(&rt, DType::F32, 16), ErrorCode::OutOfMemory);
    assert!(msg.starts_with("injected allocation failure"), "{msg}");
    assert_eq!(Carrier::cpu(&rt, DType::F32, 16).unwrap().size().unwrap(), 16);
    // ... and a failed promotion leaves the prior state.
    let te = seeded(&rt, &arange(8), &[4], &[2], Policy::None);
    let before = states(&te);
    rt.inject_fault(Fault::Allocation, 2).unwrap();
    expect_code(te.promote(&TileSet::new([[0], [1], [2]]).unwrap()), ErrorCode::OutOfMemory);
    assert_eq!(states(&te), before);
    // IO: an injected read failure of a file tier; a file that is not there.
    let te = seeded_file(&rt, &arange(8), &[4], &[2], Policy::None);
    rt.inject_fault(Fault::Read, 1).unwrap();
    expect_code(te.promote(&TileSet::new([[0]]).unwrap()), ErrorCode::Io);
    assert_eq!(te.tile_state(&[0]).unwrap().location, TileLocation::Secondary);
    expect_code(
        Carrier::open_file(&rt, DType::F32, "/nonexistent/strideweave/weights.bin", 0, 4, &Default::default()),
        ErrorCode::Io,
    );
    // DATA_CORRUPT: a flipped byte in a zstd frame.
    let z = Carrier::zstd(&rt, DType::F32, 8, &ZstdOptions { frame_elements: 4, ..Default::default() }).unwrap();
    z.write(0, &arange(8)).unwrap();
    z.testing_corrupt_frame(1).unwrap();
    expect_code(z.to_vec::<f32>(4, 4), ErrorCode::DataCorrupt);
    assert_eq!(z.to_vec::<f32>(0, 4).unwrap(), arange(4)); // frame 0 is intact
}

#[test]
fn device_errors_timeouts_cancellation_and_internal() {
    let rt = Runtime::new().unwrap();
    let dev = Device::fake(&rt).unwrap();
    let spec = ObjectSpec { dtype: DType::F32, shape: vec![4], max_extent_bytes: 64, alignment: 16 };
    let a = dev.alloc(&spec, 16).unwrap();
    // DEVICE_LOST, then STALE_HANDLE for what the old generation made.
    dev.fake_arm_failure(fake_failure::DEVICE_LOST).unwrap();
    expect_code(a.host_to_device(0, &[0; 4]), ErrorCode::DeviceLost);
    expect_code(a.host_to_device(0, &[0; 4]), ErrorCode::StaleHandle);
    // TIMEOUT: a wait that runs out (the read is held in flight).
    let te = seeded_file(&rt, &arange(8), &[4], &[2], Policy::None);
    rt.with_hold(Fault::Read, |caught| {
        let h = te.promote_async(&TileSet::new([[1]]).unwrap()).unwrap();
        caught().unwrap();
        expect_code(h.wait_timeout(std::time::Duration::from_millis(1)), ErrorCode::Timeout);
    })
    .unwrap();
    // INTERNAL (and any code) from a policy passes through unchanged.
    let te = seeded(
        &rt,
        &arange(8),
        &[4],
        &[2],
        Policy::custom(|_: &TileSet, _: Purpose| -> Result<ResidencyPlan> {
            Err(Error::new(ErrorCode::Internal, "policy bug"))
        }),
    );
    let e = te.project(&te.full_tensor().unwrap(), &TileSelection::new([[0]]).unwrap(), None).unwrap_err();
    assert_eq!((e.code(), e.message()), (ErrorCode::Internal, "policy bug"));
    // CANCELLED: asynchronous calls after shutdown; synchronous ones work.
    let t = Tensor::from_slice(&rt, &[2], &[1f32, 2.0]).unwrap();
    rt.shutdown().unwrap();
    expect_code(t.move_to(&Carrier::host(&rt, DType::F32, 0).unwrap()), ErrorCode::Cancelled);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}
