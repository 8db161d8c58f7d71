#include <cstring>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "async/loop.hpp"
#include "carriers/tiled/expert_ffn.hpp"
#include "carriers/tiled/policy.hpp"
#include "carriers/tiled/tiled_carrier.hpp"

using namespace sw;
using namespace sw::api;

namespace {

TiledEvictable* tiled(const sw_carrier_t* handle, const char* arg) {
  Carrier* c = get<Carrier>(handle, arg);
  if (c->kind() != SW_CARRIER_TILED)
    type_error(std::string(arg) + ": expected a TiledEvictable, got a " + c->kind_name() + " carrier");
  return static_cast<TiledEvictable*>(c);
}

// An enum argument as the 32 bits a C caller passed. Loading a value outside
// the enumerators' range as the C++ enum type is undefined, so such values are
// refused as integers before the enum is read.
template <typename E>
void check_enum_bits(const E& value, const char* what) {
  static_assert(sizeof(E) == sizeof(uint32_t), "32-bit C enums");
  uint32_t raw;
  std::memcpy(&raw, &value, sizeof raw);
  if (raw > 0x7fffffffu) value_error(std::string(what) + " " + std::to_string(raw) + " is not a known value");
}


std::vector<TileCoord> coords_arg(const int64_t* coords, size_t count, size_t rank) {
  if (count && !coords) value_error("coords must not be NULL when count is " + std::to_string(count));
  if (count && rank == 0) value_error("a non-empty TileSet needs rank >= 1");
  std::vector<TileCoord> out;
  for (size_t i = 0; i < count; ++i) out.emplace_back(coords + i * rank, coords + (i + 1) * rank);
  return out;
}

void write_coords(const std::vector<TileCoord>& cs, int64_t* out, size_t capacity) {
  size_t need = 0;
  for (const auto& c : cs) need += c.size();
  if (need && !out) value_error("out_coords must not be NULL");
  if (capacity < need)
    value_error("capacity " + std::to_string(capacity) + " is less than the " + std::to_string(need) + " values needed");
  for (const auto& c : cs) out = std::copy(c.begin(), c.end(), out);
}

void write_shape(const std::vector<int64_t>& s, int64_t* out, size_t capacity) {
  if (!s.empty() && !out) value_error("out_shape must not be NULL");
  if (capacity < s.size())
    value_error("capacity " + std::to_string(capacity) + " is less than the rank " + std::to_string(s.size()));
  std::copy(s.begin(), s.end(), out);
}

// A filled vtable's user_data: the policy, and whether the TiledEvictable
// that took the vtable attached (its destroy detaches only then; a caller
// that undoes a failed creation calls destroy without an attach).
struct LruBinding {
  Ref<LruPolicy> lru;
  bool attached = false;
};

LruPolicy& lru_of(void* user) { return *static_cast<LruBinding*>(user)->lru; }

sw_error_t* lru_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t, sw_residency_plan_t** out) {
  return guard([&] { *out = to_handle<sw_residency_plan_t>(lru_of(user).plan(*get<TileSet>(required, "required"))); });
}

sw_error_t* lru_plan_promotion(void* user, const sw_tile_set_t* tiles, sw_residency_plan_t** out) {
  return guard([&] { *out = to_handle<sw_residency_plan_t>(lru_of(user).plan_promotion(*get<TileSet>(tiles, "tiles"))); });
}

void lru_outcome(void* user, const sw_residency_plan_t* plan, bool committed, const sw_tile_set_t* promoted,
                 const sw_tile_set_t* evicted) {
  auto* p = plan ? static_cast<const ResidencyPlan*>(reinterpret_cast<const Object*>(plan)) : nullptr;
  lru_of(user).outcome(p, committed, *reinterpret_cast<const TileSet*>(reinterpret_cast<const Object*>(promoted)),
                       *reinterpret_cast<const TileSet*>(reinterpret_cast<const Object*>(evicted)));
}

sw_error_t* lru_attach(void* user, const sw_carrier_t* handle) {
  return guard([&] {
    auto* binding = static_cast<LruBinding*>(user);
    if (binding->attached) state_error("this LRU policy vtable is already used by a TiledEvictable; fill one per sw_tiled_create");
    const auto* te = static_cast<const TiledEvictable*>(reinterpret_cast<const Object*>(handle));
    binding->lru->attach(te->bytes_of(static_cast<size_t>(te->geometry().tile_size)));
    binding->attached = true;
  });
}

void lru_destroy(void* user) {
  auto* binding = static_cast<LruBinding*>(user);
  if (binding->attached) binding->lru->detach();
  delete binding;
}

}  // namespace

extern "C" {

// ---- TileSet -----------------------------------------------------------------

SW_API sw_error_t* sw_tile_set_create(const int64_t* coords, size_t count, size_t rank, sw_tile_set_t** out_set) {
  return guard([&] {
    require(out_set, "out_set");
    *out_set = to_handle<sw_tile_set_t>(make_ref<TileSet>(coords_arg(coords, count, rank), rank));
  });
}
SW_API void sw_tile_set_retain(sw_tile_set_t* set) { retain_handle(set); }
SW_API void sw_tile_set_release(sw_tile_set_t* set) { release_handle(set); }

SW_API sw_error_t* sw_tile_set_count(const sw_tile_set_t* set, size_t* out_count) {
  return guard([&] {
    const TileSet* s = get<TileSet>(set, "set");
    require(out_count, "out_count");
    *out_count = s->count();
  });
}

SW_API sw_error_t* sw_tile_set_rank(const sw_tile_set_t* set, size_t* out_rank) {
  return guard([&] {
    const TileSet* s = get<TileSet>(set, "set");
    require(out_rank, "out_rank");
    *out_rank = s->rank();
  });
}

SW_API sw_error_t* sw_tile_set_coordinates(const sw_tile_set_t* set, int64_t* out_coords, size_t capacity) {
  return guard([&] { write_coords(get<TileSet>(set, "set")->coords(), out_coords, capacity); });
}

SW_API sw_error_t* sw_tile_set_equal(const sw_tile_set_t* a, const sw_tile_set_t* b, bool* out_equal) {
  return guard([&] {
    const TileSet* x = get<TileSet>(a, "a");
    const TileSet* y = get<TileSet>(b, "b");
    require(out_equal, "out_equal");
    *out_equal = x->equals(*y);
  });
}

// ---- TileSelection ------------------------------------------------------------

SW_API sw_error_t* sw_tile_selection_create(const int64_t* const* per_axis, const size_t* counts, size_t rank,
                                            sw_tile_selection_t** out_selection) {
  return guard([&] {
    require(out_selection, "out_selection");
    if (rank && (!per_axis || !counts)) value_error("per_axis and counts must not be NULL when rank is " + std::to_string(rank));
    std::vector<std::vector<int64_t>> axes(rank);
    for (size_t a = 0; a < rank; ++a) {
      if (counts[a] && !per_axis[a]) value_error("per_axis[" + std::to_string(a) + "] must not be NULL");
      axes[a].assign(per_axis[a], per_axis[a] + counts[a]);
    }
    *out_selection = to_handle<sw_tile_selection_t>(make_ref<TileSelection>(std::move(axes)));
  });
}
SW_API void sw_tile_selection_retain(sw_tile_selection_t* s) { retain_handle(s); }
SW_API void sw_tile_selection_release(sw_tile_selection_t* s) { release_handle(s); }

SW_API sw_error_t* sw_tile_selection_rank(const sw_tile_selection_t* selection, size_t* out_rank) {
  return guard([&] {
    const TileSelection* s = get<TileSelection>(selection, "selection");
    require(out_rank, "out_rank");
    *out_rank = s->rank();
  });
}

SW_API sw_error_t* sw_tile_selection_compact_grid_shape(const sw_tile_selection_t* selection, int64_t* out_shape,
                                                        size_t capacity) {
  return guard([&] { write_shape(get<TileSelection>(selection, "selection")->compact_grid_shape(), out_shape, capacity); });
}

SW_API sw_error_t* sw_tile_selection_axis(const sw_tile_selection_t* selection, size_t axis, int64_t* out_coords,
                                          size_t capacity) {
  return guard([&] {
    const TileSelection* s = get<TileSelection>(selection, "selection");
    if (axis >= s->rank())
      index_error("axis " + std::to_string(axis) + " is out of range for a selection of rank " + std::to_string(s->rank()));
    write_shape(s->per_axis()[axis], out_coords, capacity);
  });
}

SW_API sw_error_t* sw_tile_selection_count(const sw_tile_selection_t* selection, size_t* out_count) {
  return guard([&] {
    const TileSelection* s = get<TileSelection>(selection, "selection");
    require(out_count, "out_count");
    *out_count = s->count();
  });
}

SW_API sw_error_t* sw_tile_selection_coordinates(const sw_tile_selection_t* selection, int64_t* out_coords,
                                                 size_t capacity) {
  return guard([&] { write_coords(get<TileSelection>(selection, "selection")->coordinates(), out_coords, capacity); });
}

SW_API sw_error_t* sw_tile_selection_tile_set(const sw_tile_selection_t* selection, sw_tile_set_t** out_set) {
  return guard([&] {
    const TileSelection* s = get<TileSelection>(selection, "selection");
    require(out_set, "out_set");
    *out_set = to_handle<sw_tile_set_t>(s->tile_set());
  });
}

SW_API sw_error_t* sw_tile_selection_equal(const sw_tile_selection_t* a, const sw_tile_selection_t* b, bool* out_equal) {
  return guard([&] {
    const TileSelection* x = get<TileSelection>(a, "a");
    const TileSelection* y = get<TileSelection>(b, "b");
    require(out_equal, "out_equal");
    *out_equal = x->equals(*y);
  });
}

// ---- ResidencyPlan --------------------------------------------------------------

SW_API sw_error_t* sw_residency_plan_create(const sw_tile_set_t* promote, const sw_tile_set_t* retain,
                                            const sw_tile_set_t* evict, sw_residency_plan_t** out_plan) {
  return guard([&] {
    require(out_plan, "out_plan");
    auto opt = [](const sw_tile_set_t* h, const char* arg) { return h ? ref<TileSet>(h, arg) : Ref<TileSet>(); };
    *out_plan = to_handle<sw_residency_plan_t>(
        make_ref<ResidencyPlan>(opt(promote, "promote"), opt(retain, "retain"), opt(evict, "evict")));
  });
}
SW_API void sw_residency_plan_retain(sw_residency_plan_t* plan) { retain_handle(plan); }
SW_API void sw_residency_plan_release(sw_residency_plan_t* plan) { release_handle(plan); }

SW_API sw_error_t* sw_residency_plan_promote(const sw_residency_plan_t* plan, sw_tile_set_t** out_set) {
  return guard([&] {
    const ResidencyPlan* p = get<ResidencyPlan>(plan, "plan");
    require(out_set, "out_set");
    *out_set = to_handle<sw_tile_set_t>(p->promote());
  });
}

SW_API sw_error_t* sw_residency_plan_retain_set(const sw_residency_plan_t* plan, sw_tile_set_t** out_set) {
  return guard([&] {
    const ResidencyPlan* p = get<ResidencyPlan>(plan, "plan");
    require(out_set, "out_set");
    *out_set = to_handle<sw_tile_set_t>(p->retain());
  });
}

SW_API sw_error_t* sw_residency_plan_evict(const sw_residency_plan_t* plan, sw_tile_set_t** out_set) {
  return guard([&] {
    const ResidencyPlan* p = get<ResidencyPlan>(plan, "plan");
    require(out_set, "out_set");
    *out_set = to_handle<sw_tile_set_t>(p->evict());
  });
}

// ---- policies -------------------------------------------------------------------

SW_API const char* sw_residency_purpose_name(sw_residency_purpose_t purpose) { return purpose_name(purpose); }

SW_API void sw_residency_policy_init(sw_residency_policy_t* policy) {
  if (!policy) return;
  *policy = sw_residency_policy_t{};
  policy->struct_size = sizeof(sw_residency_policy_t);
}

SW_API sw_error_t* sw_lru_policy_create(size_t budget_tiles, sw_lru_policy_t** out_policy) {
  return guard([&] {
    require(out_policy, "out_policy");
    if (budget_tiles == 0) value_error("sw_lru_policy_create: the budget must be at least one tile");
    *out_policy = reinterpret_cast<sw_lru_policy_t*>(static_cast<Object*>(make_ref<LruPolicy>(budget_tiles, 0).detach()));
  });
}

SW_API void sw_lru_policy_desc_init(sw_lru_policy_desc_t* desc) {
  if (!desc) return;
  *desc = sw_lru_policy_desc_t{};
  desc->struct_size = sizeof(sw_lru_policy_desc_t);
}

SW_API sw_error_t* sw_lru_policy_create_ex(const sw_lru_policy_desc_t* desc, sw_lru_policy_t** out_policy) {
  return guard([&] {
    require(desc, "desc");
    require(out_policy, "out_policy");
    sw_lru_policy_desc_t d;
    sw_lru_policy_desc_init(&d);
    d = struct_in(desc, d, "desc");
    if ((d.budget_tiles == 0) == (d.budget_bytes == 0))
      value_error("sw_lru_policy_create_ex: set exactly one of budget_tiles and budget_bytes (got " +
                  std::to_string(d.budget_tiles) + " tiles and " + std::to_string(d.budget_bytes) + " bytes)");
    *out_policy = reinterpret_cast<sw_lru_policy_t*>(
        static_cast<Object*>(make_ref<LruPolicy>(d.budget_tiles, d.budget_bytes).detach()));
  });
}

static LruPolicy* lru(const sw_lru_policy_t* h, const char* arg) {
  if (!h) type_error(std::string(arg) + ": expected an LRU policy, got NULL");
  auto* obj = reinterpret_cast<Object*>(const_cast<sw_lru_policy_t*>(h));
  if (obj->object_kind() != ObjectKind::kLruPolicy)
    type_error(std::string(arg) + ": expected an LRU policy, got a " + kind_name(obj->object_kind()));
  return static_cast<LruPolicy*>(obj);
}

SW_API void sw_lru_policy_retain(sw_lru_policy_t* policy) { retain_handle(policy); }
SW_API void sw_lru_policy_release(sw_lru_policy_t* policy) { release_handle(policy); }

SW_API sw_error_t* sw_lru_policy_as_residency_policy(sw_lru_policy_t* policy, sw_residency_policy_t* out_policy) {
  return guard([&] {
    LruPolicy* p = lru(policy, "policy");
    require(out_policy, "out_policy");
    sw_residency_policy_init(out_policy);
    out_policy->user_data = new LruBinding{Ref<LruPolicy>(p)};  // deleted by lru_destroy
    out_policy->plan = lru_plan;
    out_policy->destroy = lru_destroy;
    out_policy->outcome = lru_outcome;
    out_policy->attach = lru_attach;
    out_policy->plan_promotion = lru_plan_promotion;
  });
}

SW_API sw_error_t* sw_lru_policy_budget_tiles(const sw_lru_policy_t* policy, size_t* out_tiles) {
  return guard([&] {
    LruPolicy* p = lru(policy, "policy");
    require(out_tiles, "out_tiles");
    *out_tiles = p->budget_tiles();
  });
}

SW_API sw_error_t* sw_lru_policy_hint(sw_lru_policy_t* policy, const sw_tile_set_t* tiles) {
  return guard([&] { lru(policy, "policy")->hint(ref<TileSet>(tiles, "tiles")); });
}

SW_API void sw_lru_stats_init(sw_lru_stats_t* stats) {
  if (!stats) return;
  *stats = sw_lru_stats_t{};
  stats->struct_size = sizeof(sw_lru_stats_t);
}

SW_API sw_error_t* sw_lru_policy_stats(const sw_lru_policy_t* policy, sw_lru_stats_t* out_stats) {
  return guard([&] {
    LruPolicy* p = lru(policy, "policy");
    require(out_stats, "out_stats");
    struct_out(out_stats, p->stats(), "out_stats");
  });
}

// ---- TiledEvictable ------------------------------------------------------------

SW_API sw_error_t* sw_tiled_create(sw_carrier_t* primary, sw_carrier_t* secondary, const int64_t* grid_shape,
                                   const int64_t* tile_shape, size_t rank, const sw_residency_policy_t* policy,
                                   sw_carrier_t** out_tiled) {
  return guard([&] {
    auto p = ref<Carrier>(primary, "primary");
    auto s = ref<Carrier>(secondary, "secondary");
    require(out_tiled, "out_tiled");
    if (rank && (!grid_shape || !tile_shape)) value_error("grid_shape and tile_shape must not be NULL");
    sw_residency_policy_t vt;
    if (policy) {
      sw_residency_policy_init(&vt);
      vt = struct_in(policy, vt, "policy");
    }
    std::vector<int64_t> g(grid_shape, grid_shape + rank), t(tile_shape, tile_shape + rank);
    *out_tiled = to_handle<sw_carrier_t>(TiledEvictable::create(p, s, g, t, policy ? &vt : nullptr, true));
  });
}

SW_API sw_error_t* sw_tiled_full_tensor(sw_carrier_t* handle, sw_tensor_t** out_tensor) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_tensor, "out_tensor");
    te->check_live("full_tensor");
    *out_tensor = to_handle<sw_tensor_t>(Tensor::create(Ref<Carrier>(te), 0, Layout::dense(te->geometry().logical)));
  });
}

SW_API sw_error_t* sw_tiled_rank(const sw_carrier_t* handle, size_t* out_rank) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_rank, "out_rank");
    *out_rank = te->geometry().rank();
  });
}

SW_API sw_error_t* sw_tiled_grid_shape(const sw_carrier_t* handle, int64_t* out_shape, size_t capacity) {
  return guard([&] { write_shape(tiled(handle, "tiled")->geometry().grid, out_shape, capacity); });
}

SW_API sw_error_t* sw_tiled_tile_shape(const sw_carrier_t* handle, int64_t* out_shape, size_t capacity) {
  return guard([&] { write_shape(tiled(handle, "tiled")->geometry().tile, out_shape, capacity); });
}

SW_API sw_error_t* sw_tiled_primary(const sw_carrier_t* handle, sw_carrier_t** out_carrier) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_carrier, "out_carrier");
    *out_carrier = to_handle<sw_carrier_t>(te->primary_carrier());
  });
}

SW_API sw_error_t* sw_tiled_secondary(const sw_carrier_t* handle, sw_carrier_t** out_carrier) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_carrier, "out_carrier");
    *out_carrier = to_handle<sw_carrier_t>(te->secondary_carrier());
  });
}

SW_API sw_error_t* sw_tiled_has_policy(const sw_carrier_t* handle, bool* out_has_policy) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_has_policy, "out_has_policy");
    *out_has_policy = te->has_policy();
  });
}

SW_API sw_error_t* sw_tiled_tile_state(const sw_carrier_t* handle, const int64_t* coord, size_t rank,
                                       sw_tile_state_t* out_state) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_state, "out_state");
    if (rank && !coord) value_error("coord must not be NULL");
    checked_struct_size<sw_tile_state_t>(out_state->struct_size, "out_state");
    struct_out(out_state, te->tile_state(TileCoord(coord, coord + rank)), "out_state");
  });
}

SW_API void sw_tile_state_init(sw_tile_state_t* state) {
  if (!state) return;
  *state = sw_tile_state_t{};
  state->struct_size = sizeof(sw_tile_state_t);
}

SW_API sw_error_t* sw_tiled_tiles(const sw_carrier_t* handle, sw_tile_set_kind_t kind, sw_tile_set_t** out_set) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    require(out_set, "out_set");
    check_enum_bits(kind, "tiles: tile set kind");
    *out_set = to_handle<sw_tile_set_t>(te->tiles(kind));
  });
}

SW_API sw_error_t* sw_tiled_promote_async(sw_carrier_t* handle, const sw_tile_set_t* tiles, sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto set = ref<TileSet>(tiles, "tiles");
    require(out_await, "out_await");
    *out_await = to_handle<sw_await_t>(te->promote_async(set));
  });
}

SW_API sw_error_t* sw_tiled_prefetch_async(sw_carrier_t* handle, const sw_tile_set_t* tiles, sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto set = ref<TileSet>(tiles, "tiles");
    require(out_await, "out_await");
    *out_await = to_handle<sw_await_t>(te->promote_async(set, true));
  });
}

SW_API sw_error_t* sw_tiled_evict_async(sw_carrier_t* handle, const sw_tile_set_t* tiles, sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto set = ref<TileSet>(tiles, "tiles");
    require(out_await, "out_await");
    *out_await = to_handle<sw_await_t>(te->evict_async(set));
  });
}

static void wait_or_raise(const Ref<Await>& a) {
  if (a->host().on_loop_thread() && a->status() == SW_AWAIT_PENDING)
    state_error("a blocking residency call on the loop thread would deadlock; use the async form");
  Status st = a->wait(-1);
  if (!st.ok()) st.raise();
}

SW_API sw_error_t* sw_tiled_promote(sw_carrier_t* handle, const sw_tile_set_t* tiles) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    wait_or_raise(te->promote_async(ref<TileSet>(tiles, "tiles")));
  });
}

SW_API sw_error_t* sw_tiled_evict(sw_carrier_t* handle, const sw_tile_set_t* tiles) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    wait_or_raise(te->evict_async(ref<TileSet>(tiles, "tiles")));
  });
}

SW_API sw_error_t* sw_tiled_project(sw_carrier_t* handle, sw_tensor_t* tensor, const sw_tile_selection_t* selection,
                                    sw_carrier_t* destination, sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto t = ref<Tensor>(tensor, "tensor");
    auto sel = ref<TileSelection>(selection, "selection");
    Ref<Carrier> dst;
    if (destination) dst = ref<Carrier>(destination, "destination");
    require(out_await, "out_await");
    *out_await = to_handle<sw_await_t>(te->project(t, sel, dst));
  });
}

SW_API sw_error_t* sw_tiled_expert_matmul(sw_carrier_t* handle, sw_tensor_t* experts, sw_tensor_t* x,
                                          sw_tensor_t* ids, sw_tensor_t* gates, const sw_matmul_desc_t* desc,
                                          sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto full = ref<Tensor>(experts, "experts");
    auto tx = ref<Tensor>(x, "x");
    auto tids = ref<Tensor>(ids, "ids");
    Ref<Tensor> tg;
    if (gates) tg = ref<Tensor>(gates, "gates");
    require(out_await, "out_await");
    sw_matmul_desc_t d;
    sw_matmul_desc_init(&d);
    if (desc) d = struct_in(desc, d, "sw_tiled_expert_matmul: desc");
    *out_await = to_handle<sw_await_t>(te->expert_matmul(full, tx, tids, tg, d.out_dtype));
  });
}

SW_API void sw_expert_ffn_desc_init(sw_expert_ffn_desc_t* desc) {
  if (!desc) return;
  *desc = sw_expert_ffn_desc_t{};
  desc->struct_size = sizeof(sw_expert_ffn_desc_t);
  desc->activation = SW_UNARY_SILU;
  desc->out_dtype = SW_DTYPE_INVALID;
}

SW_API sw_error_t* sw_tiled_expert_ffn(sw_carrier_t* gate, sw_tensor_t* gate_experts, sw_carrier_t* up,
                                       sw_tensor_t* up_experts, sw_carrier_t* down, sw_tensor_t* down_experts,
                                       sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates,
                                       const sw_expert_ffn_desc_t* desc, sw_await_t** out_await) {
  return guard([&] {
    ExpertFfnWeights w;
    w.gate = Ref<TiledEvictable>(tiled(gate, "gate"));
    w.gate_full = ref<Tensor>(gate_experts, "gate_experts");
    // Both NULL: the fused form, `gate` the gate_up experts.
    if (!up != !up_experts)
      value_error(std::string(up ? "up_experts" : "up") + " is NULL while " + (up ? "up" : "up_experts") +
                  " is not: pass both (gate and up apart) or neither (gate is the fused gate_up)");
    if (up) {
      w.up = Ref<TiledEvictable>(tiled(up, "up"));
      w.up_full = ref<Tensor>(up_experts, "up_experts");
    }
    w.down = Ref<TiledEvictable>(tiled(down, "down"));
    w.down_full = ref<Tensor>(down_experts, "down_experts");
    auto tx = ref<Tensor>(x, "x");
    auto tids = ref<Tensor>(ids, "ids");
    Ref<Tensor> tg;
    if (gates) tg = ref<Tensor>(gates, "gates");
    require(out_await, "out_await");
    sw_expert_ffn_desc_t d;
    sw_expert_ffn_desc_init(&d);
    if (desc) d = struct_in(desc, d, "sw_tiled_expert_ffn: desc");
    *out_await = to_handle<sw_await_t>(expert_ffn(w, tx, tids, tg, d.out_dtype, unary_of(d.activation)));
  });
}

SW_API sw_error_t* sw_tiled_scatter(sw_carrier_t* handle, sw_tensor_t* compact, sw_tensor_t* template_tensor,
                                    const sw_tile_selection_t* selection, sw_scatter_reduction_t reduction,
                                    sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto c = ref<Tensor>(compact, "compact");
    auto t = ref<Tensor>(template_tensor, "template");
    auto sel = ref<TileSelection>(selection, "selection");
    require(out_await, "out_await");
    check_enum_bits(reduction, "scatter: reduction");
    *out_await = to_handle<sw_await_t>(te->scatter(c, t, sel, reduction));
  });
}

SW_API sw_error_t* sw_tiled_update_async(sw_carrier_t* handle, sw_tensor_t* tensor, sw_tensor_t* compact,
                                         const sw_tile_selection_t* selection, sw_scatter_reduction_t reduction,
                                         sw_await_t** out_await) {
  return guard([&] {
    TiledEvictable* te = tiled(handle, "tiled");
    auto t = ref<Tensor>(tensor, "tensor");
    auto c = ref<Tensor>(compact, "compact");
    auto sel = ref<TileSelection>(selection, "selection");
    require(out_await, "out_await");
    check_enum_bits(reduction, "update: reduction");
    *out_await = to_handle<sw_await_t>(te->update(t, c, sel, reduction));
  });
}

}  // extern "C"
