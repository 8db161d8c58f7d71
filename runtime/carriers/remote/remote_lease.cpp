#include "carriers/remote/remote_lease.hpp"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <random>

#include "base/error.hpp"
#include "carriers/remote/remote_sync.hpp"

namespace sw::remote {

namespace {

std::string reply_string(const redisReply& r) { return r.str ? std::string(r.str, r.len) : std::string(); }

std::string quoted(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('\'');
  out.append(text);
  out.push_back('\'');
  return out;
}

int64_t ticks_now() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// host:pid:random, so that a refusal can say which process holds the lease.
std::string make_token() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  std::random_device device;
  const uint64_t r = (static_cast<uint64_t>(device()) << 32) ^ device();
  char tail[32];
  std::snprintf(tail, sizeof tail, "%016" PRIx64, r);
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + tail;
}

}  // namespace

WriterLease::WriterLease(std::shared_ptr<const Config> cfg, uint32_t ttl_ms)
    : cfg_(std::move(cfg)), ttl_ms_(ttl_ms ? ttl_ms : kDefaultLeaseMs), key_(cfg_->ns + ":w"), token_(make_token()) {
  session_ = std::make_unique<Session>(cfg_, 0);
  const std::string what = "taking the writer lease '" + key_ + "'";
  session_->append({"SET", key_, token_, "NX", "PX", std::to_string(ttl_ms_)});
  Reply r = session_->get_ok(what);
  if (r->type != REDIS_REPLY_STATUS)
    state_error("remote carrier: the namespace '" + cfg_->ns + "' has a writer already: " + describe_holder(*session_) +
                "; open it read_only to read it, or wait until that writer ends");
  confirmed_.store(ticks_now(), std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

WriterLease::~WriterLease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!taken_by_.empty()) return;
  // Deleted only while it is still this lease's; on any failure it ends
  // with its time to live.
  (void)capture([&] {
    Session& s = session();
    const std::string what = "ending the writer lease '" + key_ + "'";
    if (watch_is_mine(s, what, nullptr)) {
      s.append({"MULTI"});
      s.append({"DEL", key_});
      s.append({"EXEC"});
    } else {
      s.append({"UNWATCH"});
    }
    while (s.pending()) s.get_ok(what);
  });
}

Session& WriterLease::session() {
  if (!session_ || session_->broken() || session_->pending()) {
    session_.reset();
    session_ = std::make_unique<Session>(cfg_, 0);
  }
  return *session_;
}

bool WriterLease::watch_is_mine(Session& s, const std::string& what, std::string* other) {
  s.append({"WATCH", key_});
  s.append({"GET", key_});
  s.get_ok(what);
  Reply v = s.get_ok(what);
  const bool mine = v->type == REDIS_REPLY_STRING && reply_string(*v) == token_;
  if (!mine && other && v->type == REDIS_REPLY_STRING) *other = reply_string(*v);
  return mine;
}

std::string WriterLease::describe_holder(Session& s) {
  s.append({"GET", key_});
  s.append({"PTTL", key_});
  Reply holder = s.get_ok("reading the writer lease '" + key_ + "'");
  Reply ttl = s.get_ok("reading the writer lease '" + key_ + "'");
  std::string who = "another writer";
  if (holder->type == REDIS_REPLY_STRING) who = quoted(reply_string(*holder));
  std::string text = "its writer lease '" + key_ + "' on " + cfg_->server(0) + " is held by " + who;
  if (ttl->type == REDIS_REPLY_INTEGER && ttl->integer >= 0)
    text += " for " + std::to_string(ttl->integer) + " ms more";
  return text;
}

void WriterLease::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait_for(lock, std::chrono::milliseconds(std::max<uint32_t>(ttl_ms_ / 3, 1)), [&] { return stop_; });
    if (stop_ || !taken_by_.empty()) {
      if (stop_) return;
      continue;
    }
    lock.unlock();
    std::string holder;
    const Renewal r = renew(&holder);
    lock.lock();
    if (r == Renewal::kConfirmed) confirmed_.store(ticks_now(), std::memory_order_release);
    if (r == Renewal::kTaken) taken_by_ = holder.empty() ? std::string("another writer") : quoted(holder);
  }
}

WriterLease::Renewal WriterLease::renew(std::string* holder) {
  Renewal result = Renewal::kFailed;
  const Status st = capture([&] {
    Session& s = session();
    const std::string what = "renewing the writer lease '" + key_ + "'";
    const std::string ttl = std::to_string(ttl_ms_);
    if (watch_is_mine(s, what, holder)) {
      s.append({"MULTI"});
      s.append({"PEXPIRE", key_, ttl});
      s.append({"EXEC"});
      s.get_ok(what);
      s.get_ok(what);
      Reply exec = s.get_ok(what);
      // A nil EXEC: the key changed since WATCH; the next renewal looks again.
      if (exec->type == REDIS_REPLY_ARRAY && exec->elements == 1 && exec->element[0]->type == REDIS_REPLY_INTEGER &&
          exec->element[0]->integer == 1)
        result = Renewal::kConfirmed;
      return;
    }
    s.append({"UNWATCH"});
    s.get_ok(what);
    if (!holder->empty()) {
      result = Renewal::kTaken;
      return;
    }
    // Expired with no one taking it (a pause longer than its time to live,
    // a restarted server): taken again, unless someone is faster.
    s.append({"SET", key_, token_, "NX", "PX", ttl});
    Reply again = s.get_ok(what);
    result = again->type == REDIS_REPLY_STATUS ? Renewal::kConfirmed : Renewal::kTaken;
  });
  if (!st.ok()) session_.reset();
  return result;
}

Status WriterLease::check(const char* what) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!taken_by_.empty())
      return Status::make(SW_ERROR_STATE, std::string(what) + ": the remote carrier over namespace '" + cfg_->ns +
                                              "' lost its writer lease '" + key_ + "' to " + taken_by_ +
                                              " and writes no more; open the namespace again to write");
  }
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::duration(ticks_now() - confirmed_.load(std::memory_order_acquire)));
  if (age.count() > ttl_ms_ / 2)
    return Status::make(SW_ERROR_STATE, std::string(what) + ": the writer lease '" + key_ + "' of the remote carrier over namespace '" +
                                            cfg_->ns + "' was last renewed " + std::to_string(age.count()) +
                                            " ms ago, more than half its " + std::to_string(ttl_ms_) +
                                            " ms: writes wait until a renewal on " + cfg_->server(0) + " succeeds");
  return {};
}

}  // namespace sw::remote
