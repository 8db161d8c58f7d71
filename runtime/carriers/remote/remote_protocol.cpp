#include "carriers/remote/remote_protocol.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw::remote {

namespace {

std::string describe_errno(int error_number) {
  char text[256];
  return std::string(strerror_r(error_number, text, sizeof text));
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // any other name may resolve anywhere
}

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Endpoint parse_endpoint(const std::string& text, bool allow_plaintext) {
  Endpoint e;
  e.text = text;
  const std::string unix_scheme = "unix://", redis_scheme = "redis://", tls_scheme = "rediss://";
  if (text.rfind(unix_scheme, 0) == 0) {
    e.unix_socket = true;
    e.path = text.substr(unix_scheme.size());
    if (e.path.empty() || e.path.front() != '/')
      value_error("remote carrier: endpoint '" + text + "' needs an absolute socket path (unix:///path/to.sock)");
    return e;
  }
  if (text.rfind(tls_scheme, 0) == 0)
    unsupported_error("remote carrier: endpoint '" + text +
                      "': this build's hiredis has no TLS; use unix:// or redis:// on a loopback or private network");
  if (text.rfind(redis_scheme, 0) != 0)
    value_error("remote carrier: endpoint '" + text + "' is neither unix:///path nor redis://host[:port]");
  std::string rest = text.substr(redis_scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) value_error("remote carrier: endpoint '" + text + "' has an unclosed '['");
    e.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') value_error("remote carrier: endpoint '" + text + "' is not redis://[host]:port");
      port = rest.substr(close + 2);
    }
  } else {
    const size_t colon = rest.rfind(':');
    e.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (e.host.empty() || e.host.find_first_of("/@ ") != std::string::npos)
    value_error("remote carrier: endpoint '" + text + "' names no host (redis://host[:port]; credentials go in the "
                "descriptor's user and password_file)");
  if (!port.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (*end || p < 1 || p > 65535) value_error("remote carrier: endpoint '" + text + "' has no valid port");
    e.port = static_cast<int>(p);
  }
  if (!allow_plaintext && !is_loopback(e.host))
    value_error("remote carrier: endpoint '" + text +
                "' is not a loopback address and the connection would be unencrypted (this build's hiredis has no "
                "TLS); set allow_plaintext to accept that on a trusted network");
  return e;
}

std::string read_password_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw_error(SW_ERROR_IO, "remote carrier: cannot open the password file '" + path + "': " +
                                           describe_errno(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    throw_error(SW_ERROR_IO, "remote carrier: cannot stat the password file '" + path + "': " + describe_errno(errno));
  if (!S_ISREG(st.st_mode)) value_error("remote carrier: the password file '" + path + "' is not a regular file");
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    value_error("remote carrier: the password file '" + path + "' has mode " + mode +
                ": its group or others may use it; make it readable by its owner only (chmod 600)");
  }
  std::string text;
  char buffer[512];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw_error(SW_ERROR_IO, "remote carrier: cannot read the password file '" + path + "': " + describe_errno(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > 4096) value_error("remote carrier: the password file '" + path + "' is longer than 4096 bytes");
  }
  const size_t eol = text.find_first_of("\r\n");
  if (eol != std::string::npos) text.resize(eol);
  if (text.empty()) value_error("remote carrier: the password file '" + path + "' holds no password");
  return text;
}

size_t Config::endpoint_of(size_t block) const {
  size_t best = 0;
  uint64_t best_score = 0;
  for (size_t e = 0; e < placement_count; ++e) {
    const uint64_t score = mix64(placement_seed ^ mix64(static_cast<uint64_t>(block) * 0x100000001B3ull + e));
    if (e == 0 || score > best_score) {
      best = e;
      best_score = score;
    }
  }
  return best;
}

std::string Config::where(size_t block, size_t on) const {
  return "block " + std::to_string(block) + " (key '" + block_key(block) + "') on " + server(on);
}

namespace {
uint64_t steady_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

uint64_t Backoff::wait_ms(size_t server) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (server >= entries_.size()) return 0;
  const uint64_t now = steady_ms(), at = entries_[server].retry_at;
  return at > now ? at - now : 0;
}

int Backoff::failures(size_t server) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return server < entries_.size() ? entries_[server].failures : 0;
}

void Backoff::failed(size_t server) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (server >= entries_.size()) return;
  Entry& e = entries_[server];
  const uint64_t now = steady_ms();
  if (now < e.retry_at) return;  // attempts within one wait count once
  ++e.failures;
  const int doublings = std::min(e.failures - 1, 16);
  e.retry_at = now + std::min<uint64_t>(kBackoffFirstMs << doublings, kBackoffMaxMs);
}

void Backoff::connected(size_t server) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (server < entries_.size()) entries_[server] = Entry{};
}

std::string Config::without_head(std::string message) const {
  const std::string h = head();
  if (message.rfind(h, 0) == 0) message.erase(0, h.size());
  return message;
}

Status Config::no_server_left(size_t block, const Status& last, const std::string& earlier) const {
  return Status::make(last.code, head() + "no server holding " + where(block) + " could serve its read: " +
                                     without_head(last.message) + (earlier.empty() ? "" : "; before that: " + earlier));
}

std::string Config::backoff_text(size_t server) const {
  return "remote carrier '" + ns + "': not connecting to " + this->server(server) + " for " +
         std::to_string(backoff->wait_ms(server)) + " ms more, after " + std::to_string(backoff->failures(server)) +
         " failed attempts in a row: past what the request may wait";
}

std::vector<std::string> header_fields(const Config& cfg, size_t size) {
  return {"format", std::to_string(kFormatVersion),
          "dtype", dtype_name(cfg.dtype),
          "size", std::to_string(size),
          "block_elements", std::to_string(cfg.block_elements),
          "endpoints", std::to_string(cfg.placement_count),
          "placement_seed", std::to_string(cfg.placement_seed)};
}

// ---- the reply sink ----------------------------------------------------

redisReplyObjectFunctions ReplySink::functions_ = {&ReplySink::create_string, &ReplySink::create_array,
                                                   &ReplySink::create_integer, &ReplySink::create_nil,
                                                   &freeReplyObject};

void ReplySink::attach(redisReader* reader) {
  // Keep the reader's buffer between replies: by default hiredis frees it
  // once it is empty and holds more than 16 KiB, so every chunk-sized reply
  // would grow a fresh buffer again, its pages faulted in anew.
  reader->maxbuf = 0;
  original_ = reader->fn;
  reader->fn = &functions_;
  reader->privdata = this;
}

ReplySink::Expect ReplySink::next(const redisReadTask* task) {
  if (task->parent || expects_.empty()) return {};
  const Expect e = expects_.front();
  expects_.pop_front();
  return e;
}

void* ReplySink::create_string(const redisReadTask* task, char* str, size_t len) {
  ReplySink& sink = of(task);
  const Expect e = sink.next(task);
  if (e.dst && task->type == REDIS_REPLY_STRING) {
    if (e.crc && len == e.capacity && *e.crc_upto == e.at) {
      *e.crc = crc32c_copy(*e.crc, e.dst, str, len);
      *e.crc_upto += len;
    } else {
      std::memcpy(e.dst, str, len < e.capacity ? len : e.capacity);
    }
    if (e.got) *e.got = len;
    return sink.original_->createString(task, str, 0);
  }
  return sink.original_->createString(task, str, len);
}

void* ReplySink::create_array(const redisReadTask* task, int elements) {
  ReplySink& sink = of(task);
  (void)sink.next(task);
  return sink.original_->createArray(task, elements);
}

void* ReplySink::create_integer(const redisReadTask* task, long long value) {
  ReplySink& sink = of(task);
  (void)sink.next(task);
  return sink.original_->createInteger(task, value);
}

void* ReplySink::create_nil(const redisReadTask* task) {
  ReplySink& sink = of(task);
  (void)sink.next(task);
  return sink.original_->createNil(task);
}

}  // namespace sw::remote
