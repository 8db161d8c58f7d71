// Requests that commit together, and work that depends on all of them: one
// operation made of several TileRequests (the expert feed-forward's gate,
// up and down requests, or gate_up and down in its fused form, each on its
// own TiledEvictable) either commits every one of them or none, and its
// result is computed once every one of them did its work.
//
// An operation over several TiledEvictables makes one group, sets the
// group's `publish` (the work that needs every member's), makes its
// requests and hands them to submit(), and returns the group's await.
//
//  - A member whose work is done (its reads landed, its tile work and work
//    ran) does not commit: it waits, its tiles still pinned, until every
//    member is there. Then the group's `publish` runs, then every member's,
//    and only once all of them succeeded does each member commit, in the
//    order they joined, in one step on the loop thread (on the calling
//    thread when every member ran inline).
//  - When a member fails, every other member fails with the same status:
//    one still moving stops issuing work and fails once what it issued has
//    settled; one waiting fails at once; one not started yet fails at its
//    start. None of them commits.
//  - The group's await completes once every member is terminal (each has
//    released its pins and left its TiledEvictable's pending count): with
//    the result the members published, or with the first failure. Nothing
//    of the operation changes after it.
//
// Members that do not run inline start together: submit() hands them to the
// group, and launch() starts them in one turn of the loop, in the order
// they joined, so that their reads queue in that order and a failure of one
// reaches the others only after all of them started.
//
// The requests made during one step of several blocking requests (a
// backward pass, the expert feed-forward recorded for autograd: a StepScope
// on the calling thread) are an open group (join_step()): each starts at
// once and publishes its result as soon as its work is done (its
// `published` await), so that the step computes with it, and all of them
// commit when the step succeeded (commit()), or fail with it (abort()).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "async/await.hpp"
#include "autograd/node.hpp"
#include "base/status.hpp"

namespace sw {

class Runtime;
class TileRequest;

class CommitGroup final : public StepParticipant, public std::enable_shared_from_this<CommitGroup> {
 public:
  CommitGroup(Ref<Runtime> rt, Ref<Await> await, bool open = false)
      : rt_(std::move(rt)), await_(std::move(await)), open_(open) {}

  // An open group's members start when submitted; a closed group's wait
  // for launch().
  bool defers_starts() const { return !open_; }
  // StepParticipant: launch() and wait until every member is terminal
  // (commit() raises the group's failure).
  void commit() override;
  void abort(const Status& st) noexcept override;

  // Optional, set before the first member is submitted: runs once every
  // member's work is done, before any member's own `publish` and any commit
  // (on the loop thread; on the calling thread when every member ran
  // inline). Its object is the await's result; a failure fails every
  // member with nothing committed.
  std::function<Ref<Object>()> publish;

  // A closed group's members, not submitted yet (their `group` is set
  // here): checks each (TileRequest::check) before it submits any, so that
  // a refusal leaves nothing started; submits them in order, each inline
  // when it can, stopping once one failed inline; then launch(). A refusal
  // at a submission fails what was submitted and is raised.
  void submit(const std::vector<std::shared_ptr<TileRequest>>& requests);

  // Whether a member failed: the operation stops submitting members.
  bool failed() const;
  // Fails every member with `st` (the operation was refused part way
  // through submitting them).
  void fail(const Status& st);
  // After the last member was submitted (or the operation stopped
  // submitting): starts the members that wait for the loop, in one turn,
  // and commits at once when every member already ran inline. A runtime
  // shut down meanwhile fails them CANCELLED.
  void launch();

  // ---- called by the members (TileRequest) ----
  // At submission, before the request runs (inline) or waits for launch().
  void join(std::shared_ptr<TileRequest> r, bool deferred_start);
  // A member's work is done: it commits when every member's is.
  void ready(TileRequest* r);
  // A member is terminal (after it left its TiledEvictable's pending count).
  void terminal(TileRequest* r, const Status& st, const Ref<Object>& result);

 private:
  void commit_all();
  void abort_others(TileRequest* except, const Status& st);
  void complete_if_done();

  const Ref<Runtime> rt_;
  const Ref<Await> await_;
  const bool open_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<TileRequest>> members_;  // in join order; cleared at completion
  std::vector<std::shared_ptr<TileRequest>> to_start_;  // members waiting for launch()
  size_t ready_ = 0, terminal_ = 0;
  bool launched_ = false, aborted_ = false, completed_ = false;
  Status error_;  // the first failure
  Ref<Object> result_;
};

// Within a step (a StepScope on this thread), makes `req` (not submitted
// yet) a member of the step's open group for its runtime and returns the
// await of its published result; elsewhere returns the request's await.
Ref<Await> join_step(TileRequest& req);

}  // namespace sw
