#include "data/answer_spans.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

std::vector<uint8_t> answer_span_mask(const std::string& text, const Json& spans,
                                      const std::vector<int64_t>& ids, const Tokenizer& tokenizer,
                                      const std::string& where, const std::string& field) {
  RETAIN_CHECK(spans.is_array(), where, ": field '", field,
               "' must be an array of [begin, end] byte ranges");
  std::vector<uint8_t> mask(ids.size(), 0);
  const auto size = static_cast<int64_t>(text.size());
  int64_t last_end = 0;
  // The tokens of `ids` that start before byte `bytes`: those the encoding of the text up to there
  // shares with `ids` (its common prefix), plus the one that crosses the boundary, if any (the
  // cut text then encodes to more than that prefix). Counting the cut text's tokens instead fails
  // where a piece crosses the boundary ("?\nAnswer:" over a span that starts at its ':'): cut, it
  // encodes to several pieces, which once left every such span empty.
  auto tokens_before = [&](int64_t bytes) {
    const auto prefix = tokenizer.encode_prompt(text.substr(0, static_cast<size_t>(bytes)));
    const size_t n = std::min(prefix.size(), ids.size());
    const auto shared = static_cast<size_t>(
        std::mismatch(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(n), ids.begin())
            .first -
        prefix.begin());
    return std::min(ids.size(), shared + (prefix.size() > shared ? 1 : 0));
  };
  for (const auto& span : spans) {
    RETAIN_CHECK(span.is_array() && span.size() == 2 && span[0].is_number_integer() &&
                     span[1].is_number_integer(),
                 where, ": field '", field, "': expected [begin, end], found ", span.dump());
    const int64_t begin = span[0].get<int64_t>(), end = span[1].get<int64_t>();
    RETAIN_CHECK(0 <= begin && begin < end && end <= size && begin >= last_end, where, ": field '",
                 field, "': range [", begin, ", ", end, "] is empty, out of the text (", size,
                 " bytes) or overlaps the previous one");
    last_end = end;
    for (size_t k = tokens_before(begin); k < tokens_before(end); ++k) mask[k] = 1;
  }
  return mask;
}

}  // namespace retain
