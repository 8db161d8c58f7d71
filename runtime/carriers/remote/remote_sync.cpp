#include "carriers/remote/remote_sync.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace sw::remote {

namespace {

timeval to_timeval(uint32_t ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

// A write to a server that has gone raises SIGPIPE, whose default action
// ends the process. On the caller's thread the signal is blocked while a
// connection writes, and a SIGPIPE it raised is taken back before the mask
// is restored; the write itself fails EPIPE, an IO error.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!blocked_) return;
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace

Session::Session(std::shared_ptr<const Config> cfg, size_t endpoint) : cfg_(std::move(cfg)), endpoint_(endpoint) {
  const Endpoint& e = cfg_->endpoints[endpoint_];
  const timeval tv = to_timeval(cfg_->deadline_ms);
  c_ = e.unix_socket ? redisConnectUnixWithTimeout(e.path.c_str(), tv)
                     : redisConnectWithTimeout(e.host.c_str(), e.port, tv);
  if (!c_) throw std::bad_alloc();
  // The destructor does not run when the constructor throws: free the
  // context here on every refusal below.
  try {
    authenticate(e);
  } catch (...) {
    redisFree(c_);
    c_ = nullptr;
    throw;
  }
}

void Session::authenticate(const Endpoint& e) {
  const timeval tv = to_timeval(cfg_->deadline_ms);
  if (c_->err) connection_failed("cannot connect to");
  if (redisSetTimeout(c_, tv) != REDIS_OK) connection_failed("cannot set the deadline of the connection to");
  sink_.attach(c_->reader);
  if (cfg_->have_password) {
    const std::string user = cfg_->user.empty() ? "default" : cfg_->user;
    append({"AUTH", user, cfg_->password});
    Reply r = get();
    if (r->type == REDIS_REPLY_ERROR) {
      broken_ = true;
      throw_error(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': " + e.text + " refused the credentials of user '" +
                                   user + "': " + std::string(r->str, r->len));
    }
  }
}

Session::~Session() {
  if (c_) redisFree(c_);
}

void Session::connection_failed(const std::string& doing) {
  broken_ = true;
  const int error_number = errno;
  const bool timed_out = c_ && c_->err == REDIS_ERR_IO &&
                         (error_number == EAGAIN || error_number == EWOULDBLOCK || error_number == ETIMEDOUT ||
                          std::strstr(c_->errstr, "timed out") || std::strstr(c_->errstr, "temporarily unavailable"));
  const std::string detail = c_ && c_->errstr[0] ? c_->errstr : "connection failed";
  lost_ = !timed_out && c_ && c_->err != 0 && queued_ != 0;
  if (timed_out)
    throw_error(SW_ERROR_TIMEOUT, "remote carrier '" + cfg_->ns + "': " + doing + " " + server_text() +
                                      ": no reply within " + std::to_string(cfg_->deadline_ms) + " ms");
  throw_error(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': " + doing + " " + server_text() + ": " + detail);
}

std::string Session::server_text() const { return cfg_->server(endpoint_); }

void Session::append(const std::vector<std::string_view>& args, ReplySink::Expect expect) {
  std::vector<const char*> argv(args.size());
  std::vector<size_t> lengths(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    lengths[i] = args[i].size();
  }
  if (redisAppendCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lengths.data()) != REDIS_OK) {
    broken_ = true;
    throw std::bad_alloc();
  }
  sink_.expect(expect);
  ++queued_;
}

Reply Session::get() {
  void* reply = nullptr;
  if (broken_) state_error("remote carrier '" + cfg_->ns + "': the connection to " + server_text() + " is broken");
  int rc;
  {
    SigpipeGuard guard;
    rc = redisGetReply(c_, &reply);
  }
  if (rc != REDIS_OK || !reply) connection_failed("the connection failed to");
  --queued_;
  return Reply(static_cast<redisReply*>(reply));
}

Reply Session::get_ok(const std::string& what) {
  Reply r = get();
  if (r->type == REDIS_REPLY_ERROR)
    throw_error(SW_ERROR_IO, "remote carrier '" + cfg_->ns + "': " + what + " failed on " + server_text() + ": " +
                                 std::string(r->str, r->len));
  return r;
}

bool Session::idle_and_open() const {
  // An idle connection has nothing to read: readable means the server
  // closed it (a restart, CLIENT KILL, its timeout) or broke the protocol.
  pollfd p{c_->fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

std::unique_ptr<Session> SyncPool::take(size_t endpoint, bool wait) {
  for (;;) {
    std::unique_ptr<Session> s;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& idle = idle_[endpoint];
      if (idle.empty()) break;
      s = std::move(idle.back());
      idle.pop_back();
    }
    if (s->idle_and_open()) return s;
  }
  Backoff& backoff = *cfg_->backoff;
  if (const uint64_t ms = backoff.wait_ms(endpoint)) {
    if (!wait || ms >= cfg_->deadline_ms) throw_error(SW_ERROR_IO, cfg_->backoff_text(endpoint));
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  std::unique_ptr<Session> s;
  const Status st = capture([&] { s = std::make_unique<Session>(cfg_, endpoint); });
  if (!st.ok()) {
    if (st.code == SW_ERROR_IO || st.code == SW_ERROR_TIMEOUT) backoff.failed(endpoint);
    st.raise();
  }
  backoff.connected(endpoint);
  return s;
}

void SyncPool::give_back(std::unique_ptr<Session> s) {
  if (!s || s->broken() || s->pending()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  idle_[s->endpoint()].push_back(std::move(s));
}

bool parse_crc(const char* text, size_t length, uint32_t* out) {
  if (length == 0 || length > 10) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < length; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (v > 0xFFFFFFFFull) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

Status check_block(const Config& cfg, size_t block, size_t server, bool have_crc, uint32_t stored_crc, long long stored_length,
                   size_t delivered, const std::byte* data, size_t bytes, const uint32_t* computed) {
  const std::string head = "remote carrier '" + cfg.ns + "': ";
  if (stored_length <= 0)
    return Status::make(SW_ERROR_IO, head + cfg.where(block, server) + " is missing");
  if (!have_crc)
    return Status::make(SW_ERROR_DATA_CORRUPT, head + cfg.where(block, server) + " has no CRC in '" + cfg.crc_key() + "'");
  if (static_cast<unsigned long long>(stored_length) != bytes || delivered != bytes)
    return Status::make(SW_ERROR_DATA_CORRUPT, head + cfg.where(block, server) + " holds " + std::to_string(stored_length) +
                                                   " bytes, not the " + std::to_string(bytes) + " of the block");
  const uint32_t crc = computed ? *computed : crc32c(0, data, bytes);
  if (crc != stored_crc)
    return Status::make(SW_ERROR_DATA_CORRUPT, head + cfg.where(block, server) + " failed its CRC-32C check (stored " +
                                                   std::to_string(stored_crc) + ", read " + std::to_string(crc) + ")");
  return {};
}

}  // namespace sw::remote
