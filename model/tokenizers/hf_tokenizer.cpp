#include "model/tokenizers/hf_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

// The code point that ends text[0, end) (valid UTF-8 assumed).
uint32_t last_code_point(std::string_view text, size_t end) {
  size_t begin = end;
  do {
    --begin;
  } while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80);
  return next_code_point(text, begin);
}

// Length of the whitespace run that starts at `begin`.
size_t whitespace_after(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size()) {
    size_t at = i;
    if (!is_unicode_whitespace(next_code_point(text, i))) return at - begin;
  }
  return text.size() - begin;
}

// Start of the whitespace run that ends at `end`.
size_t whitespace_before(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0) {
    size_t prev = start;
    do {
      --prev;
    } while (prev > 0 && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80);
    size_t i = prev;
    if (!is_unicode_whitespace(next_code_point(text, i))) break;
    start = prev;
  }
  return start;
}

}  // namespace

HfTokenizer::HfTokenizer(const fs::path& model_dir) {
  where_ = (model_dir / "tokenizer.json").string();
  with_json_errors(where_, [&] { load(model_dir); });
}

void HfTokenizer::load(const fs::path& model_dir) {
  const fs::path path = model_dir / "tokenizer.json";
  Json j = read_json_file(path);
  RETAIN_CHECK(j.is_object(), where_, ": expected a JSON object");
  RETAIN_CHECK(j.contains("model"), where_, ": missing 'model'");
  model_ = std::make_unique<BpeModel>(j["model"], where_);
  normalizer_ = make_normalizer(j.value("normalizer", Json()), where_ + ": normalizer");
  pre_tokenizer_ = make_pre_tokenizer(j.value("pre_tokenizer", Json()), where_ + ": pre_tokenizer");
  decoder_ = make_decoder(j.value("decoder", Json()), where_ + ": decoder");

  vocab_size_ = model_->vocab_size();
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    RETAIN_CHECK(j["added_tokens"].is_array(), where_, ": 'added_tokens' must be an array");
    for (const auto& t : j["added_tokens"]) {
      std::string ctx = where_ + ": added_tokens";
      AddedToken a{json_get<int64_t>(t, "id", ctx),
                   json_get<std::string>(t, "content", ctx),
                   json_get_optional<bool>(t, "special", ctx).value_or(false),
                   json_get_optional<bool>(t, "lstrip", ctx).value_or(false),
                   json_get_optional<bool>(t, "rstrip", ctx).value_or(false),
                   json_get_optional<bool>(t, "single_word", ctx).value_or(false),
                   json_get_optional<bool>(t, "normalized", ctx).value_or(true)};
      RETAIN_CHECK(!a.content.empty(), ctx, ": token ", a.id, " has empty content");
      RETAIN_CHECK(a.id >= 0 && a.id < INT32_MAX, ctx, ": token '", a.content, "' has id ", a.id,
                   " (expected 0 .. 2^31 - 2)");
      added_by_id_[a.id] = added_.size();
      added_by_content_[a.content] = added_.size();
      vocab_size_ = std::max(vocab_size_, a.id + 1);
      added_.push_back(std::move(a));
    }
  }
  // Longest first, so a scan that takes the first match at a position takes the longest.
  std::stable_sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  added_by_id_.clear();
  added_by_content_.clear();
  for (size_t i = 0; i < added_.size(); ++i) {
    added_by_id_[added_[i].id] = i;
    added_by_content_[added_[i].content] = i;
    added_by_first_byte_[added_[i].normalized][static_cast<unsigned char>(added_[i].content[0])]
        .push_back(i);
  }

  // BOS: a TemplateProcessing post-processor whose single-sequence template starts with a
  // special token (Llama-3 style), unless tokenizer_config.json's add_bos_token says otherwise.
  std::optional<int64_t> template_bos;
  std::vector<Json> processors;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const Json& pp = j["post_processor"];
    if (pp.value("type", "") == "Sequence" && pp.contains("processors")) {
      for (const auto& p : pp["processors"]) processors.push_back(p);
    } else {
      processors.push_back(pp);
    }
  }
  for (const auto& p : processors) {
    if (p.value("type", "") != "TemplateProcessing" || !p.contains("single")) continue;
    const Json& single = p["single"];
    if (single.is_array() && !single.empty() && single[0].contains("SpecialToken")) {
      auto name = single[0]["SpecialToken"].value("id", "");
      template_bos = token_to_id(name);
      RETAIN_CHECK(template_bos.has_value(), where_, ": post_processor names special token '", name,
                   "', which is not in the vocabulary");
    }
  }
  bos_id_ = template_bos;
  add_bos_ = template_bos.has_value();

  fs::path config_path = model_dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    Json c = read_json_file(config_path);
    std::string ctx = config_path.string();
    if (c.contains("bos_token")) {
      if (auto bos = resolve_token(c["bos_token"], ctx + ": bos_token")) bos_id_ = bos;
    }
    if (c.contains("eos_token")) eos_id_ = resolve_token(c["eos_token"], ctx + ": eos_token");
    if (auto add = json_get_optional<bool>(c, "add_bos_token", ctx)) add_bos_ = *add;
    RETAIN_CHECK(!add_bos_ || bos_id_.has_value(), ctx,
                 ": add_bos_token is true but there is no bos_token");
  }
}

HfTokenizer::~HfTokenizer() = default;

std::optional<int64_t> HfTokenizer::resolve_token(const Json& value,
                                                  const std::string& where) const {
  if (value.is_null()) return std::nullopt;
  std::string content;
  if (value.is_string())
    content = value.get<std::string>();
  else if (value.is_object() && value.contains("content"))
    content = json_get<std::string>(value, "content", where);
  else
    fail(where, ": expected a token string or {\"content\": ...}, found ", value.dump());
  auto id = token_to_id(content);
  RETAIN_CHECK(id.has_value(), where, ": token '", content, "' is not in the vocabulary");
  return id;
}

std::optional<std::string> HfTokenizer::id_to_token(int64_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return added_[it->second].content;
  if (const std::string* t = model_->id_to_token(id)) return *t;
  return std::nullopt;
}

std::optional<int64_t> HfTokenizer::token_to_id(const std::string& token) const {
  auto it = added_by_content_.find(token);
  if (it != added_by_content_.end()) return added_[it->second].id;
  return model_->token_to_id(token);
}

std::string HfTokenizer::describe() const {
  return str_cat(where_, " (BPE, ", vocab_size_, " tokens, ", added_.size(), " added)");
}

void HfTokenizer::split_added(const Segment& segment, bool normalized,
                              std::vector<Segment>& out) const {
  const std::string& text = segment.text;
  size_t start_offset = 0, pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (size_t index : added_by_first_byte_[normalized][static_cast<unsigned char>(text[pos])]) {
      if (text.compare(pos, added_[index].content.size(), added_[index].content) == 0) {
        match = &added_[index];
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + match->content.size();
    pos = stop;
    if (match->single_word) {
      bool word_before = start > 0 && is_word_code_point(last_code_point(text, start));
      size_t after = stop;
      bool word_after = stop < text.size() && is_word_code_point(next_code_point(text, after));
      if (word_before || word_after) continue;
    }
    if (match->lstrip) start = std::max(whitespace_before(text, start), start_offset);
    if (match->rstrip) stop += whitespace_after(text, stop);
    if (start_offset < start)
      out.push_back({text.substr(start_offset, start - start_offset), -1,
                     segment.at_start && start_offset == 0});
    out.push_back({text.substr(start, stop - start), match->id, false});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size() || text.empty())
    out.push_back({text.substr(start_offset), -1, segment.at_start && start_offset == 0});
}

std::vector<int64_t> HfTokenizer::encode(const std::string& text) const {
  size_t bad = find_invalid_utf8(text);
  RETAIN_CHECK(bad == std::string::npos, "tokenizer: input is not valid UTF-8 (byte offset ", bad,
               ")");
  std::vector<Segment> raw, segments;
  split_added({text, -1, true}, /*normalized=*/false, raw);
  for (auto& s : raw) {
    if (s.added_id >= 0) {
      segments.push_back(std::move(s));
      continue;
    }
    if (normalizer_) normalizer_->normalize(s.text);
    split_added(s, /*normalized=*/true, segments);
  }

  std::vector<int64_t> ids;
  std::vector<PreToken> pieces;
  for (const auto& s : segments) {
    if (s.added_id >= 0) {
      ids.push_back(s.added_id);
      continue;
    }
    if (s.text.empty()) continue;
    pieces.clear();
    if (pre_tokenizer_)
      pre_tokenizer_->split({s.text, s.at_start}, pieces);
    else
      pieces.push_back({s.text, s.at_start});
    for (const auto& p : pieces) model_->tokenize(p.text, ids);
  }
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      if (!(skip_special && added_[it->second].special))
        tokens.push_back(added_[it->second].content);
      continue;
    }
    const std::string* t = model_->id_to_token(id);
    RETAIN_CHECK(t != nullptr, where_, ": cannot decode id ", id, " (vocabulary has ", vocab_size_,
                 " ids)");
    // A vocabulary entry that is also an added special token is skipped the same way.
    auto special = added_by_content_.find(*t);
    if (skip_special && special != added_by_content_.end() && added_[special->second].special)
      continue;
    tokens.push_back(*t);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder_->decode(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace retain
