// Word lists for RULER's tasks: the adjective-noun keys of the needle tasks ("gentle-harbor") and
// the word pool of common words extraction. RULER draws these from the `wonderwords` package; the
// lists here are retain's own (common English words, lowercase, one token-friendly word each),
// so keys and lists differ in their words, not in their shape.
#pragma once

#include <string>
#include <vector>

namespace retain {

const std::vector<std::string>& ruler_adjectives();
const std::vector<std::string>& ruler_nouns();
const std::vector<std::string>& ruler_verbs();

}  // namespace retain
