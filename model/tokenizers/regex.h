// PCRE2 regular expressions in UTF mode with Unicode properties (\p{L}, \p{N}, Unicode \s), JIT
// compiled when available. Used for the pre-tokenizer split patterns of tokenizer.json.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace retain {

class Regex {
 public:
  // Throws retain::Error naming `where` and the PCRE2 message when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match as [begin, end) byte offsets, left to right; an empty match
  // advances by one character, as the `regex`/`onig` crates do.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Whether the pattern matches at offset 0 of `text` (anchored there).
  bool matches_at_start(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace retain
