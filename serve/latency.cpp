#include "serve/latency.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace retain {

void LatencyWindow::add(double seconds) {
  samples_.push_back(seconds);
  if (samples_.size() > capacity_) samples_.pop_front();
  ++count_;
  sum_ += seconds;
}

LatencySummary LatencyWindow::summary() const {
  LatencySummary out;
  out.count = count_;
  out.sum = sum_;
  if (samples_.empty()) return out;
  std::vector<double> sorted(samples_.begin(), samples_.end());
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest sample with at least q of the samples at or below it.
  auto rank = [&](double q) {
    const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::max<size_t>(i, 1) - 1];
  };
  out.p50 = rank(0.5);
  out.p90 = rank(0.9);
  out.p99 = rank(0.99);
  return out;
}

}  // namespace retain
