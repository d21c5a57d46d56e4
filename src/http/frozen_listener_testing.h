// Test helper of the http tests: a listening socket on 127.0.0.1 that never accepts. Connections
// complete in the kernel's backlog and nothing is ever read or answered (no HTTP answer, no TLS
// handshake), as with a SIGSTOPped server.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace sediment::http::testing {

class FrozenListener {
 public:
  FrozenListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~FrozenListener() { ::close(fd_); }
  FrozenListener(const FrozenListener&) = delete;
  FrozenListener& operator=(const FrozenListener&) = delete;
  // "SCHEME://127.0.0.1:PORT" + path.
  std::string url(const std::string& path, const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace sediment::http::testing
