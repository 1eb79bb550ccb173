// Latency percentiles over a sliding window of the latest samples (the serving engine's
// time-to-first-token and inter-token latency for /metrics).
#pragma once

#include <cstdint>
#include <deque>

namespace retain {

struct LatencySummary {
  int64_t count = 0;                 // every sample ever added
  double sum = 0;                    // seconds, every sample ever added
  double p50 = 0, p90 = 0, p99 = 0;  // seconds, over the window
};

class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 2048) : capacity_(capacity) {}
  void add(double seconds);
  // Nearest-rank percentiles of the window (0 when empty).
  LatencySummary summary() const;

 private:
  size_t capacity_;
  std::deque<double> samples_;
  int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace retain
