#include "carriers/tiled/commit_group.hpp"

#include <algorithm>

#include "carriers/tiled/tile_request.hpp"
#include "base/error.hpp"
#include "core/runtime.hpp"

namespace sw {

bool CommitGroup::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

void CommitGroup::fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.ok()) error_ = st;
    if (aborted_) return;
    aborted_ = true;
  }
  abort_others(nullptr, st);
}

void CommitGroup::submit(const std::vector<std::shared_ptr<TileRequest>>& requests) {
  for (const auto& req : requests) req->group = shared_from_this();
  for (const auto& req : requests) req->check();
  // The members that do not run inline start together at launch(), in this
  // order, so that their reads queue in it.
  for (const auto& req : requests) {
    if (failed()) break;
    Status st = capture([&] { req->submit(); });
    if (!st.ok()) {
      fail(st);  // what was submitted fails with the refusal
      launch();
      st.raise();
    }
  }
  launch();
}

void CommitGroup::join(std::shared_ptr<TileRequest> r, bool deferred_start) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_ && r->error_.ok()) r->error_ = error_;  // fails as it runs or starts
  members_.push_back(r);
  if (deferred_start) to_start_.push_back(std::move(r));
}

void CommitGroup::launch() {
  std::vector<std::shared_ptr<TileRequest>> start;
  bool commit = false, on_loop = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launched_ = true;
    start.swap(to_start_);
    // Every member is ready (a closed group's ran inline; an open group's
    // published their results): the commit is this thread's, unless the
    // loop ran some of them.
    commit = !aborted_ && !members_.empty() && ready_ == members_.size();
    on_loop = std::any_of(members_.begin(), members_.end(), [](const auto& m) { return m->on_loop_; });
  }
  if (commit) {
    if (!on_loop) return commit_all();
    auto self = shared_from_this();
    return rt_->on_loop([self] { self->commit_all(); });
  }
  if (!start.empty()) {
    std::vector<std::shared_ptr<Operation>> ops(start.begin(), start.end());
    for (const auto& r : start) {
      r->to(TileRequest::State::kQueued);
      r->on_loop_ = true;
    }
    Status st = capture([&] { rt_->submit(std::move(ops)); });
    if (!st.ok()) {
      // Never started: they fail here, as members that ran inline would.
      for (const auto& r : start) r->on_loop_ = false;
      for (const auto& r : start) r->fail(st);
    }
  }
  complete_if_done();
}

void CommitGroup::ready(TileRequest* r) {
  if (open_) {
    // The pass goes on with the result; the commit waits for its end.
    Status st = r->publish_result();
    if (!st.ok()) return r->fail(st);
    if (r->published) r->published->succeed(r->result_);
  }
  Status failed_with;
  bool commit = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) {
      failed_with = error_;
    } else {
      ++ready_;
      commit = launched_ && ready_ == members_.size();
    }
  }
  if (!failed_with.ok()) return r->fail(failed_with);
  // The last member to get ready runs on the loop thread (members that run
  // inline are all ready before launch()).
  if (commit) commit_all();
}

void CommitGroup::commit_all() {
  std::vector<std::shared_ptr<TileRequest>> members;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    members = members_;
  }
  // Every result first: a failing publish fails the group with nothing
  // committed.
  if (publish) {
    Ref<Object> result;
    Status st = capture([&] { result = publish(); });
    if (!st.ok()) {
      for (const auto& x : members) x->fail(st);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
  }
  for (const auto& m : members) {
    Status st = m->publish_result();
    if (st.ok()) continue;
    for (const auto& x : members) x->fail(st);
    return;
  }
  for (const auto& m : members) m->commit();
}

void CommitGroup::commit() {
  launch();
  Status st = await_->wait(-1);
  if (!st.ok()) st.raise();
}

void CommitGroup::abort(const Status& st) noexcept {
  fail(st);
  launch();
  (void)await_->wait(-1);
}

Ref<Await> join_step(TileRequest& req) {
  StepScope* scope = current_step_scope();
  if (!scope) return req.await_;
  Runtime& rt = req.te_->runtime();
  std::shared_ptr<StepParticipant>& slot = scope->slot(&rt);
  if (!slot) slot = std::make_shared<CommitGroup>(Ref<Runtime>(&rt), make_ref<Await>(Ref<Runtime>(&rt), SW_AWAIT_MOVE), true);
  req.group = std::static_pointer_cast<CommitGroup>(slot);
  req.published = make_ref<Await>(Ref<Runtime>(&rt), req.await_->kind());
  return req.published;
}

void CommitGroup::terminal(TileRequest* r, const Status& st, const Ref<Object>& result) {
  bool abort = false;
  Status error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++terminal_;
    if (result) result_ = result;
    if (!st.ok()) {
      if (error_.ok()) error_ = st;
      abort = !aborted_;
      aborted_ = true;
    }
    error = error_;
  }
  if (abort) abort_others(r, error);
  complete_if_done();
}

void CommitGroup::abort_others(TileRequest* except, const Status& st) {
  std::vector<std::shared_ptr<TileRequest>> others;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& m : members_)
      if (m.get() != except) others.push_back(m);
  }
  for (const auto& m : others) {
    // A member the loop runs is the loop's to fail; one that ran inline, or
    // was never started, is idle and fails here.
    if (m->on_loop_)
      rt_->on_loop([m, st] { m->abort(st); });
    else
      m->abort(st);
  }
}

void CommitGroup::complete_if_done() {
  Status error;
  Ref<Object> result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_ || !launched_ || terminal_ < members_.size()) return;
    completed_ = true;
    error = error_;
    result = std::move(result_);
    members_.clear();  // the members hold the group until they are terminal
  }
  if (error.ok())
    await_->succeed(std::move(result));
  else
    await_->fail(std::move(error));
}

}  // namespace sw
