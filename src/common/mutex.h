// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang's
// thread-safety annotations, so that the compiler checks which lock guards which member.
//
//   class Queue {
//     Mutex mu_;
//     std::deque<int> items_ GF_GUARDED_BY(mu_);
//     void PushLocked(int x) GF_REQUIRES(mu_);
//   };
//
// Under clang with -Wthread-safety (scripts/check_thread_safety.sh, the lint.thread_safety test)
// reading or writing a GF_GUARDED_BY member without its mutex held, calling a GF_REQUIRES function
// without it, or returning with a lock still held is a compile error. Under other compilers the
// annotations expand to nothing and these classes are plain std::mutex wrappers.
//
// Thread-safety: Mutex and CondVar are for use from many threads (that is their point); a
// MutexLock belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GF_THREAD_ANNOTATION(x)
#endif

#define GF_CAPABILITY(x) GF_THREAD_ANNOTATION(capability(x))
#define GF_SCOPED_CAPABILITY GF_THREAD_ANNOTATION(scoped_lockable)
#define GF_GUARDED_BY(x) GF_THREAD_ANNOTATION(guarded_by(x))
#define GF_PT_GUARDED_BY(x) GF_THREAD_ANNOTATION(pt_guarded_by(x))
#define GF_ACQUIRED_AFTER(...) GF_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define GF_REQUIRES(...) GF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GF_ACQUIRE(...) GF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GF_RELEASE(...) GF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GF_EXCLUDES(...) GF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GF_ASSERT_CAPABILITY(x) GF_THREAD_ANNOTATION(assert_capability(x))
#define GF_RETURN_CAPABILITY(x) GF_THREAD_ANNOTATION(lock_returned(x))
#define GF_NO_THREAD_SAFETY_ANALYSIS GF_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace gpufleet {

class GF_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GF_ACQUIRE() { mu_.lock(); }
  void Unlock() GF_RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds the mutex (where it cannot see it, e.g. in a callback
  // that a locked caller runs). Checks nothing at run time.
  void AssertHeld() const GF_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Unlock/Lock let a scope drop the lock around slow work (I/O) and
// take it back; the destructor unlocks only when held.
class GF_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) GF_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() GF_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() GF_RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() GF_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable over a Mutex the caller holds. Waits may wake spuriously: wait in a loop
// or with a predicate.
class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  void Wait(Mutex& mu) GF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false when the timeout passed.
  template <class Rep, class Period>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout) GF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // Waits until pred() holds (checked with the mutex held) or the timeout passes; returns pred().
  template <class Rep, class Period, class Pred>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout, Pred pred) GF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool ok = cv_.wait_for(lock, timeout, pred);
    lock.release();
    return ok;
  }
  template <class Pred>
  void Wait(Mutex& mu, Pred pred) GF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();
  }
  template <class Clock, class Dur, class Pred>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<Clock, Dur> deadline, Pred pred) GF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool ok = cv_.wait_until(lock, deadline, pred);
    lock.release();
    return ok;
  }

 private:
  std::condition_variable cv_;
};

}  // namespace gpufleet
