#include "carriers/remote/remote_carrier.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "async/loop.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "carriers/remote/remote_lease.hpp"
#include "carriers/remote/remote_link.hpp"
#include "carriers/remote/remote_protocol.hpp"
#include "carriers/remote/remote_sync.hpp"
#include "core/dtype.hpp"

namespace sw {

using remote::Config;
using remote::Lease;
using remote::Reply;

namespace {

// `can_write`: the carrier may write (made, or opened without read_only).
std::shared_ptr<Config> make_config(sw_dtype_t dtype, const RemoteCarrierOptions& o, bool can_write) {
  auto cfg = std::make_shared<Config>();
  if (o.endpoints.empty()) value_error("remote carrier: no endpoints");
  for (const std::string& text : o.endpoints) cfg->endpoints.push_back(remote::parse_endpoint(text, o.allow_plaintext));
  cfg->placement_count = cfg->endpoints.size();
  cfg->replicas.resize(cfg->placement_count);
  if (!o.replicas.empty() && o.replicas.size() != o.endpoints.size())
    internal_error("remote carrier: replicas for " + std::to_string(o.replicas.size()) + " of " +
                   std::to_string(o.endpoints.size()) + " endpoints");
  const bool any_replica =
      std::any_of(o.replicas.begin(), o.replicas.end(), [](const auto& r) { return !r.empty(); });
  if (any_replica && can_write)
    value_error("remote carrier: read replicas serve only carriers that cannot write (sw_carrier_open_remote with "
                "read_only): a replica's copy can lag its endpoint's commits");
  for (size_t e = 0; e < o.replicas.size(); ++e)
    for (const std::string& text : o.replicas[e]) {
      for (const remote::Endpoint& known : cfg->endpoints)
        if (known.text == text)
          value_error("remote carrier: the replica '" + text + "' of endpoint '" + o.endpoints[e] +
                      "' is already one of the carrier's servers");
      cfg->replicas[e].push_back(cfg->endpoints.size());
      cfg->endpoints.push_back(remote::parse_endpoint(text, o.allow_plaintext));
    }
  cfg->backoff->resize(cfg->endpoints.size());
  if (o.key_namespace.empty()) value_error("remote carrier: the namespace is empty");
  if (o.key_namespace.find_first_of(" \t\r\n") != std::string::npos)
    value_error("remote carrier: the namespace '" + o.key_namespace + "' holds white space");
  cfg->ns = o.key_namespace;
  if (!o.user.empty() && o.password_file.empty())
    value_error("remote carrier: user '" + o.user + "' needs a password_file");
  cfg->user = o.user;
  if (!o.password_file.empty()) {
    cfg->password = remote::read_password_file(o.password_file);
    cfg->have_password = true;
  }
  if (dtype_is_quantized(dtype))
    unsupported_error(std::string("remote carrier: the block-quantized dtype ") + dtype_name(dtype) +
                      " is not supported on a remote tier yet");
  cfg->dtype = dtype;
  cfg->element_size = dtype_size(dtype);
  cfg->block_elements = o.block_elements ? o.block_elements : remote::kDefaultBlockElements;
  if (cfg->block_elements > (size_t{1} << 29) / cfg->element_size)
    value_error("remote carrier: blocks of " + std::to_string(cfg->block_elements) + " " + dtype_name(dtype) +
                " slots exceed the 512 MiB a server's string holds");
  cfg->placement_seed = o.placement_seed;
  cfg->deadline_ms = o.deadline_ms ? o.deadline_ms : remote::kDefaultDeadlineMs;
  cfg->chunk_bytes = o.chunk_bytes ? o.chunk_bytes : remote::kDefaultChunkBytes;
  cfg->requests_in_flight = o.requests_in_flight ? o.requests_in_flight : remote::kDefaultRequestsInFlight;
  return cfg;
}

size_t blocks_for(const Config& cfg, size_t size) { return (size + cfg.block_elements - 1) / cfg.block_elements; }

// Slots in block `b` of a carrier of `size` slots.
size_t block_length(const Config& cfg, size_t b, size_t size) {
  return std::min(cfg.block_elements, size - b * cfg.block_elements);
}

std::string text_of(const redisReply& r) { return std::string(r.str ? r.str : "", r.str ? r.len : 0); }

// As the asynchronous path: a read cut off by a lost connection is sent
// again once on a fresh one; a read whose bytes fail their CRC while the
// block's CRC field changed (a commit came between) is read again.
constexpr int kReadRetriesAfterLoss = 1;
constexpr int kRereadsAfterCommit = 8;

// Reads block `b` (`bytes` bytes) into `dst`, checked.
void read_block(const Config& cfg, remote::Session& s, size_t b, std::byte* dst, size_t bytes) {
  const std::string key = cfg.block_key(b), field = std::to_string(b), crc_key = cfg.crc_key();
  const size_t chunks = (bytes + cfg.chunk_bytes - 1) / cfg.chunk_bytes;
  const std::string what = "the read of " + cfg.where(b, s.endpoint());
  for (int reread = 0;; ++reread) {
    s.append({"HGET", crc_key, field});
    s.append({"STRLEN", key});
    std::vector<size_t> got(chunks, 0);
    for (size_t i = 0; i < chunks; ++i) {
      const size_t at = i * cfg.chunk_bytes, n = std::min(cfg.chunk_bytes, bytes - at);
      s.append({"GETRANGE", key, std::to_string(at), std::to_string(at + n - 1)}, {dst + at, n, &got[i]});
    }
    Reply crc = s.get_ok(what);
    Reply length = s.get_ok(what);
    size_t delivered = 0;
    for (size_t i = 0; i < chunks; ++i) {
      s.get_ok(what);
      delivered += got[i];
    }
    uint32_t stored_crc = 0;
    const bool have_crc = crc->type == REDIS_REPLY_STRING && remote::parse_crc(crc->str, crc->len, &stored_crc);
    const long long stored_length = length->type == REDIS_REPLY_INTEGER ? length->integer : -1;
    Status st = remote::check_block(cfg, b, s.endpoint(), have_crc, stored_crc, stored_length, delivered, dst, bytes);
    if (st.code != SW_ERROR_DATA_CORRUPT) {
      if (!st.ok()) st.raise();
      return;
    }
    // Corrupt, or replaced by a writer's commit while it was read: the CRC
    // field tells (it changes with every commit).
    s.append({"HGET", crc_key, field});
    Reply again = s.get_ok(what);
    uint32_t now = 0;
    const bool have_now = again->type == REDIS_REPLY_STRING && remote::parse_crc(again->str, again->len, &now);
    if (have_now == have_crc && now == stored_crc) st.raise();
    if (reread == kRereadsAfterCommit)
      throw_error(SW_ERROR_IO, "remote carrier '" + cfg.ns + "': " + cfg.where(b, s.endpoint()) +
                                   " was replaced by a write during each of " + std::to_string(reread + 1) +
                                   " reads of it");
  }
}

enum class ReadTry { kDone, kLost, kUnreachable };

// One try of a read of block `b` on `server`: kUnreachable when no
// connection to it could be made (IO), kLost when the server or the network
// ended the connection mid-read (`why` says how); any other failure throws.
ReadTry try_read_block(const Config& cfg, remote::SyncPool& pool, size_t server, bool wait, size_t b,
                       std::byte* dst, size_t bytes, Status* why) {
  std::optional<Lease> s;
  *why = capture([&] { s.emplace(pool, server, wait); });
  if (!why->ok()) {
    if (why->code != SW_ERROR_IO) why->raise();
    return ReadTry::kUnreachable;
  }
  *why = capture([&] { read_block(cfg, **s, b, dst, bytes); });
  if (why->ok()) return ReadTry::kDone;
  if (!(*s)->lost()) why->raise();
  return ReadTry::kLost;
}

// Reads block `b` on a session of `pool`: once more on a fresh connection
// when the server or the network ended the first one mid-read, then on the
// block's replicas in order when its server cannot be reached or is lost
// again.
void read_block_pooled(const Config& cfg, remote::SyncPool& pool, size_t b, std::byte* dst, size_t bytes) {
  const size_t endpoint = cfg.endpoint_of(b);
  const bool has_replicas = !cfg.replicas[endpoint].empty();
  std::string earlier;  // the failures of the servers tried before
  Status last;
  size_t server = endpoint;
  for (size_t attempt = 0; cfg.read_server(endpoint, attempt, &server); ++attempt) {
    for (int retries = 0;; ++retries) {
      Status why;
      // A server in backoff is waited for only when no replica is left after it.
      size_t after = 0;
      const bool no_replica_left = !cfg.read_server(endpoint, attempt + 1, &after);
      const ReadTry outcome = try_read_block(cfg, pool, server, no_replica_left, b, dst, bytes, &why);
      if (outcome == ReadTry::kDone) return;
      if (outcome == ReadTry::kLost && retries < kReadRetriesAfterLoss) continue;
      if (outcome == ReadTry::kLost)
        why = Status::make(why.code, cfg.head() + "the read of " + cfg.where(b, server) +
                                         " failed again on a fresh connection: " + cfg.without_head(why.message));
      if (!has_replicas) why.raise();
      if (!last.ok()) earlier += (earlier.empty() ? "" : "; ") + cfg.without_head(last.message);
      last = std::move(why);
      break;
    }
  }
  cfg.no_server_left(b, last, earlier).raise();
}

// Writes block `b` (`bytes` bytes from `src`) through its staging key and
// commits it.
void write_block(const Config& cfg, remote::Session& s, size_t b, const std::byte* src, size_t bytes) {
  const std::string staging = cfg.staging_key(b), what = "the write of " + cfg.where(b);
  s.append({"DEL", staging});
  const size_t chunks = (bytes + cfg.chunk_bytes - 1) / cfg.chunk_bytes;
  for (size_t i = 0; i < chunks; ++i) {
    const size_t at = i * cfg.chunk_bytes, n = std::min(cfg.chunk_bytes, bytes - at);
    s.append({"SETRANGE", staging, std::to_string(at),
              std::string_view(reinterpret_cast<const char*>(src + at), n)});
  }
  // Every reply is read before the first error is raised: the session stays usable.
  std::string failure;
  for (size_t i = 0; i <= chunks; ++i) {
    Reply r = s.get();
    if (r->type == REDIS_REPLY_ERROR && failure.empty()) failure = text_of(*r);
  }
  if (!failure.empty())
    throw_error(SW_ERROR_IO, "remote carrier '" + cfg.ns + "': " + what + " failed: " + failure);
  const uint32_t crc = crc32c(0, src, bytes);
  s.append({"MULTI"});
  s.append({"RENAME", staging, cfg.block_key(b)});
  s.append({"HSET", cfg.crc_key(), std::to_string(b), std::to_string(crc)});
  s.append({"EXEC"});
  for (int i = 0; i < 3; ++i) {
    Reply r = s.get();
    if (r->type == REDIS_REPLY_ERROR && failure.empty()) failure = text_of(*r);
  }
  Reply exec = s.get();
  if (failure.empty() && exec->type == REDIS_REPLY_ERROR) failure = text_of(*exec);
  if (failure.empty() && exec->type != REDIS_REPLY_ARRAY) failure = "the transaction was aborted";
  if (failure.empty())
    for (size_t i = 0; i < exec->elements; ++i)
      if (exec->element[i]->type == REDIS_REPLY_ERROR) failure = text_of(*exec->element[i]);
  if (!failure.empty())
    throw_error(SW_ERROR_IO, "remote carrier '" + cfg.ns + "': the commit of " + what.substr(4) + " failed: " + failure);
}

std::atomic<uint64_t> scratch_counter{0};

}  // namespace

RemoteCarrier::RemoteCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, std::shared_ptr<Config> config,
                             bool read_only, bool owns_keys, RemoteCarrierOptions options)
    : Carrier(std::move(runtime), SW_CARRIER_REMOTE, dtype, size),
      config_(std::move(config)),
      sync_(std::make_shared<remote::SyncPool>(config_)),
      links_(std::make_shared<remote::LinkSet>(config_)),
      options_(std::move(options)),
      read_only_(read_only),
      owns_keys_(owns_keys) {}

RemoteCarrier::~RemoteCarrier() {
  close_links();
  lease_.reset();
  if (owns_keys_ && !keys_deleted_.exchange(true)) delete_namespace(size());
}

Ref<RemoteCarrier> RemoteCarrier::create(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                         const RemoteCarrierOptions& options) {
  std::shared_ptr<Config> cfg = make_config(dtype, options, true);
  (void)dtype_size(dtype);
  auto carrier = Ref<RemoteCarrier>::adopt(new RemoteCarrier(runtime, dtype, size, cfg, false, false, options));
  for (size_t e = 0; e < cfg->endpoints.size(); ++e) {
    Lease s(*carrier->sync_, e);
    s->append({"EXISTS", cfg->header_key()});
    Reply r = s->get_ok("checking for the namespace's header");
    if (r->type == REDIS_REPLY_INTEGER && r->integer != 0)
      state_error("remote carrier: the namespace '" + cfg->ns + "' already exists on " + cfg->server(e) +
                  " (open it with sw_carrier_open_remote, or delete its keys)");
  }
  if (options.writer_lease) carrier->lease_ = std::make_unique<remote::WriterLease>(cfg, options.lease_ms);
  // From here on the keys are the carrier's: a failure deletes what was
  // written (with the carrier's release); a persistent namespace is left to
  // the servers once it is complete.
  carrier->owns_keys_ = true;
  carrier->write_namespace(size, true);
  carrier->owns_keys_ = !options.persistent;
  return carrier;
}

Ref<RemoteCarrier> RemoteCarrier::open(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                       const RemoteCarrierOptions& options) {
  std::shared_ptr<Config> cfg = make_config(dtype, options, !options.read_only);
  // Each server's header, checked against the caller's parameters; a block
  // size of 0 takes the first server's. An endpoint with replicas may be
  // unreachable when one of them answers (and a replica when its endpoint
  // does): reads go to the ones that answer.
  auto pool = std::make_shared<remote::SyncPool>(cfg);
  bool block_known = options.block_elements != 0;
  std::vector<Status> unreachable(cfg->endpoints.size());
  for (size_t e = 0; e < cfg->endpoints.size(); ++e) {
    std::map<std::string, std::string> header;
    std::optional<Lease> s;
    Status connected = capture([&] { s.emplace(*pool, e); });
    if (!connected.ok()) {
      if (connected.code != SW_ERROR_IO || cfg->placement_count == cfg->endpoints.size()) connected.raise();
      unreachable[e] = std::move(connected);
      continue;
    }
    {
      (*s)->append({"HGETALL", cfg->header_key()});
      Reply r = (*s)->get_ok("reading the namespace's header");
      if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2)
          header[text_of(*r->element[i])] = text_of(*r->element[i + 1]);
      s.reset();
    }
    if (header.empty())
      throw_error(SW_ERROR_IO, "remote carrier: the namespace '" + cfg->ns + "' has no header ('" + cfg->header_key() +
                                   "') on " + cfg->server(e) + "; seed it first");
    if (!block_known) {
      const std::string& text = header["block_elements"];
      char* end = nullptr;
      const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end || v == 0)
        throw_error(SW_ERROR_DATA_CORRUPT, "remote carrier: the header of '" + cfg->ns + "' on " + cfg->server(e) +
                                               " has no valid block_elements");
      cfg->block_elements = static_cast<size_t>(v);
      block_known = true;
    }
    const std::vector<std::string> want = remote::header_fields(*cfg, size);
    for (size_t i = 0; i + 1 < want.size(); i += 2) {
      const auto it = header.find(want[i]);
      const std::string have = it == header.end() ? "nothing" : "'" + it->second + "'";
      if (it == header.end() || it->second != want[i + 1])
        value_error("remote carrier: the namespace '" + cfg->ns + "' on " + cfg->server(e) + " has " + want[i] + " " +
                    have + ", but '" + want[i + 1] + "' was asked for");
    }
  }
  for (size_t e = 0; e < cfg->placement_count; ++e) {
    size_t server = e;
    bool any = false;
    for (size_t attempt = 0; !any && cfg->read_server(e, attempt, &server); ++attempt) any = unreachable[server].ok();
    if (!any) unreachable[e].raise();
  }
  auto carrier =
      Ref<RemoteCarrier>::adopt(new RemoteCarrier(runtime, dtype, size, cfg, options.read_only, false, options));
  if (!options.read_only && options.writer_lease)
    carrier->lease_ = std::make_unique<remote::WriterLease>(cfg, options.lease_ms);
  return carrier;
}

size_t RemoteCarrier::block_count() const { return blocks_for(*config_, size()); }

uint64_t RemoteCarrier::stored_bytes() const {
  return is_disposed() ? 0 : static_cast<uint64_t>(bytes_of(size()));
}

void RemoteCarrier::write_namespace(size_t size, bool zero_blocks) const {
  const Config& cfg = *config_;
  for (size_t e = 0; e < cfg.endpoints.size(); ++e) {
    Lease s(*sync_, e);
    const std::vector<std::string> fields = remote::header_fields(cfg, size);
    const std::string header = cfg.header_key();
    std::vector<std::string_view> args{"HSET", header};
    for (const std::string& f : fields) args.emplace_back(f);
    s->append({"DEL", header});
    s->append(args);
    s->get_ok("writing the namespace's header");
    s->get_ok("writing the namespace's header");
  }
  if (!zero_blocks) return;
  const size_t n = blocks_for(cfg, size);
  std::vector<std::byte> zeros(std::min(cfg.block_elements, size) * cfg.element_size);
  for (size_t b = 0; b < n; ++b) {
    const size_t bytes = block_length(cfg, b, size) * cfg.element_size;
    Lease s(*sync_, cfg.endpoint_of(b));
    const std::string crc = std::to_string(crc32c(0, zeros.data(), bytes));
    s->append({"SET", cfg.block_key(b), std::string_view(reinterpret_cast<const char*>(zeros.data()), bytes)});
    s->append({"HSET", cfg.crc_key(), std::to_string(b), crc});
    s->get_ok("writing " + cfg.where(b));
    s->get_ok("writing " + cfg.where(b));
  }
}

void RemoteCarrier::delete_namespace(size_t size) const noexcept {
  const Config& cfg = *config_;
  const size_t n = blocks_for(cfg, size);
  for (size_t e = 0; e < cfg.endpoints.size(); ++e) {
    Status st = capture([&] {
      Lease s(*sync_, e);
      std::vector<std::string> keys;
      auto flush = [&] {
        std::vector<std::string_view> args{"UNLINK"};
        for (const std::string& k : keys) args.emplace_back(k);
        s->append(args);
        s->get_ok("deleting the namespace's keys");
        keys.clear();
      };
      keys.push_back(cfg.header_key());
      keys.push_back(cfg.crc_key());
      for (size_t b = 0; b < n; ++b) {
        if (cfg.endpoint_of(b) != e) continue;
        keys.push_back(cfg.block_key(b));
        keys.push_back(cfg.staging_key(b));
        if (keys.size() >= 512) flush();
      }
      if (!keys.empty()) flush();
    });
    if (!st.ok()) runtime().log(SW_LOG_WARNING, st.message);
  }
}

Status RemoteCarrier::writable_status(const char* what) const {
  if (read_only_)
    return Status::make(SW_ERROR_STATE,
                        std::string(what) + ": the Remote carrier over namespace '" + config_->ns + "' is read-only");
  return lease_ ? lease_->check(what) : Status{};
}

void RemoteCarrier::check_writable(const char* what) const {
  Status st = writable_status(what);
  if (!st.ok()) st.raise();
}

void RemoteCarrier::read_slots(size_t first, size_t count, void* dst) const {
  const Config& cfg = *config_;
  const size_t es = cfg.element_size, B = cfg.block_elements, n = size();
  if (!count) return;
  auto* out = static_cast<std::byte*>(dst);
  std::vector<std::byte> bounce;
  for (size_t b = first / B; b * B < first + count; ++b) {
    const size_t begin = b * B, length = block_length(cfg, b, n);
    const size_t lo = std::max(first, begin), hi = std::min(first + count, begin + length);
    const bool whole = lo == begin && hi == begin + length;
    std::byte* land = out + (begin > first ? (begin - first) * es : 0);
    if (!whole) {
      bounce.resize(length * es);
      land = bounce.data();
    }
    runtime().check_fault(FaultKind::kRead, "remote read");
    read_block_pooled(cfg, *sync_, b, land, length * es);
    if (!whole) std::memcpy(out + (lo - first) * es, bounce.data() + (lo - begin) * es, (hi - lo) * es);
  }
}

void RemoteCarrier::write_slots(size_t first, size_t count, const void* src) {
  check_writable("write");
  const Config& cfg = *config_;
  const size_t es = cfg.element_size, B = cfg.block_elements, n = size();
  if (!count) return;
  const auto* in = static_cast<const std::byte*>(src);
  std::vector<std::byte> patched;
  for (size_t b = first / B; b * B < first + count; ++b) {
    const size_t begin = b * B, length = block_length(cfg, b, n);
    const size_t lo = std::max(first, begin), hi = std::min(first + count, begin + length);
    const std::byte* from = in + (lo - first) * es;
    Lease s(*sync_, cfg.endpoint_of(b));
    if (lo != begin || hi != begin + length) {
      // Part of a block: the block, checked, with the part written over it.
      patched.resize(length * es);
      read_block(cfg, *s, b, patched.data(), length * es);
      std::memcpy(patched.data() + (lo - begin) * es, from, (hi - lo) * es);
      from = patched.data();
    }
    runtime().check_fault(FaultKind::kWrite, "remote write");
    write_block(cfg, *s, b, from, length * es);
  }
}

Ref<Carrier> RemoteCarrier::create_empty_like() const {
  RemoteCarrierOptions o = options_;
  o.key_namespace = config_->ns + "~" + std::to_string(::getpid()) + "." +
                    std::to_string(scratch_counter.fetch_add(1, std::memory_order_relaxed));
  o.block_elements = config_->block_elements;
  o.read_only = false;
  o.persistent = false;
  o.writer_lease = false;  // a namespace of its own, named after this process
  return create(runtime_ref(), dtype(), 0, o);
}

void RemoteCarrier::dispose_storage() {
  close_links();
  lease_.reset();
  if (owns_keys_ && !keys_deleted_.exchange(true)) delete_namespace(size());
}

void RemoteCarrier::allocate_storage(size_t size, bool zero_fill) {
  check_writable("allocate");
  if (size == 0) {
    delete_namespace(this->size());
    write_namespace(0, false);
    return;
  }
  // Without zero_fill every slot is written next (a move into the carrier):
  // the blocks are stored then.
  write_namespace(size, zero_fill);
}

void RemoteCarrier::close_links() noexcept {
  std::shared_ptr<remote::LinkSet> links = links_;
  if (!links) return;
  Loop& loop = runtime().loop();
  if (loop.on_loop_thread()) {
    links->close_all();
    return;
  }
  try {
    // The connections are the loop thread's; if the loop has stopped they
    // are left to it.
    (void)loop.post([links] { links->close_all(); });
  } catch (...) {
  }
}

}  // namespace sw
