//! The device bridge contract on the fake backend (spec
//! device-bridge-contract.md): allocations, copies with exact ranges and
//! release points, views, lifetimes, typed faults, generations.
#![cfg(feature = "testing")]
mod common;
use common::*;
use strideweave::testing::fake_failure;
use strideweave::*;

fn spec(shape: &[i64]) -> ObjectSpec {
    ObjectSpec { dtype: DType::F32, shape: shape.to_vec(), max_extent_bytes: 4096, alignment: 64 }
}

fn fake() -> (Runtime, Device) {
    let rt = Runtime::new().unwrap();
    let dev = Device::fake(&rt).unwrap();
    (rt, dev)
}

#[test]
fn alloc_logs_exact_arguments_and_free_once() {
    let (_rt, dev) = fake();
    assert_eq!((dev.kind().unwrap(), dev.generation().unwrap()), (DeviceKind::Fake, 1));
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    assert_eq!((a.extent().unwrap(), a.generation().unwrap()), (64, 1));
    assert_eq!(dev.fake_log().unwrap(), vec!["alloc alloc=1 bytes=64 alignment=64"]);
    a.free().unwrap();
    assert_eq!(dev.fake_log().unwrap()[1], "free alloc=1");
    let msg = expect_code(a.free(), ErrorCode::State);
    assert!(msg.contains("already freed"), "{msg}");
}

#[test]
fn bad_extents_and_alignments_never_reach_the_backend() {
    let (_rt, dev) = fake();
    let s = spec(&[16]);
    expect_code(dev.alloc(&s, 0), ErrorCode::Value);
    expect_code(dev.alloc(&s, 8192), ErrorCode::Value);
    expect_code(dev.alloc(&s, 32), ErrorCode::Value);
    expect_code(dev.alloc(&ObjectSpec { alignment: 48, ..s.clone() }, 64), ErrorCode::Value);
    assert!(dev.fake_log().unwrap().is_empty());
    dev.fake_arm_failure(fake_failure::ALLOCATION).unwrap();
    let msg = expect_code(dev.alloc(&s, 64), ErrorCode::OutOfMemory);
    assert!(msg.contains("device allocation failed"), "{msg}");
    dev.alloc(&s, 64).unwrap(); // one-shot
}

#[test]
fn synchronous_copies_move_exact_ranges() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    let input: Vec<u8> = (100..124).collect();
    a.host_to_device(16, &input).unwrap();
    let mut out = [0xeeu8; 64];
    a.device_to_host(0, &mut out).unwrap();
    for (i, &b) in out.iter().enumerate() {
        assert_eq!(b, if (16..40).contains(&i) { (100 + i - 16) as u8 } else { 0 });
    }
    let mut part = [0u8; 5];
    a.device_to_host(20, &mut part).unwrap();
    assert_eq!(part, [104, 105, 106, 107, 108]);
    let log = dev.fake_log().unwrap();
    assert_eq!(log[1], "host_to_device alloc=1 offset=16 bytes=24 async=0");
    assert_eq!(log[2], "device_to_host alloc=1 offset=0 bytes=64 async=0");
    assert_eq!(log[3], "device_to_host alloc=1 offset=20 bytes=5 async=0");
    // Ranges are checked before the backend sees anything.
    let before = dev.fake_log().unwrap().len();
    expect_code(a.host_to_device(60, &[0; 8]), ErrorCode::Index);
    expect_code(a.host_to_device(0, &[0; 65]), ErrorCode::Index);
    expect_code(a.device_to_host(65, &mut [0; 1]), ErrorCode::Index);
    expect_code(a.host_to_device(0, &[]), ErrorCode::Value);
    assert_eq!(dev.fake_log().unwrap().len(), before);
    a.host_to_device(0, &[0; 64]).unwrap(); // the full extent exactly
}

#[test]
fn an_asynchronous_copy_releases_the_host_bytes_only_at_completion() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    let input = Box::new([1u8, 2, 3, 4, 5, 6, 7, 8]);
    let ev = unsafe { a.host_to_device_async(8, input.as_ptr(), 8) }.unwrap();
    assert_eq!(dev.event_query(ev).unwrap(), CopyStatus { host_released: false, complete: false });
    expect_code(dev.event_wait(ev, 1_000_000), ErrorCode::Timeout);
    dev.fake_complete(ev).unwrap();
    assert_eq!(dev.event_query(ev).unwrap(), CopyStatus { host_released: true, complete: true });
    dev.event_wait(ev, 0).unwrap();
    drop(input); // safe now
    let mut out = [0u8; 8];
    a.device_to_host(8, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
    let log = dev.fake_log().unwrap();
    assert_eq!(log[1], format!("host_to_device alloc=1 offset=8 bytes=8 async=1 event={}", ev.id));
    assert_eq!(log[2], format!("complete event={}", ev.id));
    expect_code(dev.fake_complete(ev), ErrorCode::Value);
    // Device to host: the bytes are valid once complete.
    let mut back = Box::new([0u8; 4]);
    let ev = unsafe { a.device_to_host_async(8, back.as_mut_ptr(), 4) }.unwrap();
    assert_eq!(dev.fake_complete_all().unwrap(), 1);
    dev.event_wait(ev, -1).unwrap();
    assert_eq!(*back, [1, 2, 3, 4]);
}

#[test]
fn free_is_refused_while_compute_a_copy_or_a_view_uses_the_allocation() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    let buf = [0u8; 4];
    let ev = unsafe { a.host_to_device_async(0, buf.as_ptr(), 4) }.unwrap();
    assert!(expect_code(a.free(), ErrorCode::State).contains("in use"));
    dev.fake_complete(ev).unwrap();
    a.compute_begin().unwrap();
    assert!(expect_code(a.free(), ErrorCode::State).contains("in use"));
    a.compute_end().unwrap();
    expect_code(a.compute_end(), ErrorCode::State);
    let v = a.view(DType::F32, &[16]).unwrap();
    assert!(expect_code(a.free(), ErrorCode::State).contains("in use"));
    drop(v);
    a.free().unwrap();
    assert!(expect_code(a.host_to_device(0, &buf), ErrorCode::State).contains("freed"));
}

#[test]
fn views_check_dtype_then_shape_and_describe_the_memory() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[4, 3]), 48).unwrap();
    expect_code(a.view(DType::F64, &[3, 4]), ErrorCode::Type);
    expect_code(a.view(DType::F32, &[3, 4]), ErrorCode::Value);
    expect_code(a.view(DType::F32, &[4]), ErrorCode::Value);
    dev.fake_arm_failure(fake_failure::VIEW).unwrap();
    assert!(expect_code(a.view(DType::F32, &[4, 3]), ErrorCode::Io).contains("view failed"));
    let v = a.view(DType::F32, &[4, 3]).unwrap();
    let info = v.describe().unwrap();
    assert!(!info.pointer.is_null() && info.pointer as usize % 64 == 0);
    assert_eq!((info.dtype, info.shape.clone(), info.strides_bytes.clone()), (DType::F32, vec![4, 3], vec![4, 16]));
    a.host_to_device(20, &2.5f32.to_ne_bytes()).unwrap();
    // SAFETY: the view is live, so the memory is, and element 5 is inside it.
    assert_eq!(unsafe { *(info.pointer as *const f32).add(5) }, 2.5);
}

#[test]
fn copy_failures_are_io() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    dev.fake_arm_failure(fake_failure::COPY).unwrap();
    assert!(expect_code(a.host_to_device(0, &[1, 2, 3, 4]), ErrorCode::Io).contains("copy failed"));
    let mut buf = Box::new([0u8; 4]);
    let ev = unsafe { a.device_to_host_async(0, buf.as_mut_ptr(), 4) }.unwrap();
    dev.fake_arm_failure(fake_failure::COPY).unwrap();
    dev.fake_complete(ev).unwrap();
    expect_code(dev.event_query(ev), ErrorCode::Io);
    expect_code(dev.event_wait(ev, -1), ErrorCode::Io);
    a.free().unwrap();
}

#[test]
fn a_restart_abandons_pending_copies_and_every_older_handle_is_stale() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    let v = a.view(DType::F32, &[16]).unwrap();
    let buf = [1u8, 2, 3, 4];
    let pending = unsafe { a.host_to_device_async(0, buf.as_ptr(), 4) }.unwrap();
    dev.restart().unwrap();
    assert_eq!(dev.generation().unwrap(), 2);
    assert!(expect_code(dev.event_query(pending), ErrorCode::StaleHandle).contains("generation 1"));
    expect_code(dev.event_wait(pending, -1), ErrorCode::StaleHandle);
    expect_code(dev.fake_complete(pending), ErrorCode::StaleHandle);
    assert_eq!(dev.fake_complete_all().unwrap(), 0); // abandoned: never completes
    expect_code(a.free(), ErrorCode::StaleHandle);
    expect_code(a.host_to_device(0, &buf), ErrorCode::StaleHandle);
    expect_code(a.device_to_host(0, &mut [0; 4]), ErrorCode::StaleHandle);
    expect_code(a.view(DType::F32, &[16]), ErrorCode::StaleHandle);
    expect_code(a.compute_begin(), ErrorCode::StaleHandle);
    expect_code(v.describe(), ErrorCode::StaleHandle);
    dev.restart().unwrap();
    assert_eq!(dev.generation().unwrap(), 3);
    assert_eq!(dev.alloc(&spec(&[16]), 64).unwrap().generation().unwrap(), 3);
}

#[test]
fn a_lost_device_restarts() {
    let (_rt, dev) = fake();
    let a = dev.alloc(&spec(&[16]), 64).unwrap();
    let buf = [1u8, 2, 3, 4];
    let pending = unsafe { a.host_to_device_async(0, buf.as_ptr(), 4) }.unwrap();
    dev.fake_arm_failure(fake_failure::DEVICE_LOST).unwrap();
    expect_code(a.device_to_host(0, &mut [0; 4]), ErrorCode::DeviceLost);
    assert_eq!(dev.generation().unwrap(), 2);
    expect_code(dev.event_query(pending), ErrorCode::StaleHandle);
    expect_code(a.free(), ErrorCode::StaleHandle);
    expect_code(Device::host(&Runtime::new().unwrap()).unwrap().fake_log(), ErrorCode::Type);
}
