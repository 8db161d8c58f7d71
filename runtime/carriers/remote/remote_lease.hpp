// The writer lease of a remote namespace: one writer per namespace, any
// number of readers. A carrier that can write holds the key `<ns>:w` on the
// namespace's first endpoint, set to a token of its own with a time to live
// (SET NX PX); a thread of the lease renews it every third of that time
// (WATCH, GET, MULTI, PEXPIRE, EXEC: only while the key is still its
// token), takes it again if it expired with no one else taking it, and
// deletes it when the carrier ends. A carrier whose lease another writer
// took never writes again; one whose renewals fail (the server unreachable,
// the process paused) refuses writes until a renewal succeeds, from half
// the time to live after the last one, so a writer cannot go on writing
// under a lease that may have ended.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.hpp"
#include "carriers/remote/remote_protocol.hpp"

namespace sw::remote {

class Session;

constexpr uint32_t kDefaultLeaseMs = 15000;

class WriterLease {
 public:
  // Takes the lease: STATE naming the holder when another writer has it,
  // IO (or TIMEOUT) when the server cannot be reached or refuses the
  // command (an ACL without the lease key's commands).
  WriterLease(std::shared_ptr<const Config> cfg, uint32_t ttl_ms);
  // Stops the renewals and deletes the key if it is still this lease's.
  ~WriterLease();
  WriterLease(const WriterLease&) = delete;
  WriterLease& operator=(const WriterLease&) = delete;

  // OK while the lease is this carrier's and was confirmed within half its
  // time to live; STATE saying why `what` may not write otherwise.
  Status check(const char* what) const;
  const std::string& key() const { return key_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Renewal { kConfirmed, kTaken, kFailed };

  void run();
  // One renewal on session_ (made again when it broke).
  Renewal renew(std::string* holder);
  std::string describe_holder(Session& s);
  // session_, made again when it broke or has replies pending.
  Session& session();
  // WATCH and GET of the key on `s`: whether it holds this lease's token
  // (the transaction that follows is then this lease's); if another's, that
  // token in *other (when not null).
  bool watch_is_mine(Session& s, const std::string& what, std::string* other);

  std::shared_ptr<const Config> cfg_;
  uint32_t ttl_ms_;
  std::string key_, token_;
  std::unique_ptr<Session> session_;  // the renewal thread's, after the constructor's
  std::atomic<int64_t> confirmed_{0};  // Clock ticks of the last confirmation
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string taken_by_;  // non-empty once another writer took the lease
  std::thread thread_;
};

}  // namespace sw::remote
