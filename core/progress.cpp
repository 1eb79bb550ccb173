#include "core/progress.h"

#include <unistd.h>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace retain {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(Clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!finished_) finish();
}

void ProgressBar::update(int64_t n) {
  done_ += n;
  draw(false);
}

void ProgressBar::skip(int64_t n) {
  done_ += n;
  skipped_ += n;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  // In a log the last decile line already said 100%; on a terminal redraw the final state.
  if (tty_ || total_ <= 0 || last_logged_decile_ < 10) draw(true);
  if (tty_) std::fputc('\n', stderr);
}

std::string ProgressBar::render() const {
  return render_at(std::chrono::duration<double>(Clock::now() - start_).count());
}

std::string ProgressBar::render_at(double elapsed) const {
  double rate = elapsed > 0 ? static_cast<double>(done_ - skipped_) / elapsed : 0.0;
  std::string line = label_ + " ";
  if (total_ > 0) {
    double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    constexpr int kWidth = 20;
    int filled = static_cast<int>(frac * kWidth);
    std::string bar;
    for (int i = 0; i < kWidth; ++i) bar += i < filled ? "#" : " ";
    double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : NAN;
    line += str_cat(static_cast<int>(frac * 100), "%|", bar, "| ", done_, "/", total_, " [",
                    format_duration(elapsed), "<", format_duration(eta), ", ");
  } else {
    line += str_cat(done_, " [", format_duration(elapsed), ", ");
  }
  char rate_text[32];
  std::snprintf(rate_text, sizeof(rate_text), "%.2f", rate);
  line += str_cat(rate_text, " ", unit_, "/s]");
  if (!postfix_.empty()) line += " " + postfix_;
  return line;
}

void ProgressBar::draw(bool force) {
  auto now = Clock::now();
  if (tty_) {
    if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
    std::fprintf(stderr, "\r%s\033[K", render().c_str());
    std::fflush(stderr);
  } else {
    int64_t decile = total_ > 0 ? done_ * 10 / total_ : -1;
    bool new_decile = decile > last_logged_decile_;
    if (!force && !new_decile && now - last_draw_ < std::chrono::seconds(30)) return;
    last_logged_decile_ = std::max(decile, last_logged_decile_);
    std::fprintf(stderr, "%s\n", render().c_str());
  }
  last_draw_ = now;
}

}  // namespace retain
