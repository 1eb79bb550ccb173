#include "eval/sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"

namespace retain {

std::vector<SweepCell> sweep_cells(const std::vector<std::string>& policies,
                                   const std::vector<double>& budgets,
                                   const std::string& benchmark) {
  RETAIN_CHECK(!policies.empty(), benchmark, ": --policy needs at least one policy");
  std::vector<SweepCell> cells;
  for (const auto& spec : policies) {
    PolicySpec p = parse_policy(spec);
    RETAIN_CHECK(!p.needs_scorer() || !p.scorer().empty(), benchmark, ": --policy ", spec,
                 " needs its learned scorer: ", p.name(), ":scorer=FILE (retain export of a ",
                 p.name(), " run)");
    if (!p.budgeted()) {
      cells.push_back({spec, std::nullopt, p});
      continue;
    }
    RETAIN_CHECK(!budgets.empty(), benchmark, ": --policy ", spec, " needs --budget");
    for (double b : budgets) cells.push_back({spec, b, p});
  }
  return cells;
}

PredictionLog::PredictionLog(const fs::path& path, std::function<std::string(const Json&)> key,
                             bool writer)
    : key_(std::move(key)) {
  if (fs::exists(path)) {
    std::string text = read_text_file(path);
    // Lines are written whole (one write each), so only a crash of the machine can leave a last
    // line without its newline: drop it, and redo that prediction.
    const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (!writer) text.resize(complete);
    if (complete < text.size()) {
      log_warn(path.string(), ": dropping an incomplete last line (", text.size() - complete,
               " bytes) left by an interrupted write");
      fs::resize_file(path, complete);
      text.resize(complete);
    }
    std::istringstream in(text);
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      Json j = parse_json(line, str_cat(path.string(), ":", n));
      done_[key_(j)] = j;
    }
    if (!done_.empty() && writer)
      log_info("resuming: ", done_.size(), " predictions already in ", path.string());
  }
  if (!writer) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  RETAIN_CHECK(fd_ >= 0, path.string(), ": cannot open for appending");
  path_ = path.string();
}

PredictionLog::~PredictionLog() {
  if (fd_ >= 0) ::close(fd_);
}

const Json* PredictionLog::find(const std::string& key) const {
  auto it = done_.find(key);
  return it == done_.end() ? nullptr : &it->second;
}

void PredictionLog::append(const Json& record) {
  // One write(2) per line: a process killed at any moment leaves whole lines only (a regular
  // file's write is not cut short by a signal), so a resumed run never meets a torn record.
  if (fd_ < 0) return;  // a reader
  const std::string line = record.dump() + "\n";
  // A write cut short (a full disk, a file-size limit) is taken back to the last whole line, so
  // the file holds whole predictions only and a resumed run redoes this one.
  const off_t whole = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = std::strerror(n < 0 ? errno : ENOSPC);
      if (whole >= 0 && ::ftruncate(fd_, whole) != 0)
        fail(path_, ": write failed (", reason, ") and its last ", done,
             " bytes could not be taken back (", std::strerror(errno),
             "); a resumed run drops that incomplete line");
      fail(path_, ": write failed (", reason, "); the predictions before it are kept whole");
    }
    done += static_cast<size_t>(n);
  }
}

fs::path start_run_dir(const std::string& out, const Json& config) {
  fs::path dir(out);
  fs::create_directories(dir);
  const std::string text = config.dump(2) + "\n";
  log_info("resolved config (", (dir / "config.yaml").string(), "):\n", text);
  write_text_file_atomic(dir / "config.yaml", text);
  return dir;
}

int64_t question_start(const Tokenizer& tokenizer, const std::string& text,
                       const std::string& question, bool with_bos) {
  size_t at = text.rfind(question);
  RETAIN_CHECK(at != std::string::npos, "the question is not in the prompt (internal)");
  const std::string before = text.substr(0, at);
  int64_t count = before.empty() ? 0 : static_cast<int64_t>(tokenizer.encode(before).size());
  if (with_bos) count += static_cast<int64_t>(tokenizer.prefix_ids().size());
  return count;
}

std::vector<int64_t> token_indices_at(const Tokenizer& tokenizer, const std::string& text,
                                      const std::vector<size_t>& bytes, bool with_bos) {
  const std::vector<int64_t> ids =
      with_bos ? tokenizer.encode_prompt(text) : tokenizer.encode(text);
  const auto first = with_bos ? static_cast<int64_t>(tokenizer.prefix_ids().size()) : int64_t{0};
  const auto n = static_cast<int64_t>(ids.size());
  // The bytes that ids[first, k) decode to: the text's first bytes, since decoding a prefix of
  // the encoding gives a prefix of the text back.
  const auto decoded = [&](int64_t k) {
    return tokenizer.decode(std::vector<int64_t>(ids.begin() + first, ids.begin() + k)).size();
  };
  std::vector<int64_t> out;
  for (size_t at : bytes) {
    RETAIN_CHECK(at < text.size(), "token_indices_at: byte ", at, " is past the text's ",
                 text.size(), " (internal)");
    // The first k whose tokens [first, k] reach past byte `at`: the token holding it.
    int64_t lo = first, hi = n - 1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (decoded(mid + 1) > at)
        hi = mid;
      else
        lo = mid + 1;
    }
    out.push_back(lo);
  }
  return out;
}

std::vector<int64_t> stop_ids(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int64_t> ids = config.eos_token_ids;
  if (tokenizer != nullptr && tokenizer->eos_id() &&
      std::find(ids.begin(), ids.end(), *tokenizer->eos_id()) == ids.end())
    ids.push_back(*tokenizer->eos_id());
  return ids;
}

}  // namespace retain
