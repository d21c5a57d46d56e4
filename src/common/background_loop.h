// BackgroundLoop: a function run periodically on a thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace sediment {

// Runs a pass function on one thread it owns, between Start() and Stop():
//   - every `interval` (Options::schedule says how it is counted), or, with the DelayFromPass
//     constructor, after the wait the pass itself returns;
//   - at once after Notify() (one extra pass however many Notify() calls arrived meanwhile; a call
//     during a pass makes another pass follow it; a call before Start() makes the first pass
//     start at once);
//   - never two passes at once, never a pass after Stop() returned.
// Waits are real time (a condition variable on the steady clock), as in the hand-written loops
// it replaced: a ManualClock does not drive them; tests shorten the interval or call Notify().
//
// Lifetime: the pass runs on the loop's thread and may use whatever the owner keeps alive until
// Stop() returns, so an owner stops its loop (or declares it as its last member, destroyed first)
// before tearing down what the pass uses. A stopped loop does not start again.
//
// Thread-safety: every method may be called from any thread concurrently, the pass included:
// Stop() from the pass marks the loop stopping and returns without joining (the thread ends when
// the pass returns; a later Stop() from another thread, or the destructor, joins it).
class BackgroundLoop {
 public:
  using Duration = std::chrono::steady_clock::duration;
  // As an interval or a returned delay: no timed pass, only Notify() starts one.
  static constexpr Duration kNoPeriod = Duration::max();

  enum class Schedule {
    // A pass, then `interval` of waiting, then the next pass (the pass's own time adds up).
    kFixedDelay,
    // Passes due every `interval` from the first due time. A pass that ends after the next due
    // time is followed by the next pass at once, and when a whole period was missed the grid
    // restarts an interval after the late wake-up (no burst of catch-up passes). A Notify()ed
    // pass counts as the one due next.
    kFixedRate,
  };
  enum class FirstPass {
    kAfterInterval,  // the first pass waits one interval
    kAtStart,        // the first pass runs as soon as the thread starts
  };
  struct Options {
    Duration interval = kNoPeriod;
    Schedule schedule = Schedule::kFixedDelay;
    FirstPass first_pass = FirstPass::kAfterInterval;
  };
  struct DelayFromPass {};

  // `name` names the thread (first 15 characters, for debuggers and `top -H`).
  BackgroundLoop(std::string name, Options options, std::function<void()> pass);
  // The pass returns the wait before the next pass (kNoPeriod: none until Notify()); the
  // schedule is not used, `interval` is the first wait when first_pass is kAfterInterval.
  BackgroundLoop(std::string name, Options options, DelayFromPass, std::function<Duration()> pass);
  // Stop().
  ~BackgroundLoop();
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  // Starts the thread. False (and nothing happens) when it was started or stopped before.
  bool Start() EXCLUDES(lifecycle_mu_, mu_);
  // Makes the next pass start now, or right after the one running.
  void Notify() EXCLUDES(mu_);
  // Cuts the wait short, lets a running pass finish and joins the thread (see the class comment
  // for a call from the pass). Idempotent; concurrent calls all return once the thread ended.
  void Stop() EXCLUDES(lifecycle_mu_, mu_);
  // True once Stop() was called: long passes check it to return early.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // For waits inside a pass: sleeps `d` (real time) unless stopped. False when cut short by
  // Stop() (or called after it), true when the whole `d` passed.
  bool SleepFor(Duration d) EXCLUDES(mu_);

 private:
  void Run() EXCLUDES(mu_);

  const std::string name_;
  const Options options_;
  const bool fixed_rate_;  // kFixedRate, and the pass returns no delay of its own
  const std::function<Duration()> pass_;

  Mutex lifecycle_mu_;  // serializes Start and the joins of Stop
  std::thread thread_ GUARDED_BY(lifecycle_mu_);
  bool started_ GUARDED_BY(lifecycle_mu_) = false;
  std::atomic<std::thread::id> thread_id_{};  // the loop's thread, once started

  Mutex mu_;
  CondVar cv_;  // stop_ or notified_ set
  bool stop_ GUARDED_BY(mu_) = false;
  bool notified_ GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};  // mirrors stop_ for lock-free reads
};

}  // namespace sediment
