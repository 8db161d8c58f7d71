#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "async/loop.hpp"
#include "carriers/host/memory_carrier.hpp"
#include "core/dtype.hpp"
#include "ops/move.hpp"

using namespace sw;
using namespace sw::api;

extern "C" {

SW_API void sw_await_callback_info_init(sw_await_callback_info_t* info) {
  if (!info) return;
  *info = sw_await_callback_info_t{};
  info->struct_size = sizeof(sw_await_callback_info_t);
  info->mode = SW_CALLBACK_MODE_WAITING_THREAD;
}

SW_API void sw_await_retain(sw_await_t* await) { retain_handle(await); }
SW_API void sw_await_release(sw_await_t* await) { release_handle(await); }

SW_API sw_error_t* sw_await_kind(const sw_await_t* await, sw_await_kind_t* out_kind) {
  return guard([&] {
    const Await* a = get<Await>(await, "await");
    require(out_kind, "out_kind");
    *out_kind = a->kind();
  });
}

SW_API sw_error_t* sw_await_query(const sw_await_t* await, sw_await_status_t* out_status) {
  return guard([&] {
    const Await* a = get<Await>(await, "await");
    require(out_status, "out_status");
    *out_status = a->status();
  });
}

SW_API sw_error_t* sw_await_wait(sw_await_t* await, int64_t timeout_ns) {
  return guard([&] {
    Await* a = get<Await>(await, "await");
    if (timeout_ns != 0 && a->host().on_loop_thread() && a->status() == SW_AWAIT_PENDING)
      state_error("sw_await_wait on the loop thread would deadlock; use a waiting-thread callback");
    Status st = a->wait(timeout_ns);
    if (!st.ok()) st.raise();
  });
}

SW_API sw_error_t* sw_await_result(sw_await_t* await, sw_tensor_t** out_result) {
  return guard([&] {
    Await* a = get<Await>(await, "await");
    require(out_result, "out_result");
    Ref<Object> r = a->result();
    *out_result = r ? to_handle<sw_tensor_t>(Ref<Tensor>(static_cast<Tensor*>(r.get()))) : nullptr;
  });
}

SW_API sw_error_t* sw_await_set_callback(sw_await_t* await, const sw_await_callback_info_t* info) {
  return guard([&] {
    Await* a = get<Await>(await, "await");
    require(info, "info");
    sw_await_callback_info_t i;
    sw_await_callback_info_init(&i);
    i = struct_in(info, i, "info");
    if (!i.callback) value_error("info->callback must not be NULL");
    if (i.mode != SW_CALLBACK_MODE_WAITING_THREAD && i.mode != SW_CALLBACK_MODE_LOOP_THREAD)
      value_error("info->mode " + std::to_string(static_cast<int>(i.mode)) + " is not a callback mode");
    a->set_callback(i);
  });
}

SW_API sw_error_t* sw_move_async(sw_tensor_t* tensor, sw_carrier_t* destination, sw_await_t** out_await) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    auto d = ref<Carrier>(destination, "destination");
    require(out_await, "out_await");
    *out_await = to_handle<sw_await_t>(ops::move_async(t, d));
  });
}

SW_API sw_error_t* sw_carrier_create_host(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_host");
    require(out_carrier, "out_carrier");
    count_allocation(*rt, "Host carrier");
    *out_carrier = to_handle<sw_carrier_t>(make_ref<HostCarrier>(rt, dtype, size));
  });
}

SW_API sw_error_t* sw_carrier_stored_bytes(const sw_carrier_t* carrier, uint64_t* out_bytes) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_bytes, "out_bytes");
    *out_bytes = c->is_disposed() ? 0 : c->stored_bytes();
  });
}

}  // extern "C"
