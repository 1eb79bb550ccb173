// Byte ranges of a text (e.g. `retain synth`'s answer_spans) as a mask over its tokens: the tokens
// a training run learns from (`prep --label-spans`) and the tokens `eval ppl --score-spans`
// scores. Token k is in a span when the text up to the span's start encodes to at most k tokens
// and the text up to its end to more than k, so a token that straddles a boundary belongs to the
// span it ends in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/tokenizer.h"

namespace retain {

// `spans`: a JSON array of [begin, end] byte ranges, in order, not overlapping, inside the text;
// anything else is an error naming `where` and `field`. `token_count`: the tokens the caller
// encoded the text to (a trailing EOS or a leading BOS the prefix encodings lack are not
// counted: their mask stays 0).
std::vector<uint8_t> answer_span_mask(const std::string& text, const Json& spans,
                                      size_t token_count, const Tokenizer& tokenizer,
                                      const std::string& where, const std::string& field);

}  // namespace retain
