// The remote carrier: a secondary tier whose slots live on Valkey or Redis
// servers, in fixed-size blocks of block_elements slots, one key each, with a
// CRC-32C per block and a header on every endpoint (remote_protocol.hpp has
// the key layout; docs/remote-tier.md the whole story).
//
// Two paths reach the servers. The blocking one (read_slots, write_slots,
// creating, opening and disposing) uses one blocking hiredis connection per
// endpoint, kept for reuse, with the deadline as its socket timeout. The
// asynchronous one (read_async, write_async: a TiledEvictable's promotions and
// evictions) drives hiredis's asynchronous API on the runtime's libuv loop:
// per endpoint one connection for demand transfers and one for prefetch
// reads, so that prefetches never queue in front of demand reads. A transfer
// keeps up to requests_in_flight GETRANGE or SETRANGE commands of
// chunk_bytes outstanding; GETRANGE replies land straight in the tile buffer
// (ReplySink) when the transfer covers whole blocks, else in a bounce buffer
// of the block.
//
// A read checks each block's length and CRC: a missing block is IO naming
// the block and server, a wrong one DATA_CORRUPT, unless the block's CRC
// field changed meanwhile (a writer's commit came between), when the block
// is read again. A write of a block fills
// its staging key and, once every chunk is stored, commits it with
// MULTI / RENAME / HSET crc / EXEC, so the stored block is either the old
// one or the new one. An asynchronous write that covers part of a block
// (read, patched and rewritten) runs the blocking path on a worker.
//
// Deadlines: every asynchronous command carries its transfer's deadline;
// when the oldest one on a connection expires the connection is dropped and
// every command pending on it fails TIMEOUT; the next transfer reconnects.
// A read whose connection the server or the network ended is sent again,
// once, on a fresh connection, within the same transfer; a write is not (the
// tile stays dirty, the stored block whole).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/carrier.hpp"

namespace sw {

namespace remote {
struct Config;
class SyncPool;
class LinkSet;
class Transfer;
class WriterLease;
}  // namespace remote

struct RemoteCarrierOptions {
  std::vector<std::string> endpoints;
  std::string key_namespace;
  std::string user;
  std::string password_file;
  bool allow_plaintext = false;
  bool read_only = false;
  size_t block_elements = 0;  // 0: the default (create) or the header's (open)
  uint64_t placement_seed = 0;
  uint32_t deadline_ms = 0;
  size_t chunk_bytes = 0;
  uint32_t requests_in_flight = 0;
  bool persistent = false;  // create: the keys outlive the carrier
  // [endpoint] -> its read replicas (open, read-only only); empty: none.
  std::vector<std::vector<std::string>> replicas;
  uint32_t lease_ms = 0;     // the writer lease's time to live; 0: the default
  bool writer_lease = true;  // false: a private scratch namespace, no lease
};

class RemoteCarrier final : public Carrier {
 public:
  // A zero-filled carrier in a new namespace (STATE if it exists).
  static Ref<RemoteCarrier> create(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                   const RemoteCarrierOptions& options);
  // A carrier over an existing namespace whose header every endpoint holds.
  static Ref<RemoteCarrier> open(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size,
                                 const RemoteCarrierOptions& options);
  ~RemoteCarrier() override;

  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;
  Ref<Carrier> create_empty_like() const override;
  bool is_read_only() const override { return read_only_; }
  uint64_t stored_bytes() const override;

  const remote::Config& config() const { return *config_; }
  size_t block_count() const;

 protected:
  void issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                  bool whole_blocks) override;
  void issue_write(size_t first, size_t count, const std::byte* src, IoDone done) override;
  void dispose_storage() override;
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  friend class remote::Transfer;

  RemoteCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, std::shared_ptr<remote::Config> config,
                bool read_only, bool owns_keys, RemoteCarrierOptions options);
  // Writes the header (of `size` slots) on every endpoint and, with
  // `zero_blocks`, every block as zeros.
  void write_namespace(size_t size, bool zero_blocks) const;
  // Deletes every key of the namespace for a carrier of `size` slots.
  void delete_namespace(size_t size) const noexcept;
  // STATE for a read-only carrier or one without a valid writer lease.
  void check_writable(const char* what) const;
  Status writable_status(const char* what) const;
  // Closes the asynchronous connections (on the loop thread).
  void close_links() noexcept;

  std::shared_ptr<const remote::Config> config_;
  std::shared_ptr<remote::SyncPool> sync_;
  std::shared_ptr<remote::LinkSet> links_;  // loop thread only
  std::unique_ptr<remote::WriterLease> lease_;  // a carrier that can write, but a scratch one
  RemoteCarrierOptions options_;
  bool read_only_ = false;
  bool owns_keys_ = false;  // made by create: dispose deletes the keys
  std::atomic<bool> keys_deleted_{false};
};

}  // namespace sw
