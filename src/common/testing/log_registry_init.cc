// Linked into every unit test (sediment_add_test, through the object library
// sediment_test_log_init). Builds spdlog's default logger registry on the main thread before
// main() runs, before any test starts a thread that logs.
//
// Why: the registry is a function-local static inside the uninstrumented libspdlog.so. Its
// one-time initialisation is thread-safe, but ThreadSanitizer cannot see the guard, so when the
// first log call of a process comes from a test's worker thread TSan reports later log calls from
// other threads as racing with the constructor (seen in ReplicatorTest at -O0, where the
// suppression in scripts/tsan.supp could not match because TSan failed to restore the
// constructor's stack).
#include <spdlog/spdlog.h>

namespace {

[[maybe_unused]] const bool kRegistryBuilt = [] {
  spdlog::default_logger_raw();
  return true;
}();

}  // namespace
