/* The part of the SWIG interface every language shares: which declarations of
 * include/strideweave/strideweave.h the generated layer exposes as they are.
 *
 * A language module (bindings/python/native.i, bindings/java/native.i) sets
 * its %module, its typemaps for sw_error_t* results and out-parameters, and
 * its own helpers for the declarations ignored here, then %includes this
 * file. Everything generated from it is a private layer: the public APIs are
 * the hand-written facades on top.
 */

%{
#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"
%}

/* The export macro is an attribute SWIG need not see. */
#define SW_API

/* Structs the languages fill through helpers rather than field by field. */
%ignore sw_runtime_desc_t;
%ignore sw_allocator_t;
%ignore sw_await_callback_info_t;
%ignore sw_file_carrier_desc_t;
%ignore sw_file_carrier_io_t;
%ignore sw_zstd_carrier_desc_t;
%ignore sw_remote_carrier_desc_t;
%ignore sw_residency_policy_t;
%ignore sw_lru_stats_t;
%ignore sw_lru_policy_desc_t;
%ignore sw_tile_state_t;
%ignore sw_external_memory_desc_t;
%ignore sw_matmul_desc_t;
%ignore sw_random_desc_t;

/* Functions taking or filling those structs, raw buffers, arrays with a
 * separate capacity, callbacks or void pointers: each language wraps them in
 * a helper with a natural signature. */
%ignore sw_runtime_desc_init;
%ignore sw_runtime_create;
%ignore sw_await_callback_info_init;
%ignore sw_await_set_callback;
%ignore sw_await_wait;
%ignore sw_file_carrier_desc_init;
%ignore sw_carrier_create_file;
%ignore sw_carrier_open_file;
%ignore sw_file_carrier_io_init;
%ignore sw_file_carrier_io;
%ignore sw_zstd_carrier_desc_init;
%ignore sw_carrier_create_zstd;
%ignore sw_remote_carrier_desc_init;
%ignore sw_carrier_create_remote;
%ignore sw_carrier_open_remote;
%ignore sw_carrier_create_cpu_from;
%ignore sw_external_memory_desc_init;
%ignore sw_carrier_create_cpu_external;
%ignore sw_matmul_desc_init;
%ignore sw_matmul_ex;
%ignore sw_random_desc_init;
%ignore sw_tensor_random;
%ignore sw_cat;
%ignore sw_stack;
%ignore sw_carrier_read;
%ignore sw_carrier_write;
%ignore sw_tensor_from_data;
%ignore sw_tensor_read;
%ignore sw_tensor_write;
%ignore sw_layout_create;
%ignore sw_layout_group;
%ignore sw_layout_permute;
%ignore sw_layout_extents;
%ignore sw_layout_decode;
%ignore sw_layout_to_string;
%ignore sw_tensor_shape;
%ignore sw_tensor_permute;
%ignore sw_tile_set_create;
%ignore sw_tile_set_coordinates;
%ignore sw_tile_selection_create;
%ignore sw_tile_selection_compact_grid_shape;
%ignore sw_tile_selection_axis;
%ignore sw_tile_selection_coordinates;
%ignore sw_residency_policy_init;
%ignore sw_lru_policy_as_residency_policy;
%ignore sw_lru_policy_stats;
%ignore sw_lru_policy_desc_init;
%ignore sw_lru_policy_create_ex;
%ignore sw_tiled_create;
%ignore sw_tiled_grid_shape;
%ignore sw_tiled_tile_shape;
%ignore sw_tiled_tile_state;
%ignore sw_tiled_promote_async;
%ignore sw_tiled_prefetch_async;
%ignore sw_tiled_evict_async;
%ignore sw_tiled_promote;
%ignore sw_tiled_evict;
%ignore sw_set_log;
%ignore sw_tensor_to_dlpack;
%ignore sw_tensor_to_dlpack_versioned;
%ignore sw_device_view_to_dlpack;
%ignore sw_device_view_to_dlpack_versioned;
/* Model files: the structs and arrays go through language helpers. */
%ignore sw_file_tensor_info_t;
%ignore sw_file_tensor_info_init;
%ignore sw_file_tensor_view;
%ignore sw_file_segment_t;
%ignore sw_carrier_open_file_segments;
%ignore sw_carrier_open_npy;
%ignore sw_carrier_open_safetensors;
%ignore sw_carrier_open_safetensors_stack;
%ignore sw_carrier_open_safetensors_stack_files;
%ignore sw_carrier_open_raw_tensor;
%ignore sw_carrier_open_gguf;
%ignore sw_gguf_save_desc_t;
%ignore sw_gguf_save_desc_init;
%ignore sw_save_gguf;
%ignore sw_testing_parse_gguf_header;
%ignore sw_safetensors_save_desc_t;
%ignore sw_safetensors_save_desc_init;
%ignore sw_save_safetensors;
%ignore sw_save_npy;
%ignore sw_testing_parse_npy_header;
%ignore sw_testing_parse_safetensors_header;
%ignore sw_file_io_stats_t;
%ignore sw_file_io_stats_init;
%ignore sw_testing_file_io_stats;
%ignore sw_io_queue_stats_t;
%ignore sw_io_queue_stats_init;
%ignore sw_testing_io_queue_stats;
/* An error a host callback hands back to the library: a language's own
 * callback trampolines make it; as a plain call it would only raise. */
%ignore sw_error_create;

/* Calls that may block (waits, I/O, kernels, residency transitions, thread
 * joins) or run a host callback: the languages that have a global
 * interpreter lock release it around them. */
%define SW_BLOCKING_CALLS(FEATURE)
FEATURE sw_runtime_shutdown;
FEATURE sw_runtime_release;
FEATURE sw_carrier_dispose;
FEATURE sw_carrier_create_cpu;
FEATURE sw_carrier_create_host;
FEATURE sw_carrier_create_vulkan;
FEATURE sw_device_create_vulkan;
FEATURE sw_device_release;
FEATURE sw_tensor_get;
FEATURE sw_tensor_set;
FEATURE sw_add;
FEATURE sw_elementwise_mul;
FEATURE sw_mul;
FEATURE sw_mul_scalar;
FEATURE sw_scalar_mul;
FEATURE sw_relu;
FEATURE sw_reduce_sum;
FEATURE sw_matmul;
FEATURE sw_unary;
FEATURE sw_binary;
FEATURE sw_binary_scalar;
FEATURE sw_scalar_binary;
FEATURE sw_binary_inplace;
FEATURE sw_binary_scalar_inplace;
FEATURE sw_where;
FEATURE sw_reduce;
FEATURE sw_reduce_index;
FEATURE sw_softmax;
FEATURE sw_log_softmax;
FEATURE sw_topk;
FEATURE sw_index_select;
FEATURE sw_gather;
FEATURE sw_index_add;
FEATURE sw_scatter_add;
FEATURE sw_tensor_full;
FEATURE sw_tensor_arange;
FEATURE sw_tensor_reshape;
FEATURE sw_tensor_flatten;
FEATURE sw_tensor_contiguous;
FEATURE sw_tensor_clone;
FEATURE sw_tensor_to_dtype;
FEATURE sw_tensor_fill;
FEATURE sw_tensor_copy_from;
FEATURE sw_backward;
FEATURE sw_move_async;
FEATURE sw_tiled_project;
FEATURE sw_tiled_expert_matmul;
FEATURE sw_tiled_expert_ffn;
FEATURE sw_tiled_scatter;
FEATURE sw_tiled_update_async;
FEATURE sw_tiled_full_tensor;
%enddef

/* A language module defines SW_BLOCKING_FEATURE (Python: %thread) to mark
 * the calls above, and includes this file after its typemaps. */
#ifdef SW_BLOCKING_FEATURE
SW_BLOCKING_CALLS(SW_BLOCKING_FEATURE)
#endif

%include "strideweave/strideweave.h"
/* The testing hooks, for the test suites (strideweave_testing.h). */
%include "strideweave/strideweave_testing.h"
