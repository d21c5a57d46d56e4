#include "metrics/process.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace sediment::metrics {
namespace {

struct ProcStat {
  double cpu_seconds = 0;
  double start_seconds_after_boot = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
};

// /proc/self/stat: the fields after the command name (which may hold spaces and parentheses, so
// the text after the last ')').
std::optional<ProcStat> ReadProcStat() {
  std::ifstream in("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(all.substr(close + 1));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string s; rest >> s;) f.push_back(s);
  // Fields (1-based, proc(5)): 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss.
  if (f.size() < 22) return std::nullopt;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ProcStat s;
  try {
    s.cpu_seconds = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / ticks;
    s.start_seconds_after_boot = std::stod(f[22 - 3]) / ticks;
    s.virtual_bytes = std::stod(f[23 - 3]);
    s.resident_bytes = std::stod(f[24 - 3]) * page;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return s;
}

// Boot time in seconds since the epoch ("btime" of /proc/stat).
std::optional<double> BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) {
      try {
        return std::stod(line.substr(6));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

std::optional<double> OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return std::nullopt;
  double n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

void Collect(Writer& w) {
  const std::optional<ProcStat> st = ReadProcStat();
  if (st) {
    w.Begin("process_cpu_seconds", Type::kCounter, "User and system CPU time spent in seconds.");
    w.Sample({}, st->cpu_seconds);
    w.Begin("process_resident_memory_bytes", Type::kGauge, "Resident memory size in bytes.");
    w.Sample({}, st->resident_bytes);
    w.Begin("process_virtual_memory_bytes", Type::kGauge, "Virtual memory size in bytes.");
    w.Sample({}, st->virtual_bytes);
    if (const std::optional<double> boot = BootTime()) {
      w.Begin("process_start_time_seconds", Type::kGauge,
              "Start time of the process since unix epoch in seconds.");
      w.Sample({}, *boot + st->start_seconds_after_boot);
    }
  }
  if (const std::optional<double> fds = OpenFds()) {
    w.Begin("process_open_fds", Type::kGauge, "Number of open file descriptors.");
    w.Sample({}, *fds);
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    w.Begin("process_max_fds", Type::kGauge, "Maximum number of open file descriptors.");
    w.Sample({}, static_cast<double>(lim.rlim_cur));
  }
}

}  // namespace

void AddProcessCollector(Registry& registry) { registry.AddCollector(Collect); }

}  // namespace sediment::metrics
