// Intrusive reference counting shared by every public handle.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace sw {

// Tags let the API layer tell a wrong handle kind (TYPE error) from a right one.
enum class ObjectKind : uint32_t {
  kRuntime = 0x53575254,  // "SWRT"
  kLayout = 0x5357544c,
  kCarrier = 0x53574341,
  kTensor = 0x53575454,
  kAwait = 0x53574157,
  kNode = 0x5357474e,
  kTileSet = 0x53575453,
  kTileSelection = 0x5357534c,
  kResidencyPlan = 0x53575250,
  kLruPolicy = 0x53574c52,
  kDevice = 0x53574456,
  kDeviceAllocation = 0x53574441,
  kDeviceView = 0x53575657,
  kDead = 0xdeadbeef,
};

class Object {
 public:
  explicit Object(ObjectKind kind) : kind_(kind) {}
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  virtual ~Object() { kind_ = ObjectKind::kDead; }

  ObjectKind object_kind() const { return kind_; }
  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  uint32_t ref_count() const { return refs_.load(std::memory_order_relaxed); }
  // Whether this is the only reference; acquire, so that whatever the
  // holders of released references did happens before what follows.
  bool is_unique() const { return refs_.load(std::memory_order_acquire) == 1; }

 private:
  ObjectKind kind_;
  mutable std::atomic<uint32_t> refs_{1};
};

// A strong reference. `adopt` takes over an existing count (new objects start
// at one); the constructor from a raw pointer adds one.
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}
  explicit Ref(T* p) : p_(p) {
    if (p_) p_->retain();
  }
  static Ref adopt(T* p) {
    Ref r;
    r.p_ = p;
    return r;
  }
  Ref(const Ref& o) : p_(o.p_) {
    if (p_) p_->retain();
  }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U>
  Ref(const Ref<U>& o) : p_(o.get()) {
    if (p_) p_->retain();
  }
  ~Ref() {
    if (p_) p_->release();
  }
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // Hands the reference to the caller (for out-parameters).
  T* detach() { return std::exchange(p_, nullptr); }
  bool operator==(const Ref& o) const { return p_ == o.p_; }

 private:
  T* p_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>::adopt(new T(std::forward<Args>(args)...));
}

}  // namespace sw
