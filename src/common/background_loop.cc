#include "common/background_loop.h"

#include <algorithm>
#include <utility>

#include "common/clock.h"
#include "common/thread.h"

namespace sediment {
namespace {

using Steady = std::chrono::steady_clock;

// `from + d`, or time_point::max() (wait for a Notify) when that would not fit.
Steady::time_point AddSaturating(Steady::time_point from, BackgroundLoop::Duration d) {
  if (d >= Steady::time_point::max() - from) return Steady::time_point::max();
  return from + std::max(d, BackgroundLoop::Duration::zero());
}

}  // namespace

BackgroundLoop::BackgroundLoop(std::string name, Options options, std::function<void()> pass)
    : name_(std::move(name)),
      options_(options),
      fixed_rate_(options.schedule == Schedule::kFixedRate),
      pass_([pass = std::move(pass), interval = options.interval] {
        pass();
        return interval;
      }) {}

BackgroundLoop::BackgroundLoop(std::string name, Options options, DelayFromPass,
                               std::function<Duration()> pass)
    : name_(std::move(name)), options_(options), fixed_rate_(false), pass_(std::move(pass)) {}

BackgroundLoop::~BackgroundLoop() { Stop(); }

bool BackgroundLoop::Start() {
  MutexLock lifecycle(&lifecycle_mu_);
  {
    MutexLock lock(&mu_);
    if (started_ || stop_) return false;
  }
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return true;
}

void BackgroundLoop::Notify() {
  {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  cv_.NotifyAll();
}

void BackgroundLoop::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_release);
  }
  cv_.NotifyAll();
  if (std::this_thread::get_id() == thread_id_.load()) return;  // from the pass: cannot join
  MutexLock lifecycle(&lifecycle_mu_);
  if (thread_.joinable()) thread_.join();
}

bool BackgroundLoop::SleepFor(Duration d) {
  MutexLock lock(&mu_);
  const Steady::time_point until = AddSaturating(SteadyNow(), d);
  while (!stop_) {
    if (until == Steady::time_point::max()) {
      cv_.Wait(mu_);
    } else if (!cv_.WaitUntil(mu_, until)) {
      break;
    }
  }
  return !stop_;
}

void BackgroundLoop::Run() {
  thread_id_.store(std::this_thread::get_id());
  SetCurrentThreadName(name_);

  Steady::time_point due = options_.first_pass == FirstPass::kAtStart
                               ? SteadyNow()
                               : AddSaturating(SteadyNow(), options_.interval);
  MutexLock lock(&mu_);
  for (;;) {
    while (!stop_ && !notified_) {
      if (due == Steady::time_point::max()) {
        cv_.Wait(mu_);
      } else if (!cv_.WaitUntil(mu_, due)) {
        break;  // due
      }
    }
    if (stop_) return;
    notified_ = false;
    lock.Unlock();
    if (fixed_rate_) {
      // The next due time, counted before the pass so that its length does not shift the grid.
      const Steady::time_point woke = SteadyNow();
      due = AddSaturating(due, options_.interval);
      if (due < woke) due = AddSaturating(woke, options_.interval);
    }
    const Duration next = pass_();
    if (!fixed_rate_) due = AddSaturating(SteadyNow(), next);
    lock.Lock();
  }
}

}  // namespace sediment
