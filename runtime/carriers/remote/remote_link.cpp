#include "carriers/remote/remote_link.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "async/loop.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "carriers/remote/remote_carrier.hpp"
#include "carriers/remote/remote_sync.hpp"

namespace sw::remote {

namespace {

enum Kind { kAuth, kHget, kStrlen, kGetrange, kRecheck, kDel, kSetrange, kMulti, kRename, kHset, kExec };

std::string reply_text(const redisReply* r) { return r && r->str ? std::string(r->str, r->len) : std::string(); }

void close_timer(uv_handle_t* handle) { delete reinterpret_cast<uv_timer_t*>(handle); }

// hiredis's event hooks on a uv_poll_t of the loop, which does not keep the
// loop alive (the deadline timer does while commands are pending). A poll
// error (a reset connection: libuv reports EPOLLERR as a status and stops
// the handle) is handed to hiredis as a read, whose read(2) then fails and
// disconnects the context, so the commands pending on it fail at once.
struct Watch {
  uv_poll_t handle;
  redisAsyncContext* ac = nullptr;
  int events = 0;
};

void watch_update(Watch* w) {
  if (w->events)
    uv_poll_start(&w->handle, w->events, [](uv_poll_t* handle, int status, int events) {
      auto* watch = static_cast<Watch*>(handle->data);
      if (!watch->ac) return;
      if (status < 0) {
        redisAsyncHandleRead(watch->ac);
        if (watch->ac) watch_update(watch);  // nothing to read after all: poll again
        return;
      }
      if (events & UV_READABLE) redisAsyncHandleRead(watch->ac);
      if (watch->ac && (events & UV_WRITABLE)) redisAsyncHandleWrite(watch->ac);
    });
  else
    uv_poll_stop(&w->handle);
}

void watch_add_read(void* data) {
  auto* w = static_cast<Watch*>(data);
  w->events |= UV_READABLE;
  watch_update(w);
}
void watch_del_read(void* data) {
  auto* w = static_cast<Watch*>(data);
  w->events &= ~UV_READABLE;
  watch_update(w);
}
void watch_add_write(void* data) {
  auto* w = static_cast<Watch*>(data);
  w->events |= UV_WRITABLE;
  watch_update(w);
}
void watch_del_write(void* data) {
  auto* w = static_cast<Watch*>(data);
  w->events &= ~UV_WRITABLE;
  watch_update(w);
}
void watch_cleanup(void* data) {
  auto* w = static_cast<Watch*>(data);
  w->ac = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&w->handle),
           [](uv_handle_t* handle) { delete static_cast<Watch*>(handle->data); });
}

bool watch_attach(redisAsyncContext* ac, uv_loop_t* loop) {
  auto* w = new (std::nothrow) Watch;
  if (!w) return false;
  if (uv_poll_init(loop, &w->handle, ac->c.fd) != 0) {
    delete w;
    return false;
  }
  w->handle.data = w;
  w->ac = ac;
  uv_unref(reinterpret_cast<uv_handle_t*>(&w->handle));
  ac->ev.data = w;
  ac->ev.addRead = &watch_add_read;
  ac->ev.delRead = &watch_del_read;
  ac->ev.addWrite = &watch_add_write;
  ac->ev.delWrite = &watch_del_write;
  ac->ev.cleanup = &watch_cleanup;
  return true;
}

// hiredis writes with write(2): to a server that has gone that raises
// SIGPIPE, whose default action ends the process. The loop thread is the
// runtime's own, so it blocks the signal for good (a write then fails EPIPE).
void block_sigpipe_on_loop() {
  thread_local bool blocked = false;
  if (blocked) return;
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  blocked = pthread_sigmask(SIG_BLOCK, &pipe, nullptr) == 0;
}

}  // namespace

// ---- a link ------------------------------------------------------------------

Link::Link(std::shared_ptr<const Config> cfg, size_t endpoint, uv_loop_t* loop)
    : cfg_(std::move(cfg)), endpoint_(endpoint), loop_(loop) {
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
}

Link::~Link() { close(); }

void Link::close() noexcept {
  drop(Status::make(SW_ERROR_CANCELLED, "remote carrier '" + cfg_->ns + "': the connection to " +
                                             cfg_->server(endpoint_) + " was closed"));
  if (timer_) {
    timer_->data = nullptr;
    uv_timer_stop(timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(timer_), &close_timer);
    timer_ = nullptr;
  }
}

Status Link::lost_status(const redisAsyncContext* ac) const {
  const std::string detail = ac && ac->errstr && ac->errstr[0] ? ac->errstr : "the connection was closed";
  return Status::make(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': the connection to " + cfg_->server(endpoint_) +
                                       " failed: " + detail);
}

bool Link::connect(Status* why, uint64_t* backoff_ms) {
  block_sigpipe_on_loop();
  const Endpoint& e = cfg_->endpoints[endpoint_];
  if (const uint64_t ms = cfg_->backoff->wait_ms(endpoint_)) {
    *backoff_ms = ms;
    *why = Status::make(SW_ERROR_IO, cfg_->backoff_text(endpoint_));
    return false;
  }
  redisAsyncContext* ac = e.unix_socket ? redisAsyncConnectUnix(e.path.c_str())
                                        : redisAsyncConnect(e.host.c_str(), e.port);
  if (!ac) {
    *why = Status::make(SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return false;
  }
  if (ac->err) {
    *why = Status::make(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': cannot connect to " + e.text + ": " +
                                         (ac->errstr ? ac->errstr : "connection failed"));
    redisAsyncFree(ac);
    cfg_->backoff->failed(endpoint_);
    return false;
  }
  if (!watch_attach(ac, loop_)) {
    *why = Status::make(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': cannot watch the connection to " + e.text);
    redisAsyncFree(ac);
    return false;
  }
  ac->data = this;
  redisAsyncSetDisconnectCallback(ac, &Link::on_disconnect);
  sink_.clear();
  sink_.attach(ac->c.reader);
  drop_status_ = {};
  ac_ = ac;
  answered_ = false;
  if (cfg_->have_password) {
    const std::string user = cfg_->user.empty() ? "default" : cfg_->user;
    const char* argv[3] = {"AUTH", user.c_str(), cfg_->password.c_str()};
    const size_t lengths[3] = {4, user.size(), cfg_->password.size()};
    sink_.expect();
    if (redisAsyncCommandArgv(ac, &Link::on_auth, this, 3, argv, lengths) != REDIS_OK) {
      sink_.unexpect();
      *why = Status::make(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': cannot authenticate to " + e.text);
      ac_ = nullptr;
      ac->data = nullptr;
      redisAsyncFree(ac);
      return false;
    }
  }
  return true;
}

template <typename Enqueue>
bool Link::send_with(Command* cmd, ReplySink::Expect expect, Status* why, uint64_t* backoff_ms, Enqueue&& enqueue) {
  *backoff_ms = 0;
  if (!abandoned_.ok()) {
    *why = abandoned_;
    return false;
  }
  if (!ac_ && !connect(why, backoff_ms)) return false;
  sink_.expect(expect);
  if (enqueue(ac_) != REDIS_OK) {
    sink_.unexpect();
    *why = lost_status(ac_);
    return false;
  }
  cmd->link = this;
  pending_.push_back(cmd);
  if (pending_.size() == 1) arm();
  return true;
}

bool Link::send(Command* cmd, const std::vector<std::string_view>& args, ReplySink::Expect expect, Status* why,
                uint64_t* backoff_ms) {
  std::vector<const char*> argv(args.size());
  std::vector<size_t> lengths(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    lengths[i] = args[i].size();
  }
  return send_with(cmd, expect, why, backoff_ms, [&](redisAsyncContext* ac) {
    return redisAsyncCommandArgv(ac, &Link::on_reply, cmd, static_cast<int>(args.size()), argv.data(),
                                 lengths.data());
  });
}

bool Link::send_formatted(Command* cmd, std::string_view resp, ReplySink::Expect expect, Status* why,
                          uint64_t* backoff_ms) {
  return send_with(cmd, expect, why, backoff_ms, [&](redisAsyncContext* ac) {
    return redisAsyncFormattedCommand(ac, &Link::on_reply, cmd, resp.data(), resp.size());
  });
}

void Link::flush() noexcept {
  // redisBufferWrite, not redisAsyncHandleWrite: on an error it only marks
  // the context (the write event still registered reports it), so no
  // command's callback runs from inside the caller's send.
  if (!ac_ || !(ac_->c.flags & REDIS_CONNECTED) || ac_->c.err) return;
  int done = 0;
  (void)redisBufferWrite(&ac_->c, &done);
}

void Link::abandon(Status why) noexcept {
  if (!ac_ || !abandoned_.ok()) return;
  abandoned_ = std::move(why);
  arm();
}

void Link::drop(Status why) noexcept {
  redisAsyncContext* ac = ac_;
  if (!ac) return;
  drop_status_ = std::move(why);
  ac_ = nullptr;
  lost_ = nullptr;
  redisAsyncFree(ac);  // runs every pending command's callback with no reply
}

void Link::arm() noexcept {
  if (!timer_) return;
  if (!abandoned_.ok()) {
    uv_timer_start(timer_, &Link::on_timer, 0, 0);
    return;
  }
  if (pending_.empty()) {
    uv_timer_stop(timer_);
    return;
  }
  const uint64_t now = uv_now(loop_), deadline = pending_.front()->deadline;
  uv_timer_start(timer_, &Link::on_timer, deadline > now ? deadline - now : 0, 0);
}

void Link::on_timer(uv_timer_t* timer) {
  auto* link = static_cast<Link*>(timer->data);
  if (link && !link->abandoned_.ok()) {
    Status why = std::move(link->abandoned_);
    link->abandoned_ = {};
    link->drop(std::move(why));
    return;
  }
  if (!link || link->pending_.empty()) return;
  if (link->pending_.front()->deadline > uv_now(link->loop_)) {
    link->arm();
    return;
  }
  link->drop(Status::make(SW_ERROR_TIMEOUT, "remote carrier '" + link->cfg_->ns + "': no reply from " +
                                                link->cfg_->server(link->endpoint_) + " within " +
                                                std::to_string(link->cfg_->deadline_ms) +
                                                " ms; the connection was dropped"));
}

void Link::on_auth(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* link = static_cast<Link*>(privdata);
  auto* r = static_cast<redisReply*>(reply);
  if (r && link->ac_ == ac) link->answered(ac);
  if (!r || r->type != REDIS_REPLY_ERROR || link->ac_ != ac) return;
  const std::string user = link->cfg_->user.empty() ? "default" : link->cfg_->user;
  // The commands sent behind AUTH fail with this, not with the server's
  // NOAUTH replies to them.
  link->drop(Status::make(SW_ERROR_IO, "remote carrier '" + link->cfg_->ns + "': " +
                                           link->cfg_->server(link->endpoint_) + " refused the credentials of user '" +
                                           user + "': " + reply_text(r)));
}

void Link::on_disconnect(const redisAsyncContext* ac, int) {
  auto* link = static_cast<Link*>(ac->data);
  if (link && link->ac_ == ac) link->ac_ = nullptr;
}

Link& LinkSet::get(IoPriority priority, size_t endpoint, uv_loop_t* loop) {
  const size_t n = cfg_->endpoints.size();
  if (links_.empty()) links_.resize(2 * n);
  std::unique_ptr<Link>& link = links_[(priority == IoPriority::kPrefetch ? n : 0) + endpoint];
  if (!link) link = std::make_unique<Link>(cfg_, endpoint, loop);
  return *link;
}

// ---- a transfer --------------------------------------------------------------

// A read of a block cut off by a lost connection is sent again, from its
// start, on a fresh connection, this many times; a read whose bytes fail
// their CRC while the block's CRC field changed (a writer's commit came
// between the CRC's read and the bytes') is read again this many times.
constexpr int kReadRetriesAfterLoss = 1;
constexpr int kRereadsAfterCommit = 8;

// One asynchronous read or write of a carrier's slots: its blocks' commands
// on their endpoints' links, at most requests_in_flight outstanding; `done`
// runs once, on a later turn of the loop, after the last reply. A block's
// read that needs sending again (a lost connection, a commit in between)
// starts over within the same transfer.
class Transfer : public std::enable_shared_from_this<Transfer> {
 public:
  Transfer(Ref<RemoteCarrier> carrier, bool write, size_t first, size_t count, std::byte* buffer, IoDone done,
           IoPriority priority)
      : carrier_(std::move(carrier)), cfg_(*carrier_->config_), write_(write), first_(first), count_(count),
        buffer_(buffer), done_(std::move(done)), priority_(priority) {}

  void start() noexcept;
  // `lost`: the connection was ended by the server or the network.
  void on_reply(const Command& cmd, redisReply* reply, const Status& failure, bool lost) noexcept;

 private:
  struct Block {
    size_t index = 0, endpoint = 0, bytes = 0;
    size_t server = 0;   // where the block's commands go: its endpoint, or a read's replica
    size_t attempt = 0;  // a read: which of Config::read_server's servers that is
    std::byte* land = nullptr;     // where the block's bytes are read to or written from
    std::vector<std::byte> bounce;  // a read of part of the block
    size_t copy_from = 0, copy_length = 0, copy_to = 0;  // the part, in bytes
    size_t chunks = 0, steps = 0, sent = 0, outstanding = 0;
    bool have_crc = false;
    uint32_t crc = 0;
    // The CRC-32C of the block's first crc_upto bytes, extended chunk by
    // chunk as GETRANGE replies land (their bytes still in the cache, while
    // the server prepares the next ones) or as SETRANGE commands are sent.
    uint32_t running_crc = 0;
    size_t crc_upto = 0;
    long long length = -1;
    size_t delivered = 0;
    bool commit_sent = false;
    bool checked = false;     // a read: its bytes passed their checks
    bool rechecking = false;  // a read: its CRC field is read again after a mismatch
    Status mismatch;          // what the checks found, meanwhile
    int rereads = 0;
    bool lost = false;  // a read: its server failed it; sent again once its commands are back
    Status lost_status;
    int retries = 0;       // a read: sent again on a fresh connection to the same server
    std::string earlier;   // a read: how the servers tried before failed it
  };

  // `flush`: written to the socket at once (Link::flush).
  bool send(Block& b, int kind, const std::vector<std::string_view>& args, ReplySink::Expect expect = {},
            size_t at = 0, bool flush = false) {
    return send_command(b, kind, &args, {}, expect, at, flush);
  }
  // A command already in the protocol's form.
  bool send_resp(Block& b, int kind, std::string_view resp, bool flush) {
    return send_command(b, kind, nullptr, resp, {}, 0, flush);
  }
  bool send_command(Block& b, int kind, const std::vector<std::string_view>* args, std::string_view resp,
                    ReplySink::Expect expect, size_t at, bool flush);
  // Sends SETRANGE of the block's bytes [at, at + n) to `key`, written to
  // the socket at once, and extends the block's running CRC over them: the
  // CRC is taken as the bytes are copied into the command.
  bool send_setrange(Block& b, const std::string& key, size_t at, size_t n);
  // The CRC-32C of a written block's bytes: the running one once it covers
  // them all, else taken over them now.
  static uint32_t written_crc(const Block& b) noexcept {
    return b.crc_upto == b.bytes ? b.running_crc : crc32c(0, b.land, b.bytes);
  }
  bool send_step(Block& b);
  // A write of a block whose chunks all fit in the requests in flight: its
  // whole transaction at once (one round trip). Returns whether it was sent.
  bool send_transaction(Block& b);
  void send_commit(Block& b);
  void block_read(Block& b);
  // Sends the block's read again from its first command.
  void restart(Block& b);
  // A read of `b` that its server failed (`lost`: the connection was ended;
  // else no connection could be made) with `why`: sent again, on a later
  // turn, on a fresh connection to the same server once after a loss, then
  // on the block's replicas in order; fails the transfer when none is left.
  void read_failed_on_server(Block& b, bool lost, Status why);
  // A lost read whose commands are all back: sent again on a later turn
  // (never inside the callbacks of the connection going away).
  void retry_later(Block& b);
  // The same, `ms` milliseconds later (a server's reconnection backoff).
  void retry_after(uint64_t ms);
  void run_retries();
  void issue();
  void finish_if_idle();
  void fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
  }
  std::string head() const { return cfg_.head(); }
  std::string without_head(std::string message) const { return cfg_.without_head(std::move(message)); }
  // The block waits, with `why`, to be sent again from its first command.
  void wait_to_resend(Block& b, Status why) {
    if (b.lost) return;
    b.lost = true;
    b.lost_status = std::move(why);
    ++waiting_;
  }
  uv_loop_t* uv() const { return carrier_->runtime().loop().uv(); }

  Ref<RemoteCarrier> carrier_;
  const Config& cfg_;
  bool write_;
  size_t first_, count_;
  std::byte* buffer_;
  IoDone done_;
  IoPriority priority_;
  std::vector<Block> blocks_;
  size_t cursor_ = 0;  // the first block with steps left to send
  uint32_t in_flight_ = 0;  // commands outstanding, and a posted retry
  uint64_t deadline_ = 0;
  size_t waiting_ = 0;  // lost blocks not sent again yet: nothing is sent meanwhile
  bool retry_posted_ = false;
  Status error_;
  bool finished_ = false;
};

void Transfer::start() noexcept {
  deadline_ = uv_now(uv()) + cfg_.deadline_ms;
  if (carrier_->runtime().is_shut_down())
    fail(Status::make(SW_ERROR_CANCELLED, std::string(write_ ? "remote write" : "remote read") +
                                              ": the runtime has been shut down"));
  fail(capture([&] {
    const size_t es = cfg_.element_size, B = cfg_.block_elements, n = carrier_->size();
    for (size_t b = first_ / B; count_ && b * B < first_ + count_; ++b) {
      Block blk;
      const size_t begin = b * B, length = std::min(B, n - begin);
      const size_t lo = std::max(first_, begin), hi = std::min(first_ + count_, begin + length);
      blk.index = b;
      blk.endpoint = cfg_.endpoint_of(b);
      blk.server = blk.endpoint;
      blk.bytes = length * es;
      blk.copy_from = (lo - begin) * es;
      blk.copy_length = (hi - lo) * es;
      blk.copy_to = (lo - first_) * es;
      if (lo == begin && hi == begin + length) {
        blk.land = buffer_ + blk.copy_to;
      } else {
        if (write_) internal_error("remote write of part of a block on the loop");
        blk.bounce.resize(blk.bytes);
        blk.land = blk.bounce.data();
      }
      blk.chunks = (blk.bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes;
      blk.steps = (write_ ? 1 : 2) + blk.chunks;
      blocks_.push_back(std::move(blk));
    }
  }));
  issue();
  finish_if_idle();
}

bool Transfer::send_command(Block& b, int kind, const std::vector<std::string_view>* args, std::string_view resp,
                            ReplySink::Expect expect, size_t at, bool flush) {
  auto* cmd = new (std::nothrow) Command;
  if (!cmd) {
    fail(Status::make(SW_ERROR_OUT_OF_MEMORY, "out of memory"));
    return false;
  }
  cmd->transfer = shared_from_this();
  cmd->kind = kind;
  cmd->block = static_cast<size_t>(&b - blocks_.data());
  cmd->deadline = deadline_;
  cmd->at = at;
  if (expect.dst) expect.got = &cmd->got;
  Status why;
  bool sent = false;
  uint64_t backoff_ms = 0;
  fail(capture([&] {
    Link& link = carrier_->links_->get(priority_, b.server, uv());
    sent = args ? link.send(cmd, *args, expect, &why, &backoff_ms)
                : link.send_formatted(cmd, resp, expect, &why, &backoff_ms);
    if (sent && flush) link.flush();
  }));
  if (!sent) {
    delete cmd;
    if (why.ok()) why = Status::make(SW_ERROR_IO, head() + "cannot send to " + cfg_.server(b.server));
    size_t next = 0;
    const bool replica_left = !write_ && cfg_.read_server(b.endpoint, b.attempt + 1, &next);
    if (backoff_ms && !replica_left) {
      // The server's reconnection backoff: the block is sent again once it
      // has passed, if that is within the deadline.
      if (uv_now(uv()) + backoff_ms >= deadline_) {
        fail(std::move(why));
        return false;
      }
      wait_to_resend(b, std::move(why));
      if (b.outstanding == 0) retry_after(backoff_ms);
      return false;
    }
    if (write_ || why.code != SW_ERROR_IO) {
      fail(std::move(why));
      return false;
    }
    // No connection to the server could be made: a read moves on to a replica.
    if (!b.lost) read_failed_on_server(b, false, std::move(why));
    if (b.lost && b.outstanding == 0) retry_later(b);
    return false;
  }
  ++in_flight_;
  ++b.outstanding;
  return true;
}

bool Transfer::send_step(Block& b) {
  const size_t step = b.sent++;
  const std::string key = write_ ? cfg_.staging_key(b.index) : cfg_.block_key(b.index);
  if (!write_ && step == 0) {
    const std::string crc_key = cfg_.crc_key(), field = std::to_string(b.index);
    return send(b, kHget, {"HGET", crc_key, field});
  }
  if (!write_ && step == 1) return send(b, kStrlen, {"STRLEN", key});
  if (write_ && step == 0 && b.chunks <= cfg_.requests_in_flight) return send_transaction(b);
  if (write_ && step == 0) return send(b, kDel, {"DEL", key});
  const size_t chunk = step - (write_ ? 1 : 2);
  const size_t at = chunk * cfg_.chunk_bytes, n = std::min(cfg_.chunk_bytes, b.bytes - at);
  const std::string from = std::to_string(at);
  if (write_) return send_setrange(b, key, at, n);
  const std::string to = std::to_string(at + n - 1);
  // The reply extends the block's running CRC as it is copied in.
  return send(b, kGetrange, {"GETRANGE", key, from, to}, {b.land + at, n, nullptr, &b.running_crc, &b.crc_upto, at},
              at);
}

bool Transfer::send_setrange(Block& b, const std::string& key, size_t at, size_t n) {
  // The command in the protocol's form, its bytes copied in with their CRC
  // in one pass: hiredis would copy them to format the command anyway.
  const std::string from = std::to_string(at);
  const std::string prefix = "*4\r\n$8\r\nSETRANGE\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
                           std::to_string(from.size()) + "\r\n" + from + "\r\n$" + std::to_string(n) + "\r\n";
  std::unique_ptr<char[]> resp(new (std::nothrow) char[prefix.size() + n + 2]);
  if (!resp) {
    fail(Status::make(SW_ERROR_OUT_OF_MEMORY, head() + "out of memory for the write of " + cfg_.where(b.index)));
    return false;
  }
  std::memcpy(resp.get(), prefix.data(), prefix.size());
  char* payload = resp.get() + prefix.size();
  const bool in_order = at == b.crc_upto && n <= b.bytes - at;
  const uint32_t crc = in_order ? crc32c_copy(b.running_crc, payload, b.land + at, n)
                                : (std::memcpy(payload, b.land + at, n), 0u);
  payload[n] = '\r';
  payload[n + 1] = '\n';
  if (!send_resp(b, kSetrange, std::string_view(resp.get(), prefix.size() + n + 2), true)) return false;
  if (in_order) {
    b.running_crc = crc;
    b.crc_upto = at + n;
  }
  return true;
}

// A block's write in one round trip: MULTI, DEL of the staging key, its
// SETRANGE chunks, RENAME over the live key, HSET of the CRC and EXEC, sent
// together. The server applies the transaction whole or not at all: a
// command refused while queued (OOM under noeviction) aborts the EXEC, and a
// connection that ends before the EXEC discards it. The chunks' replies are
// QUEUED; the EXEC's array holds theirs. A larger block takes two round
// trips, DEL and chunks then the commit (send_commit): its chunks are sent
// as replies free room, and no other transfer's command may come between a
// MULTI and its EXEC on the link.
bool Transfer::send_transaction(Block& b) {
  fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kWrite, "remote commit"); }));
  if (!error_.ok()) return false;
  if (!send(b, kMulti, {"MULTI"})) return false;  // nothing sent: retried or failed as any first command
  b.sent = b.steps;
  b.commit_sent = true;
  const std::string staging = cfg_.staging_key(b.index), key = cfg_.block_key(b.index), crc_key = cfg_.crc_key(),
                    field = std::to_string(b.index);
  bool sent = send(b, kDel, {"DEL", staging});
  for (size_t at = 0; sent && at < b.bytes; at += cfg_.chunk_bytes)
    sent = send_setrange(b, staging, at, std::min(cfg_.chunk_bytes, b.bytes - at));
  if (sent) {
    // A fault point standing for a command that could not be sent, which
    // leaves the transaction open without its EXEC.
    fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kWrite, "remote transaction sent in part"); }));
    sent = error_.ok();
  }
  if (sent) {
    const std::string crc_text = std::to_string(written_crc(b));
    sent = send(b, kRename, {"RENAME", staging, key}) && send(b, kHset, {"HSET", crc_key, field, crc_text}) &&
           send(b, kExec, {"EXEC"}, {}, 0, true);
  }
  if (!sent) {
    // The transaction is open on the connection without its EXEC: nothing
    // else may follow it there. Dropping the connection discards it.
    fail(capture([&] {
      carrier_->links_->get(priority_, b.server, uv())
          .abandon(Status::make(SW_ERROR_IO, head() + "the write of " + cfg_.where(b.index) +
                                                 " could not be sent whole; the connection was dropped"));
    }));
  }
  return sent;
}

void Transfer::send_commit(Block& b) {
  b.commit_sent = true;
  // Every chunk of the block is stored: the commit joins them.
  fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kWrite, "remote commit"); }));
  if (!error_.ok()) return;
  const uint32_t crc = written_crc(b);
  const std::string staging = cfg_.staging_key(b.index), key = cfg_.block_key(b.index), crc_key = cfg_.crc_key(),
                    field = std::to_string(b.index), crc_text = std::to_string(crc);
  send(b, kMulti, {"MULTI"}) && send(b, kRename, {"RENAME", staging, key}) &&
      send(b, kHset, {"HSET", crc_key, field, crc_text}) && send(b, kExec, {"EXEC"});
}

void Transfer::block_read(Block& b) {
  const uint32_t* computed = b.crc_upto == b.bytes ? &b.running_crc : nullptr;
  Status st = check_block(cfg_, b.index, b.server, b.have_crc, b.crc, b.length, b.delivered, b.land, b.bytes, computed);
  if (st.code == SW_ERROR_DATA_CORRUPT) {
    // Corrupt, or replaced by a writer's commit while it was read: the CRC
    // field tells (it changes with every commit).
    b.mismatch = std::move(st);
    b.rechecking = true;
    const std::string crc_key = cfg_.crc_key(), field = std::to_string(b.index);
    send(b, kRecheck, {"HGET", crc_key, field});
    return;
  }
  if (!st.ok()) return fail(std::move(st));
  b.checked = true;
  if (!b.bounce.empty()) {
    std::memcpy(buffer_ + b.copy_to, b.land + b.copy_from, b.copy_length);
    std::vector<std::byte>().swap(b.bounce);
  }
}

void Transfer::restart(Block& b) {
  b.sent = 0;
  b.have_crc = false;
  b.crc = 0;
  b.length = -1;
  b.delivered = 0;
  b.rechecking = false;
  b.mismatch = {};
  b.running_crc = 0;  // the chunks arrive again
  b.crc_upto = 0;
  cursor_ = std::min(cursor_, static_cast<size_t>(&b - blocks_.data()));
}

void Transfer::read_failed_on_server(Block& b, bool lost, Status why) {
  Status st = lost ? Status::make(why.code, head() + "the read of " + cfg_.where(b.index, b.server) + " failed" +
                                                (b.retries ? " again on a fresh connection" : "") + ": " +
                                                without_head(why.message))
                   : std::move(why);
  if (lost && b.retries < kReadRetriesAfterLoss) {
    ++b.retries;
  } else {
    size_t next = 0;
    if (!cfg_.read_server(b.endpoint, b.attempt + 1, &next)) {
      return fail(b.attempt == 0 ? std::move(st) : cfg_.no_server_left(b.index, st, b.earlier));
    }
    b.earlier += (b.earlier.empty() ? "" : "; ") + without_head(st.message);
    ++b.attempt;
    b.server = next;
    b.retries = 0;
  }
  wait_to_resend(b, std::move(st));
}

void Transfer::retry_later(Block& b) {
  if (retry_posted_) return;  // the posted one takes every waiting block
  if (!carrier_->runtime().is_shut_down() &&
      carrier_->runtime().loop().post([self = shared_from_this()] { self->run_retries(); })) {
    retry_posted_ = true;
    ++in_flight_;
    return;
  }
  fail(b.lost_status);
}

void Transfer::retry_after(uint64_t ms) {
  if (retry_posted_) return;
  auto* timer = new uv_timer_t;
  uv_timer_init(uv(), timer);
  timer->data = new std::shared_ptr<Transfer>(shared_from_this());
  uv_timer_start(
      timer,
      [](uv_timer_t* t) {
        auto* held = static_cast<std::shared_ptr<Transfer>*>(t->data);
        std::shared_ptr<Transfer> self = std::move(*held);
        delete held;
        uv_close(reinterpret_cast<uv_handle_t*>(t), &close_timer);
        self->run_retries();
      },
      ms, 0);
  retry_posted_ = true;
  ++in_flight_;
}

void Transfer::run_retries() {
  retry_posted_ = false;
  --in_flight_;
  if (carrier_->runtime().is_shut_down())
    fail(Status::make(SW_ERROR_CANCELLED, "remote read: the runtime has been shut down"));
  for (Block& b : blocks_) {
    if (!b.lost || b.outstanding != 0) continue;
    b.lost = false;
    --waiting_;
    restart(b);
  }
  issue();
  finish_if_idle();
}

void Transfer::on_reply(const Command& cmd, redisReply* reply, const Status& failure, bool lost) noexcept {
  --in_flight_;
  Block& b = blocks_[cmd.block];
  --b.outstanding;
  if (!failure.ok()) {
    if (!lost) {
      fail(failure);
    } else if (write_) {
      // A write is not sent again: its commit never ran or ran whole, and
      // the tile stays dirty. Name the block; the link's message names the
      // server and why.
      fail(Status::make(failure.code, head() + "the write of " + cfg_.where(b.index) + " failed: " +
                                          without_head(failure.message)));
    } else if (!b.lost) {
      read_failed_on_server(b, true, failure);
    }
  } else if (reply->type == REDIS_REPLY_ERROR) {
    fail(Status::make(SW_ERROR_IO, head() + "the " + (write_ ? "write" : "read") + " of " + cfg_.where(b.index, b.server) +
                                       " failed: " + reply_text(reply)));
  } else {
    switch (cmd.kind) {
      case kHget:
        b.have_crc = reply->type == REDIS_REPLY_STRING && parse_crc(reply->str, reply->len, &b.crc);
        break;
      case kStrlen: b.length = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1; break;
      case kGetrange:
        // The sink extended the block's CRC as it copied the reply (a
        // block's replies come in the order of its chunks, one connection).
        b.delivered += cmd.got;
        fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kRead, "remote read of a chunk"); }));
        break;
      case kSetrange:
        fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kWrite, "remote write of a chunk"); }));
        break;
      case kRecheck: {
        b.rechecking = false;
        uint32_t now = 0;
        const bool have = reply->type == REDIS_REPLY_STRING && parse_crc(reply->str, reply->len, &now);
        if (have == b.have_crc && now == b.crc) {
          fail(std::move(b.mismatch));  // the bytes the CRC was stored for are not these
        } else if (b.rereads < kRereadsAfterCommit) {
          ++b.rereads;
          restart(b);
        } else {
          fail(Status::make(SW_ERROR_IO, head() + cfg_.where(b.index, b.server) + " was replaced by a write during each of " +
                                             std::to_string(b.rereads + 1) + " reads of it"));
        }
        break;
      }
      case kExec: {
        std::string failure_text = reply->type == REDIS_REPLY_ARRAY ? "" : "the transaction was aborted";
        for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; ++i)
          if (reply->element[i]->type == REDIS_REPLY_ERROR) failure_text = reply_text(reply->element[i]);
        if (!failure_text.empty()) {
          fail(Status::make(SW_ERROR_IO, head() + "the commit of " + cfg_.where(b.index) + " failed: " + failure_text));
        } else {
          // Committed on the server: a failure from here on is what a lost reply
          // would be, the tile staying dirty over the new stored block.
          fail(capture([&] { carrier_->runtime().check_fault(FaultKind::kWrite, "remote commit's reply"); }));
        }
        break;
      }
      default: break;
    }
  }
  if (error_.ok() && b.outstanding == 0) {
    if (b.lost) {
      retry_later(b);
    } else if (b.sent == b.steps && !b.rechecking) {
      if (write_ && !b.commit_sent) send_commit(b);
      else if (!write_ && !b.checked) block_read(b);
    }
  }
  issue();
  finish_if_idle();
}

void Transfer::issue() {
  while (error_.ok() && waiting_ == 0 && in_flight_ < cfg_.requests_in_flight && cursor_ < blocks_.size()) {
    Block& b = blocks_[cursor_];
    if (b.sent == b.steps) {
      ++cursor_;
      continue;
    }
    if (!send_step(b)) break;
  }
}

void Transfer::finish_if_idle() {
  if (finished_ || in_flight_ > 0) return;
  if (error_.ok() && (cursor_ < blocks_.size() || waiting_ > 0)) return;
  finished_ = true;
  // On a later turn: never inside hiredis's callbacks, nor the caller's call.
  auto finish = [done = std::move(done_), status = std::move(error_)]() mutable { done(std::move(status)); };
  if (!carrier_->runtime().loop().post(finish)) finish();
}

// After Transfer: it calls into one.
void Link::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* cmd = static_cast<Command*>(privdata);
  Link* link = cmd->link;
  const auto it = std::find(link->pending_.begin(), link->pending_.end(), cmd);
  if (it != link->pending_.end()) link->pending_.erase(it);
  Status failure;
  bool lost = false;
  if (!reply) {
    // The context is going away: its commands fail with the reason. One
    // drop() did not end was ended by the server or the network (the first
    // of its commands to fail finds it still current); before any answer,
    // that was a failed attempt to connect.
    if (link->ac_ == ac) {
      link->ac_ = nullptr;
      link->lost_ = ac;
      if (!link->answered_) link->cfg_->backoff->failed(link->endpoint_);
    }
    lost = link->lost_ == ac;
    failure = lost || link->drop_status_.ok() ? link->lost_status(ac) : link->drop_status_;
  } else if (link->ac_ == ac) {
    link->answered(ac);
  }
  link->arm();
  std::shared_ptr<Transfer> transfer = std::move(cmd->transfer);
  transfer->on_reply(*cmd, static_cast<redisReply*>(reply), failure, lost);
  delete cmd;
}

}  // namespace sw::remote

namespace sw {

void RemoteCarrier::issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority, bool) {
  std::make_shared<remote::Transfer>(Ref<RemoteCarrier>(this), false, first, count, dst, std::move(done), priority)
      ->start();
}

void RemoteCarrier::issue_write(size_t first, size_t count, const std::byte* src, IoDone done) {
  if (Status refused = writable_status("write"); !refused.ok()) {
    auto refuse = [done = std::move(done), refused = std::move(refused)]() mutable { done(std::move(refused)); };
    if (!runtime().loop().post(refuse)) refuse();
    return;
  }
  const size_t B = config_->block_elements;
  const bool whole = count == 0 || (first % B == 0 && ((first + count) % B == 0 || first + count == size()));
  if (!whole) return Carrier::issue_write(first, count, src, std::move(done));  // read, patch, write: on a worker
  std::make_shared<remote::Transfer>(Ref<RemoteCarrier>(this), true, first, count, const_cast<std::byte*>(src),
                                     std::move(done), IoPriority::kDemand)
      ->start();
}

}  // namespace sw
