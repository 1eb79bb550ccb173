// Byte ranges of a text (e.g. `retain synth`'s answer_spans) as a mask over its tokens: the tokens
// a training run learns from (`prep --label-spans`) and the tokens `eval ppl --score-spans`
// scores. Token k of the text's encoding is in a span when it starts inside it: a token that
// straddles the span's start belongs to what came before (a template's "?\nAnswer:" piece over a
// span ": 79"), one that straddles its end to the span ("▁79\n").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

// `spans`: a JSON array of [begin, end] byte ranges, in order, not overlapping, inside the text;
// anything else is an error naming `where` and `field`. `ids`: the caller's encoding of the
// whole text (a trailing EOS or a leading BOS the prefix encodings lack are never in a span).
std::vector<uint8_t> answer_span_mask(const std::string& text, const Json& spans,
                                      const std::vector<int64_t>& ids, const Tokenizer& tokenizer,
                                      const std::string& where, const std::string& field);

}  // namespace retain
