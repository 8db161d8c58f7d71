/*
 * StrideWeave testing hooks: deterministic fault injection, transfer holds,
 * claims, the fake device's controls and Vulkan counters, for tests of the
 * library and of programs that embed it. Not for production use.
 *
 * These functions are exported under their own symbol version node
 * (STRIDEWEAVE_TESTING_0), apart from the stable API of strideweave.h: they
 * may change between minor releases. Include strideweave.h first, or let
 * this header include it.
 */
#ifndef STRIDEWEAVE_STRIDEWEAVE_TESTING_H_
#define STRIDEWEAVE_STRIDEWEAVE_TESTING_H_

#include "strideweave/strideweave.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The fake device's controls                                                */
/* ------------------------------------------------------------------------ */

/* The fake backend's call log: one line per backend call, e.g.
 * "alloc alloc=1 bytes=256 alignment=64", "host_to_device alloc=3 offset=16
 * bytes=64 async=1", "complete event=2", "free alloc=1", "restart
 * generation=2". TYPE for a device that is not fake. */
SW_API sw_error_t* sw_fake_device_log_count(const sw_device_t* device, size_t* out_count);
/* Writes line `index` (NUL-terminated) and its length without the NUL; with a
 * too small buffer only *out_length, failing VALUE. INDEX past the end. */
SW_API sw_error_t* sw_fake_device_log_entry(const sw_device_t* device, size_t index, char* buffer,
                                            size_t capacity, size_t* out_length);
SW_API sw_error_t* sw_fake_device_log_clear(sw_device_t* device);

typedef enum sw_fake_failure_t {
  SW_FAKE_FAIL_ALLOCATION = 1,   /* next allocation: OUT_OF_MEMORY */
  SW_FAKE_FAIL_COPY = 2,         /* next copy (sync: at the call; async: at completion): IO */
  SW_FAKE_FAIL_VIEW = 4,         /* next view: IO */
  SW_FAKE_FAIL_DEVICE_LOST = 8,  /* next backend call: DEVICE_LOST and a restart */
  SW_FAKE_FAILURE_FORCE32 = 0x7fffffff
} sw_fake_failure_t;

/* Arms one-shot failures (a bitwise OR of sw_fake_failure_t). */
SW_API sw_error_t* sw_fake_device_arm_failure(sw_device_t* device, uint32_t failures);
/* Performs one pending asynchronous copy now (both host_released and complete
 * afterwards). VALUE when the event is not pending; STALE_HANDLE as above. */
SW_API sw_error_t* sw_fake_device_complete(sw_device_t* device, const sw_copy_event_t* event);
/* Performs every pending asynchronous copy, oldest first. */
SW_API sw_error_t* sw_fake_device_complete_all(sw_device_t* device, size_t* out_completed);

/* ------------------------------------------------------------------------ */
/* Claims, faults, holds and counters                                        */
/* ------------------------------------------------------------------------ */

/* Claims a carrier as in-flight work would, so tests can observe the rules
 * for owned carriers. STATE if it is already owned or disposed. Not for
 * production use. */
SW_API sw_error_t* sw_testing_claim(sw_carrier_t* carrier);
/* Ends a claim made by sw_testing_claim(). STATE if it holds none. */
SW_API sw_error_t* sw_testing_unclaim(sw_carrier_t* carrier);

/* What counts as an SW_FAULT_ALLOCATION, one each, whatever the size:
 * - creating a carrier: sw_carrier_create_cpu, _cpu_from, _host, _zstd,
 *   _file, _vulkan, sw_tiled_create, and the CPU carrier of sw_tensor_from_data
 *   and sw_tensor_zeros (an injected failure comes after the argument checks
 *   and before anything is allocated or claimed);
 * - each tile buffer a TiledEvictable allocates: one per tile of a full
 *   primary seed at sw_tiled_create, one per tile given primary storage by a
 *   promotion, an update or a scatter;
 * - giving an empty carrier storage: the destination of a move or a
 *   projection, the secondary tier on a first eviction;
 * - a device allocation (sw_device_alloc on host and Vulkan devices).
 * Not counted: carriers that allocate no storage (sw_carrier_open_file over
 * the caller's file, sw_carrier_create_cpu_external over the caller's
 * memory), op results, and the library's internal staging buffers.
 *
 * The device kinds count calls of the device bridge, on every device (host,
 * fake, Vulkan), public or made by the library for a Vulkan carrier or tile:
 * - SW_FAULT_DEVICE_ALLOCATION: one backend allocation (sw_device_alloc, a
 *   Vulkan carrier's buffer, a tile buffer on a Vulkan primary), before the
 *   backend is called;
 * - SW_FAULT_DEVICE_COPY: one copy through sw_device_host_to_device or
 *   sw_device_device_to_host, synchronous or asynchronous, refused at the
 *   call before any byte moves;
 * - SW_FAULT_DEVICE_LOST: one backend call (allocation, copy, view) fails as
 *   a lost device would: DEVICE_LOST, and the device restarts, so every
 *   handle of the old generation is stale. */
typedef enum sw_fault_kind_t {
  SW_FAULT_ALLOCATION = 1,  /* an allocation as listed above */
  SW_FAULT_READ = 2,        /* one read request of a storage carrier (a
                               remote carrier: one chunk's reply), or one
                               read of a model file's header by
                               sw_carrier_open_npy / _safetensors(_stack) */
  SW_FAULT_WRITE = 3,       /* one write request of a storage carrier (a
                               remote carrier: one chunk's reply, a block's
                               commit, the commit's reply) */
  SW_FAULT_DECOMPRESS = 4,  /* one zstd frame decompression */
  SW_FAULT_DEVICE_ALLOCATION = 5, /* one device allocation: OUT_OF_MEMORY */
  SW_FAULT_DEVICE_COPY = 6,       /* one device copy: IO */
  SW_FAULT_DEVICE_LOST = 7,       /* one device call: DEVICE_LOST and a restart */
  /* One use of O_DIRECT by a File carrier opened with direct_io: opening its
   * O_DIRECT descriptor, or one read or write through it. It is refused as
   * a file system without O_DIRECT refuses it (EINVAL), so the carrier falls
   * back to buffered I/O for good and the transfer still succeeds. */
  SW_FAULT_DIRECT_IO = 8,
  /* One compute job of a TiledEvictable request on its tiles' memory (the
   * products of sw_tiled_expert_matmul, the copy of a blocking
   * materialisation), before it starts: on a worker, or on the calling
   * thread when the call needs no tile moved. An injected fault fails the
   * request as a failed scratch allocation of its kernels would: its await
   * fails OUT_OF_MEMORY, "injected tile work failure", nothing committed.
   * A hold (sw_testing_hold) stops the job there, its tiles pinned, until
   * sw_testing_release_hold: a call that runs on the calling thread does
   * not return until then, so hold from another thread. */
  SW_FAULT_TILE_WORK = 9,
  SW_FAULT_KIND_FORCE32 = 0x7fffffff
} sw_fault_kind_t;

/* What a Vulkan device has done since it was created. */
typedef struct sw_vulkan_counters_t {
  uint32_t struct_size;
  uint64_t submits;      /* command batches submitted to the queue */
  uint64_t dispatches;   /* compute shader dispatches recorded */
  uint64_t copies;       /* buffer-to-buffer copies recorded */
  uint64_t host_reads;   /* reads of device memory into host memory */
  uint64_t host_writes;  /* writes of host memory into device memory */
  uint64_t pipelines;    /* compute pipelines created (each is kept) */
  uint64_t buffers_made;   /* device buffers allocated fresh */
  uint64_t buffers_reused; /* device buffers taken from the device's reuse pool */
} sw_vulkan_counters_t;

SW_API void sw_vulkan_counters_init(sw_vulkan_counters_t* counters);
/* Reads a Vulkan device's counters, so tests can check that work stays on
 * the device and is batched. TYPE for a device that is not Vulkan. Not for
 * production use. */
SW_API sw_error_t* sw_testing_vulkan_counters(sw_device_t* device, sw_vulkan_counters_t* out_counters);

/* Arms a one-shot fault: the `nth` (1 = next) operation of `kind` in this
 * runtime fails (allocation: OUT_OF_MEMORY with a message starting
 * "injected allocation failure", read/write: IO, decompress: DATA_CORRUPT;
 * direct I/O: refused, falling back to buffered I/O, with no error),
 * changing nothing, as any failure; the operation after it succeeds again.
 * The device kinds fail with OUT_OF_MEMORY, IO and DEVICE_LOST (the device
 * restarts), messages starting "injected device". Arming again replaces the
 * count; nth 0 disarms. While no kind is armed a fault point costs one
 * relaxed atomic load. Not for production use. */
SW_API sw_error_t* sw_testing_inject_fault(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t nth);
/* How many operations of `kind` this runtime reached since `kind` was last
 * armed (they are counted only while it is armed: arm UINT64_MAX to count a
 * workload without failing it), and how many faults of `kind` it injected
 * since it was created. Either out-parameter may be NULL. VALUE for an
 * unknown kind. Not for production use. */
SW_API sw_error_t* sw_testing_fault_counts(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t* out_reached,
                                           uint64_t* out_injected);
/* Holds back the completion of the `nth` (1 = next) asynchronous storage
 * transfer of `kind` (SW_FAULT_READ or SW_FAULT_WRITE; one transfer is one
 * read or write the library starts on a storage carrier, however many
 * requests it takes): the bytes move, but the work waiting for them sees the
 * transfer in flight until sw_testing_release_hold, so a test can act in
 * that window deterministically. SW_FAULT_TILE_WORK holds the `nth` compute
 * job of tiled work before it starts (see the kind). One hold at a time;
 * arming again replaces the count; nth 0 disarms. VALUE for other kinds.
 * Not for production use. */
SW_API sw_error_t* sw_testing_hold(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t nth);
/* Blocks until the armed hold has caught its transfer's completion (or its
 * tiled work; negative timeout: no limit); TIMEOUT when the time ran out. */
SW_API sw_error_t* sw_testing_wait_held(sw_runtime_t* runtime, int64_t timeout_ns);
/* Lets the held completion run on the loop thread (held tiled work goes on
 * where it was). STATE when none is held. sw_runtime_shutdown releases a
 * held completion itself. */
SW_API sw_error_t* sw_testing_release_hold(sw_runtime_t* runtime);
/* Flips one stored byte of a zstd carrier's frame `frame` so the next read of
 * it fails DATA_CORRUPT. UNSUPPORTED for other carriers. */
SW_API sw_error_t* sw_testing_corrupt_frame(sw_carrier_t* carrier, size_t frame);
/* The stored (compressed) bytes of a zstd carrier's frame `frame` and their
 * count; buffer NULL (capacity 0) asks for the count only; with a too small
 * buffer only *out_length, failing VALUE. INDEX past the last frame;
 * UNSUPPORTED for other carriers. */
SW_API sw_error_t* sw_testing_frame_bytes(const sw_carrier_t* carrier, size_t frame, void* buffer, size_t capacity,
                                          size_t* out_length);
/* Stores `length` raw bytes as a zstd carrier's frame `frame`, whatever they
 * hold, so tests and fuzzers can hand the carrier any frame: the next read
 * of the frame checks it as it checks every frame (a damaged one is
 * DATA_CORRUPT). INDEX past the last frame; UNSUPPORTED for other carriers. */
SW_API sw_error_t* sw_testing_replace_frame(sw_carrier_t* carrier, size_t frame, const void* bytes, size_t length);

/* ------------------------------------------------------------------------ */
/* Model-file header parsers and file I/O counters                           */
/* ------------------------------------------------------------------------ */

/* The header parsers behind sw_carrier_open_npy and
 * sw_carrier_open_safetensors, as pure functions over a byte buffer, for
 * fuzzing: `data` holds the first `size` bytes of a file of `file_size`
 * bytes (0: the buffer is the whole file; a file_size below size cuts the
 * buffer to it), which must include the whole header. They never read past
 * data + size. Errors as the openers (DATA_CORRUPT, UNSUPPORTED; messages
 * name "npy buffer" or "safetensors buffer" and the field); VALUE for NULL
 * data with size > 0. `out_info` may be NULL; when given it is filled as an
 * opener would (segments 1; the geometry of rank-0 or empty shapes has
 * zeros). Not for production use. */
SW_API sw_error_t* sw_testing_parse_npy_header(const void* data, size_t size, uint64_t file_size,
                                               sw_file_tensor_info_t* out_info);
/* Parses a safetensors header. `out_count` (may be NULL) gets the number of
 * tensors; with `name` non-NULL `out_info` describes that tensor (VALUE when
 * the header has none of that name). */
SW_API sw_error_t* sw_testing_parse_safetensors_header(const void* data, size_t size, uint64_t file_size,
                                                       const char* name, size_t* out_count,
                                                       sw_file_tensor_info_t* out_info);

/* The GGUF header parser behind sw_carrier_open_gguf, as the two above
 * (messages name "GGUF buffer"): `out_tensor_count` and `out_metadata_count`
 * (may be NULL) get the numbers of tensors and metadata key values; with
 * `name` non-NULL `out_info` describes that tensor (VALUE when the header
 * has none of that name; UNSUPPORTED when its ggml type has no StrideWeave
 * dtype, as the opener). */
SW_API sw_error_t* sw_testing_parse_gguf_header(const void* data, size_t size, uint64_t file_size, const char* name,
                                                size_t* out_tensor_count, size_t* out_metadata_count,
                                                sw_file_tensor_info_t* out_info);

/* Bytes a File carrier has read or written, by path. */
typedef struct sw_file_io_stats_t {
  uint32_t struct_size;
  uint64_t direct_bytes;   /* through O_DIRECT, in place */
  uint64_t bounce_bytes;   /* through O_DIRECT via an aligned bounce buffer */
  uint64_t buffered_bytes; /* through the page cache */
  bool direct_open;        /* an O_DIRECT descriptor is open and in use (for
                              every file of a carrier over several) */
} sw_file_io_stats_t;

SW_API void sw_file_io_stats_init(sw_file_io_stats_t* stats);
/* A File carrier's I/O counters, so tests can check that direct I/O was
 * used. TYPE for another carrier kind. Not for production use. */
SW_API sw_error_t* sw_testing_file_io_stats(const sw_carrier_t* carrier, sw_file_io_stats_t* out_stats);

/* The runtime's file request slots (see sw_tiled_prefetch_async): requests
 * granted a slot and the most in flight at once, per class, since the
 * runtime was made, over the shared slots and every device's own (a device
 * with a measured profile has its own: see sw_file_carrier_io). */
typedef struct sw_io_queue_stats_t {
  uint32_t struct_size;
  uint32_t slots;                 /* shared request slots (libuv's thread pool size) */
  uint32_t prefetch_slots;        /* at most this many prefetch requests in flight */
  uint64_t demand_requests;       /* reads and writes of requests something waits for */
  uint64_t prefetch_requests;     /* reads of sw_tiled_prefetch_async */
  uint32_t max_demand_in_flight;
  uint32_t max_prefetch_in_flight;
  uint32_t max_in_flight;         /* both classes together */
  bool io_uring;                  /* O_DIRECT requests go through the loop's io_uring */
  uint64_t ring_requests;         /* requests submitted to it */
} sw_io_queue_stats_t;

SW_API void sw_io_queue_stats_init(sw_io_queue_stats_t* stats);
SW_API sw_error_t* sw_testing_io_queue_stats(sw_runtime_t* runtime, sw_io_queue_stats_t* out_stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRIDEWEAVE_STRIDEWEAVE_TESTING_H_ */
