#include "eval/benchmarks/videomme_subtitles.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"

namespace retain {

namespace {

// Python's text mode: "\r\n" and a lone "\r" read as "\n".
std::string universal_newlines(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, from)) {
    out.push_back(s.substr(from, at - from));
    from = at + sep.size();
  }
  out.push_back(s.substr(from));
  return out;
}

bool only_space(const std::string& s) {
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  return true;
}

// Python's int(str) for the digits of a time: surrounding whitespace, a sign, and single
// underscores between digits allowed.
int64_t python_int(const std::string& text, const std::string& where) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  bool negative = false;
  if (b < e && (text[b] == '+' || text[b] == '-')) negative = text[b++] == '-';
  int64_t value = 0;
  bool digit_before = false;
  RETAIN_CHECK(b < e, where, ": '", text, "' is not an integer");
  for (size_t i = b; i < e; ++i) {
    const char c = text[i];
    if (c == '_' && digit_before && i + 1 < e &&
        std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      digit_before = false;
      continue;
    }
    RETAIN_CHECK(std::isdigit(static_cast<unsigned char>(c)) && value < (int64_t{1} << 50), where,
                 ": '", text, "' is not an integer");
    value = value * 10 + (c - '0');
    digit_before = true;
  }
  return negative ? -value : value;
}

// parse_subtitle_time: "H:M:S,ms".
double parse_time(const std::string& text, const std::string& where) {
  const auto hms = split(text, ":");
  RETAIN_CHECK(hms.size() == 3, where, ": the time '", text, "' is not H:M:S,ms");
  const auto s_ms = split(hms[2], ",");
  RETAIN_CHECK(s_ms.size() == 2, where, ": the time '", text, "' is not H:M:S,ms");
  const int64_t whole = python_int(hms[0], where) * 3600 + python_int(hms[1], where) * 60 +
                        python_int(s_ms[0], where);
  return static_cast<double>(whole) + static_cast<double>(python_int(s_ms[1], where)) / 1000.0;
}

// The first re.findall(r'<font color="white" size=".72c">(.*?)</font>', text) match: the
// pattern's "." matches any character but a newline, and so does (.*?).
bool first_font_text(const std::string& text, std::string& out) {
  static const std::string head = "<font color=\"white\" size=\"";
  static const std::string mid = "72c\">";
  static const std::string tail = "</font>";
  for (size_t i = 0; i + head.size() + 1 + mid.size() <= text.size(); ++i) {
    if (text.compare(i, head.size(), head) != 0) continue;
    const size_t wild = i + head.size();
    if (text[wild] == '\n' || text.compare(wild + 1, mid.size(), mid) != 0) continue;
    const size_t body = wild + 1 + mid.size();
    const size_t end = text.find(tail, body);
    const size_t newline = text.find('\n', body);
    if (end == std::string::npos || (newline != std::string::npos && newline < end)) continue;
    out = text.substr(body, end - body);
    return true;
  }
  return false;
}

}  // namespace

std::vector<SrtBlock> parse_srt(const std::string& bytes, const std::string& where) {
  std::vector<SrtBlock> blocks;
  std::map<std::pair<double, double>, size_t> position;
  size_t number = 0;
  for (const auto& section : split(universal_newlines(bytes), "\n\n")) {
    ++number;
    if (only_space(section)) continue;
    const auto lines = split(section, "\n");
    if (lines.size() < 3) continue;
    const std::string block = str_cat(where, " block ", number);
    const auto range = split(lines[1], " --> ");
    RETAIN_CHECK(range.size() >= 2, block, ": '", lines[1], "' is not 'start --> end'");
    SrtBlock b;
    b.start = parse_time(range[0], block);
    b.end = parse_time(range[1], block);
    for (size_t k = 2; k < lines.size(); ++k) b.text += (k > 2 ? " " : "") + lines[k];
    auto [it, inserted] = position.emplace(std::pair{b.start, b.end}, blocks.size());
    if (inserted)
      blocks.push_back(std::move(b));
    else
      blocks[it->second].text = std::move(b.text);
  }
  return blocks;
}

std::vector<int64_t> python_int_set_order(const std::vector<int64_t>& items) {
  // CPython's Objects/setobject.c for keys whose hash is themselves (0 <= key < 2^61 - 1).
  constexpr size_t kLinearProbes = 9, kPerturbShift = 5, kMinSize = 8;
  std::vector<int64_t> table(kMinSize, -1);  // -1: an empty slot
  size_t mask = kMinSize - 1, fill = 0;
  auto insert_clean = [](std::vector<int64_t>& t, size_t m, int64_t key) {
    auto perturb = static_cast<size_t>(key);
    size_t i = static_cast<size_t>(key) & m;
    for (;;) {
      if (t[i] < 0) break;
      if (i + kLinearProbes <= m) {
        bool found = false;
        for (size_t j = 1; j <= kLinearProbes; ++j)
          if (t[i + j] < 0) {
            i += j;
            found = true;
            break;
          }
        if (found) break;
      }
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & m;
    }
    t[i] = key;
  };
  for (int64_t key : items) {
    RETAIN_CHECK(key >= 0, "python_int_set_order: negative key ", key);
    auto perturb = static_cast<size_t>(key);
    size_t i = static_cast<size_t>(key) & mask;
    bool present = false;
    size_t slot = 0;
    bool have_slot = false;
    while (!have_slot && !present) {
      const size_t probes = i + kLinearProbes <= mask ? kLinearProbes : 0;
      for (size_t j = 0; j <= probes; ++j) {
        if (table[i + j] < 0) {
          slot = i + j;
          have_slot = true;
          break;
        }
        if (table[i + j] == key) {
          present = true;
          break;
        }
      }
      if (have_slot || present) break;
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & mask;
    }
    if (present) continue;
    table[slot] = key;
    ++fill;
    if (fill * 5 < mask * 3) continue;
    // set_table_resize(used > 50000 ? used * 2 : used * 4): no deletions, so used == fill.
    const size_t min_used = fill > 50000 ? fill * 2 : fill * 4;
    size_t size = kMinSize;
    while (size <= min_used) size <<= 1;
    std::vector<int64_t> grown(size, -1);
    for (int64_t k : table)
      if (k >= 0) insert_clean(grown, size - 1, k);
    table = std::move(grown);
    mask = size - 1;
  }
  std::vector<int64_t> out;
  for (int64_t k : table)
    if (k >= 0) out.push_back(k);
  return out;
}

std::string videomme_subtitle_text(const std::vector<SrtBlock>& blocks, double fps,
                                   int64_t total_frames, int64_t frame_num) {
  if (frame_num == -1) frame_num = total_frames;
  // convert_time_to_frame: int(t * fps), saturated where Python's int would outgrow int64 (no
  // sampled frame compares differently against such a bound).
  auto frame_of = [fps](double seconds) {
    const double f = std::trunc(seconds * fps);
    if (f >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (f <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(f);
  };
  std::vector<std::pair<int64_t, int64_t>> frames;
  for (const auto& b : blocks) frames.push_back({frame_of(b.start), frame_of(b.end)});
  // np.linspace(0, total - 1, frame_num, dtype=int): i * step, the last exactly the end, each
  // truncated toward zero.
  std::vector<int64_t> sampled;
  const double stop = static_cast<double>(total_frames - 1);
  const double step = frame_num > 1 ? stop / static_cast<double>(frame_num - 1) : 0.0;
  for (int64_t i = 0; i < frame_num; ++i)
    sampled.push_back(i == frame_num - 1 && frame_num > 1
                          ? static_cast<int64_t>(stop)
                          : static_cast<int64_t>(static_cast<double>(i) * step));
  std::vector<int64_t> hits;
  for (int64_t f : sampled)
    for (size_t k = 0; k < frames.size(); ++k)
      if (f < frames[k].second && f >= frames[k].first) hits.push_back(static_cast<int64_t>(k));
  std::string out;
  bool first = true;
  for (int64_t k : python_int_set_order(hits)) {
    std::string text;
    if (!first_font_text(blocks[static_cast<size_t>(k)].text, text)) continue;
    out += (first ? "" : "\n") + text;
    first = false;
  }
  return out;
}

}  // namespace retain
