// What the remote carrier's blocking and asynchronous paths share: the
// carrier's settings (endpoints, keys, credentials, placement), the parse
// of an endpoint and its security checks, and the reply sink that lands
// GETRANGE replies straight in a destination buffer.
//
// The key layout of a namespace `ns` (docs/remote-tier.md):
//   ns:h    a hash, on every endpoint: the header (format version, dtype,
//           size, block size, endpoint count, placement seed)
//   ns:b:i  a string on the endpoint block i is placed on: its bytes
//   ns:c    a hash on each endpoint: field i = the CRC-32C of block i there
//   ns:s:i  the staging key of a write of block i, renamed over ns:b:i
#pragma once

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "strideweave/strideweave.h"

namespace sw::remote {

// The header's format version; a namespace written in another is refused.
constexpr int kFormatVersion = 1;
constexpr size_t kDefaultBlockElements = size_t{1} << 18;
constexpr size_t kDefaultChunkBytes = size_t{1} << 20;
constexpr uint32_t kDefaultDeadlineMs = 5000;
constexpr uint32_t kDefaultRequestsInFlight = 4;

struct Endpoint {
  std::string text;  // as the caller wrote it, for messages
  bool unix_socket = false;
  std::string path;  // unix_socket
  std::string host;  // otherwise
  int port = 6379;
};

// Parses `text` and applies the transport rules: VALUE for a malformed
// endpoint or a plaintext non-loopback one without `allow_plaintext`,
// UNSUPPORTED for rediss://.
Endpoint parse_endpoint(const std::string& text, bool allow_plaintext);
// Reads the password's first line from `path`: VALUE if the file is not a
// regular file or its group or others may read or write it, IO if it cannot
// be read. The password never appears in a message.
std::string read_password_file(const std::string& path);

// Reconnection backoff, per server, shared by a carrier's blocking and
// asynchronous connections. After an attempt to connect to a server fails,
// the next one waits kBackoffFirstMs, doubling with each attempt that fails
// after its wait, up to kBackoffMaxMs; a connection made resets it. A
// request waits out the rest of a wait within its deadline (a read with a
// replica left moves on to it instead).
class Backoff {
 public:
  static constexpr uint64_t kBackoffFirstMs = 20;
  static constexpr uint64_t kBackoffMaxMs = 1000;

  void resize(size_t servers) { entries_.resize(servers); }
  // Milliseconds until an attempt to connect to `server` may be made.
  uint64_t wait_ms(size_t server) const;
  // Failed attempts to connect to `server` in a row.
  int failures(size_t server) const;
  void failed(size_t server);
  void connected(size_t server);

 private:
  struct Entry {
    int failures = 0;
    uint64_t retry_at = 0;  // steady-clock milliseconds
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

// Everything a connection needs; immutable once the carrier is made, shared
// by the carrier and its connections (the backoff state aside).
struct Config {
  // The servers: the endpoints blocks are placed on, [0, placement_count),
  // then their read replicas.
  std::vector<Endpoint> endpoints;
  size_t placement_count = 0;
  // [endpoint] -> the indices in `endpoints` of its read replicas, in the
  // order they are tried.
  std::vector<std::vector<size_t>> replicas;
  std::string ns;
  std::string user;      // empty: "default"
  std::string password;  // empty: no AUTH
  bool have_password = false;
  sw_dtype_t dtype = SW_DTYPE_F32;
  size_t element_size = 4;
  size_t block_elements = kDefaultBlockElements;
  uint64_t placement_seed = 0;
  uint32_t deadline_ms = kDefaultDeadlineMs;
  size_t chunk_bytes = kDefaultChunkBytes;
  uint32_t requests_in_flight = kDefaultRequestsInFlight;
  std::shared_ptr<Backoff> backoff = std::make_shared<Backoff>();
  // IO: connecting to `server` waits `wait_ms` more after `failures` failed
  // attempts, past what the request may wait.
  std::string backoff_text(size_t server) const;

  std::string header_key() const { return ns + ":h"; }
  std::string crc_key() const { return ns + ":c"; }
  std::string block_key(size_t block) const { return ns + ":b:" + std::to_string(block); }
  std::string staging_key(size_t block) const { return ns + ":s:" + std::to_string(block); }
  // The endpoint block `block` is placed on: rendezvous hashing of
  // (placement_seed, block) over the endpoints' positions.
  size_t endpoint_of(size_t block) const;
  // The server a read of a block placed on `endpoint` goes to on its
  // `attempt`-th try (0: the endpoint, then its replicas in order); false
  // when there is none left.
  bool read_server(size_t endpoint, size_t attempt, size_t* server) const {
    if (attempt == 0) *server = endpoint;
    else if (endpoint < replicas.size() && attempt - 1 < replicas[endpoint].size()) *server = replicas[endpoint][attempt - 1];
    else return false;
    return true;
  }
  // "block 3 (key 'ns:b:3') on unix:///run/a.sock", for messages.
  std::string where(size_t block) const { return where(block, endpoint_of(block)); }
  // The same, on server `server` (a replica of the block's endpoint).
  std::string where(size_t block, size_t server) const;
  std::string server(size_t endpoint) const { return endpoints[endpoint].text; }
  // "remote carrier '<ns>': ", the head of the carrier's messages, and a
  // message without it (to quote one message inside another).
  std::string head() const { return "remote carrier '" + ns + "': "; }
  std::string without_head(std::string message) const;
  // A read of `block` that every server holding it failed: `last` the last
  // server's failure, `earlier` the ones before ("; "-separated).
  Status no_server_left(size_t block, const Status& last, const std::string& earlier) const;
};

// Lands the bulk-string replies of chosen commands straight in a buffer.
// The reader of a connection parses replies in the order the commands were
// sent; each command sent through the connection pushes one Expect, and the
// reader's object functions pop one per top-level reply: a string reply to
// an Expect with a destination is copied there (its length recorded in
// *got) and becomes an empty reply object, so no copy of it is kept.
class ReplySink {
 public:
  struct Expect {
    std::byte* dst = nullptr;  // null: an ordinary reply
    size_t capacity = 0;
    size_t* got = nullptr;     // the reply's length, also past capacity
    // A running CRC-32C of the destination's block, over its first
    // *crc_upto bytes: a whole reply for the bytes from `at` on, when
    // *crc_upto == at, extends it while it is copied (one pass).
    uint32_t* crc = nullptr;
    size_t* crc_upto = nullptr;
    size_t at = 0;
  };
  // Installs the sink's functions on `reader` (and keeps its buffer between
  // replies).
  void attach(redisReader* reader);
  void expect(Expect e) { expects_.push_back(e); }
  void expect() { expects_.push_back(Expect{}); }
  // Takes back the last expect() (its command was not sent).
  void unexpect() { expects_.pop_back(); }
  // Forgets what was expected (the connection is gone).
  void clear() { expects_.clear(); }

 private:
  static void* create_string(const redisReadTask* task, char* str, size_t len);
  static void* create_array(const redisReadTask* task, int elements);
  static void* create_integer(const redisReadTask* task, long long value);
  static void* create_nil(const redisReadTask* task);
  static ReplySink& of(const redisReadTask* task) { return *static_cast<ReplySink*>(task->privdata); }
  // The Expect of a top-level reply, or none for an element of an array.
  Expect next(const redisReadTask* task);

  static redisReplyObjectFunctions functions_;
  redisReplyObjectFunctions* original_ = nullptr;
  std::deque<Expect> expects_;
};

// The header fields a namespace is written with, in HSET order.
std::vector<std::string> header_fields(const Config& cfg, size_t size);

}  // namespace sw::remote
