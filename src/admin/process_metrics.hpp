// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
struct MetricFamily;
}

namespace nlockd::admin {

// The process_* metrics that Prometheus client libraries export (the names and meanings of the
// Go client's process collector), read from procfs at each scrape: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds and process_start_time_seconds. The daemon serves them beside the service's
// metrics; the library does not, since its host owns the process and may export them itself.
// Keeps no state: any thread may call it.
class ProcessMetrics {
 public:
  // `proc` is procfs' root; tests give a directory laid out like it (stat, self/stat,
  // self/limits, self/fd/).
  explicit ProcessMetrics(std::string proc = "/proc");

  // The families whose files could be read (a metric whose file cannot be read is left out,
  // not reported as 0).
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the Prometheus text exposition format (version 0.0.4).
  std::string Serialize() const;

 private:
  std::string proc_;
};

// What /proc/PID/stat says, in the units of the metrics.
struct ProcessStat {
  double cpu_seconds = 0;           // utime + stime
  double virtual_memory_bytes = 0;  // vsize
  double resident_memory_bytes = 0;
  double start_ticks = 0;  // starttime: clock ticks after boot
};
// Parses a /proc/PID/stat line (the command name may hold spaces and parentheses); nullopt when
// it has too few fields.
std::optional<ProcessStat> ParseProcessStat(std::string_view text, double ticks_per_second,
                                            double page_size);
// The "btime" of /proc/stat: boot time in seconds since the epoch.
std::optional<double> ParseBootTime(std::string_view text);
// The soft limit of "Max open files" in /proc/PID/limits; nullopt when unlimited or absent.
std::optional<double> ParseMaxOpenFiles(std::string_view text);

}  // namespace nlockd::admin
