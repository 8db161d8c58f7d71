// The remote carrier's blocking connections: one per endpoint, kept for
// reuse, each used by one thread at a time, with the deadline as its socket
// timeout. Any failure closes the connection; the next use reconnects.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "carriers/remote/remote_protocol.hpp"

namespace sw::remote {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// One blocking connection, authenticated.
class Session {
 public:
  Session(std::shared_ptr<const Config> cfg, size_t endpoint);  // connects and authenticates
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Queues a command; its reply is read by get(), in order.
  void append(const std::vector<std::string_view>& args, ReplySink::Expect expect = {});
  // The next reply: IO or TIMEOUT naming the server when the connection
  // fails (the session is then broken).
  Reply get();
  // The next reply, which must not be an error reply: IO naming `what`,
  // the server and the server's message otherwise.
  Reply get_ok(const std::string& what);
  bool broken() const { return broken_; }
  // Whether it broke because the server or the network ended the
  // connection while replies were awaited (not a deadline, not a refusal).
  bool lost() const { return lost_; }
  // Replies not read yet.
  bool pending() const { return queued_ != 0; }
  size_t endpoint() const { return endpoint_; }
  // Whether an idle connection is still open (nothing arrived on it).
  bool idle_and_open() const;

 private:
  [[noreturn]] void connection_failed(const std::string& doing);
  void authenticate(const Endpoint& e);  // the constructor's checks and AUTH; throws
  std::string server_text() const;

  std::shared_ptr<const Config> cfg_;
  size_t endpoint_;
  redisContext* c_ = nullptr;
  ReplySink sink_;
  size_t queued_ = 0;  // replies not read yet
  bool broken_ = false;
  bool lost_ = false;
};

class SyncPool {
 public:
  explicit SyncPool(std::shared_ptr<const Config> cfg) : cfg_(std::move(cfg)), idle_(cfg_->endpoints.size()) {}
  // A session to `endpoint`: an idle one, or a new one, made once the
  // server's reconnection backoff has passed (waited for when `wait` and
  // within the deadline; IO otherwise).
  std::unique_ptr<Session> take(size_t endpoint, bool wait = true);
  // Keeps a healthy session with nothing queued for reuse.
  void give_back(std::unique_ptr<Session> s);

 private:
  std::shared_ptr<const Config> cfg_;
  std::mutex mutex_;
  std::vector<std::vector<std::unique_ptr<Session>>> idle_;
};

// Borrows a session for a scope.
class Lease {
 public:
  Lease(SyncPool& pool, size_t endpoint, bool wait = true) : pool_(pool), s_(pool.take(endpoint, wait)) {}
  ~Lease() { pool_.give_back(std::move(s_)); }
  Session* operator->() const { return s_.get(); }
  Session& operator*() const { return *s_; }

 private:
  SyncPool& pool_;
  std::unique_ptr<Session> s_;
};

// A block's checks once its replies are in (from `server`): whether its CRC field and key
// exist, its stored length, the bytes its GETRANGE replies delivered, and
// its CRC over `data` (`computed`, when not null, is that CRC, taken as the
// replies came in). OK, IO (missing) or DATA_CORRUPT naming the block.
Status check_block(const Config& cfg, size_t block, size_t server, bool have_crc, uint32_t stored_crc, long long stored_length,
                   size_t delivered, const std::byte* data, size_t bytes, const uint32_t* computed = nullptr);
// Parses a CRC field's value; false if it is not one.
bool parse_crc(const char* text, size_t length, uint32_t* out);

}  // namespace sw::remote
