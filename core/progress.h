// A progress bar on stderr with count, rate and ETA:
//   prefill  45%|█████▍      | 45/100 [00:12<00:15, 3.72 tok/s] loss=2.31
// On a terminal it redraws in place (at most 10 times a second); otherwise (logs, CI) it prints a
// line every 10% of the work or every 30 s, whichever comes first.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace retain {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit = "it");
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t n = 1);
  // Counts n units done before this bar started (a resumed run): they fill the bar but not the
  // rate, so the rate and the ETA are this run's own.
  void skip(int64_t n);
  void set_postfix(std::string postfix) { postfix_ = std::move(postfix); }
  void finish();

  // The rendered line for the current state, and for a given elapsed time (tests).
  std::string render() const;
  std::string render_at(double elapsed_s) const;

 private:
  using Clock = std::chrono::steady_clock;
  void draw(bool force);

  std::string label_;
  std::string unit_;
  std::string postfix_;
  int64_t total_;
  int64_t done_ = 0;
  int64_t skipped_ = 0;  // of done_, the units of an earlier run
  bool tty_;
  bool finished_ = false;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  int64_t last_logged_decile_ = -1;
};

// "01:02:03" or "02:03" for a duration in seconds.
std::string format_duration(double seconds);

}  // namespace retain
