#include "bench/post.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/env.h"

namespace sediment::bench {
namespace {

double ClockSeconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port with blocking I/O bounded by poll().
class Connection {
 public:
  Connection(int port, std::chrono::milliseconds timeout) : port_(port), timeout_(timeout) {}
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `head` and `body`, reads the answer: its status, or -1 with `error` set.
  int Exchange(std::string_view head, std::string_view body, std::string* answer_body,
               std::string* error) {
    if (fd_ < 0 && !Connect(error)) return -1;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(body.data()), body.size()}};
    int iov_at = 0;
    while (iov_at < 2) {
      if (iov[iov_at].iov_len == 0) {
        ++iov_at;
        continue;
      }
      if (!Wait(POLLOUT, deadline, error)) return -1;
      const ssize_t n = ::writev(fd_, iov + iov_at, 2 - iov_at);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        *error = std::string("send: ") + std::strerror(errno);
        return -1;
      }
      size_t left = static_cast<size_t>(n);
      while (iov_at < 2 && left >= iov[iov_at].iov_len) {
        left -= iov[iov_at].iov_len;
        iov[iov_at].iov_len = 0;
        ++iov_at;
      }
      if (iov_at < 2) {
        iov[iov_at].iov_base = static_cast<char*>(iov[iov_at].iov_base) + left;
        iov[iov_at].iov_len -= left;
      }
    }
    // The answer: a status line and headers, then Content-Length bytes (what sediment sends for
    // an ingest answer; an answer without it is refused as malformed).
    size_t header_end = std::string::npos;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!Read(deadline, error)) return -1;
    }
    const std::string_view head_in(in_.data(), header_end);
    int status = 0;
    if (head_in.size() < 12 || head_in.substr(0, 5) != "HTTP/" ||
        std::sscanf(in_.c_str() + 9, "%3d", &status) != 1) {
      *error = "malformed answer: " + std::string(head_in.substr(0, 80));
      return -1;
    }
    size_t length = 0;
    bool have_length = false;
    bool close = false;
    for (size_t at = head_in.find("\r\n"); at != std::string_view::npos;) {
      const size_t next = head_in.find("\r\n", at + 2);
      std::string line(head_in.substr(
          at + 2, next == std::string_view::npos ? std::string_view::npos : next - at - 2));
      for (char& c : line) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (line.rfind("content-length:", 0) == 0) {
        length = std::strtoull(line.c_str() + 15, nullptr, 10);
        have_length = true;
      } else if (line.rfind("connection:", 0) == 0 && line.find("close") != std::string::npos) {
        close = true;
      }
      at = next;
    }
    if (!have_length) {
      *error = "answer without Content-Length";
      return -1;
    }
    const size_t body_at = header_end + 4;
    while (in_.size() < body_at + length) {
      if (!Read(deadline, error)) return -1;
    }
    answer_body->assign(in_, body_at, length);
    in_.erase(0, body_at + length);
    if (close) Close();
    return status;
  }

 private:
  bool Connect(std::string* error) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) {
      *error = std::string("socket: ") + std::strerror(errno);
      return false;
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS) {
      *error = std::string("connect: ") + std::strerror(errno);
      Close();
      return false;
    }
    if (!Wait(POLLOUT, deadline, error)) return false;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      *error = std::string("connect: ") + std::strerror(err);
      Close();
      return false;
    }
    in_.clear();
    return true;
  }

  bool Wait(short events, std::chrono::steady_clock::time_point deadline, std::string* error) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        *error = "no answer within " + std::to_string(timeout_.count()) + " ms";
        return false;
      }
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) {
        *error = std::string("poll: ") + std::strerror(errno);
        return false;
      }
    }
  }

  bool Read(std::chrono::steady_clock::time_point deadline, std::string* error) {
    char buf[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) {
        *error = "the server closed the connection";
        return false;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *error = std::string("recv: ") + std::strerror(errno);
        return false;
      }
      if (!Wait(POLLIN, deadline, error)) return false;
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const int port_;
  const std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string in_;  // bytes read and not yet consumed
};

}  // namespace

std::vector<LineBatchView> SplitBatches(std::string_view data, uint64_t batch_lines) {
  std::vector<LineBatchView> out;
  for (size_t pos = 0; pos < data.size();) {
    size_t end = pos;
    uint64_t n = 0;
    while (n < batch_lines && end < data.size()) {
      const size_t nl = data.find('\n', end);
      end = nl == std::string_view::npos ? data.size() : nl + 1;
      ++n;
    }
    out.push_back(LineBatchView{data.substr(pos, end - pos), n});
    pos = end;
  }
  return out;
}

int Post(const PostOptions& options) {
  auto data_or = Env::Default()->ReadFile(options.in);
  if (!data_or.ok()) {
    std::fprintf(stderr, "sediment-benchutil post: %s\n", data_or.status().ToString().c_str());
    return 1;
  }
  const std::string& data = data_or.value();
  const std::vector<LineBatchView> batches = SplitBatches(data, options.batch_lines);

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> events{0}, bytes{0}, retries{0};
  std::mutex mu;
  std::string first_error;  // guarded by mu
  auto fail = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = std::move(what);
    failed = true;
  };

  auto client = [&] {
    Connection conn(options.port, std::chrono::seconds(options.timeout_seconds));
    std::string answer, error;
    for (;;) {
      if (failed) return;
      const size_t i = next.fetch_add(1);
      if (i >= batches.size()) return;
      const LineBatchView& b = batches[i];
      const std::string head = "POST " + options.path +
                               " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                               options.token + "\r\nContent-Type: " + options.content_type +
                               "\r\nContent-Length: " + std::to_string(b.body.size()) + "\r\n\r\n";
      for (int attempt = 0;; ++attempt) {
        const int status = conn.Exchange(head, b.body, &answer, &error);
        if (status == 200) {
          events += b.lines;
          bytes += b.body.size();
          break;
        }
        if (status < 0) {
          // The request may or may not have been taken: never resent.
          return fail("batch " + std::to_string(i) + ": " + error);
        }
        if ((status == 429 || status == 503) && attempt < options.max_retries) {
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(100 << attempt));
          continue;
        }
        return fail("batch " + std::to_string(i) + ": HTTP " + std::to_string(status) + ": " +
                    answer.substr(0, 300));
      }
    }
  };

  const double cpu0 = ClockSeconds(CLOCK_PROCESS_CPUTIME_ID);
  const double t0 = ClockSeconds(CLOCK_MONOTONIC);
  std::vector<std::thread> threads;
  for (int c = 0; c < options.clients; ++c) threads.emplace_back(client);
  for (std::thread& t : threads) t.join();
  const double seconds = ClockSeconds(CLOCK_MONOTONIC) - t0;
  const double cpu = ClockSeconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  if (failed) {
    std::fprintf(stderr, "sediment-benchutil post: %s\n", first_error.c_str());
    return 1;
  }
  std::printf(
      "{\"batches\": %zu, \"events\": %llu, \"bytes\": %llu, \"retries\": %llu, "
      "\"clients\": %d, \"seconds\": %.4f, \"start_monotonic\": %.6f, \"cpu_seconds\": %.4f}\n",
      batches.size(), static_cast<unsigned long long>(events.load()),
      static_cast<unsigned long long>(bytes.load()),
      static_cast<unsigned long long>(retries.load()), options.clients, seconds, t0, cpu);
  return 0;
}

}  // namespace sediment::bench
