#include "common/thread.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace sediment {
namespace {

id_t CurrentTid() { return static_cast<id_t>(::syscall(SYS_gettid)); }

}  // namespace

void SetCurrentThreadName(std::string_view name) {
  const std::string short_name(name.substr(0, 15));  // the kernel's limit
  pthread_setname_np(pthread_self(), short_name.c_str());
}

Status SetCurrentThreadNice(int nice) {
  if (nice < -20 || nice > 19) {
    return Status::InvalidArgument("nice value " + std::to_string(nice) + " is not in -20..19");
  }
  if (::setpriority(PRIO_PROCESS, CurrentTid(), nice) != 0) {
    const int err = errno;
    const std::string what =
        "setting the thread's nice value to " + std::to_string(nice) + ": " + std::strerror(err);
    if (err == EACCES || err == EPERM) return Status::PermissionDenied(what);
    return Status::Internal(what);
  }
  return Status::OK();
}

Result<int> CurrentThreadNice() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, CurrentTid());
  if (nice == -1 && errno != 0) {
    return Status::Internal(std::string("reading the thread's nice value: ") +
                            std::strerror(errno));
  }
  return nice;
}

}  // namespace sediment
