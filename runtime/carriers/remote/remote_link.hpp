// The remote carrier's asynchronous connections, on the runtime's libuv loop
// (loop thread only). A Link is one hiredis asynchronous connection to one
// endpoint, made on first use and again after it was dropped (a deadline,
// refused credentials, the carrier's close) or lost (the server or the
// network ended it); its socket's poll handle does not keep the loop alive,
// its deadline timer does while commands are pending. A LinkSet holds a carrier's links: per endpoint one
// for demand transfers and one for prefetch reads.
#pragma once

#include <uv.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "async/io_queue.hpp"
#include "base/status.hpp"
#include "carriers/remote/remote_protocol.hpp"

struct redisAsyncContext;
struct redisReply;

namespace sw::remote {

class Transfer;
class Link;

// One command sent on a link, until its reply (or the link's end) comes.
struct Command {
  Link* link = nullptr;
  std::shared_ptr<Transfer> transfer;
  int kind = 0;          // the transfer's
  size_t block = 0;      // the transfer's block
  size_t at = 0;         // a GETRANGE's or SETRANGE's first byte in the block
  size_t got = 0;        // bytes a GETRANGE reply delivered
  uint64_t deadline = 0; // uv_now milliseconds
};

class Link {
 public:
  Link(std::shared_ptr<const Config> cfg, size_t endpoint, uv_loop_t* loop);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Sends `cmd` (connecting first when there is no connection). On failure
  // returns false with the reason; `cmd` is then not sent. `*backoff_ms` is
  // then the wait before a connection may be tried (no attempt was made),
  // or 0 (one was made and failed, or the connection failed).
  bool send(Command* cmd, const std::vector<std::string_view>& args, ReplySink::Expect expect, Status* why,
            uint64_t* backoff_ms);
  // The same for a command already in the protocol's form (`resp`, one
  // whole command), which the connection copies.
  bool send_formatted(Command* cmd, std::string_view resp, ReplySink::Expect expect, Status* why,
                      uint64_t* backoff_ms);
  // Writes what the connection holds unsent now, as far as the socket
  // takes it without blocking, instead of on the loop's next turn: work
  // done after this overlaps the server's. A write error is left for the
  // loop's next turn, which fails the pending commands as any other.
  void flush() noexcept;
  // The connection is left in a state no command may follow (a transaction
  // whose EXEC could not be queued): every send is refused with `why` from
  // now on, and on the loop's next turn the connection is dropped (its
  // pending commands fail with `why`; the server discards the transaction).
  // The next send after that connects afresh.
  void abandon(Status why) noexcept;
  void close() noexcept;
  uv_loop_t* loop() const { return loop_; }

 private:
  bool connect(Status* why, uint64_t* backoff_ms);
  // send()'s and send_formatted()'s common part: `enqueue` hands the
  // command to hiredis and returns its status.
  template <typename Enqueue>
  bool send_with(Command* cmd, ReplySink::Expect expect, Status* why, uint64_t* backoff_ms, Enqueue&& enqueue);
  // Drops the connection: every command pending on it completes with `why`.
  void drop(Status why) noexcept;
  void arm() noexcept;
  // The server answered on `ac`: the attempt to connect succeeded.
  void answered(const redisAsyncContext* ac) noexcept {
    if (answered_ || ac != ac_) return;
    answered_ = true;
    cfg_->backoff->connected(endpoint_);
  }
  Status lost_status(const redisAsyncContext* ac) const;
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_auth(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  static void on_timer(uv_timer_t* timer);

  std::shared_ptr<const Config> cfg_;
  size_t endpoint_;
  uv_loop_t* loop_;
  redisAsyncContext* ac_ = nullptr;
  ReplySink sink_;
  uv_timer_t* timer_ = nullptr;
  std::deque<Command*> pending_;
  // Why drop() let the connection go (a deadline, refused credentials, the
  // carrier's close).
  Status drop_status_;
  // The context the server or the network ended, while its commands fail:
  // theirs is a lost connection, which a read may try again on a new one.
  const redisAsyncContext* lost_ = nullptr;
  // Set by abandon() until the connection is dropped.
  Status abandoned_;
  // Whether the current connection answered yet: one that ends before its
  // first reply is a failed attempt to connect (the reconnection backoff).
  bool answered_ = false;
};

class LinkSet {
 public:
  explicit LinkSet(std::shared_ptr<const Config> cfg) : cfg_(std::move(cfg)) {}
  Link& get(IoPriority priority, size_t endpoint, uv_loop_t* loop);
  void close_all() noexcept { links_.clear(); }

 private:
  std::shared_ptr<const Config> cfg_;
  std::vector<std::unique_ptr<Link>> links_;  // [priority * endpoints + endpoint]
};

}  // namespace sw::remote
