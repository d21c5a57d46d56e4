// Properties of the calling thread: its name (as ps, top and perf show it) and its CPU priority.
// Linux only: the nice value is per thread there (setpriority on the thread id), which POSIX
// leaves unspecified.
#pragma once

#include <string_view>

#include "common/status.h"

namespace sediment {

// Names the calling thread; the kernel keeps the first 15 bytes.
void SetCurrentThreadName(std::string_view name);

// Sets the calling thread's nice value (-20..19, higher = less CPU when threads compete; 0 is
// the default). Raising it needs no privilege; lowering it below the current value may (then
// kPermissionDenied). Threads the caller starts afterwards inherit the value.
[[nodiscard]] Status SetCurrentThreadNice(int nice);

// The calling thread's nice value.
[[nodiscard]] Result<int> CurrentThreadNice();

}  // namespace sediment
