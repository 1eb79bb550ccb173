#include "data/answer_spans.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

std::vector<uint8_t> answer_span_mask(const std::string& text, const Json& spans,
                                      size_t token_count, const Tokenizer& tokenizer,
                                      const std::string& where, const std::string& field) {
  RETAIN_CHECK(spans.is_array(), where, ": field '", field,
               "' must be an array of [begin, end] byte ranges");
  std::vector<uint8_t> mask(token_count, 0);
  const auto size = static_cast<int64_t>(text.size());
  int64_t last_end = 0;
  auto tokens_before = [&](int64_t bytes) {
    return std::min(token_count,
                    tokenizer.encode_prompt(text.substr(0, static_cast<size_t>(bytes))).size());
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
