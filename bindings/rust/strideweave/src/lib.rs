//! StrideWeave for Rust: a safe binding of `libstrideweave`'s C ABI.
//!
//! StrideWeave's core is the [`TiledEvictable`]: one logical tensor (MoE
//! expert weights `(expert, out, in)` with one expert per tile, say) whose
//! tiles live in a primary tier (CPU memory, Vulkan) or a secondary tier (a
//! file, zstd-compressed memory, host memory, Valkey or Redis servers), are
//! promoted and evicted asynchronously under a residency policy, are
//! gathered ("projected") into compact tensors while other work runs, are
//! scattered back, take part in autograd, and never lose a dirty value.
//!
//! ```no_run
//! use strideweave::{Carrier, DType, Policy, Runtime, TileSelection, TiledEvictable};
//!
//! # fn main() -> strideweave::Result<()> {
//! let rt = Runtime::new()?;
//! let cpu = Carrier::cpu(&rt, DType::F32, 0)?; // primary: empty
//! let file = Carrier::file(&rt, DType::F32, 64 * 32 * 32, &Default::default())?; // secondary
//! let experts = TiledEvictable::new(&cpu, &file, &[64, 1, 1], &[1, 32, 32], Policy::None)?;
//! let w = experts.full_tensor()?;
//! // Gather experts 2, 7 and 19 while other work runs.
//! let pending = experts.project(&w, &TileSelection::new([&[2, 7, 19][..], &[0], &[0]])?, None)?;
//! let compact = pending.wait()?; // (3, 32, 32)
//! assert_eq!(compact.shape()?, vec![3, 32, 32]);
//! # Ok(())
//! # }
//! ```
//!
//! # Conventions
//!
//! - **Handles** are reference counted: `Clone` retains, `Drop` releases.
//!   No handle type exposes its raw pointer mutably or lets it outlive its
//!   reference, so a use after release cannot be written in safe code; the
//!   library keeps alive whatever in-flight work touches, so handles may be
//!   dropped in any order, awaits included.
//! - **Errors**: every fallible call returns [`Result`]; [`Error::code`] is
//!   the C ABI's pinned code. A failed call changes nothing.
//! - **Order**: every ordinal is first mode fastest: element `(i, j)` of an
//!   `(M, N)` tensor is value `i + M * j` of a slice passed in or read out.
//! - **Threads**: [`Send`]/[`Sync`] follow the header's thread-safety notes,
//!   each impl justified where it is written.
//! - **Asynchronous work** returns an [`Await`]: `wait()` blocks, `.await`
//!   does not.
//!
//! # Adding operations
//!
//! Ops are enum-driven ([`UnaryOp`], [`BinaryOp`], [`ScalarOp`] in
//! `ops.rs`): a new C op with one of those signatures is one variant and one
//! `match` arm mapping it to its C function (a unary op of `sw_unary` to
//! its `sw_unary_op_t`), plus a named method on [`Tensor`] if wanted.
#![warn(missing_docs)]

mod awaits;
mod carrier;
mod device;
mod dtype;
mod error;
mod ffi;
mod layout;
mod model_files;
#[cfg(feature = "ndarray")]
mod ndarray_support;
mod ops;
mod policy;
mod runtime;
mod tensor;
#[cfg(feature = "testing")]
pub mod testing;
mod tiled;
mod tiles;

pub use awaits::{move_async, Await, AwaitKind, AwaitMove, AwaitOutput, AwaitProjection, AwaitResidency, AwaitUpdate};
pub use carrier::{
    Carrier, CarrierKind, FileIo, FileOptions, FileSegment, IoProfileSource, RemoteOptions, ZstdOptions,
};
pub use device::{CopyEvent, CopyStatus, Device, DeviceAllocation, DeviceKind, DeviceView, ObjectSpec, ViewInfo};
pub use dtype::{BF16Bits, DType, Element, F16Bits};
pub use error::{Error, ErrorCode, Result};
pub use layout::Layout;
pub use model_files::{save_npy, save_safetensors, FileOrder, FileTensor};
pub use ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
pub use policy::{LruPolicy, LruStats, Outcome, Policy, Purpose, ResidencyPolicy};
pub use runtime::{version, version_string, Runtime, RuntimeOptions};
pub use tensor::{is_grad_enabled, no_grad, set_grad_enabled, Distribution, NoGradGuard, RandomOptions, Tensor};
pub use tiled::{ExpertFfnOptions, Reduction, TileLocation, TileSetKind, TileState, TiledEvictable};
pub use tiles::{ResidencyPlan, TileSelection, TileSet, Tiles};

/// The raw C ABI (the `strideweave-sys` crate), for what this crate does not wrap.
pub use strideweave_sys as sys;
