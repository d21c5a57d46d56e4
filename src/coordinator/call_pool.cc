#include "coordinator/call_pool.h"

#include <algorithm>

namespace sediment::coordinator {

CallPool::CallPool(CallPoolOptions options) : options_(options) {}

CallPool::~CallPool() { Shutdown(); }

void CallPool::Submit(std::function<void()> call, std::function<void()> refuse) {
  std::vector<std::thread> finished;  // joined outside the lock
  {
    std::unique_lock lock(mu_);
    if (shutdown_ || queue_.size() >= options_.max_queued) {
      ++refused_;
      lock.unlock();
      if (refuse) refuse();
      return;
    }
    queue_.push_back(Call{std::move(call), std::move(refuse)});
    // Threads that ended are joined here (they have left Worker: the join is immediate).
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (std::find(ended_.begin(), ended_.end(), it->get_id()) != ended_.end()) {
        ended_.erase(std::find(ended_.begin(), ended_.end(), it->get_id()));
        finished.push_back(std::move(*it));
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
    if (idle_threads_ == 0 && threads_.size() < options_.max_threads) {
      threads_.emplace_back([this] { Worker(); });
    } else {
      cv_.notify_one();
    }
  }
  for (auto& t : finished) t.join();
}

void CallPool::Worker() {
  std::unique_lock lock(mu_);
  while (true) {
    if (queue_.empty()) {
      if (shutdown_) break;
      ++idle_threads_;
      const bool woke =
          cv_.wait_for(lock, options_.idle, [this] { return shutdown_ || !queue_.empty(); });
      --idle_threads_;
      if (!woke) break;  // idle too long
      continue;
    }
    Call call = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    call.run();
    call = Call{};  // captured state is released outside the lock
    lock.lock();
    --running_;
  }
  ended_.push_back(std::this_thread::get_id());
}

void CallPool::Shutdown() {
  std::deque<Call> refused;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    refused.swap(queue_);
    refused_ += refused.size();
    threads.swap(threads_);
    ended_.clear();
    cv_.notify_all();
  }
  for (auto& c : refused) {
    if (c.refuse) c.refuse();
  }
  for (auto& t : threads) t.join();
}

CallPool::Stats CallPool::stats() const {
  std::lock_guard lock(mu_);
  return Stats{threads_.size() - ended_.size(), running_, queue_.size(), refused_};
}

}  // namespace sediment::coordinator
