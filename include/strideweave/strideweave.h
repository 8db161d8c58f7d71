/*
 * StrideWeave: an embeddable runtime for tensors that do not fit where they are
 * computed. This is the only public header; it is C99 and C++ compatible.
 *
 * Conventions (read once, they hold for every function below)
 * ------------------------------------------------------------
 * Errors     Every fallible function returns `sw_error_t*`. NULL means success.
 *            A non-NULL error is owned by the caller: read it with
 *            sw_error_code() / sw_error_message() and free it with
 *            sw_error_free(). When a function fails it changes nothing: no
 *            out-parameter is written, no value, version or ownership moves.
 *            Error codes are pinned forever; see sw_error_code_t.
 * Handles    Every handle is opaque and reference counted. A handle written to
 *            an `out_*` parameter is a new reference owned by the caller, who
 *            drops it with the matching sw_<x>_release(). Release is NULL-safe
 *            and never blocks. Handles passed as arguments are borrowed for the
 *            duration of the call; the library retains whatever it keeps.
 * Threads    Reference counting is thread-safe for every handle. Layouts are
 *            immutable and fully thread-safe. Carriers and tensors may be read
 *            from several threads at once; concurrent writes to the same
 *            carrier must be serialised by the caller.
 * Structs    Structs that may grow begin with `uint32_t struct_size`; fill them
 *            with the matching sw_<x>_desc_init() before setting fields.
 * Ordinals   Every ordinal <-> coordinate conversion is first mode fastest
 *            (colexicographic): coordinate (i, j) of a (M, N) shape is ordinal
 *            i + M * j. "Dense" layouts and bulk reads/writes use this order.
 * Versions   Same SW_VERSION_MAJOR means ABI compatible.
 */
#ifndef STRIDEWEAVE_STRIDEWEAVE_H_
#define STRIDEWEAVE_STRIDEWEAVE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SW_API marks the exported functions. Building the library defines
 * SW_BUILDING_LIBRARY; a program linking a static build on Windows defines
 * SW_STATIC. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(SW_BUILDING_LIBRARY)
#define SW_API __declspec(dllexport)
#elif defined(SW_STATIC)
#define SW_API
#else
#define SW_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define SW_API __attribute__((visibility("default")))
#else
#define SW_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versioning                                                                */
/* ------------------------------------------------------------------------ */

#define SW_VERSION_MAJOR 0
#define SW_VERSION_MINOR 3
#define SW_VERSION_PATCH 0
/* Packs a version as major << 22 | minor << 12 | patch. */
#define SW_MAKE_VERSION(major, minor, patch) \
  ((((uint32_t)(major)) << 22) | (((uint32_t)(minor)) << 12) | ((uint32_t)(patch)))
#define SW_VERSION SW_MAKE_VERSION(SW_VERSION_MAJOR, SW_VERSION_MINOR, SW_VERSION_PATCH)

/* The version of the loaded library, packed as SW_MAKE_VERSION. */
SW_API uint32_t sw_version(void);
/* The version of the loaded library as "major.minor.patch"; static storage. */
SW_API const char* sw_version_string(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Stable error codes. The numbers never change; new codes are only appended.
 * The bindings map them one-to-one onto exception kinds (Python in brackets). */
typedef enum sw_error_code_t {
  SW_OK = 0,                     /* not an error; sw_error_code(NULL) */
  SW_ERROR_TYPE = 1,             /* wrong handle kind, dtype or class [TypeError] */
  SW_ERROR_VALUE = 2,            /* bad shape, size, range or option [ValueError] */
  SW_ERROR_STATE = 3,            /* released, pending, owned, pinned, conflict,
                                    modified in-place [RuntimeError] */
  SW_ERROR_UNSUPPORTED = 4,      /* valid request this build cannot do [NotImplementedError] */
  SW_ERROR_INDEX = 5,            /* coordinate, slot or axis out of range [IndexError] */
  SW_ERROR_OUT_OF_MEMORY = 6,    /* allocation failed [MemoryError] */
  SW_ERROR_IO = 7,               /* file or system I/O failed [OSError] */
  SW_ERROR_DATA_CORRUPT = 8,     /* stored data failed its checksum or decode */
  SW_ERROR_DEVICE_LOST = 9,      /* the device was lost */
  SW_ERROR_STALE_HANDLE = 10,    /* handle from an older device generation */
  SW_ERROR_TIMEOUT = 11,         /* a wait expired [TimeoutError] */
  SW_ERROR_CANCELLED = 12,       /* work cancelled, e.g. by shutdown */
  SW_ERROR_INTERNAL = 13,        /* a bug in StrideWeave; please report it */
  SW_ERROR_CODE_FORCE32 = 0x7fffffff
} sw_error_code_t;

typedef struct sw_error_t sw_error_t;

/* The code of `error`; SW_OK for NULL. */
SW_API sw_error_code_t sw_error_code(const sw_error_t* error);
/* The message of `error`, naming the problem; "" for NULL. Borrowed: valid
 * until sw_error_free(error). */
SW_API const char* sw_error_message(const sw_error_t* error);
/* Frees an error. NULL-safe. */
SW_API void sw_error_free(sw_error_t* error);
/* The name of a code ("TYPE", "VALUE", ...); "UNKNOWN" for other numbers. */
SW_API const char* sw_error_code_name(sw_error_code_t code);
/* A new error with `code` and a copy of `message` (NULL gives ""), for host
 * code that must hand the library an error: a residency policy's plan()
 * returns it, and the library frees it and passes the same code and message
 * to the caller. Owned by the caller until returned to the library; free an
 * unused one with sw_error_free(). `code` must be one of SW_ERROR_TYPE ..
 * SW_ERROR_INTERNAL: SW_OK or an unknown number gives an SW_ERROR_INTERNAL
 * error whose message is "invalid error code N: " followed by `message`, so
 * a mistake never reads as success. Never returns NULL: when memory runs out
 * it returns the library's static out-of-memory error (code
 * SW_ERROR_OUT_OF_MEMORY, message "out of memory"), which sw_error_free
 * accepts like any other. Thread-safe. */
SW_API sw_error_t* sw_error_create(sw_error_code_t code, const char* message);

/* ------------------------------------------------------------------------ */
/* Data types                                                                */
/* ------------------------------------------------------------------------ */

typedef enum sw_dtype_t {
  SW_DTYPE_INVALID = 0,
  SW_DTYPE_F32 = 1,
  SW_DTYPE_F64 = 2,
  SW_DTYPE_F16 = 3,
  SW_DTYPE_BF16 = 4,
  SW_DTYPE_I32 = 5,
  SW_DTYPE_I64 = 6,
  SW_DTYPE_U8 = 7,
  SW_DTYPE_BOOL = 8,
  /* Block-quantized dtypes, stored as GGUF (ggml) stores them, byte for byte.
   * A tensor's shape counts elements; its storage is blocks of consecutive
   * elements along the first mode (ggml's ne[0], the fastest mode), so the
   * first mode's extent is a multiple of the block and a view never splits
   * one. Blocks (elements / bytes, little-endian):
   *   Q8_0   32 / 34: f16 d, 32 int8 q; x = d * q.
   *   Q4_0   32 / 18: f16 d, 16 bytes; element j < 16 the low nibble of byte
   *          j, element 16 + j its high nibble; x = d * (q - 8).
   *   Q4_K  256 / 144: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and
   *          mins, 128 bytes of nibbles; x = d * scale * q - dmin * min per
   *          32-element sub-block.
   *   Q6_K  256 / 210: 128 bytes of low nibbles, 64 bytes of high 2-bit
   *          pairs, 16 int8 scales, f16 d; x = d * scale * (q - 32) per
   *          16-element sub-block.
   *   MXFP4  32 / 17: an e8m0 exponent byte, 16 bytes of fp4 (e2m1) nibbles
   *          laid out as Q4_0's.
   * docs/quantization.md gives every layout in full. Only moves (projection,
   * scatter, promotion, eviction, copies), views that keep whole blocks and
   * sw_tensor_to_dtype take these dtypes; other ops refuse them (TYPE). */
  SW_DTYPE_Q8_0 = 9,
  SW_DTYPE_Q4_0 = 10,
  SW_DTYPE_Q4_K = 11,
  SW_DTYPE_Q6_K = 12,
  SW_DTYPE_MXFP4 = 13,
  SW_DTYPE_FORCE32 = 0x7fffffff
} sw_dtype_t;

/* Bytes per element; 0 for an unknown dtype and for a block-quantized one
 * (whose elements share their block's bytes: sw_dtype_block_bytes). */
SW_API size_t sw_dtype_size(sw_dtype_t dtype);
/* "f32", "bf16", ..., "q8_0", "q4_0", "q4_k", "q6_k", "mxfp4"; "invalid" for
 * an unknown dtype. Static storage. */
SW_API const char* sw_dtype_name(sw_dtype_t dtype);
/* Elements of one storage unit: the block's element count for a
 * block-quantized dtype (32 or 256), 1 for the others, 0 for an unknown
 * dtype. Element counts of a quantized dtype's carriers and buffers are
 * multiples of it. */
SW_API size_t sw_dtype_block_elements(sw_dtype_t dtype);
/* Bytes of one storage unit: a block's bytes for a block-quantized dtype,
 * sw_dtype_size for the others, 0 for an unknown dtype. `count` elements
 * take count / sw_dtype_block_elements * sw_dtype_block_bytes bytes. */
SW_API size_t sw_dtype_block_bytes(sw_dtype_t dtype);

/* ------------------------------------------------------------------------ */
/* Runtime                                                                   */
/* ------------------------------------------------------------------------ */

/* A runtime owns the worker threads, the host buffer pool and the hooks the
 * host installed. Every carrier and tensor belongs to exactly one runtime and
 * keeps it alive. Several runtimes may live in one process; the library keeps
 * no process-global mutable state. Thread-safe. */
typedef struct sw_runtime_t sw_runtime_t;

typedef enum sw_log_level_t {
  SW_LOG_DEBUG = 0,
  SW_LOG_INFO = 1,
  SW_LOG_WARNING = 2,
  SW_LOG_ERROR = 3,
  SW_LOG_LEVEL_FORCE32 = 0x7fffffff
} sw_log_level_t;

/* The library never prints on its own; it reports through this callback,
 * which may be called from any of the runtime's threads. */
typedef void (*sw_log_fn)(void* user_data, sw_log_level_t level, const char* message);

/* A host allocator for large buffers. `alloc` returns memory aligned to at
 * least `alignment` bytes (a power of two) or NULL; `free` gets the same size
 * and alignment back. Both may be called from any thread. */
typedef struct sw_allocator_t {
  void* (*alloc)(void* user_data, size_t size, size_t alignment);
  void (*free)(void* user_data, void* pointer, size_t size, size_t alignment);
  void* user_data;
} sw_allocator_t;

typedef struct sw_runtime_desc_t {
  uint32_t struct_size;
  /* Threads computing kernels, the caller included; 0 = one per core. */
  uint32_t compute_threads;
  /* Threads for background work (decompression, copies); 0 = 2. File I/O
   * runs on libuv's own thread pool. */
  uint32_t worker_threads;
  /* Bytes of freed host buffers kept for reuse; SIZE_MAX = default (1 GiB). */
  size_t pool_limit_bytes;
  sw_log_fn log;            /* optional */
  void* log_user_data;
  /* Messages below this level are not reported; a level above SW_LOG_ERROR
   * reports none. Negative: SW_ERROR_VALUE. */
  sw_log_level_t log_level;
  const sw_allocator_t* allocator; /* optional; copied at creation */
} sw_runtime_desc_t;

SW_API void sw_runtime_desc_init(sw_runtime_desc_t* desc);
/* Creates a runtime. `desc` may be NULL for the defaults. */
SW_API sw_error_t* sw_runtime_create(const sw_runtime_desc_t* desc, sw_runtime_t** out_runtime);
SW_API void sw_runtime_retain(sw_runtime_t* runtime);
SW_API void sw_runtime_release(sw_runtime_t* runtime);
/* The number of compute threads, the caller included. */
SW_API sw_error_t* sw_runtime_compute_threads(const sw_runtime_t* runtime, uint32_t* out_threads);
/* Completes every pending await with SW_ERROR_CANCELLED (their carriers are
 * usable and unchanged afterwards), fires the callbacks still owed, stops the
 * loop thread and joins the runtime's threads. Later asynchronous calls fail
 * CANCELLED; synchronous calls keep working. Idempotent; releasing the last
 * reference shuts down too. Must not be called from a callback. */
SW_API sw_error_t* sw_runtime_shutdown(sw_runtime_t* runtime);

/* ------------------------------------------------------------------------ */
/* Layouts                                                                   */
/* ------------------------------------------------------------------------ */

/* A Layout is a pair of congruent trees (shape, stride), CuTe style: a tuple
 * of top-level modes, each either a leaf `extent:stride` or a nested tuple.
 * index(coord) = sum over leaves of coord_leaf * stride_leaf, where a
 * coordinate of a nested mode is decoded first mode fastest into its leaves.
 * Written as text: "(4,(2,2)):(1,(4,8))". Immutable and thread-safe.
 *
 * One rule for sizes and strides, however a layout is made (create, dense,
 * parse, group, permute): its size (the product of the extents) and its
 * index span, 1 + the sum over leaves of |stride| * (extent - 1), must both
 * fit in int64_t; otherwise VALUE. Every index, cosize and ordinal of a
 * layout then fits in int64_t. Nesting deeper than SW_MAX_LAYOUT_DEPTH is
 * VALUE, with a message naming the limit. */
typedef struct sw_layout_t sw_layout_t;

/* Longest rank (top-level modes) accepted by tensors and ops. */
#define SW_MAX_RANK 16
/* Deepest nesting of a layout's modes (a tuple of leaves is one level):
 * deeper text, groupings or trees are VALUE. */
#define SW_MAX_LAYOUT_DEPTH 32

/* A flat layout with `rank` leaf modes. Extents must be >= 0; strides may be
 * any value (negative strides are allowed). rank 0 is a scalar (size 1). */
SW_API sw_error_t* sw_layout_create(const int64_t* shape, const int64_t* stride, size_t rank,
                                    sw_layout_t** out_layout);
/* The dense first-mode-fastest layout: stride_i = product of extents before i. */
SW_API sw_error_t* sw_layout_dense(const int64_t* extents, size_t rank, sw_layout_t** out_layout);
/* Parses "shape:stride" text such as "(4,(2,2)):(1,(4,8))" or "8:1" (rank 1).
 * The two trees must be congruent. VALUE error naming the position if not. */
SW_API sw_error_t* sw_layout_parse(const char* text, sw_layout_t** out_layout);
/* A layout whose mode i is modes[i]: the single mode of a rank-1 layout, or
 * the tuple of all modes of a layout of another rank. */
SW_API sw_error_t* sw_layout_group(const sw_layout_t* const* modes, size_t count,
                                   sw_layout_t** out_layout);
/* Reorders the top-level modes: mode i of the result is mode perm[i]. */
SW_API sw_error_t* sw_layout_permute(const sw_layout_t* layout, const size_t* perm, size_t rank,
                                     sw_layout_t** out_layout);
SW_API void sw_layout_retain(sw_layout_t* layout);
SW_API void sw_layout_release(sw_layout_t* layout);

/* Number of top-level modes. */
SW_API sw_error_t* sw_layout_rank(const sw_layout_t* layout, size_t* out_rank);
/* Extent (product of leaf extents) of each top-level mode; `capacity` must be
 * at least the rank. */
SW_API sw_error_t* sw_layout_extents(const sw_layout_t* layout, int64_t* out_extents, size_t capacity);
/* Number of coordinates: the product of all extents. */
SW_API sw_error_t* sw_layout_size(const sw_layout_t* layout, int64_t* out_size);
/* One past the largest index reached (0 for an empty layout). Negative strides
 * are counted by magnitude. */
SW_API sw_error_t* sw_layout_cosize(const sw_layout_t* layout, int64_t* out_cosize);
/* Whether distinct coordinates always reach distinct indices. */
SW_API sw_error_t* sw_layout_is_injective(const sw_layout_t* layout, bool* out_injective);
/* Whether two layouts have the same trees, extents and strides. */
SW_API sw_error_t* sw_layout_equal(const sw_layout_t* a, const sw_layout_t* b, bool* out_equal);
/* index(coord). `count` is either the rank (one coordinate per top-level mode,
 * decoded into its leaves) or the number of leaves (one per leaf). */
SW_API sw_error_t* sw_layout_index(const sw_layout_t* layout, const int64_t* coord, size_t count,
                                   int64_t* out_index);
/* First-mode-fastest ordinal of a per-mode coordinate (the shape's encode). */
SW_API sw_error_t* sw_layout_encode(const sw_layout_t* layout, const int64_t* coord, size_t count,
                                    int64_t* out_ordinal);
/* Per-mode coordinate of an ordinal (the shape's decode); `capacity` >= rank. */
SW_API sw_error_t* sw_layout_decode(const sw_layout_t* layout, int64_t ordinal, int64_t* out_coord,
                                    size_t capacity);
/* Writes the text form (see sw_layout_parse) and its length without the NUL.
 * With a too small buffer it writes nothing but *out_length and fails VALUE;
 * call with buffer NULL and capacity 0 to learn the length. */
SW_API sw_error_t* sw_layout_to_string(const sw_layout_t* layout, char* buffer, size_t capacity,
                                       size_t* out_length);

/* ------------------------------------------------------------------------ */
/* Carriers                                                                  */
/* ------------------------------------------------------------------------ */

/* A carrier is a flat run of `size` physical slots of one dtype (a slot is
 * an element; a block-quantized dtype's size and every range read or written
 * are whole blocks, VALUE otherwise) with
 * - a version counter: +1 per successful public write (never by residency
 *   moves or by the library's own internal writes);
 * - an ownership state: a carrier claimed by in-flight work or by a composite
 *   is not publicly mutable (writes and dispose fail STATE);
 * - dispose: idempotent; afterwards value access fails STATE.
 * Reference counting is thread-safe; see the threading note at the top. */
typedef struct sw_carrier_t sw_carrier_t;

typedef enum sw_carrier_kind_t {
  SW_CARRIER_CPU = 1,
  SW_CARRIER_HOST = 2,
  SW_CARRIER_FILE = 3,
  SW_CARRIER_ZSTD = 4,
  SW_CARRIER_VULKAN = 5,
  SW_CARRIER_TILED = 6,
  SW_CARRIER_REMOTE = 7,
  SW_CARRIER_KIND_FORCE32 = 0x7fffffff
} sw_carrier_kind_t;

/* A zero-filled CPU carrier of `size` slots (0 makes an empty carrier). CPU
 * carriers are aligned host memory from the runtime's reuse pool; they are the
 * default compute carrier. */
SW_API sw_error_t* sw_carrier_create_cpu(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                         sw_carrier_t** out_carrier);
/* A CPU carrier holding a copy of `size` elements at `data` (NULL allowed
 * only for size 0). */
SW_API sw_error_t* sw_carrier_create_cpu_from(sw_runtime_t* runtime, sw_dtype_t dtype,
                                              const void* data, size_t size,
                                              sw_carrier_t** out_carrier);

/* Host memory the caller lends to a CPU carrier (sw_carrier_create_cpu_external). */
typedef struct sw_external_memory_desc_t {
  uint32_t struct_size;
  /* Slot 0 of the memory, aligned to at least the dtype's size. NULL only
   * when `bytes` is 0 (an empty carrier). */
  void* data;
  /* Bytes at `data`: a multiple of the dtype's size; the carrier has
   * bytes / dtype size slots. */
  size_t bytes;
  /* The memory must not be written by the library: public writes to the
   * carrier (sw_carrier_write, sw_tensor_set, sw_tensor_write) and moves into
   * it fail STATE, sw_carrier_is_mutable is false. Ops, reads and moves out
   * of it are allowed. Default false. */
  bool read_only;
  /* Optional. Called exactly once, with `user_data`, when the carrier drops
   * the memory: on dispose (sw_carrier_dispose, a move out of the carrier,
   * a TiledEvictable taking its values as the primary seed) or when its last
   * reference goes, whichever comes first. It may run on any thread (the
   * runtime's loop thread for a move) and must not call back into the
   * library for this carrier. */
  void (*release)(void* user_data);
  void* user_data;
} sw_external_memory_desc_t;

SW_API void sw_external_memory_desc_init(sw_external_memory_desc_t* desc);
/* A CPU carrier (kind SW_CARRIER_CPU, a compute carrier) whose slots are the
 * caller's memory, without a copy: what the caller writes there is what ops
 * read, and what the library writes lands there. The memory must stay valid
 * and must not be freed until desc->release is called; the library never
 * frees it, never returns it to its buffer pool and never reallocates it (an
 * empty one stays empty: it cannot be the allocated destination of a move or
 * a projection). Writes by the caller bypass the version counter, as writes
 * through sw_carrier_host_pointer do. Everything else is as for any CPU
 * carrier: every op takes it, moves go into it (unless read-only) and out of
 * it (disposing it, so releasing the memory), ownership and dispose rules
 * hold. Creating one allocates no storage, so SW_FAULT_ALLOCATION
 * (strideweave_testing.h) does not
 * count it. Errors: TYPE for an invalid dtype; VALUE for a NULL desc, an
 * unknown desc->struct_size, NULL data with bytes > 0, data not aligned to
 * the dtype's size, or bytes not a multiple of it. On failure release is not
 * called: the memory stays the caller's. */
SW_API sw_error_t* sw_carrier_create_cpu_external(sw_runtime_t* runtime, sw_dtype_t dtype,
                                                  const sw_external_memory_desc_t* desc,
                                                  sw_carrier_t** out_carrier);
SW_API void sw_carrier_retain(sw_carrier_t* carrier);
SW_API void sw_carrier_release(sw_carrier_t* carrier);

SW_API sw_error_t* sw_carrier_kind(const sw_carrier_t* carrier, sw_carrier_kind_t* out_kind);
SW_API sw_error_t* sw_carrier_dtype(const sw_carrier_t* carrier, sw_dtype_t* out_dtype);
/* Number of slots. Still answers after dispose. */
SW_API sw_error_t* sw_carrier_size(const sw_carrier_t* carrier, size_t* out_size);
SW_API sw_error_t* sw_carrier_version(const sw_carrier_t* carrier, uint64_t* out_version);
/* Live and not owned: public writes would be accepted. */
SW_API sw_error_t* sw_carrier_is_mutable(const sw_carrier_t* carrier, bool* out_mutable);
/* Refuses public writes for good: a file opened with sw_carrier_open_file,
 * external memory lent read-only. Still answers after dispose. */
SW_API sw_error_t* sw_carrier_is_read_only(const sw_carrier_t* carrier, bool* out_read_only);
/* Claimed by in-flight work or by a composite carrier. */
SW_API sw_error_t* sw_carrier_is_owned(const sw_carrier_t* carrier, bool* out_owned);
SW_API sw_error_t* sw_carrier_is_disposed(const sw_carrier_t* carrier, bool* out_disposed);
/* Copies `count` slots starting at `first_slot` into `destination`
 * (count * dtype size bytes). INDEX if the range is outside the carrier.
 * Safe against a concurrent dispose on another thread (a move committing its
 * source, say): the read completes on intact values or fails STATE. */
SW_API sw_error_t* sw_carrier_read(const sw_carrier_t* carrier, size_t first_slot, size_t count,
                                   void* destination);
/* Writes `count` slots starting at `first_slot`; one version step. */
SW_API sw_error_t* sw_carrier_write(sw_carrier_t* carrier, size_t first_slot, size_t count,
                                    const void* source);
/* Frees the carrier's values; idempotent. STATE while it is owned. The handle
 * stays valid (size, dtype and kind still answer). Reads already running on
 * other threads finish first: their storage goes with the last of them. */
SW_API sw_error_t* sw_carrier_dispose(sw_carrier_t* carrier);
/* The host address of slot 0 of a CPU carrier, for zero-copy views (NumPy,
 * DLPack, tinygrad's Tensor.from_blob: see docs/interop.md for the shape
 * order and lifetime rules). Valid until the carrier is disposed (a finished
 * move out of it disposes it) or released; the caller keeps it retained
 * while the memory is lent. Unlike sw_carrier_read it does not hold the
 * storage against a concurrent dispose. Writes through it bypass the version
 * counter and must not be made to a read-only carrier. UNSUPPORTED for
 * carriers whose memory is not host addressable (Vulkan carriers among them:
 * move or read their tensors instead). */
SW_API sw_error_t* sw_carrier_host_pointer(sw_carrier_t* carrier, void** out_pointer);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/* A tensor is (carrier, offset, layout): element `c` lives at slot
 * offset + layout.index(c). Its shape is the layout's top-level extents. A
 * tensor handle is also its autograd identity (requires_grad, grad, the node
 * that produced it). Reference counting is thread-safe. */
typedef struct sw_tensor_t sw_tensor_t;

/* A tensor over an existing carrier. Every reachable slot must lie inside the
 * carrier (INDEX otherwise). */
SW_API sw_error_t* sw_tensor_create(sw_carrier_t* carrier, int64_t offset, const sw_layout_t* layout,
                                    sw_tensor_t** out_tensor);
/* A dense CPU tensor holding a copy of numel(extents) elements at `data`,
 * given first mode fastest. */
SW_API sw_error_t* sw_tensor_from_data(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents,
                                       size_t rank, const void* data, sw_tensor_t** out_tensor);
/* A dense zero-filled CPU tensor. */
SW_API sw_error_t* sw_tensor_zeros(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents,
                                   size_t rank, sw_tensor_t** out_tensor);
/* A dense CPU tensor with every element `value`, converted to `dtype`.
 * TYPE for an unknown dtype; VALUE when the value does not fit an integer
 * or bool dtype exactly (2.5 for i32, 2 for bool). */
SW_API sw_error_t* sw_tensor_full(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                  double value, sw_tensor_t** out_tensor);
/* A rank-1 CPU tensor of ceil((stop - start) / step) elements (none when
 * that is <= 0): element i is start + i * step, computed in double and
 * converted to `dtype` (truncated toward zero for integer dtypes, as
 * sw_tensor_to_dtype converts). VALUE for step 0, a non-finite argument or
 * more than 2^48 elements; TYPE for an unknown dtype. */
SW_API sw_error_t* sw_tensor_arange(sw_runtime_t* runtime, sw_dtype_t dtype, double start, double stop, double step,
                                    sw_tensor_t** out_tensor);

typedef enum sw_random_distribution_t {
  SW_RANDOM_UNIFORM = 1, /* in [low, high) */
  SW_RANDOM_NORMAL = 2,  /* mean, stddev */
  SW_RANDOM_DISTRIBUTION_FORCE32 = 0x7fffffff
} sw_random_distribution_t;

/* Options of sw_tensor_random; fill with sw_random_desc_init. */
typedef struct sw_random_desc_t {
  uint32_t struct_size;
  sw_random_distribution_t distribution; /* default SW_RANDOM_UNIFORM */
  sw_dtype_t dtype;                      /* a floating dtype; default SW_DTYPE_F32 */
  uint64_t seed;                         /* default 0 */
  double low, high;                      /* uniform; default 0 and 1 */
  double mean, stddev;                   /* normal; default 0 and 1 */
} sw_random_desc_t;

SW_API void sw_random_desc_init(sw_random_desc_t* desc);
/* A dense CPU tensor of random values. The generator is counter based:
 * element i (first mode fastest) of a given seed, distribution and
 * parameters is the same on every machine, for every thread count and for
 * any shape holding it at ordinal i; the values differ from NumPy's and
 * PyTorch's generators. Uniform values are low + (high - low) * u with u of
 * 53 random bits, never high itself once rounded to the dtype; normal ones
 * are Box-Muller pairs. desc == NULL is the defaults. TYPE for a dtype that
 * is not floating; VALUE for an unknown desc->struct_size or distribution,
 * non-finite parameters, low > high or stddev < 0. */
SW_API sw_error_t* sw_tensor_random(sw_runtime_t* runtime, const sw_random_desc_t* desc, const int64_t* extents,
                                    size_t rank, sw_tensor_t** out_tensor);
SW_API void sw_tensor_retain(sw_tensor_t* tensor);
SW_API void sw_tensor_release(sw_tensor_t* tensor);

SW_API sw_error_t* sw_tensor_carrier(const sw_tensor_t* tensor, sw_carrier_t** out_carrier);
SW_API sw_error_t* sw_tensor_layout(const sw_tensor_t* tensor, sw_layout_t** out_layout);
SW_API sw_error_t* sw_tensor_offset(const sw_tensor_t* tensor, int64_t* out_offset);
SW_API sw_error_t* sw_tensor_dtype(const sw_tensor_t* tensor, sw_dtype_t* out_dtype);
SW_API sw_error_t* sw_tensor_rank(const sw_tensor_t* tensor, size_t* out_rank);
/* Top-level extents; `capacity` must be at least the rank. */
SW_API sw_error_t* sw_tensor_shape(const sw_tensor_t* tensor, int64_t* out_extents, size_t capacity);
SW_API sw_error_t* sw_tensor_numel(const sw_tensor_t* tensor, int64_t* out_numel);
/* The carrier's version. */
SW_API sw_error_t* sw_tensor_version(const sw_tensor_t* tensor, uint64_t* out_version);
/* Reads one element as a double (integers exact up to 2^53, bool as 0/1). */
SW_API sw_error_t* sw_tensor_get(const sw_tensor_t* tensor, const int64_t* coord, size_t count,
                                 double* out_value);
/* Writes one element converted from a double; one version step. VALUE if the
 * value does not fit an integer dtype or is not integral. */
SW_API sw_error_t* sw_tensor_set(sw_tensor_t* tensor, const int64_t* coord, size_t count, double value);
/* Copies every element, first mode fastest, into `destination`, which holds
 * `capacity_bytes` (at least numel * dtype size). */
SW_API sw_error_t* sw_tensor_read(const sw_tensor_t* tensor, void* destination, size_t capacity_bytes);
/* Writes every element from `source` (numel * dtype size bytes, first mode
 * fastest); one version step. VALUE if the layout is not injective. */
SW_API sw_error_t* sw_tensor_write(sw_tensor_t* tensor, const void* source, size_t size_bytes);
/* A view whose mode i is mode perm[i] of `tensor` (same carrier and offset).
 * Differentiable: gradients flow back through the inverse permutation. */
SW_API sw_error_t* sw_tensor_permute(sw_tensor_t* tensor, const size_t* perm, size_t rank,
                                     sw_tensor_t** out_view);
/* The view with modes `axis0` and `axis1` swapped. */
SW_API sw_error_t* sw_tensor_transpose(sw_tensor_t* tensor, size_t axis0, size_t axis1,
                                       sw_tensor_t** out_view);

/* Views and copies. A view is a new tensor over the same carrier (a new
 * offset and layout): writes through it are seen by its base and the other
 * way round, and it shares the carrier's version counter. Views are
 * differentiable: gradients flow back to the base. None of these takes a
 * tensor on a TiledEvictable (UNSUPPORTED: project it first).
 *
 * Element order: reshape, view and flatten keep the tensor's elements in
 * first-mode-fastest (colexicographic) order, the order of the header's
 * ordinals and of sw_tensor_read: element (i, j) of an (M, N) tensor is
 * ordinal i + M * j, and so element o of the result is element o of the
 * input. This is NumPy's order='F' (Fortran order), not NumPy's and
 * PyTorch's default row-major order: reshaping (2, 3) to (3, 2) maps
 * element (1, 0), ordinal 1, to (1, 0), and (0, 1), ordinal 2, to (2, 0).
 *
 * reshape is a view whenever the tensor's slots in that order can be
 * described by a layout of the new extents (they always can for a dense
 * tensor, and for most strided ones: modes are split where a leaf's extent
 * divides, and merged into nested modes where they do not walk one
 * progression), else a dense copy; view fails VALUE where no such layout
 * exists. `extents` may hold one -1, inferred from the element count; VALUE
 * when the counts differ, for two -1 or another negative extent. */
SW_API sw_error_t* sw_tensor_reshape(sw_tensor_t* tensor, const int64_t* extents, size_t rank,
                                     sw_tensor_t** out_result);
SW_API sw_error_t* sw_tensor_view(sw_tensor_t* tensor, const int64_t* extents, size_t rank, sw_tensor_t** out_view);
/* reshape merging modes start_axis..end_axis (negative counts from the end;
 * INDEX out of range, VALUE when start comes after end). A rank-0 tensor
 * flattens to rank 1. */
SW_API sw_error_t* sw_tensor_flatten(sw_tensor_t* tensor, int64_t start_axis, int64_t end_axis,
                                     sw_tensor_t** out_result);
/* The view with a mode of extent 1 inserted before mode `axis` (in
 * [-rank - 1, rank]; INDEX otherwise). */
SW_API sw_error_t* sw_tensor_unsqueeze(sw_tensor_t* tensor, int64_t axis, sw_tensor_t** out_view);
/* The view without the listed modes of extent 1 (a listed mode of another
 * extent stays, as in PyTorch); axes == NULL with count 0 drops every mode
 * of extent 1. INDEX for an axis out of range. */
SW_API sw_error_t* sw_tensor_squeeze(sw_tensor_t* tensor, const int64_t* axes, size_t count, sw_tensor_t** out_view);
/* The broadcast view of `extents` (trailing modes aligned, NumPy style):
 * modes of extent 1 stretch with stride 0, new leading modes are added,
 * -1 keeps a mode's extent. VALUE for a mode of another extent, fewer
 * extents than the rank, or -1 on a new mode. The view reaches slots
 * several times: in-place writes to it fail VALUE. */
SW_API sw_error_t* sw_tensor_expand(sw_tensor_t* tensor, const int64_t* extents, size_t rank,
                                    sw_tensor_t** out_view);
/* The view of elements start, start + step, ... before stop along `axis`,
 * as Python's t[start:stop:step]: negative start and stop count from the
 * end, both are clamped as slice.indices() clamps them (so INT64_MAX means
 * "to the end" and, with a negative step, INT64_MIN "through index 0"),
 * and a negative step walks backwards (a negative stride). VALUE for step
 * 0, INDEX for an axis out of range; UNSUPPORTED for a strided slice of a
 * nested mode that does not walk one progression (slice a contiguous copy). */
SW_API sw_error_t* sw_tensor_slice(sw_tensor_t* tensor, int64_t axis, int64_t start, int64_t stop, int64_t step,
                                   sw_tensor_t** out_view);
/* The view at `index` along `axis`, without that mode (Python's t[:, i]);
 * a negative index counts from the end. INDEX out of range. */
SW_API sw_error_t* sw_tensor_select(sw_tensor_t* tensor, int64_t axis, int64_t index, sw_tensor_t** out_view);
/* The tensor itself (a new reference) when its layout is dense, else a
 * dense copy on the same compute carrier kind (differentiable). */
SW_API sw_error_t* sw_tensor_contiguous(sw_tensor_t* tensor, sw_tensor_t** out_result);
/* A dense copy, always (differentiable). */
SW_API sw_error_t* sw_tensor_clone(sw_tensor_t* tensor, sw_tensor_t** out_result);
/* A view over the same slots outside autograd: no history, no
 * requires_grad; it shares the carrier (and its version counter). */
SW_API sw_error_t* sw_tensor_detach(sw_tensor_t* tensor, sw_tensor_t** out_view);
/* The values converted to `dtype`: the tensor itself (a new reference) when
 * it has that dtype, else a dense copy. Floating to floating rounds to
 * nearest even (f64 to f16 through f32); floating to integer truncates
 * toward zero and saturates at the type's range, NaN giving 0; integer to
 * integer wraps modulo 2^bits; anything to bool is != 0 (NaN is true); bool
 * is 0 or 1. Differentiable between floating dtypes. TYPE for an unknown
 * dtype. */
SW_API sw_error_t* sw_tensor_to_dtype(sw_tensor_t* tensor, sw_dtype_t dtype, sw_tensor_t** out_result);
/* In-place writes: one version step of the tensor's carrier each (PyTorch's
 * version counter: a tensor saved for backward and then modified fails the
 * backward STATE "modified in-place"). STATE for a released, owned or
 * read-only carrier; VALUE for a layout that reaches a slot twice. With
 * grad mode on, STATE for a leaf that requires grad (modify it under
 * sw_set_grad_enabled(false), as an optimiser step does) and for a view of
 * a tensor that requires grad; another tensor takes the write as its new
 * history. */
/* Every element = value, converted (VALUE when it does not fit, as
 * sw_tensor_full). sw_tensor_fill(t, 0) is PyTorch's zero_(). */
SW_API sw_error_t* sw_tensor_fill(sw_tensor_t* tensor, double value);
/* destination = source, broadcast to the destination's shape (VALUE
 * otherwise) and converted to its dtype as sw_tensor_to_dtype converts.
 * Both on one compute carrier kind (TYPE otherwise: move first). A source
 * overlapping the destination is read before anything is written.
 * Differentiable with respect to the source. */
SW_API sw_error_t* sw_tensor_copy_from(sw_tensor_t* destination, sw_tensor_t* source);

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/* The six ops of the spec. Results are fresh dense tensors on the compute
 * carrier kind of the inputs. Inputs may have any strided or nested layout.
 * Elementwise ops broadcast NumPy style (trailing modes aligned, extent 1
 * stretches). f32 and f64 are computed natively; matmul also takes f16 and
 * bf16 inputs (see sw_matmul). Both operands must have the same dtype (TYPE
 * otherwise): these six do not promote. sw_binary, sw_unary and sw_reduce
 * below are the same ops for every dtype, with type promotion.
 * With grad mode on and an input that requires grad, the result records one
 * autograd node. Ops are thread-safe. */
SW_API sw_error_t* sw_add(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);
SW_API sw_error_t* sw_elementwise_mul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);
/* mul(tensor, tensor) is elementwise_mul; the scalar forms multiply by a weak
 * scalar that takes the tensor's dtype. */
SW_API sw_error_t* sw_mul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);
SW_API sw_error_t* sw_mul_scalar(sw_tensor_t* a, double scalar, sw_tensor_t** out_result);
SW_API sw_error_t* sw_scalar_mul(double scalar, sw_tensor_t* b, sw_tensor_t** out_result);
SW_API sw_error_t* sw_relu(sw_tensor_t* a, sw_tensor_t** out_result);
/* Sums over `axes` (negative counts from the end; duplicates are VALUE,
 * out of range INDEX). axes == NULL with count 0 sums over every axis. With
 * keepdims the reduced modes stay with extent 1. */
SW_API sw_error_t* sw_reduce_sum(sw_tensor_t* a, const int64_t* axes, size_t count, bool keepdims,
                                 sw_tensor_t** out_result);
/* NumPy matmul: (..., M, K) @ (..., K, N) -> (..., M, N), batch modes
 * broadcast; a rank-1 operand is promoted and its mode dropped afterwards.
 * The result has the operands' dtype, as in PyTorch: f32, f64, and f16 or
 * bf16, whose products accumulate in f32 and are rounded to the half dtype
 * once (sw_matmul_ex gives the f32 sums instead). On the CPU, bf16 runs on
 * the CPU's bf16 instructions (AMX, AVX512_BF16) where it has them; half
 * operands are never converted to an f32 copy. Operands whose matrix modes
 * have one unit stride (any batch strides, the other stride at least its
 * extent: transposes, padded rows, the experts of a projection in the
 * geometry docs/matmul.md recommends) are read in place; other layouts are
 * packed per batch first.
 *
 * Block-quantized weights: b a (K, N) Q8_0, Q4_0, Q4_K, Q6_K or MXFP4 CPU
 * tensor (blocks along K), a any float CPU tensor (K) or (M, K), taken as
 * f32. The blocks are multiplied where they lie (a quantized to 8-bit
 * blocks; docs/quantization.md gives the error bound); the result is a's
 * dtype when that is f32, bf16 or f16, else f32 (sw_matmul_ex: f32, bf16
 * or f16). TYPE for an integer a or another result dtype, VALUE for
 * batched operands, UNSUPPORTED for a non-CPU operand or gradients. */
SW_API sw_error_t* sw_matmul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);

/* Options of sw_matmul_ex; fill with sw_matmul_desc_init. */
typedef struct sw_matmul_desc_t {
  uint32_t struct_size;
  /* The result's dtype. SW_DTYPE_INVALID (the default): the operands', as
   * sw_matmul. SW_DTYPE_F32 with f16 or bf16 operands: the f32 sums,
   * unrounded. Anything else is TYPE. */
  sw_dtype_t out_dtype;
} sw_matmul_desc_t;

SW_API void sw_matmul_desc_init(sw_matmul_desc_t* desc);

/* sw_matmul with options; desc == NULL is the defaults. VALUE for an unknown
 * desc->struct_size. Autograd works as for sw_matmul: the gradients have the
 * operands' dtype. */
SW_API sw_error_t* sw_matmul_ex(sw_tensor_t* a, sw_tensor_t* b, const sw_matmul_desc_t* desc,
                                sw_tensor_t** out_result);

/* ---- The tensor surface: unary, binary, reductions, selection, indexing ---
 *
 * The functions below take every dtype where the op makes sense and
 * promote mixed operands as PyTorch does:
 *   - categories bool < integer (u8, i32, i64) < floating (f16, bf16, f32,
 *     f64): the higher category wins (i32 + f32 is f32, bool + u8 is u8);
 *   - within a category the wider type wins, u8 with i32 giving i32 and f16
 *     with bf16 giving f32;
 *   - rank-0 tensors promote like any other (PyTorch gives them a lower
 *     priority; pass a scalar to the *_scalar forms for a weak scalar).
 * f16 and bf16 are computed in f32 and rounded once to the result. Integer
 * arithmetic wraps modulo 2^bits. Broadcasting is NumPy's (trailing modes
 * aligned, extent 1 stretches; VALUE otherwise). Results are fresh dense
 * tensors on the inputs' compute carrier kind (TYPE for operands on two
 * kinds or a storage carrier). Differentiable ops record one autograd node
 * when grad mode is on and a floating input requires grad; comparisons,
 * indices and integer results never do.
 *
 * Carriers: every op runs on the CPU carrier. On a Vulkan carrier the
 * elementwise ops (unary, binary, comparisons, where), sum / mean / max /
 * min reductions, softmax and log_softmax, views, copies, cat and stack run
 * as shaders in f32 (f16 and bf16 through f32; f64 where the device has
 * shaderFloat64, except exp, log, silu, gelu, sigmoid, tanh and pow);
 * integer and bool arithmetic, topk, max / min with indices and the index
 * ops fail UNSUPPORTED there, naming the op and the carrier. A tensor on a
 * TiledEvictable is taken only where the op is one of the six direct ops of
 * the spec (SW_BINARY_ADD, SW_BINARY_MUL and their scalar forms,
 * SW_UNARY_RELU, SW_REDUCE_SUM); any other op on one fails UNSUPPORTED,
 * pointing at sw_tiled_project. */

/* Enum values are fixed forever; new ops are only appended. */
typedef enum sw_unary_op_t {
  SW_UNARY_NEG = 1,     /* -x; every dtype but bool (u8 wraps) */
  SW_UNARY_ABS = 2,     /* |x|; every dtype but bool */
  SW_UNARY_EXP = 3,     /* floating results: integer and bool inputs give f32 */
  SW_UNARY_LOG = 4,
  SW_UNARY_SQRT = 5,
  SW_UNARY_RSQRT = 6,   /* 1 / sqrt(x) */
  SW_UNARY_SILU = 7,    /* x * sigmoid(x) */
  SW_UNARY_GELU = 8,    /* x * Phi(x), the exact (erf) form: PyTorch's approximate='none' */
  SW_UNARY_SIGMOID = 9, /* 1 / (1 + exp(-x)) */
  SW_UNARY_TANH = 10,
  SW_UNARY_RELU = 11,   /* max(x, 0); every dtype but bool */
  SW_UNARY_OP_FORCE32 = 0x7fffffff
} sw_unary_op_t;

typedef enum sw_binary_op_t {
  SW_BINARY_ADD = 1,     /* bool + bool is or */
  SW_BINARY_SUB = 2,     /* TYPE for two bools */
  SW_BINARY_MUL = 3,     /* bool * bool is and */
  SW_BINARY_DIV = 4,     /* true division: integer and bool operands give f32 */
  SW_BINARY_POW = 5,     /* integers exact (a negative exponent gives 1 / a^-b truncated: 0 unless |a| is 1);
                            TYPE for two bools */
  SW_BINARY_MAXIMUM = 6, /* NaN if either is; a tie splits the gradient */
  SW_BINARY_MINIMUM = 7,
  /* Comparisons give bool (NaN compares unequal to everything). */
  SW_BINARY_EQ = 8,
  SW_BINARY_NE = 9,
  SW_BINARY_LT = 10,
  SW_BINARY_LE = 11,
  SW_BINARY_GT = 12,
  SW_BINARY_GE = 13,
  SW_BINARY_OP_FORCE32 = 0x7fffffff
} sw_binary_op_t;

typedef enum sw_reduce_op_t {
  SW_REDUCE_SUM = 1,  /* integer and bool sums are i64 */
  SW_REDUCE_MEAN = 2, /* floating dtypes only (TYPE otherwise); NaN over no element */
  SW_REDUCE_MAX = 3,  /* NaN if any is; VALUE over a mode of extent 0 */
  SW_REDUCE_MIN = 4,
  SW_REDUCE_OP_FORCE32 = 0x7fffffff
} sw_reduce_op_t;

/* f(a). VALUE for an unknown op; TYPE for neg, abs and relu of bool. */
SW_API sw_error_t* sw_unary(sw_unary_op_t op, sw_tensor_t* a, sw_tensor_t** out_result);
/* a op b, broadcast and promoted as above. VALUE for an unknown op. */
SW_API sw_error_t* sw_binary(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);
/* a op scalar and scalar op b. The scalar is weak: it takes the tensor's
 * dtype, as a Python number does in PyTorch (f16 + 0.1 stays f16). VALUE
 * when it cannot: a non-integral or out-of-range scalar for an integer
 * tensor, anything but 0 and 1 for a bool one (convert the tensor first to
 * compute in another dtype), and a negative exponent for pow of an integer
 * tensor. Division of an integer or bool tensor computes in f32. */
SW_API sw_error_t* sw_binary_scalar(sw_binary_op_t op, sw_tensor_t* a, double scalar, sw_tensor_t** out_result);
SW_API sw_error_t* sw_scalar_binary(sw_binary_op_t op, double scalar, sw_tensor_t* b, sw_tensor_t** out_result);
/* a op= b and a op= scalar, in place (see the in-place rules above
 * sw_tensor_fill): b broadcast to a's shape (VALUE otherwise), the result
 * converted to a's dtype; TYPE when the result's category is higher than
 * a's (an i32 tensor += an f32 one). A `b` overlapping `a` otherwise than
 * exactly is read before anything is written. */
SW_API sw_error_t* sw_binary_inplace(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b);
SW_API sw_error_t* sw_binary_scalar_inplace(sw_binary_op_t op, sw_tensor_t* a, double scalar);
/* condition ? a : b elementwise, the three broadcast together; `condition`
 * must be bool (TYPE otherwise) and takes no gradient. */
SW_API sw_error_t* sw_where(sw_tensor_t* condition, sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result);
/* Reduces over `axes` as sw_reduce_sum does (negative counts from the end;
 * duplicates VALUE, out of range INDEX; axes == NULL with count 0: every
 * axis; keepdims keeps extent-1 modes). Sum and mean of f16 / bf16
 * accumulate in f32. The max / min gradient is shared evenly between tied
 * elements (PyTorch's amax / amin). */
SW_API sw_error_t* sw_reduce(sw_reduce_op_t op, sw_tensor_t* a, const int64_t* axes, size_t count, bool keepdims,
                             sw_tensor_t** out_result);
/* The max (SW_REDUCE_MAX) or min (SW_REDUCE_MIN; VALUE for the others)
 * along `axis` with the index (i64) of the first element reaching it; NaN
 * counts as the most extreme value. Both results have a's shape without
 * `axis` (with extent 1 there under keepdims). The gradient flows to the
 * selected elements. VALUE over an axis of extent 0; INDEX for an axis out
 * of range. */
SW_API sw_error_t* sw_reduce_index(sw_reduce_op_t op, sw_tensor_t* a, int64_t axis, bool keepdims,
                                   sw_tensor_t** out_values, sw_tensor_t** out_indices);
/* exp(a - max) / sum(exp(a - max)) along `axis`, and its logarithm
 * computed as (a - max) - log(sum(...)); floating dtypes only (TYPE). */
SW_API sw_error_t* sw_softmax(sw_tensor_t* a, int64_t axis, sw_tensor_t** out_result);
SW_API sw_error_t* sw_log_softmax(sw_tensor_t* a, int64_t axis, sw_tensor_t** out_result);
/* The k largest values along `axis`, sorted descending, ties broken by the
 * lower index, NaN counting as the largest, and their indices (i64): a's
 * shape with k along `axis`. VALUE for k outside [0, extent]; TYPE for bool.
 * The gradient flows to the selected elements. */
SW_API sw_error_t* sw_topk(sw_tensor_t* a, int64_t k, int64_t axis, sw_tensor_t** out_values,
                           sw_tensor_t** out_indices);
/* Rows of `a` along `axis` picked by `index`, an i32 or i64 tensor of rank
 * 0 or 1: a's shape with numel(index) along the axis (PyTorch's
 * index_select). INDEX for an index outside [0, extent) (negative indices
 * do not wrap); TYPE for another index dtype. Differentiable with respect
 * to `a`: its gradient is sw_index_add's. */
SW_API sw_error_t* sw_index_select(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t** out_result);
/* out[c] = a[c with c[axis] = index[c]] for `index` of a's rank whose other
 * extents are at most a's (PyTorch's gather); the result has index's
 * shape. Errors as sw_index_select; VALUE for shapes. */
SW_API sw_error_t* sw_gather(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t** out_result);
/* The adjoints: a copy of `a` with source's rows added at the rows `index`
 * picks (sw_index_add; index of rank 0 or 1, source of a's shape with
 * numel(index) along the axis), or with source[c] added at c with c[axis]
 * = index[c] (sw_scatter_add; index of a's and source's rank, extents at
 * most theirs). Repeated indices accumulate. `a` and `source` have one
 * dtype (TYPE otherwise; bool is TYPE). Differentiable with respect to both. */
SW_API sw_error_t* sw_index_add(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t* source,
                                sw_tensor_t** out_result);
SW_API sw_error_t* sw_scatter_add(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t* source,
                                  sw_tensor_t** out_result);
/* `count` tensors joined along an existing `axis` (sw_cat: one rank, the
 * same extents elsewhere) or a new one (sw_stack: one shape; axis in
 * [-rank - 1, rank]), promoted to one dtype. VALUE for count 0 or shapes
 * that differ; sw_cat of rank-0 tensors is VALUE. */
SW_API sw_error_t* sw_cat(sw_tensor_t* const* tensors, size_t count, int64_t axis, sw_tensor_t** out_result);
SW_API sw_error_t* sw_stack(sw_tensor_t* const* tensors, size_t count, int64_t axis, sw_tensor_t** out_result);

/* ------------------------------------------------------------------------ */
/* Autograd                                                                  */
/* ------------------------------------------------------------------------ */

/* Grad mode is per thread and on by default. A no-grad scope in C is
 *   bool previous = sw_set_grad_enabled(false); ... sw_set_grad_enabled(previous); */
SW_API bool sw_is_grad_enabled(void);
/* Sets the calling thread's grad mode and returns the previous one. */
SW_API bool sw_set_grad_enabled(bool enabled);

/* Marks a leaf tensor as requiring gradients. TYPE for non-float dtypes; VALUE
 * for a tensor produced by a recorded op (not a leaf). */
SW_API sw_error_t* sw_tensor_set_requires_grad(sw_tensor_t* tensor, bool requires_grad);
SW_API sw_error_t* sw_tensor_requires_grad(const sw_tensor_t* tensor, bool* out_requires_grad);
/* Whether the tensor was not produced by a recorded op. */
SW_API sw_error_t* sw_tensor_is_leaf(const sw_tensor_t* tensor, bool* out_is_leaf);
/* The accumulated gradient, or NULL written to *out_grad when there is none. */
SW_API sw_error_t* sw_tensor_grad(const sw_tensor_t* tensor, sw_tensor_t** out_grad);
/* Drops the accumulated gradient. */
SW_API sw_error_t* sw_tensor_clear_grad(sw_tensor_t* tensor);
/* Runs reverse mode from `tensor`. `cotangent` has its shape and dtype, or is
 * NULL for a one-element tensor (cotangent 1). Every saved tensor's version is
 * checked before any node runs (STATE "modified in-place"). Contributions to
 * a node are summed before it runs; leaf gradients accumulate. Without
 * `retain_graph` the graph's saved tensors are freed and a second backward
 * through it fails STATE. */
SW_API sw_error_t* sw_backward(sw_tensor_t* tensor, sw_tensor_t* cotangent, bool retain_graph);

/* ------------------------------------------------------------------------ */
/* Asynchronous work                                                         */
/* ------------------------------------------------------------------------ */

/* Every asynchronous call validates its arguments first (failing with no
 * state changed), submits every transfer whose inputs are ready, and returns
 * an await handle without waiting. Each runtime runs one libuv loop thread
 * that completes the work; other threads reach it through a queue.
 *
 * An await is reference counted and thread-safe: any number of threads may
 * query or wait on it at once, and every wait observes the same result or the
 * same error. An await is not a tensor: passing one where a tensor is
 * expected fails TYPE. In-flight work retains everything it touches, so
 * handles may be released in any order, the await included. */
typedef struct sw_await_t sw_await_t;

typedef enum sw_await_kind_t {
  SW_AWAIT_MOVE = 1,        /* result: a tensor */
  SW_AWAIT_PROJECTION = 2,  /* result: a tensor */
  SW_AWAIT_RESIDENCY = 3,   /* result: none */
  SW_AWAIT_KIND_FORCE32 = 0x7fffffff
} sw_await_kind_t;

typedef enum sw_await_status_t {
  SW_AWAIT_PENDING = 0,
  SW_AWAIT_SUCCEEDED = 1,
  SW_AWAIT_FAILED = 2,
  SW_AWAIT_STATUS_FORCE32 = 0x7fffffff
} sw_await_status_t;

typedef enum sw_callback_mode_t {
  /* Fires on a thread that waits on this await (sw_await_wait) or calls
   * sw_runtime_process_events after completion: never spontaneously. */
  SW_CALLBACK_MODE_WAITING_THREAD = 1,
  /* Fires on the runtime's loop thread as soon as the await completes. The
   * callback must not block on other awaits of the same runtime. */
  SW_CALLBACK_MODE_LOOP_THREAD = 2,
  SW_CALLBACK_MODE_FORCE32 = 0x7fffffff
} sw_callback_mode_t;

/* Completion callback: fires exactly once per await, with SW_OK and "" on
 * success, else the error's code and message (both borrowed for the call).
 * `await` is borrowed; retain it to keep it. */
typedef void (*sw_await_callback_fn)(void* user_data, sw_await_t* await, sw_error_code_t code,
                                     const char* message);

typedef struct sw_await_callback_info_t {
  uint32_t struct_size;
  sw_callback_mode_t mode; /* default SW_CALLBACK_MODE_WAITING_THREAD */
  sw_await_callback_fn callback;
  void* user_data;
} sw_await_callback_info_t;

SW_API void sw_await_callback_info_init(sw_await_callback_info_t* info);
SW_API void sw_await_retain(sw_await_t* await);
SW_API void sw_await_release(sw_await_t* await);
SW_API sw_error_t* sw_await_kind(const sw_await_t* await, sw_await_kind_t* out_kind);
/* Non-blocking. */
SW_API sw_error_t* sw_await_query(const sw_await_t* await, sw_await_status_t* out_status);
/* Blocks until the await is terminal or `timeout_ns` passes (negative: no
 * limit; 0: poll). Returns NULL on success, a copy of the await's error on
 * failure (the same code and message every time), or SW_ERROR_TIMEOUT when
 * the time ran out (the await stays pending). Fires a waiting-thread callback
 * that is still owed before returning. */
SW_API sw_error_t* sw_await_wait(sw_await_t* await, int64_t timeout_ns);
/* The result of a succeeded await: the same tensor every call (a new
 * reference); NULL for an await without a result. STATE while pending; the
 * await's error if it failed. */
SW_API sw_error_t* sw_await_result(sw_await_t* await, sw_tensor_t** out_result);
/* Installs the completion callback. At most once per await (STATE after). If
 * the await is already terminal, a loop-thread callback fires on the loop
 * thread soon and a waiting-thread callback on the next wait/process_events. */
SW_API sw_error_t* sw_await_set_callback(sw_await_t* await, const sw_await_callback_info_t* info);

/* A file descriptor that is readable while completions are ready to be
 * processed: register it with poll/epoll, asyncio's add_reader or a Java
 * selector, and call sw_runtime_process_events when it fires. Owned by the
 * runtime; do not close it. */
SW_API sw_error_t* sw_runtime_event_fd(sw_runtime_t* runtime, int* out_fd);
/* Fires every waiting-thread callback owed for awaits that have completed,
 * on the calling thread, and drains the event fd. Non-blocking. */
SW_API sw_error_t* sw_runtime_process_events(sw_runtime_t* runtime, size_t* out_fired);

/* Moves the values of `tensor` into `destination`, returning a MOVE await.
 * The destination must have the tensor's dtype (TYPE) and hold at least its
 * element count, or be empty (size 0), in which case it is allocated to fit
 * (VALUE otherwise). Neither carrier may be disposed or owned (STATE), the
 * destination may not be read-only (STATE; a read-only source such as a
 * weights file is fine: disposing it closes it untouched), and they must
 * differ (VALUE). Both are claimed until the await is terminal. On
 * success the result is a dense tensor of the same shape at slot 0 of the
 * destination (one version step there) and the source carrier is disposed;
 * on failure both carriers are usable again and unchanged. With grad mode on
 * and a tensor that requires grad, the result records a node whose backward
 * brings the cotangent back to the source's side. */
SW_API sw_error_t* sw_move_async(sw_tensor_t* tensor, sw_carrier_t* destination, sw_await_t** out_await);

/* ------------------------------------------------------------------------ */
/* Storage carriers (secondary tiers)                                        */
/* ------------------------------------------------------------------------ */

/* Plain host memory that is not a compute carrier: a secondary tier. Zeroed. */
SW_API sw_error_t* sw_carrier_create_host(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          sw_carrier_t** out_carrier);

typedef struct sw_file_carrier_desc_t {
  uint32_t struct_size;
  /* Where a new carrier's file is created; NULL: $TMPDIR or /tmp. */
  const char* directory;
  /* Open with O_DIRECT where the file system allows it (transfers are then
   * aligned to 4096 bytes internally). */
  bool direct_io;
  /* Bytes per read or write request, and requests in flight per transfer.
   * 0 = chosen for the device: with direct_io, a device's best pair is
   * measured once (a probe of O_DIRECT reads of the first read-only file of
   * at least 64 MiB opened on it, a few hundred milliseconds) and kept in a
   * cache file for later runs (see sw_file_carrier_io); without a measure,
   * 4 MiB and 4. A value set here overrides the device's. */
  size_t chunk_bytes;
  uint32_t requests_in_flight;
} sw_file_carrier_desc_t;

SW_API void sw_file_carrier_desc_init(sw_file_carrier_desc_t* desc);
/* A zero-filled carrier backed by a new scratch file in desc->directory. The
 * file is unlinked as soon as it is created: it never shows in the
 * directory, its space is freed when the carrier is disposed or destroyed,
 * and a crash or a missing release leaves nothing on disk. IO on failure to
 * create the file. */
SW_API sw_error_t* sw_carrier_create_file(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_file_carrier_desc_t* desc, sw_carrier_t** out_carrier);
/* A read-only carrier over `size` elements at `byte_offset` of an existing
 * file (a weights file, say). The file is the user's: it is never written or
 * removed. IO if it cannot be opened; VALUE if the region passes its end.
 * Public writes fail STATE. */
SW_API sw_error_t* sw_carrier_open_file(sw_runtime_t* runtime, sw_dtype_t dtype, const char* path,
                                        uint64_t byte_offset, size_t size, const sw_file_carrier_desc_t* desc,
                                        sw_carrier_t** out_carrier);

/* Where a file carrier's transfer settings came from. */
typedef enum sw_io_profile_source_t {
  SW_IO_PROFILE_DEFAULT = 0, /* no measure of the device: the defaults */
  SW_IO_PROFILE_PROBED = 1,  /* measured by this process when the carrier opened */
  SW_IO_PROFILE_CACHED = 2,  /* measured earlier (this process, or the cache file) */
  SW_IO_PROFILE_SOURCE_FORCE32 = 0x7fffffff
} sw_io_profile_source_t;

/* How a file carrier moves its bytes. The device profile is the measured
 * best pair for O_DIRECT reads of the device holding the carrier's (first)
 * file. The probe's cache file is $STRIDEWEAVE_CACHE_DIR/io-devices, else
 * $XDG_CACHE_HOME/strideweave/io-devices, else
 * $HOME/.cache/strideweave/io-devices; STRIDEWEAVE_IO_PROBE=0 turns the
 * probe off, =refresh measures again and replaces the cached line. */
typedef struct sw_file_carrier_io_t {
  uint32_t struct_size;
  size_t chunk_bytes;          /* bytes per request its transfers use */
  uint32_t requests_in_flight; /* requests in flight per transfer */
  bool direct_io;              /* every file reads through O_DIRECT */
  sw_io_profile_source_t source;  /* of the device profile */
  uint64_t device;             /* st_dev of the (first) file */
  double device_read_bytes_per_second; /* the profile's measured rate; 0 unmeasured */
} sw_file_carrier_io_t;

SW_API void sw_file_carrier_io_init(sw_file_carrier_io_t* io);
/* TYPE when `carrier` is not a File carrier. */
SW_API sw_error_t* sw_file_carrier_io(const sw_carrier_t* carrier, sw_file_carrier_io_t* out_io);

typedef struct sw_zstd_carrier_desc_t {
  uint32_t struct_size;
  int32_t level;           /* zstd level; default 1 */
  size_t frame_elements;   /* elements per independently compressed frame; 0 = 1 Mi;
                              rounded up to whole blocks of a quantized dtype */
  int32_t shuffle;         /* byte-shuffle filter: -1 auto (on for float dtypes), 0 off, 1 on */
} sw_zstd_carrier_desc_t;

SW_API void sw_zstd_carrier_desc_init(sw_zstd_carrier_desc_t* desc);
/* A zero-filled carrier holding its values zstd-compressed in host memory,
 * one frame per `frame_elements` chunk, each with a content checksum: a
 * corrupt frame reads as SW_ERROR_DATA_CORRUPT, never as garbage. */
SW_API sw_error_t* sw_carrier_create_zstd(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_zstd_carrier_desc_t* desc, sw_carrier_t** out_carrier);
/* Remote carriers: a secondary tier whose slots live on Valkey or Redis
 * servers (docs/remote-tier.md). The slots are cut into blocks of
 * `block_elements` (the last one shorter), one string key each,
 * `<namespace>:b:<i>`, each with a CRC-32C in the hash `<namespace>:c`; the
 * hash `<namespace>:h` on every endpoint holds the namespace's header
 * (format version, dtype, size, block size, endpoint count, placement
 * seed). Block i lives on one endpoint, chosen by rendezvous hashing of
 * (placement_seed, i) over the endpoints' positions in the list: every
 * client of a namespace lists the same servers in the same order.
 *
 * Reads check each block's CRC (SW_ERROR_DATA_CORRUPT naming the block and
 * server on a mismatch); a missing block is SW_ERROR_IO naming the block and
 * the server, never zeros. A write of a block goes to a staging key and
 * replaces the block atomically (MULTI, RENAME, HSET of its CRC, EXEC), so a
 * failed write leaves the stored block as it was (a failed eviction leaves
 * its tiles resident and dirty). Every request has a deadline: on expiry the
 * connection is dropped, the transfers pending on it fail SW_ERROR_TIMEOUT,
 * and the next request reconnects. A read whose connection the server or
 * the network closed is sent again once on a fresh connection (SW_ERROR_IO
 * if that one is lost too); a read that straddled a writer's commit of the
 * block is read again, so it returns the whole old or the whole new block.
 *
 * Security: StrideWeave opens no port. Endpoints are `unix:///path` or
 * `redis://host[:port]`; a `redis://` host that is not a loopback address
 * (127.0.0.0/8, ::1, localhost) is refused (SW_ERROR_VALUE) unless
 * allow_plaintext is set, since this build's client has no TLS (`rediss://`
 * is SW_ERROR_UNSUPPORTED). The password is read from `password_file`,
 * which must be a regular file that neither its group nor others may read or
 * write (SW_ERROR_VALUE otherwise); it is never printed. Builds without
 * hiredis fail SW_ERROR_UNSUPPORTED. */
typedef struct sw_remote_carrier_desc_t {
  uint32_t struct_size;
  /* The servers, `unix:///path/to.sock` or `redis://host[:port]` (port 6379
   * by default); at least one. */
  const char* const* endpoints;
  size_t endpoint_count;
  /* The namespace of every key of the carrier; not empty, no spaces. */
  const char* key_namespace;
  /* ACL user for AUTH; NULL: "default". Needs password_file. */
  const char* user;
  /* A file holding the password (its first line); NULL: no AUTH. */
  const char* password_file;
  /* Allow `redis://` to a host that is not a loopback address (unencrypted). */
  bool allow_plaintext;
  /* sw_carrier_open_remote only: refuse writes (SW_ERROR_STATE). */
  bool read_only;
  /* Slots per block. Create: 0 = 262144. Open: 0 = the header's; any other
   * value must be the header's. */
  size_t block_elements;
  /* Seeds the placement of blocks on endpoints; open: must be the header's. */
  uint64_t placement_seed;
  /* Deadline of every request, in milliseconds; 0 = 5000. */
  uint32_t deadline_ms;
  /* Bytes per GETRANGE or SETRANGE command; 0 = 1 MiB. */
  size_t chunk_bytes;
  /* Commands in flight per transfer; 0 = 4. */
  uint32_t requests_in_flight;
  /* sw_carrier_create_remote only: the namespace outlives the carrier (a
   * seeded tier other clients open); by default disposing or releasing the
   * carrier deletes its keys. */
  bool persistent;
  /* Read replicas: replica_endpoints[i] holds a copy of the blocks of
   * endpoints[replica_of[i]] (a server started with `replicaof` that
   * endpoint); any number per endpoint, each written as an endpoint is.
   * Reads go to a block's endpoint first and, when it cannot be reached or
   * its connection is lost mid-read, to its replicas in order, within the
   * same deadline. A replica's copy can lag its endpoint's commits, so
   * replicas serve only carriers that cannot write: sw_carrier_open_remote
   * with read_only (SW_ERROR_VALUE otherwise). 0 / NULL: no replicas. A
   * desc of the first remote carriers, whose struct_size ends before these
   * fields, has none. */
  const char* const* replica_endpoints;
  const size_t* replica_of;
  size_t replica_count;
  /* The writer lease's time to live, in milliseconds; 0 = 15000. A carrier
   * that can write (made by sw_carrier_create_remote, or opened without
   * read_only) holds the namespace's writer lease, the key `<namespace>:w`
   * on the first endpoint, renewed every third of this: one writer per
   * namespace, any number of readers. A second writer is refused
   * SW_ERROR_STATE naming the holder (host:pid:id) and how long its lease
   * lasts; a carrier whose lease another writer took (after it lapsed)
   * refuses every write SW_ERROR_STATE, and one whose last renewal is older
   * than half this refuses writes until a renewal succeeds. The lease ends
   * with the carrier. A desc without this field (as without the replicas)
   * takes the default. */
  uint32_t lease_ms;
} sw_remote_carrier_desc_t;

SW_API void sw_remote_carrier_desc_init(sw_remote_carrier_desc_t* desc);
/* A zero-filled carrier of `size` slots in a new namespace on the servers:
 * its header and every block are written, under the namespace's writer
 * lease (lease_ms). SW_ERROR_STATE if the namespace already has a header on
 * one of them or another writer holds its lease; SW_ERROR_IO (or SW_ERROR_TIMEOUT)
 * naming the server when one cannot be reached or refuses a command. Unless
 * desc->persistent, the carrier owns its keys: disposing or releasing it
 * deletes them. */
SW_API sw_error_t* sw_carrier_create_remote(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                            const sw_remote_carrier_desc_t* desc, sw_carrier_t** out_carrier);
/* A carrier over an existing namespace (seeded by sw_carrier_create_remote
 * or `python -m strideweave.remote seed`). Every endpoint's header must match
 * the format version, `dtype`, `size`, the block size, the endpoint count and
 * the placement seed (SW_ERROR_VALUE naming the field and the server
 * otherwise; SW_ERROR_IO if a server has no header). Without read_only the
 * carrier takes the namespace's writer lease (SW_ERROR_STATE naming the
 * holder when another writer has it). The keys are never deleted by the
 * carrier. */
SW_API sw_error_t* sw_carrier_open_remote(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_remote_carrier_desc_t* desc, sw_carrier_t** out_carrier);

/* Bytes the carrier's storage occupies now (compressed bytes for zstd, file
 * bytes for file, dtype size * size for memory carriers). */
SW_API sw_error_t* sw_carrier_stored_bytes(const sw_carrier_t* carrier, uint64_t* out_bytes);

/* ------------------------------------------------------------------------ */
/* Model files: .npy, .safetensors and raw tensors as secondary tiers        */
/* ------------------------------------------------------------------------ */

/* A model file indexes its tensors row-major (C order: the last index
 * fastest), as NumPy, PyTorch and safetensors do; StrideWeave's dense
 * layouts are first mode fastest. So a row-major (E, O, I) file is, as it
 * lies, the first-mode-fastest tensor (I, O, E): the openers below describe
 * that tensor and the TiledEvictable geometry that makes each tile one
 * contiguous block of the file (one expert), and the permutation that gives
 * the file's own indexing back as a free view. See docs/model-files.md. */

typedef enum sw_file_order_t {
  SW_FILE_ORDER_ROW_MAJOR = 1,          /* C order: the last index fastest */
  SW_FILE_ORDER_FIRST_MODE_FASTEST = 2, /* Fortran order: the first index fastest */
  SW_FILE_ORDER_FORCE32 = 0x7fffffff
} sw_file_order_t;

/* What an opener found and the geometry to use it with. Fill with
 * sw_file_tensor_info_init before passing it. `rank` entries of each array
 * are set, the rest zero.
 *
 *   sw_tiled_create(primary, carrier, info.grid_shape, info.tile_shape,
 *                   info.rank, policy, &tiled);
 *   sw_tiled_full_tensor(tiled, &full);       (info.logical_shape: for
 *       sw_tiled_project, _scatter, _update_async and ops)
 *   sw_file_tensor_view(full, &info, &view);  (info.shape, indexed as the
 *       file does: view[e, o, i] is numpy.load(path)[e, o, i]; for reading,
 *       writing and saving elements)
 *
 * The spec's footprint rule admits only tensors of the carrier's logical
 * shape to projection and ops, so the file-order view is a second tensor.
 * A compact projection of the full tensor, (I, O, S) for S experts, indexes
 * as the file does once permuted the same way (sw_tensor_permute with
 * info.permutation gives (S, O, I), and keeps autograd). */
typedef struct sw_file_tensor_info_t {
  uint32_t struct_size;
  sw_dtype_t dtype;
  size_t rank;
  /* The shape as the file indexes it (NumPy's shape); for a stack of
   * tensors (sw_carrier_open_safetensors_stack, _stack_files) the count
   * comes first. */
  int64_t shape[SW_MAX_RANK];
  sw_file_order_t order;
  /* Byte offset of element 0 in the file (in its file, for a stack over
   * several files), and the bytes of all elements. */
  uint64_t data_offset;
  uint64_t data_bytes;
  /* File regions the carrier reads (1, or the number of stacked tensors). */
  size_t segments;
  /* The full tensor's first-mode-fastest shape: `shape` reversed for a
   * row-major file, `shape` itself for a Fortran-order one. */
  int64_t logical_shape[SW_MAX_RANK];
  /* The TiledEvictable geometry: the file's slowest index cut into tiles of
   * one index each (one expert of a row-major (E, O, I) tensor: grid
   * (1, 1, E), tile (I, O, 1)); a rank-1 tensor is one tile. */
  int64_t grid_shape[SW_MAX_RANK];
  int64_t tile_shape[SW_MAX_RANK];
  /* Mode i of the file's indexing is mode permutation[i] of the full tensor
   * (rank - 1 - i for a row-major file; i for Fortran order). */
  size_t permutation[SW_MAX_RANK];
} sw_file_tensor_info_t;

SW_API void sw_file_tensor_info_init(sw_file_tensor_info_t* info);

/* `tensor` indexed as the file described by `info` does: a new tensor over
 * the same carrier and offset whose mode i is mode info->permutation[i] of
 * `tensor` (its layout permuted, no copy). Made for the full tensor of a
 * TiledEvictable built from `info`, which sw_tensor_permute refuses; the
 * view is not recorded for autograd (a fresh leaf): pass the full tensor to
 * projection and ops, and use sw_tensor_permute on a projection whose
 * gradients must flow. Any tensor of info->rank modes works. VALUE when the
 * ranks differ, info->permutation is not a permutation or info has an
 * unknown struct_size; TYPE for a NULL or non-tensor handle; STATE for a
 * released carrier. */
SW_API sw_error_t* sw_file_tensor_view(sw_tensor_t* tensor, const sw_file_tensor_info_t* info,
                                       sw_tensor_t** out_view);

/* `count` slots at byte `byte_offset` of a file. */
typedef struct sw_file_segment_t {
  uint64_t byte_offset;
  size_t count;
} sw_file_segment_t;

/* A read-only File carrier whose slots are the segments' slots, segment
 * after segment: segment i's slots follow segment i - 1's. The segments may
 * lie anywhere in the file, in any order, and may be empty. Otherwise as
 * sw_carrier_open_file (desc, direct I/O, read-only). TYPE for an invalid
 * dtype; VALUE for NULL segments with count > 0, a segment passing the end
 * of the file (naming it) or slot counts that overflow; IO if the file
 * cannot be opened. */
SW_API sw_error_t* sw_carrier_open_file_segments(sw_runtime_t* runtime, sw_dtype_t dtype, const char* path,
                                                 const sw_file_segment_t* segments, size_t count,
                                                 const sw_file_carrier_desc_t* desc, sw_carrier_t** out_carrier);

/* Error rules of the openers below (the message names the file and the
 * field at fault):
 *   IO            the file cannot be opened or read;
 *   DATA_CORRUPT  its header is bad: bad magic, a header length past the end
 *                 of the file, bad syntax (JSON, the npy dictionary), a
 *                 missing, mistyped or duplicate field, a negative dimension,
 *                 a shape whose byte size overflows or disagrees with its
 *                 data_offsets, data past the end of the file (truncated),
 *                 overlapping or duplicate tensors, a dtype the format does
 *                 not define, a non-ASCII npy header;
 *   UNSUPPORTED   a well-formed file StrideWeave cannot hold: a dtype other
 *                 than F32, F64, F16, BF16, I32, I64, U8 and BOOL (naming
 *                 it; npy has no bf16), structured or big-endian npy dtypes,
 *                 npy format versions other than 1.0 and 2.0, a rank above
 *                 SW_MAX_RANK;
 *   VALUE         a bad request: a tensor name the file lacks, a stack of
 *                 tensors that differ in dtype or shape or name one twice,
 *                 a tensor with no elements or of rank 0 (a TiledEvictable
 *                 holds neither), a NULL argument.
 * `desc` (may be NULL) is as for sw_carrier_open_file: direct_io works on
 * every carrier (reads through O_DIRECT, via an aligned bounce buffer where
 * the tensor's offset is not 4096-aligned; buffered where the file system
 * refuses O_DIRECT). `out_info` may be NULL. Nothing is written on error. */

/* The array of a .npy file (format 1.0 or 2.0), C or Fortran order. */
SW_API sw_error_t* sw_carrier_open_npy(sw_runtime_t* runtime, const char* path, const sw_file_carrier_desc_t* desc,
                                       sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier);
/* Tensor `name` of a .safetensors file ("__metadata__" is ignored). */
SW_API sw_error_t* sw_carrier_open_safetensors(sw_runtime_t* runtime, const char* path, const char* name,
                                               const sw_file_carrier_desc_t* desc, sw_file_tensor_info_t* out_info,
                                               sw_carrier_t** out_carrier);
/* `count` tensors of one .safetensors file, all of one dtype and one shape
 * S, as one carrier over their `count` segments, in the order given: the
 * tensor of shape (count, *S) that stacks them (a Hugging Face checkpoint
 * that stores each expert as its own tensor). Its geometry makes tile i
 * tensor names[i]. VALUE for count 0 too. */
SW_API sw_error_t* sw_carrier_open_safetensors_stack(sw_runtime_t* runtime, const char* path,
                                                     const char* const* names, size_t count,
                                                     const sw_file_carrier_desc_t* desc,
                                                     sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier);
/* The same over several .safetensors files, for a checkpoint sharded into
 * files (model-00001-of-00003.safetensors, ...) whose tensors to stack lie
 * in different ones: tensor names[i] of file paths[i], for i < count, as
 * one read-only carrier of shape (count, *S) with the geometry and info of
 * sw_carrier_open_safetensors_stack (tile i is tensor names[i]). Paths may
 * repeat and come in any order; each file is opened and its header read
 * once, whatever the number of its tensors or the spelling of its path,
 * and the carrier keeps one descriptor per file (with direct_io also one
 * O_DIRECT descriptor, each file falling back to buffered reads on its
 * own). info.data_offset is tensor names[0]'s byte offset in paths[0],
 * info.data_bytes the bytes of all `count` tensors, info.segments `count`.
 * Errors as above, naming the file and the tensor at fault: VALUE for NULL
 * paths or names (or a NULL entry), count 0, a name its file lacks, a
 * tensor whose dtype or shape differs from names[0]'s, or one tensor of one
 * file given twice (one name in several files is fine); IO for a file that
 * cannot be opened; DATA_CORRUPT for a bad header. Nothing is written and
 * no file is left open on error. */
SW_API sw_error_t* sw_carrier_open_safetensors_stack_files(sw_runtime_t* runtime, const char* const* paths,
                                                           const char* const* names, size_t count,
                                                           const sw_file_carrier_desc_t* desc,
                                                           sw_file_tensor_info_t* out_info,
                                                           sw_carrier_t** out_carrier);
/* A raw tensor of `shape` (`rank` extents) and `dtype` at `byte_offset` of
 * `path`, in `order`. VALUE for an unknown order, a rank above SW_MAX_RANK or
 * a region past the end of the file; TYPE for an invalid dtype. */
SW_API sw_error_t* sw_carrier_open_raw_tensor(sw_runtime_t* runtime, const char* path, sw_dtype_t dtype,
                                              uint64_t byte_offset, const int64_t* shape, size_t rank,
                                              sw_file_order_t order, const sw_file_carrier_desc_t* desc,
                                              sw_file_tensor_info_t* out_info, sw_carrier_t** out_carrier);

/* Options of sw_save_safetensors; fill with sw_safetensors_save_desc_init. */
typedef struct sw_safetensors_save_desc_t {
  uint32_t struct_size;
  /* `metadata_count` string pairs written as the file's "__metadata__"
   * (Hugging Face writes {"format": "pt"}); NULL and 0 for none. */
  const char* const* metadata_keys;
  const char* const* metadata_values;
  size_t metadata_count;
} sw_safetensors_save_desc_t;

SW_API void sw_safetensors_save_desc_init(sw_safetensors_save_desc_t* desc);

/* Saves `count` tensors to a .safetensors file at `path`, tensor names[i]
 * holding tensors[i] with its shape and its own indexing: what reads back as
 * tensors[i][c] is element c of the tensor (a view permuted to (E, O, I)
 * saves as (E, O, I), so the safetensors and NumPy readers see it as the
 * view does). Values are read chunk by chunk from wherever they live, on any
 * carrier: a tensor of a TiledEvictable (its full tensor or a view of it) is
 * read tile by tile from the tier each tile is in, dirty primary values
 * included, with no promotion and about two tiles of memory. The file is
 * written beside `path` under a temporary name, flushed to the disk (fsync)
 * and renamed over it at the end: a failure leaves nothing, a crash leaves
 * the old file or the whole new one, and an existing file (even one a
 * carrier is reading) stays intact until then. `desc` may be NULL. VALUE for NULL
 * arguments, an empty, duplicate or non-UTF-8 name, the name
 * "__metadata__", a duplicate metadata key or an unknown desc->struct_size;
 * TYPE for a NULL or non-tensor handle; STATE for a released carrier, a
 * TiledEvictable's invalid tile or a carrier a TiledEvictable took over as
 * its primary seed; IO when the file cannot be written. */
SW_API sw_error_t* sw_save_safetensors(const char* path, const char* const* names, sw_tensor_t* const* tensors,
                                       size_t count, const sw_safetensors_save_desc_t* desc);
/* Saves one tensor to a .npy file (format 1.0, C order), its shape and
 * indexing kept as for sw_save_safetensors, so numpy.load gives it back.
 * UNSUPPORTED for bf16, which NumPy has no dtype for; otherwise errors as
 * sw_save_safetensors. */
SW_API sw_error_t* sw_save_npy(const char* path, sw_tensor_t* tensor);

/* ------------------------------------------------------------------------ */
/* GGUF files (llama.cpp's format) as secondary tiers                        */
/* ------------------------------------------------------------------------ */

/* A GGUF tensor's dimensions ne[0..n) list the fastest first (ggml's order),
 * which is this ABI's first-mode-fastest order: its NumPy shape is ne
 * reversed. So sw_carrier_open_gguf reports `shape` = ne reversed with
 * SW_FILE_ORDER_ROW_MAJOR, and `logical_shape` = ne: llama.cpp's stacked
 * expert tensors (blk.L.ffn_gate_exps.weight, ffn_up_exps, ffn_down_exps, of
 * ne (n_embd, n_ff, n_expert)) open as the full tensor (n_embd, n_ff,
 * n_expert) with grid (1, 1, n_expert) and tile (n_embd, n_ff, 1): one
 * expert per tile, each one contiguous block of the file. */

/* Tensor `name` of a GGUF file (versions 2 and 3), as
 * sw_carrier_open_safetensors opens one of a .safetensors file (desc,
 * direct I/O, out_info, the error rules above). Besides those:
 * DATA_CORRUPT for a bad magic, an unknown ggml type or metadata value
 * type, a duplicate key or tensor name, a general.alignment that is not a
 * UINT32 power of two, a tensor offset that is not a multiple of the
 * alignment, a first dimension (ne[0]) its type's block does not divide,
 * more than 4 dimensions, or a count, string length or tensor that passes
 * the end of the file; UNSUPPORTED for GGUF versions other than 2 and 3, a
 * big-endian file, and a tensor whose ggml type StrideWeave has no dtype for
 * (F32, F16, BF16, F64, I32, I64, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4 open;
 * others such as Q4_1 and Q5_K are refused as "unsupported dtype", naming
 * the type). */
SW_API sw_error_t* sw_carrier_open_gguf(sw_runtime_t* runtime, const char* path, const char* name,
                                        const sw_file_carrier_desc_t* desc, sw_file_tensor_info_t* out_info,
                                        sw_carrier_t** out_carrier);

/* GGUF's metadata value types (the values are the format's). */
typedef enum sw_gguf_value_type_t {
  SW_GGUF_TYPE_UINT8 = 0,
  SW_GGUF_TYPE_INT8 = 1,
  SW_GGUF_TYPE_UINT16 = 2,
  SW_GGUF_TYPE_INT16 = 3,
  SW_GGUF_TYPE_UINT32 = 4,
  SW_GGUF_TYPE_INT32 = 5,
  SW_GGUF_TYPE_FLOAT32 = 6,
  SW_GGUF_TYPE_BOOL = 7,
  SW_GGUF_TYPE_STRING = 8,
  SW_GGUF_TYPE_ARRAY = 9,
  SW_GGUF_TYPE_UINT64 = 10,
  SW_GGUF_TYPE_INT64 = 11,
  SW_GGUF_TYPE_FLOAT64 = 12,
  SW_GGUF_TYPE_FORCE32 = 0x7fffffff
} sw_gguf_value_type_t;

/* Options of sw_save_gguf; fill with sw_gguf_save_desc_init. */
typedef struct sw_gguf_save_desc_t {
  uint32_t struct_size;
  /* `metadata_count` key values written in this order: value i has type
   * metadata_types[i] and metadata_values[i] points at it, in the C type of
   * its type (uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
   * bool, uint64_t, int64_t, double), or is a NUL-terminated UTF-8 string
   * for SW_GGUF_TYPE_STRING. Arrays are not written (UNSUPPORTED). NULL and
   * 0 for none. */
  const char* const* metadata_keys;
  const sw_gguf_value_type_t* metadata_types;
  const void* const* metadata_values;
  size_t metadata_count;
  /* The data alignment, a power of two; 0 = 32 (GGUF's default). Another
   * value is written as the "general.alignment" key. */
  uint32_t alignment;
} sw_gguf_save_desc_t;

SW_API void sw_gguf_save_desc_init(sw_gguf_save_desc_t* desc);

/* Saves `count` tensors to a GGUF (version 3) file at `path` as
 * sw_save_safetensors saves them (values read from wherever they live,
 * TiledEvictables tile by tile without promotion, written under a temporary
 * name and renamed): tensor names[i] holds tensors[i] with its indexing, its
 * ne being its shape reversed, so gguf-py's GGUFReader gives its data back
 * with the tensor's shape (save sw_file_tensor_view of a TiledEvictable
 * opened from a GGUF file to keep that file's ne). F32, F16, BF16, F64, I32
 * and I64 tensors of rank 0 to 4, and block-quantized ones (Q8_0, Q4_0,
 * Q4_K, Q6_K, MXFP4) of rank 1 to 4 as their ggml types, with ne their
 * shape as it is (their blocks run along the first mode, ggml's ne[0]) and
 * their blocks first mode fastest as data, as GGUF stores them; each
 * tensor's data starts at a multiple of the alignment. TYPE for another
 * dtype; VALUE for a rank above 4, a quantized tensor whose first extent is
 * not whole blocks, an empty, duplicate or non-UTF-8 name or key, the key
 * "general.alignment", an alignment that is not a power of two, an unknown
 * value type, a NULL value or an unknown desc->struct_size; UNSUPPORTED for
 * an array value; otherwise errors as sw_save_safetensors. */
SW_API sw_error_t* sw_save_gguf(const char* path, const char* const* names, sw_tensor_t* const* tensors, size_t count,
                                const sw_gguf_save_desc_t* desc);

/* ------------------------------------------------------------------------ */
/* Tile values: TileSet, TileSelection, ResidencyPlan                        */
/* ------------------------------------------------------------------------ */

/* Most tiles a TiledEvictable holds, and so most a selection can select
 * (its tile table lives in host memory): more is VALUE before anything is
 * allocated. */
#define SW_MAX_TILES ((uint64_t)1 << 24)

/* Immutable, thread-safe values. A TileSet is a finite set of full-rank tile
 * coordinates, ordered first coordinate fastest (sorted by reversed tuple).
 * A TileSelection is an ordered Cartesian product of per-axis coordinates,
 * enumerated first mode fastest. A ResidencyPlan holds three disjoint
 * TileSets: promote, retain and evict. */
typedef struct sw_tile_set_t sw_tile_set_t;
typedef struct sw_tile_selection_t sw_tile_selection_t;
typedef struct sw_residency_plan_t sw_residency_plan_t;

/* A set of `count` coordinates of `rank` entries each, row after row in
 * `coords` (count * rank values, any order). VALUE for a negative entry or a
 * duplicate coordinate. count 0 makes the empty, rank-agnostic set. */
SW_API sw_error_t* sw_tile_set_create(const int64_t* coords, size_t count, size_t rank,
                                      sw_tile_set_t** out_set);
SW_API void sw_tile_set_retain(sw_tile_set_t* set);
SW_API void sw_tile_set_release(sw_tile_set_t* set);
SW_API sw_error_t* sw_tile_set_count(const sw_tile_set_t* set, size_t* out_count);
/* The rank of its coordinates (0 for the empty set). */
SW_API sw_error_t* sw_tile_set_rank(const sw_tile_set_t* set, size_t* out_rank);
/* Writes count * rank values in the set's order; `capacity` counts values. */
SW_API sw_error_t* sw_tile_set_coordinates(const sw_tile_set_t* set, int64_t* out_coords, size_t capacity);
SW_API sw_error_t* sw_tile_set_equal(const sw_tile_set_t* a, const sw_tile_set_t* b, bool* out_equal);

/* per_axis[i] points at counts[i] coordinates of axis i, in the caller's
 * order. VALUE for rank 0 or above SW_MAX_RANK, an empty axis, a duplicate
 * within an axis, a negative coordinate, or more than SW_MAX_TILES tiles in
 * all (the product of the counts). */
SW_API sw_error_t* sw_tile_selection_create(const int64_t* const* per_axis, const size_t* counts, size_t rank,
                                            sw_tile_selection_t** out_selection);
SW_API void sw_tile_selection_retain(sw_tile_selection_t* selection);
SW_API void sw_tile_selection_release(sw_tile_selection_t* selection);
SW_API sw_error_t* sw_tile_selection_rank(const sw_tile_selection_t* selection, size_t* out_rank);
/* Selected count per axis; `capacity` >= rank. */
SW_API sw_error_t* sw_tile_selection_compact_grid_shape(const sw_tile_selection_t* selection,
                                                        int64_t* out_shape, size_t capacity);
/* The coordinates of one axis, in the caller's order; `capacity` >= its count. */
SW_API sw_error_t* sw_tile_selection_axis(const sw_tile_selection_t* selection, size_t axis,
                                          int64_t* out_coords, size_t capacity);
/* Number of selected tiles (product of the per-axis counts). */
SW_API sw_error_t* sw_tile_selection_count(const sw_tile_selection_t* selection, size_t* out_count);
/* Every selected source coordinate, first mode fastest: count * rank values. */
SW_API sw_error_t* sw_tile_selection_coordinates(const sw_tile_selection_t* selection, int64_t* out_coords,
                                                 size_t capacity);
/* The selected tiles as a TileSet. */
SW_API sw_error_t* sw_tile_selection_tile_set(const sw_tile_selection_t* selection, sw_tile_set_t** out_set);
SW_API sw_error_t* sw_tile_selection_equal(const sw_tile_selection_t* a, const sw_tile_selection_t* b,
                                           bool* out_equal);

/* Any of the three may be NULL (an empty set). VALUE if a tile occurs in two
 * fields or the non-empty fields disagree on rank. */
SW_API sw_error_t* sw_residency_plan_create(const sw_tile_set_t* promote, const sw_tile_set_t* retain,
                                            const sw_tile_set_t* evict, sw_residency_plan_t** out_plan);
SW_API void sw_residency_plan_retain(sw_residency_plan_t* plan);
SW_API void sw_residency_plan_release(sw_residency_plan_t* plan);
SW_API sw_error_t* sw_residency_plan_promote(const sw_residency_plan_t* plan, sw_tile_set_t** out_set);
SW_API sw_error_t* sw_residency_plan_retain_set(const sw_residency_plan_t* plan, sw_tile_set_t** out_set);
SW_API sw_error_t* sw_residency_plan_evict(const sw_residency_plan_t* plan, sw_tile_set_t** out_set);

/* ------------------------------------------------------------------------ */
/* Residency policies                                                        */
/* ------------------------------------------------------------------------ */

typedef enum sw_residency_purpose_t {
  SW_PURPOSE_OPERATION = 1,
  SW_PURPOSE_PROJECTION = 2,
  SW_PURPOSE_SCATTER = 3,
  SW_PURPOSE_BACKWARD = 4,
  SW_PURPOSE_FORCE32 = 0x7fffffff
} sw_residency_purpose_t;

/* "operation", "projection", "scatter", "backward"; "unknown" otherwise. */
SW_API const char* sw_residency_purpose_name(sw_residency_purpose_t purpose);

/* A residency policy: plan() receives the tiles a request must read or write
 * and its purpose, and returns a plan (a new reference the library takes
 * over) or an error, which is passed through to the caller unchanged before
 * any transfer starts. Returning success with no plan, or a handle that is
 * not a plan, fails TYPE; a plan that does not fit the grid fails VALUE. It
 * is called on the thread that makes the request, at most once per request.
 * The policy can only optimise: required tiles are always made available,
 * and evictions wait until no work needs the tile.
 *
 * A request commits as a whole or not at all: its promotions, the evictions
 * its plan asked for (dirty values written to the secondary tier first) and
 * its result appear together once everything succeeded; if anything fails
 * (a fetch, a write, the work), nothing it planned happens. outcome() tells
 * the policy which, so its view can follow the carrier. */
typedef struct sw_residency_policy_t {
  uint32_t struct_size;
  void* user_data;
  sw_error_t* (*plan)(void* user_data, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                      sw_residency_plan_t** out_plan);
  /* Optional: called once when the TiledEvictable created with this vtable
   * is gone (each sw_tiled_create that takes a vtable calls it once). */
  void (*destroy)(void* user_data);
  /* Optional (added in 0.2; a policy from an older header has none).
   * Called exactly once for every plan that plan() returned, once the
   * request it planned is terminal or was refused before it started:
   * `committed` is true when the request succeeded, and then `promoted` and
   * `evicted` are the tiles it made primary and dropped from primary (an
   * eviction the library deferred because other work still needed the tile
   * is not listed: the tile is still primary); when the request failed both
   * sets are empty and nothing it planned happened. Also called with `plan`
   * NULL and `committed` true for residency changes outside planned
   * requests: sw_tiled_promote / sw_tiled_evict, public writes that brought
   * tiles to the primary tier, and a full primary seed at creation. The
   * handles are borrowed for the call. Runs on the runtime's loop thread or
   * on the thread that made the call, with no library lock held; it must
   * not block on this TiledEvictable's requests. */
  void (*outcome)(void* user_data, const sw_residency_plan_t* plan, bool committed,
                  const sw_tile_set_t* promoted, const sw_tile_set_t* evicted);
  /* Optional (added in 0.3). Called once by sw_tiled_create with the new
   * TiledEvictable (borrowed; its geometry and dtype may be queried), before
   * any request: a policy that budgets bytes learns the tile size here. An
   * error fails the creation with it, and the policy stays the caller's
   * (destroy is not called). */
  sw_error_t* (*attach)(void* user_data, const sw_carrier_t* tiled);
  /* Optional (added in 0.3). Called by sw_tiled_promote(_async) with the
   * tiles it is asked to make primary, on the calling thread: returns a plan
   * whose evict set is carried out together with the promotion (as a
   * request's planned evictions: dropped once no work needs them, dirty
   * values written first); its promote and retain sets are ignored. An error
   * refuses the promotion with it before anything changes. outcome() is
   * called for that plan like for any other. Without it, an explicit
   * promotion evicts nothing. */
  sw_error_t* (*plan_promotion)(void* user_data, const sw_tile_set_t* tiles, sw_residency_plan_t** out_plan);
} sw_residency_policy_t;

SW_API void sw_residency_policy_init(sw_residency_policy_t* policy);

/* The built-in LRU policy: keeps at most a budget of tiles primary (a count
 * of tiles, or of bytes turned into whole tiles when a TiledEvictable
 * attaches), promotes what a request needs, evicts the least recently used
 * tiles that no request needs, and promotes prefetch hints while the budget
 * allows. The budget holds for every request:
 *  - a request that needs more tiles than fit (a direct op on a whole
 *    tensor, a large projection) keeps those already primary, promotes the
 *    missing ones while room can be made, and has the rest read from the
 *    secondary tier for that request only ("transient" in the statistics):
 *    it streams through the budget instead of exceeding it;
 *  - sw_tiled_promote evicts least recently used tiles to make room, and a
 *    promotion of more tiles than the budget holds fails VALUE with nothing
 *    changed;
 *  - a tile promoted by hand or written by sw_tiled_update_async counts
 *    as a use, not a miss, whether or not it was primary already: it
 *    becomes the most recently used.
 * Planned evictions are deferred, never skipped, only while other work reads
 * the tile, so while requests overlap the count may pass the budget until
 * that work commits and the next plan evicts again. A dirty tile whose
 * secondary tier is read-only cannot be evicted and stays primary.
 * Its view of what is primary follows what requests committed (through the
 * vtable's outcome): a failed or refused request leaves its view and its
 * statistics as they were. One LRU policy serves one TiledEvictable (its
 * view is of tile coordinates). */
typedef struct sw_lru_policy_t sw_lru_policy_t;

/* Statistics of committed requests only. */
typedef struct sw_lru_stats_t {
  uint32_t struct_size;
  uint64_t requests;   /* planned requests that committed */
  uint64_t hits;       /* required tiles already primary when planned */
  uint64_t misses;     /* required tiles it had to promote */
  uint64_t promoted;   /* tiles planned for promotion (misses and prefetches) */
  uint64_t evicted;    /* tiles its plans evicted */
  /* Added in 0.3: required tiles read from the secondary tier for one
   * request without being promoted, because the budget was full of tiles
   * that request needs too (counted in misses as well). */
  uint64_t transient;
} sw_lru_stats_t;

SW_API void sw_lru_stats_init(sw_lru_stats_t* stats);

/* An LRU policy of `budget_tiles` tiles (at least 1, else VALUE). */
SW_API sw_error_t* sw_lru_policy_create(size_t budget_tiles, sw_lru_policy_t** out_policy);

typedef struct sw_lru_policy_desc_t {
  uint32_t struct_size;
  /* Exactly one of the two is nonzero (else VALUE). */
  size_t budget_tiles;
  /* Bytes of primary tile memory: the budget is the number of whole tiles
   * that fit, fixed when the TiledEvictable attaches (VALUE there when not
   * even one tile fits). */
  uint64_t budget_bytes;
} sw_lru_policy_desc_t;

SW_API void sw_lru_policy_desc_init(sw_lru_policy_desc_t* desc);
SW_API sw_error_t* sw_lru_policy_create_ex(const sw_lru_policy_desc_t* desc, sw_lru_policy_t** out_policy);
/* The budget in tiles; 0 for a byte budget no TiledEvictable has attached to yet. */
SW_API sw_error_t* sw_lru_policy_budget_tiles(const sw_lru_policy_t* policy, size_t* out_tiles);
SW_API void sw_lru_policy_retain(sw_lru_policy_t* policy);
SW_API void sw_lru_policy_release(sw_lru_policy_t* policy);
/* Fills a policy vtable that uses `policy` (retained until its destroy):
 * one for the sw_tiled_create it is passed to. A second TiledEvictable
 * attaching while the first still uses the policy fails STATE. */
SW_API sw_error_t* sw_lru_policy_as_residency_policy(sw_lru_policy_t* policy, sw_residency_policy_t* out_policy);
/* Tiles expected soon (the next batch's experts, say): promoted by the next
 * plan() while the budget allows. Replaces earlier hints. */
SW_API sw_error_t* sw_lru_policy_hint(sw_lru_policy_t* policy, const sw_tile_set_t* tiles);
SW_API sw_error_t* sw_lru_policy_stats(const sw_lru_policy_t* policy, sw_lru_stats_t* out_stats);

/* ------------------------------------------------------------------------ */
/* TiledEvictable                                                            */
/* ------------------------------------------------------------------------ */

/* A TiledEvictable is a carrier (kind SW_CARRIER_TILED) holding one logical
 * tensor of shape grid_shape * tile_shape (mode by mode), cut into tiles that
 * live in a primary tier (a compute carrier: CPU or Vulkan) or a secondary tier (a
 * storage carrier: host, file, zstd or remote), move asynchronously, and are
 * gathered into compact tensors by projection.
 *
 * Geometry: slot s of the carrier decodes (first mode fastest) to a logical
 * coordinate x; its tile is x / tile_shape and its within-tile index the
 * first-mode-fastest encoding of x % tile_shape. Each tile's values are kept
 * contiguously. In the tier carriers, tiles are stored one after another in
 * tile-ordinal order (first grid mode fastest), each tile's values first mode
 * fastest: tile k occupies slots [k * T, (k + 1) * T) where T is the tile's
 * element count. Seeds are read with that layout: a weights file holding one
 * expert after another can be the secondary tier as it is.
 *
 * Both tiers are claimed by the TiledEvictable (owned, not publicly mutable)
 * and disposed by its dispose. A full primary seed's values move into the
 * TiledEvictable's tile buffers: the seed keeps reporting its size, and
 * public reads of it (a carrier or tensor read, an op, its host pointer) fail
 * STATE "owned by a TiledEvictable"; read its values through the full
 * tensor. The secondary tier can still be read (its storage is the tier). Thread-safe; requests from several threads are
 * serialised internally, and each commits as a whole or not at all (see
 * sw_residency_policy_t). A read of the full tensor racing an update or a
 * write is consistent per tile: each tile holds the value before or after
 * it, never a mix (a read of several tiles is not one snapshot). */

typedef enum sw_tile_location_t {
  SW_TILE_PRIMARY = 1,
  SW_TILE_SECONDARY = 2,
  SW_TILE_IMPLICIT = 3, /* a valid implicit zero (gradients) */
  SW_TILE_INVALID = 4,
  SW_TILE_LOCATION_FORCE32 = 0x7fffffff
} sw_tile_location_t;

typedef struct sw_tile_state_t {
  uint32_t struct_size;
  sw_tile_location_t location;
  bool valid;
  bool dirty; /* primary value not yet written to the secondary tier */
} sw_tile_state_t;

SW_API void sw_tile_state_init(sw_tile_state_t* state);

typedef enum sw_tile_set_kind_t {
  SW_TILES_PRIMARY = 1,
  SW_TILES_SECONDARY = 2,
  SW_TILES_VALID = 3,
  SW_TILES_DIRTY = 4,
  SW_TILES_KIND_FORCE32 = 0x7fffffff
} sw_tile_set_kind_t;

/* `primary` is an empty or full-extent compute carrier (CPU or Vulkan),
 * `secondary` an empty or full-extent storage carrier, of the same dtype.
 * With a Vulkan primary, tile buffers are device-local: promotions read the
 * secondary tier into host staging and upload, evictions download dirty
 * tiles before writing them, and projections, scatters and updates gather on
 * the device (one strided copy per tile, queued behind the device's work;
 * a full tensor of a non-canonical layout is staged through host memory).
 * Projection destinations and compact tensors are then Vulkan carriers. A full primary makes
 * every tile primary-resident; a full secondary every tile secondary-
 * resident; with both full the tiles are primary and dirty; with both empty
 * every tile is invalid. `policy` may be NULL; it is copied. TYPE for wrong
 * carrier kinds or dtypes, VALUE for shapes (grid and tile ranks differ, an
 * extent < 1, a tier neither empty nor full), STATE for disposed or owned
 * tiers. On failure no tier is claimed. */
SW_API sw_error_t* sw_tiled_create(sw_carrier_t* primary, sw_carrier_t* secondary, const int64_t* grid_shape,
                                   const int64_t* tile_shape, size_t rank, const sw_residency_policy_t* policy,
                                   sw_carrier_t** out_tiled);
/* The full logical tensor: dense layout of the logical shape at offset 0. */
SW_API sw_error_t* sw_tiled_full_tensor(sw_carrier_t* tiled, sw_tensor_t** out_tensor);
SW_API sw_error_t* sw_tiled_rank(const sw_carrier_t* tiled, size_t* out_rank);
SW_API sw_error_t* sw_tiled_grid_shape(const sw_carrier_t* tiled, int64_t* out_shape, size_t capacity);
SW_API sw_error_t* sw_tiled_tile_shape(const sw_carrier_t* tiled, int64_t* out_shape, size_t capacity);
/* The tier carriers (new references). */
SW_API sw_error_t* sw_tiled_primary(const sw_carrier_t* tiled, sw_carrier_t** out_carrier);
SW_API sw_error_t* sw_tiled_secondary(const sw_carrier_t* tiled, sw_carrier_t** out_carrier);
/* Whether a residency policy was given at creation. */
SW_API sw_error_t* sw_tiled_has_policy(const sw_carrier_t* tiled, bool* out_has_policy);
SW_API sw_error_t* sw_tiled_tile_state(const sw_carrier_t* tiled, const int64_t* coord, size_t rank,
                                       sw_tile_state_t* out_state);
SW_API sw_error_t* sw_tiled_tiles(const sw_carrier_t* tiled, sw_tile_set_kind_t kind, sw_tile_set_t** out_set);

/* Residency transitions of the tiles in `tiles` (a TileSelection converts
 * with sw_tile_selection_tile_set); another handle kind is TYPE. VALUE for a
 * rank or range mismatch, STATE for a disposed carrier,
 * for an invalid tile to promote, for a dirty tile to evict into a read-only
 * secondary, or when a tile is covered by another incomplete residency
 * request. Promotion makes every tile valid on primary; eviction writes dirty
 * values to the secondary tier before dropping primary storage, and waits for
 * work that still needs a tile. Both commit atomically, are idempotent, and
 * leave the prior state of the whole set on failure. No autograd node. */
SW_API sw_error_t* sw_tiled_promote_async(sw_carrier_t* tiled, const sw_tile_set_t* tiles, sw_await_t** out_await);
SW_API sw_error_t* sw_tiled_evict_async(sw_carrier_t* tiled, const sw_tile_set_t* tiles, sw_await_t** out_await);
/* Added in 0.3: sw_tiled_promote_async for tiles the caller expects to need
 * (the next layer's predicted experts), not yet waited for: the same
 * validation, errors, plan, conflicts and commit, but its reads from a file
 * tier yield to the reads and writes of other requests, which the caller
 * waits for. They take a file request slot only while no other request
 * waits for one, and at most 2 of the request slots (libuv's thread pool
 * size, UV_THREADPOOL_SIZE, 4 by default; or a device's measured depth, see
 * sw_file_carrier_io), one fewer where there are only two, at once;
 * prefetches are served in the order they were made. Other tiers read as
 * for promote_async. */
SW_API sw_error_t* sw_tiled_prefetch_async(sw_carrier_t* tiled, const sw_tile_set_t* tiles, sw_await_t** out_await);
/* promote_async / evict_async followed by wait. */
SW_API sw_error_t* sw_tiled_promote(sw_carrier_t* tiled, const sw_tile_set_t* tiles);
SW_API sw_error_t* sw_tiled_evict(sw_carrier_t* tiled, const sw_tile_set_t* tiles);

/* Gathers the selected tiles of the full tensor `tensor` (backed by `tiled`,
 * tile-footprint compatible) into a compact dense tensor of shape
 * compact_grid_shape * tile_shape, tiles in selection order. `destination`
 * is NULL (a fresh CPU carrier) or an empty or large enough, live, mutable
 * carrier of the primary tier's kind and the dtype. Starts every transfer and
 * gather it can before returning a PROJECTION await. With grad mode on and a
 * tensor requiring grad, the result records one gather node whose backward
 * scatter-adds into a fresh TiledEvictable gradient. Errors before any work:
 * TYPE (tensor of another carrier, wrong destination kind/dtype), VALUE
 * (selection rank/range, destination too small, footprints), STATE (disposed,
 * conflicting residency request, invalid tile). */
SW_API sw_error_t* sw_tiled_project(sw_carrier_t* tiled, sw_tensor_t* tensor, const sw_tile_selection_t* selection,
                                    sw_carrier_t* destination, sw_await_t** out_await);

typedef enum sw_scatter_reduction_t {
  SW_SCATTER_REPLACE = 1,
  SW_SCATTER_ADD = 2,
  SW_SCATTER_REDUCTION_FORCE32 = 0x7fffffff
} sw_scatter_reduction_t;

/* Writes `compact` (a dense-or-strided CPU tensor of the selected region's
 * shape and the dtype) at the selected tiles of a fresh TiledEvictable with
 * the template's geometry and tier kinds, returned by a MOVE await as its
 * full tensor. REPLACE takes compact's values; ADD adds them to the
 * template's. The selected tiles commit together as valid and dirty with one
 * version step; the others are invalid. Neither input changes. */
SW_API sw_error_t* sw_tiled_scatter(sw_carrier_t* tiled, sw_tensor_t* compact, sw_tensor_t* template_tensor,
                                    const sw_tile_selection_t* selection, sw_scatter_reduction_t reduction,
                                    sw_await_t** out_await);

/* Writes `compact` (as for scatter) into the selected tiles of `tiled`
 * itself: REPLACE stores it, ADD adds it (an optimiser step). This is a
 * public write of the full tensor `tensor`: one version step, and the tiles
 * become primary, valid and dirty (written to the secondary tier on eviction).
 * STATE while a selected tile is in use by pending work or covered by a
 * residency request. Returns a MOVE await without a result; no autograd. */
SW_API sw_error_t* sw_tiled_update_async(sw_carrier_t* tiled, sw_tensor_t* tensor, sw_tensor_t* compact,
                                         const sw_tile_selection_t* selection, sw_scatter_reduction_t reduction,
                                         sw_await_t** out_await);

/* The expert-indexed matmul, the mixture-of-experts primitive: every token
 * multiplied by the experts it was routed to, on the experts' tile memory in
 * place. `experts` is the full tensor (sw_tiled_full_tensor) of `tiled`, a
 * TiledEvictable of one expert per tile: grid (1, 1, E) and tile (K, N, 1),
 * tile e holding expert e's (K, N) matrix W_e (first mode fastest; a
 * row-major (E, N, K) weight file, one nn.Linear(K, N) per expert, is this
 * tensor as it lies, see docs/moe-offload.md). `ids` is a CPU (T, k) i32 or
 * i64 tensor of expert ids (token t's j-th choice at (t, j)); `x` a CPU
 * tensor of the experts' dtype, (T, K) shared by a token's k choices or
 * (T, k, K) one row per choice. The result (a CPU tensor) is
 *   gates == NULL:  Y (T, k, N),  Y[t, j, :] = x[t, (j,) :] @ W_{ids[t, j]}
 *   gates (T, k):   (T, N),       sum over j of gates[t, j] * Y[t, j, :]
 * (gates a CPU float tensor). The rows of one expert are multiplied in one
 * GEMM directly on its tile buffer: a resident expert is never copied, and
 * its bytes are read once per call. Products accumulate in f32 (f64 for
 * f64), the gated sum too, and the result is rounded once to its dtype:
 * desc->out_dtype (sw_matmul_desc_t, NULL for the defaults) as for
 * sw_matmul_ex, the experts' dtype by default or f32 for f16/bf16 experts.
 * Block-quantized experts (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4; a GGUF file's
 * stacked expert tensor opened one expert per tile) are multiplied on their
 * blocks as sw_matmul multiplies quantized weights: x any float dtype, the
 * result f32 by default (bf16 or f16 on request), no gradients
 * (UNSUPPORTED when an input requires grad, before any work).
 *
 * As a projection, it returns a PROJECTION await whose result is the tensor:
 * the policy is consulted with the experts the call uses (purpose
 * PROJECTION), missing experts are read from the secondary tier while the
 * resident ones are computed, each as soon as its read lands; the experts
 * are pinned until the commit (evictions wait, release is STATE while it is
 * pending, an overlapping residency request is refused). When every expert
 * the call uses is resident and the policy's plan moves nothing, the call
 * computes on the calling thread (its GEMMs on the compute threads) under
 * the same pins and returns its await already terminal: succeeded, or
 * failed with the computation's error. With grad mode on
 * and experts, x or gates requiring grad, the result records one node whose
 * backward gives x and the gates their gradients and the experts a
 * tile-sparse TiledEvictable gradient holding the used experts' tiles (it
 * reads the experts again, purpose BACKWARD). Errors before any work: TYPE
 * (non-CPU x, ids or gates; dtypes), VALUE (geometry, a view instead of the
 * full tensor, shapes), INDEX (an id outside [0, E), naming token and
 * slot), UNSUPPORTED (a non-CPU primary tier), STATE (disposed, an expert
 * owned by a residency request, an invalid expert tile). */
SW_API sw_error_t* sw_tiled_expert_matmul(sw_carrier_t* tiled, sw_tensor_t* experts, sw_tensor_t* x,
                                          sw_tensor_t* ids, sw_tensor_t* gates, const sw_matmul_desc_t* desc,
                                          sw_await_t** out_await);

/* Options of sw_tiled_expert_ffn; fill with sw_expert_ffn_desc_init. */
typedef struct sw_expert_ffn_desc_t {
  uint32_t struct_size;
  /* The activation of the gate product: SW_UNARY_SILU (the default: SwiGLU,
   * as Mixtral, Qwen-MoE and DeepSeek-MoE), SW_UNARY_GELU (GeGLU),
   * SW_UNARY_RELU, SW_UNARY_SIGMOID or SW_UNARY_TANH. Any other op is
   * VALUE. */
  sw_unary_op_t activation;
  /* The result's dtype: SW_DTYPE_INVALID (the default) the experts'; with
   * f16 or bf16 experts, SW_DTYPE_F32 keeps each expert's output and the
   * gated sum unrounded. Anything else is TYPE. */
  sw_dtype_t out_dtype;
} sw_expert_ffn_desc_t;

SW_API void sw_expert_ffn_desc_init(sw_expert_ffn_desc_t* desc);

/* The gated expert feed-forward, a mixture-of-experts layer's experts in one
 * call: for token t's j-th choice e = ids[t, j],
 *   a = x[t] @ Gate_e,  b = x[t] @ Up_e,  h = act(a) * b,  Y[t, j] = h @ Down_e
 * (Mixtral's w2(silu(w1 x) * w3 x): gate is w1, up w3, down w2). `gate` and
 * `up` are TiledEvictables of one expert per tile with grid (1, 1, E) and
 * tile (H, F, 1), `down` one with grid (1, 1, E) and tile (F, H, 1), all of
 * one float or block-quantized dtype with a CPU primary tier; each comes
 * with its full tensor (`*_experts`, as for sw_tiled_expert_matmul: a
 * row-major (E, F, H) gate or up file and (E, H, F) down file are these
 * tensors as they lie).
 *
 * The fused form (Hugging Face transformers 5's experts: `gate_up_proj` of
 * torch shape (E, 2F, H) and `down_proj` (E, H, F)): `up` and `up_experts`
 * both NULL, and `gate` the gate_up TiledEvictable, grid (1, 1, E) and tile
 * (H, 2F, 1) (the row-major (E, 2F, H) file as it lies), with its full
 * tensor. Expert e's (H, 2F) matrix holds Gate_e in its first F columns
 * (output features 0 to F - 1: the tile's first H * F elements) and Up_e in
 * the next F (the tile's other H * F), as transformers computes
 *   gate, up = (x @ gate_up_proj[e].T).chunk(2, dim=-1).
 * Both products are computed from the one gate_up tile in place (each half
 * is a dense (H, F) matrix; nothing is copied), and the result equals the
 * three-TiledEvictable form's on the same matrices bit for bit (grad mode
 * aside, see below). Where the text below says three requests, the fused
 * form has two, gate_up and down, and a missing expert's reads are queued
 * gate_up, then down. Exactly one of `up` and `up_experts` NULL is VALUE,
 * naming the one that is NULL; a gate_up tile whose second extent is odd
 * is VALUE.
 *
 * `x` is (T, H), shared by a token's choices, or (T, k, H); `ids` a CPU
 * (T, k) i32 or i64 tensor; `gates` NULL or a CPU (T, k) float tensor. The
 * result is
 *   gates == NULL:  Y (T, k, H)
 *   gates (T, k):   (T, H), the sum over j of gates[t, j] * Y[t, j]
 * Values are rounded where the unfused layer rounds them (three
 * sw_tiled_expert_matmul calls, sw_unary and sw_binary MUL): a, b, act(a)
 * and h to the experts' dtype, each Y[t, j] to the result's dtype
 * (desc->out_dtype), and the gated sum (in f32, f64 for f64 experts, over
 * j in order) once; the products accumulate as for sw_tiled_expert_matmul.
 * Block-quantized experts (all three of one quantized dtype) take x of any
 * float dtype; a, b, act(a) and h stay f32 and the result is f32 unless
 * desc->out_dtype asks bf16 or f16; no gradients (UNSUPPORTED).
 *
 * Each expert's three products run on its tiles' memory in place (a
 * resident expert is never copied) as soon as its inputs are there: the
 * experts resident in a TiledEvictable at the start are computed at once,
 * and a missing expert's reads are queued gate, up, then down, so its gate
 * product runs as the gate tile lands, h as the up tile lands and its down
 * product as the down tile lands. Each TiledEvictable is one request as for
 * sw_tiled_expert_matmul: its policy is consulted with the experts the call
 * uses (purpose PROJECTION) and its experts are pinned until that request
 * commits (an eviction waits, releasing that TiledEvictable is STATE). The
 * three requests commit together, once all of them did their work (every
 * product ran), or not at all: a failure in any of them fails the call with
 * its error and none of them commits (no expert promoted or evicted, no
 * policy statistic counted). The PROJECTION await the call returns
 * completes only once all three are terminal, so that nothing of the call
 * changes after it, failed or not.
 * An expert covered by an incomplete residency request in any of the three
 * refuses the call (STATE) before anything is submitted. When every expert
 * the call uses is resident in all three and no plan moves anything, the
 * call computes on the calling thread and returns its await already
 * terminal (succeeded, or failed with the computation's error).
 * With grad mode on and an experts tensor, x or gates requiring grad, the
 * call computes the unfused layer itself (blocking, its await terminal on
 * return), which records the nodes of those ops: gradients as for them. In
 * the fused form that layer's first op is the gate_up expert matmul, (T, k,
 * 2F), and a and b are its two halves taken with sw_tensor_slice (whose
 * backward gives gate_up a gradient of both halves); its product of N = 2F
 * may sum in another order than the call's two of N = F, so its f32 values
 * can be an ulp or so away from the call's without grad mode.
 *
 * Errors before any work: TYPE (non-CPU x, ids or gates; dtypes; experts of
 * different dtypes), VALUE (geometry, naming the TiledEvictable at fault; a
 * view instead of the full tensor; shapes; the activation), INDEX (an id
 * outside [0, E), naming token and slot), UNSUPPORTED (a non-CPU primary
 * tier), STATE (disposed, an expert owned by a residency request, an
 * invalid expert tile). */
SW_API sw_error_t* sw_tiled_expert_ffn(sw_carrier_t* gate, sw_tensor_t* gate_experts, sw_carrier_t* up,
                                       sw_tensor_t* up_experts, sw_carrier_t* down, sw_tensor_t* down_experts,
                                       sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates,
                                       const sw_expert_ffn_desc_t* desc, sw_await_t** out_await);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

/* A device is one backend's memory (host, fake or Vulkan) seen through the
 * device bridge: allocations, copies with exact byte ranges, and views. It
 * has a generation, 1 at creation, bumped by every restart (explicit, or a
 * lost device) and never lowered; each allocation, copy event and view
 * belongs to the generation it was made in, and once the generation moves on
 * every call taking it fails SW_ERROR_STALE_HANDLE. A device keeps its
 * runtime alive. Thread-safe: any thread may call any function below.
 *
 * Failures are typed: a backend allocation failure is OUT_OF_MEMORY, a copy
 * failure IO, a view the backend cannot provide IO, a lost device
 * DEVICE_LOST (the device has then restarted: pending copies are abandoned
 * and never complete, the generation is bumped). */
typedef struct sw_device_t sw_device_t;
/* A device allocation: reference counted; the handle's last release frees
 * the memory once nothing uses it. Thread-safe. */
typedef struct sw_device_allocation_t sw_device_allocation_t;
/* A view over an allocation, the descriptor fed to NumPy, DLPack and
 * tinygrad. A live view counts as a use of its allocation. Thread-safe. */
typedef struct sw_device_view_t sw_device_view_t;

typedef enum sw_device_kind_t {
  SW_DEVICE_HOST = 1,
  SW_DEVICE_FAKE = 2,
  SW_DEVICE_VULKAN = 3,
  SW_DEVICE_KIND_FORCE32 = 0x7fffffff
} sw_device_kind_t;

/* What an allocation holds: the tensor view spec of its role. */
typedef struct sw_object_spec_t {
  uint32_t struct_size;
  sw_dtype_t dtype;
  size_t rank;
  int64_t shape[SW_MAX_RANK];
  /* Largest extent an allocation of this object may have, in bytes. */
  uint64_t max_extent_bytes;
  /* Alignment of the allocation's start, a power of two; 0 = 16. */
  uint64_t alignment;
} sw_object_spec_t;

SW_API void sw_object_spec_init(sw_object_spec_t* spec);

/* A copy event: {generation, id}. Plain data; copy it freely. Fill one
 * with sw_copy_event_init before passing it as an out-parameter; an event
 * passed in must carry a struct_size this library knows (VALUE otherwise). */
typedef struct sw_copy_event_t {
  uint32_t struct_size;
  uint64_t generation;
  uint64_t id;
} sw_copy_event_t;

SW_API void sw_copy_event_init(sw_copy_event_t* event);

/* A view's description. strides_bytes are first mode fastest (dense: stride
 * i is the product of the extents before i, times the dtype size). `pointer`
 * is the host address of element 0, or NULL when the memory is not host
 * visible. */
typedef struct sw_view_info_t {
  uint32_t struct_size;
  void* pointer;
  sw_dtype_t dtype;
  size_t rank;
  int64_t shape[SW_MAX_RANK];
  int64_t strides_bytes[SW_MAX_RANK];
} sw_view_info_t;

SW_API void sw_view_info_init(sw_view_info_t* info);

/* The fake backend's hooks, so an embedder can plug its own device. Every
 * function may be NULL: the built-in fake then does that part itself (host
 * memory). Return SW_OK or an error code; a failure becomes an error of that
 * code. Called with the device's lock held, on the thread making the call,
 * or on the thread calling sw_fake_device_complete (strideweave_testing.h)
 * for asynchronous copies:
 * hooks must not call back into the device. */
typedef struct sw_fake_device_vtable_t {
  uint32_t struct_size;
  void* user_data;
  sw_error_code_t (*allocate)(void* user_data, uint64_t allocation_id, uint64_t bytes, uint64_t alignment,
                              void** out_host_pointer);
  void (*free)(void* user_data, uint64_t allocation_id);
  sw_error_code_t (*host_to_device)(void* user_data, uint64_t allocation_id, uint64_t offset, const void* host,
                                    uint64_t bytes);
  sw_error_code_t (*device_to_host)(void* user_data, uint64_t allocation_id, uint64_t offset, void* host,
                                    uint64_t bytes);
  /* Called when the device restarts: every allocation is gone. */
  void (*restart)(void* user_data, uint64_t new_generation);
  /* Called once when the device is destroyed. */
  void (*destroy)(void* user_data);
} sw_fake_device_vtable_t;

SW_API void sw_fake_device_vtable_init(sw_fake_device_vtable_t* vtable);

/* Device features a handed-in VkDevice was created with: Vulkan cannot be
 * asked which features a device enabled, so the embedder says so. */
typedef enum sw_vulkan_feature_t {
  /* VkPhysicalDeviceFeatures.shaderFloat64: f64 kernels on Vulkan carriers. */
  SW_VULKAN_FEATURE_SHADER_FLOAT64 = 1,
  SW_VULKAN_FEATURE_FORCE32 = 0x7fffffff
} sw_vulkan_feature_t;

/* Lets an embedder hand in its own Vulkan objects (VkInstance,
 * VkPhysicalDevice, VkDevice, VkQueue as void*); all NULL makes the library
 * create its own on the first physical device, with every
 * sw_vulkan_feature_t feature the device has enabled.
 *
 * A handed-in `device` needs `physical_device`, `queue` (of a family with
 * compute, `queue_family_index`) and `enabled_features`; `instance` may then
 * be NULL. Handed-in objects stay the embedder's: the library never destroys
 * them, so they must outlive the sw_device_t and every carrier made on it
 * (release those, then destroy the VkDevice, then the VkInstance). The
 * library submits to `queue` from whichever thread makes a call, under its
 * own lock: an embedder that submits to the same queue itself must serialise
 * with the library (or hand in a queue it does not use). The device needs
 * Vulkan 1.1 and no extensions; the library's buffers, memory, pipelines and
 * command pools on it are its own and freed with the sw_device_t. */
typedef struct sw_vulkan_device_desc_t {
  uint32_t struct_size;
  void* instance;
  void* physical_device;
  void* device;
  void* queue;
  uint32_t queue_family_index;
  /* Bits of sw_vulkan_feature_t the handed-in device was created with;
   * ignored when the library creates the device. */
  uint32_t enabled_features;
} sw_vulkan_device_desc_t;

SW_API void sw_vulkan_device_desc_init(sw_vulkan_device_desc_t* desc);

/* Host memory behind the bridge: copies are memcpy (asynchronous ones on a
 * background worker, completed on the loop thread). */
SW_API sw_error_t* sw_device_create_host(sw_runtime_t* runtime, sw_device_t** out_device);
/* The fake backend: logs every call with its exact arguments (see
 * sw_fake_device_log_entry in strideweave_testing.h), fails one armed call,
 * and performs an asynchronous copy only when sw_fake_device_complete says
 * so, reading or
 * writing the host bytes at that moment. `vtable` may be NULL; it is copied. */
SW_API sw_error_t* sw_device_create_fake(sw_runtime_t* runtime, const sw_fake_device_vtable_t* vtable,
                                         sw_device_t** out_device);
/* A Vulkan device (device-local buffers, staging copies, fences; asynchronous
 * completions arrive through the runtime's loop). `desc` may be NULL.
 * UNSUPPORTED, naming the missing part, when the build has no Vulkan or no
 * Vulkan driver (ICD) is present. */
SW_API sw_error_t* sw_device_create_vulkan(sw_runtime_t* runtime, const sw_vulkan_device_desc_t* desc,
                                           sw_device_t** out_device);
SW_API void sw_device_retain(sw_device_t* device);
SW_API void sw_device_release(sw_device_t* device);
SW_API sw_error_t* sw_device_kind(const sw_device_t* device, sw_device_kind_t* out_kind);
SW_API sw_error_t* sw_device_generation(const sw_device_t* device, uint64_t* out_generation);
/* Abandons every pending copy (it never reports complete), frees every
 * allocation in the backend and bumps the generation. */
SW_API sw_error_t* sw_device_restart(sw_device_t* device);

/* Allocates `extent_bytes` for an object of `spec`. VALUE, without calling
 * the backend, for extent 0, an extent below the spec's element bytes or
 * above its max_extent_bytes, or an alignment that is not a power of two;
 * TYPE for an invalid dtype; OUT_OF_MEMORY when the backend fails. */
SW_API sw_error_t* sw_device_alloc(sw_device_t* device, const sw_object_spec_t* spec, uint64_t extent_bytes,
                                   sw_device_allocation_t** out_allocation);
/* Frees the memory now (the handle stays, for release). STATE with "in use"
 * while compute (sw_device_compute_begin), a pending copy or a live view
 * uses it; STATE when already freed; STALE_HANDLE for an older generation. */
SW_API sw_error_t* sw_device_free(sw_device_allocation_t* allocation);
SW_API void sw_device_allocation_retain(sw_device_allocation_t* allocation);
SW_API void sw_device_allocation_release(sw_device_allocation_t* allocation);
SW_API sw_error_t* sw_device_allocation_extent(const sw_device_allocation_t* allocation, uint64_t* out_bytes);
SW_API sw_error_t* sw_device_allocation_generation(const sw_device_allocation_t* allocation,
                                                   uint64_t* out_generation);
/* Marks compute work that uses the allocation (free is refused until the
 * matching end). STALE_HANDLE for an older generation. */
SW_API sw_error_t* sw_device_compute_begin(sw_device_allocation_t* allocation);
SW_API sw_error_t* sw_device_compute_end(sw_device_allocation_t* allocation);

/* Copies exactly `bytes` host bytes into [device_offset, device_offset +
 * bytes) of the allocation. INDEX when the range passes the extent, VALUE for
 * 0 bytes or a NULL pointer; STATE when freed; STALE_HANDLE for an older
 * generation; IO when the copy fails. Synchronous (async false): on return
 * the host bytes may be released and the copy is complete. Asynchronous: the
 * host bytes must stay untouched until the event reports host_released;
 * `out_event` gets the event either way (may be NULL when synchronous). */
SW_API sw_error_t* sw_device_host_to_device(sw_device_allocation_t* allocation, uint64_t device_offset,
                                            const void* host, uint64_t bytes, bool async,
                                            sw_copy_event_t* out_event);
/* Copies exactly [device_offset, device_offset + bytes) into `host`, with the
 * same checks. The host bytes are valid on return (synchronous) or once the
 * event reports complete; they must not be freed before host_released. */
SW_API sw_error_t* sw_device_device_to_host(sw_device_allocation_t* allocation, uint64_t device_offset,
                                            void* host, uint64_t bytes, bool async, sw_copy_event_t* out_event);
/* Non-blocking. STALE_HANDLE for an event of an older generation (abandoned
 * by a restart); VALUE for an unknown id; IO when the copy failed. */
SW_API sw_error_t* sw_device_event_query(sw_device_t* device, const sw_copy_event_t* event,
                                         bool* out_host_released, bool* out_complete);
/* Blocks until the event is complete or `timeout_ns` passes (negative: no
 * limit). TIMEOUT when the time ran out; errors as for query. */
SW_API sw_error_t* sw_device_event_wait(sw_device_t* device, const sw_copy_event_t* event, int64_t timeout_ns);

/* A view of the allocation as a dense first-mode-fastest tensor. TYPE when
 * `dtype` is not the spec's, then VALUE when `shape` is not the spec's; IO
 * when the backend cannot map the memory; STALE_HANDLE / STATE as above. */
SW_API sw_error_t* sw_device_view(sw_device_allocation_t* allocation, sw_dtype_t dtype, const int64_t* shape,
                                  size_t rank, sw_device_view_t** out_view);
SW_API void sw_device_view_retain(sw_device_view_t* view);
SW_API void sw_device_view_release(sw_device_view_t* view);
SW_API sw_error_t* sw_device_view_describe(const sw_device_view_t* view, sw_view_info_t* out_info);
/* DLPack exports (the structs of dlpack.h, DLPack 1.x: the library builds
 * against the copy in third_party/dlpack). Each writes a new managed tensor
 * to *out_managed_tensor, describing the memory in place (kDLCPU, element
 * strides, byte_offset 0) and keeping what owns it alive; the caller owns it
 * and hands it to a consumer, which calls its deleter exactly once, from any
 * thread; the deleter frees it. Nothing is written on error. Thread-safe.
 *
 * Exports a host-visible view as a legacy DLManagedTensor*; it keeps the
 * view, a use of its allocation (which then refuses to be freed), alive
 * until its deleter runs. TYPE for a NULL or wrong handle, VALUE for a NULL
 * out_managed_tensor, STALE_HANDLE after the device restarted, UNSUPPORTED
 * when the memory is not host visible. For tinygrad, pass the described view
 * without DLPack:
 *   Tensor.from_blob(info.pointer, reversed(info.shape), dtype=..., device="CPU")
 * (dense first mode fastest is row-major with the shape reversed), keeping
 * the view alive while tinygrad may read: see docs/interop.md. */
SW_API sw_error_t* sw_device_view_to_dlpack(sw_device_view_t* view, void** out_managed_tensor);
/* The same as a DLManagedTensorVersioned* for a consumer that reads DLPack
 * up to version max_major.max_minor: its version is 1.x, the minor at most
 * max_minor when max_major is 1 (a consumer of a later major gets this
 * library's 1.x), and its flags are 0. VALUE when max_major is 0 (before
 * DLPack 1.0 there is no versioned struct: use sw_device_view_to_dlpack);
 * other errors as sw_device_view_to_dlpack. */
SW_API sw_error_t* sw_device_view_to_dlpack_versioned(sw_device_view_t* view, uint32_t max_major, uint32_t max_minor,
                                                      void** out_managed_tensor);
/* Exports a tensor on a host-addressable carrier (CPU, Host) as a legacy
 * DLManagedTensor*, sharing the carrier's memory; it keeps the tensor, and
 * so its carrier, alive until its deleter runs. The carrier must not be
 * disposed (sw_carrier_dispose, a move out of it) while a consumer may read,
 * since the export does not hold its storage against that: the Python
 * package refuses release() while an export is alive. Each top-level mode
 * must walk one arithmetic progression (a nested mode may, as NumPy strides
 * need). TYPE for a NULL or wrong handle, VALUE for a NULL
 * out_managed_tensor, STATE for a released carrier or one a TiledEvictable
 * holds as a tier, UNSUPPORTED for a carrier whose memory is not host
 * addressable (Vulkan, File, Zstd, TiledEvictable: read or move their
 * tensors instead) or a mode that is not one progression. */
SW_API sw_error_t* sw_tensor_to_dlpack(sw_tensor_t* tensor, void** out_managed_tensor);
/* The same as a DLManagedTensorVersioned*, versioned as for
 * sw_device_view_to_dlpack_versioned, with DLPACK_FLAG_BITMASK_READ_ONLY
 * set in flags when the carrier is read-only (a CPU carrier over read-only
 * external memory) and no other flag: the export is never a copy. VALUE when max_major is 0; other errors as sw_tensor_to_dlpack. */
SW_API sw_error_t* sw_tensor_to_dlpack_versioned(sw_tensor_t* tensor, uint32_t max_major, uint32_t max_minor,
                                                 void** out_managed_tensor);

/* A compute carrier of `size` zero-filled slots in device-local memory of a
 * Vulkan device. Ops on it run as SPIR-V compute shaders, recorded into one
 * command buffer per batch and submitted when values are read (sw_tensor_read,
 * sw_carrier_read, a move), so a chain of ops costs one submission and one
 * wait; kernel outputs are not zero-filled, and freed device memory is reused
 * (up to the runtime's pool limit). Autograd through Vulkan tensors runs its
 * backward as shaders on the device too.
 *
 * dtypes, as on the CPU carrier: f32 for every op; f64 for every op where
 * the device has shaderFloat64 (else UNSUPPORTED naming the feature; for a
 * handed-in device, declare it in sw_vulkan_device_desc_t.enabled_features);
 * f16 and bf16 stored 16-bit, matmul widening them to f32 in the shader and
 * giving, as on the CPU, a result of the operands' dtype rounded once from
 * the f32 sums (sw_matmul_ex: the f32 sums), their gradients rounded back on
 * the device. Any dtype
 * can be stored and moved. What the CPU carrier refuses (TYPE: add of f16,
 * reduce_sum of i32, ...) fails with the same code here.
 *
 * sw_move_async moves tensors between it and CPU carriers. It can be the
 * primary tier of a TiledEvictable (sw_tiled_create). TYPE when `device` is not a
 * Vulkan device; UNSUPPORTED in builds without Vulkan. */
SW_API sw_error_t* sw_carrier_create_vulkan(sw_runtime_t* runtime, sw_device_t* device, sw_dtype_t dtype,
                                            size_t size, sw_carrier_t** out_carrier);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRIDEWEAVE_STRIDEWEAVE_H_ */
