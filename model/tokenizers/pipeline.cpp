#include "model/tokenizers/pipeline.h"

#include <cstdio>
#include <optional>

#include "core/error.h"
#include "core/utf8.h"
#include "model/tokenizers/byte_level.h"
#include "model/tokenizers/regex.h"
#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

std::string type_of(const Json& json, const std::string& where) {
  RETAIN_CHECK(json.is_object(), where, ": expected an object, found ", json.type_name());
  return json_get<std::string>(json, "type", where);
}

// A Split/Replace "pattern": {"String": "..."} (literal) or {"Regex": "..."}.
class Pattern {
 public:
  Pattern(const Json& json, const std::string& where) {
    RETAIN_CHECK(json.is_object() && json.size() == 1, where,
                 ": pattern must be {\"String\": ...} or {\"Regex\": ...}, found ", json.dump());
    if (json.contains("String")) {
      literal_ = json_get<std::string>(json, "String", where);
    } else {
      regex_ = std::make_unique<Regex>(json_get<std::string>(json, "Regex", where), where);
    }
  }
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const {
    if (regex_) return regex_->find_all(text);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal_->empty()) return out;
    for (size_t at = text.find(*literal_); at != std::string_view::npos;
         at = text.find(*literal_, at + literal_->size()))
      out.emplace_back(at, at + literal_->size());
    return out;
  }

 private:
  std::optional<std::string> literal_;
  std::unique_ptr<Regex> regex_;
};

std::string replace_all(std::string_view text, const Pattern& pattern, const std::string& content) {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : pattern.find_all(text)) {
    out.append(text.substr(last, b - last));
    out += content;
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

// ---- normalizers ----

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_unicode(text, form_); }

 private:
  NormalForm form_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const Json& json, const std::string& where)
      : pattern_(json.at("pattern"), where),
        content_(json_get<std::string>(json, "content", where)) {}
  void normalize(std::string& text) const override { text = replace_all(text, pattern_, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      for (size_t i = 0; i < text.size() && is_unicode_whitespace(next_code_point(text, i));)
        begin = i;
    }
    if (right_) {
      // Walk forward remembering where the trailing whitespace run starts.
      end = text.size();
      for (size_t i = begin; i < text.size();) {
        size_t at = i;
        if (!is_unicode_whitespace(next_code_point(text, i)))
          end = text.size();
        else if (end == text.size())
          end = at;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// ---- pre-tokenizers ----

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(where, ": split behavior '", name,
       "' is not supported (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
       "Contiguous)");
}

// Splits `piece` around `matches` the way tokenizers' NormalizedString::split does.
void split_by_matches(const PreToken& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      bool invert, SplitBehavior behavior, std::vector<PreToken>& out) {
  struct Span {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Span> spans;  // the whole text, alternating gaps and matches
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) spans.push_back({last, b, invert});
    spans.push_back({b, e, !invert});
    last = e;
  }
  if (last < piece.text.size()) spans.push_back({last, piece.text.size(), invert});

  std::vector<Span> parts;  // is_match now means "remove"
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto s : spans) parts.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      parts = spans;
      break;
    case SplitBehavior::kContiguous:
      for (auto s : spans) {
        if (s.is_match == previous_match && !parts.empty())
          parts.back().end = s.end;
        else
          parts.push_back({s.begin, s.end, false});
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto s : spans) {
        if (s.is_match && !previous_match && !parts.empty())
          parts.back().end = s.end;
        else
          parts.push_back({s.begin, s.end, false});
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !parts.empty())
          parts.back().begin = it->begin;
        else
          parts.push_back({it->begin, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const auto& p : parts) {
    if (p.is_match || p.end == p.begin) continue;
    out.push_back({piece.text.substr(p.begin, p.end - p.begin), piece.at_start && p.begin == 0});
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const Json& json, const std::string& where)
      : pattern_(json.at("pattern"), where),
        behavior_(parse_behavior(json_get<std::string>(json, "behavior", where), where)),
        invert_(json_get_optional<bool>(json, "invert", where).value_or(false)) {}
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    split_by_matches(piece, pattern_.find_all(piece.text), invert_, behavior_, out);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Digits: each digit alone (individual_digits) or each run of digits, isolated. tokenizers tests
// Rust's char::is_numeric, i.e. \p{N}.
class DigitsPreTokenizer : public PreTokenizer {
 public:
  DigitsPreTokenizer(const Json& json, const std::string& where)
      : digits_(json_get_optional<bool>(json, "individual_digits", where).value_or(false)
                    ? "\\p{N}"
                    : "\\p{N}+",
                where) {}
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    split_by_matches(piece, digits_.find_all(piece.text), false, SplitBehavior::kIsolated, out);
  }

 private:
  Regex digits_;
};

// GPT-2's split, used by ByteLevel when use_regex is true.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(const Json& json, const std::string& where)
      : add_prefix_space_(json_get_optional<bool>(json, "add_prefix_space", where).value_or(true)) {
    if (json_get_optional<bool>(json, "use_regex", where).value_or(true))
      regex_ = std::make_unique<Regex>(kGpt2Pattern, where);
  }
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    PreToken p = piece;
    if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
    std::vector<PreToken> parts;
    if (regex_)
      split_by_matches(p, regex_->find_all(p.text), false, SplitBehavior::kIsolated, parts);
    else
      parts.push_back(p);
    for (auto& part : parts) out.push_back({bytes_to_byte_level(part.text), part.at_start});
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

PrependScheme parse_prepend_scheme(const Json& json, const std::string& where) {
  if (auto scheme = json_get_optional<std::string>(json, "prepend_scheme", where)) {
    if (*scheme == "always") return PrependScheme::kAlways;
    if (*scheme == "first") return PrependScheme::kFirst;
    if (*scheme == "never") return PrependScheme::kNever;
    fail(where, ": prepend_scheme '", *scheme,
         "' is not supported (expected always, first or never)");
  }
  // Older files: add_prefix_space true means "always".
  return json_get_optional<bool>(json, "add_prefix_space", where).value_or(true)
             ? PrependScheme::kAlways
             : PrependScheme::kNever;
}

std::string single_char(const Json& json, const char* key, const std::string& where) {
  auto s = json_get<std::string>(json, key, where);
  size_t i = 0;
  if (!s.empty()) next_code_point(s, i);
  RETAIN_CHECK(!s.empty() && i == s.size(), where, ": '", key, "' must be one character, found '",
               s, "'");
  return s;
}

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(const Json& json, const std::string& where)
      : replacement_(single_char(json, "replacement", where)),
        scheme_(parse_prepend_scheme(json, where)),
        split_(json_get_optional<bool>(json, "split", where).value_or(true)) {}
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    PreToken p{replace_spaces(piece.text), piece.at_start};
    bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts &&
        (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start)))
      p.text.insert(0, replacement_);
    if (!split_) {
      if (!p.text.empty()) out.push_back(p);
      return;
    }
    std::vector<std::pair<size_t, size_t>> matches;
    for (size_t at = p.text.find(replacement_); at != std::string::npos;
         at = p.text.find(replacement_, at + replacement_.size()))
      matches.emplace_back(at, at + replacement_.size());
    split_by_matches(p, matches, false, SplitBehavior::kMergedWithNext, out);
  }

 private:
  std::string replace_spaces(const std::string& text) const {
    std::string out;
    for (char c : text) {
      if (c == ' ')
        out += replacement_;
      else
        out.push_back(c);
    }
    return out;
  }
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    std::vector<PreToken> current{piece}, next;
    for (const auto& p : parts_) {
      next.clear();
      for (const auto& c : current) p->split(c, next);
      current.swap(next);
    }
    out.insert(out.end(), current.begin(), current.end());
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// ---- decoders ----

class ByteLevelDecoder : public TokenDecoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      // A token made only of byte-level characters becomes its bytes; any other token (an added
      // token with a space, say) is taken as it is, as tokenizers does.
      std::string converted;
      bool all_mapped = true;
      for (size_t i = 0; i < t.size();) {
        size_t len = utf8_length(static_cast<unsigned char>(t[i]));
        auto b = char_to_byte(std::string_view(t).substr(i, len));
        if (!b) {
          all_mapped = false;
          break;
        }
        converted.push_back(static_cast<char>(*b));
        i += len;
      }
      bytes += all_mapped ? converted : t;
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ByteFallbackDecoder : public TokenDecoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (find_invalid_utf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (auto& t : tokens) {
      unsigned value = 0;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
          std::sscanf(t.c_str() + 3, "%2X", &value) == 1) {
        pending.push_back(static_cast<char>(value));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public TokenDecoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder : public TokenDecoder {
 public:
  StripDecoder(const Json& json, const std::string& where)
      : content_(single_char(json, "content", where)),
        start_(json_get<size_t>(json, "start", where)),
        stop_(json_get<size_t>(json, "stop", where)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::string> chars;
      for (size_t i = 0; i < t.size();) {
        size_t len = utf8_length(static_cast<unsigned char>(t[i]));
        chars.push_back(t.substr(i, len));
        i += len;
      }
      size_t begin = 0;
      while (begin < std::min(start_, chars.size()) && chars[begin] == content_) ++begin;
      size_t end = chars.size();
      for (size_t k = 0; k < stop_ && end > begin && chars[end - 1] == content_; ++k) --end;
      std::string out;
      for (size_t i = begin; i < end; ++i) out += chars[i];
      t = out;
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public TokenDecoder {
 public:
  ReplaceDecoder(const Json& json, const std::string& where)
      : pattern_(json.at("pattern"), where),
        content_(json_get<std::string>(json, "content", where)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = replace_all(t, pattern_, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class MetaspaceDecoder : public TokenDecoder {
 public:
  MetaspaceDecoder(const Json& json, const std::string& where)
      : replacement_(single_char(json, "replacement", where)),
        scheme_(parse_prepend_scheme(json, where)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      // Every replacement character of the first token is dropped unless the scheme is never,
      // exactly as tokenizers does.
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && scheme_ != PrependScheme::kNever)) out.push_back(' ');
          k += replacement_.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      tokens[i] = out;
    }
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
};

class SequenceDecoder : public TokenDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<TokenDecoder>> parts)
      : parts_(std::move(parts)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode(tokens);
  }

 private:
  std::vector<std::unique_ptr<TokenDecoder>> parts_;
};

template <typename T, typename Make>
std::vector<std::unique_ptr<T>> make_list(const Json& json, const char* key,
                                          const std::string& where, Make make) {
  const Json& list = json.at(key);
  RETAIN_CHECK(list.is_array(), where, ": '", key, "' must be an array");
  std::vector<std::unique_ptr<T>> out;
  for (size_t i = 0; i < list.size(); ++i) {
    auto item = make(list[i], str_cat(where, ".", key, "[", i, "]"));
    if (item) out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& json, const std::string& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKD);
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(json_get<std::string>(json, "prepend", where));
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(json, where);
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(
        json_get_optional<bool>(json, "strip_left", where).value_or(true),
        json_get_optional<bool>(json, "strip_right", where).value_or(true));
  if (type == "Sequence")
    return std::make_unique<SequenceNormalizer>(
        make_list<Normalizer>(json, "normalizers", where, make_normalizer));
  fail(where, ": normalizer type '", type,
       "' is not supported (expected NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip or Sequence)");
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& json, const std::string& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "Split") return std::make_unique<SplitPreTokenizer>(json, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPreTokenizer>(json, where);
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(json, where);
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(json, where);
  if (type == "Sequence")
    return std::make_unique<SequencePreTokenizer>(
        make_list<PreTokenizer>(json, "pretokenizers", where, make_pre_tokenizer));
  fail(where, ": pre_tokenizer type '", type,
       "' is not supported (expected Split, ByteLevel, Metaspace or Sequence)");
}

std::unique_ptr<TokenDecoder> make_decoder(const Json& json, const std::string& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(json, where);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(json, where);
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(json, where);
  if (type == "Sequence")
    return std::make_unique<SequenceDecoder>(
        make_list<TokenDecoder>(json, "decoders", where, make_decoder));
  fail(where, ": decoder type '", type,
       "' is not supported (expected ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace or "
       "Sequence)");
}

}  // namespace retain
