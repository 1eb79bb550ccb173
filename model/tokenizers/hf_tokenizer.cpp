#include "model/tokenizers/hf_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/utf8.h"
#include "model/tokenizers/transformers_classes.h"
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
  const std::string text = read_text_file(path);
  Json j = parse_json(text, where_);
  RETAIN_CHECK(j.is_object(), where_, ": expected a JSON object");
  RETAIN_CHECK(j.contains("model") && j["model"].is_object(), where_, ": missing 'model'");

  // What transformers 5 makes of the directory (transformers_classes.h).
  const fs::path config_path = model_dir / "tokenizer_config.json";
  const fs::path model_config_path = model_dir / "config.json";
  Json config = Json::object(), model_config = Json::object();
  if (fs::exists(config_path)) {
    config = read_json_file(config_path);
    RETAIN_CHECK(config.is_object(), config_path.string(), ": expected a JSON object");
  }
  if (fs::exists(model_config_path)) model_config = read_json_file(model_config_path);
  const auto choice =
      choose_tokenizer_class(config, model_config, text.find("\"ByteLevel\"") != std::string::npos);
  std::string pipeline;
  if (choice.name == "TokenizersBackend") {
    pipeline = "tokenizer.json as written, as transformers 5 uses it (TokenizersBackend; " +
               choice.reason + ")";
    with_json_errors(config_path.string(), [&] { add_config_added_tokens(config, j); });
  } else if (auto rebuilt = with_json_errors(config_path.string(), [&] {
               return rebuild_tokenizer_json(choice.name, config, j);
             })) {
    pipeline = "transformers 5's " + choice.name + " rebuild (" + choice.reason +
               "): tokenizer.json's vocabulary, merges and post-processor with " + *rebuilt;
  } else {
    pipeline = "tokenizer.json as written; transformers 5 would rebuild it as " + choice.name +
               " (" + choice.reason +
               "), which retain does not reproduce: ids may differ from "
               "AutoTokenizer's";
    log_warn(where_, ": ", pipeline);
  }
  with_json_errors(config_path.string(), [&] { add_named_special_tokens(choice.name, config, j); });

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

  // BOS/EOS: tokenizer.json's post-processor decides; transformers 5 drops tokenizer_config.json's
  // add_bos_token/add_eos_token whenever tokenizer.json exists.
  if (j.contains("post_processor") && j["post_processor"].is_object())
    read_post_processor(j["post_processor"]);
  const std::string ctx = config_path.string();
  if (config.contains("bos_token"))
    bos_id_ = resolve_token(config["bos_token"], ctx + ": bos_token");
  if (!bos_id_ && !prefix_.empty()) bos_id_ = prefix_.front();
  if (config.contains("eos_token"))
    eos_id_ = resolve_token(config["eos_token"], ctx + ": eos_token");
  if (auto split = json_get_optional<bool>(config, "split_special_tokens", ctx))
    split_special_ = *split;

  auto names = [&](const std::vector<int64_t>& ids) {
    std::string out;
    for (int64_t id : ids) out += (out.empty() ? "" : " ") + id_to_token(id).value_or("?");
    return out.empty() ? std::string("nothing") : out;
  };
  explanation_ = {
      describe(), "pipeline: " + pipeline,
      "special tokens: the post-processor puts " + names(prefix_) + " before and " +
          names(suffix_) +
          " after a text (tokenizer_config.json's add_bos_token / "
          "add_eos_token are ignored when tokenizer.json exists, as in transformers 5)"};
  if (split_special_)
    explanation_.push_back("split_special_tokens: special tokens written in the text are text");
}

void HfTokenizer::read_post_processor(const Json& pp) {
  const std::string ctx = where_ + ": post_processor";
  const std::string type = json_get<std::string>(pp, "type", ctx);
  if (type == "Sequence") {
    for (const auto& p : json_get<Json>(pp, "processors", ctx)) read_post_processor(p);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // {"cls": [token, id], "sep": [token, id]}: [CLS] text [SEP].
    for (const char* key : {"cls", "sep"}) {
      const Json& pair = json_get<Json>(pp, key, ctx);
      RETAIN_CHECK(pair.is_array() && pair.size() == 2 && pair[1].is_number_integer() &&
                       pair[1].get<int64_t>() >= 0 && pair[1].get<int64_t>() < vocab_size_,
                   ctx, ": '", key, "' must be [token, id] with an id in the vocabulary");
      std::vector<int64_t>& ids = key[0] == 'c' ? prefix_ : suffix_;
      ids.assign(1, pair[1].get<int64_t>());
    }
    return;
  }
  if (type != "TemplateProcessing") return;  // ByteLevel and others add no tokens
  const Json& single = json_get<Json>(pp, "single", ctx);
  const Json specials = pp.value("special_tokens", Json::object());
  RETAIN_CHECK(single.is_array(), ctx, ": 'single' must be an array");
  std::vector<int64_t> before, after;
  bool seen_text = false;
  for (const auto& item : single) {
    if (item.contains("Sequence")) {
      seen_text = true;
      continue;
    }
    RETAIN_CHECK(item.contains("SpecialToken"), ctx, ": template item ", item.dump(),
                 " is neither SpecialToken nor Sequence");
    const auto name = json_get<std::string>(item["SpecialToken"], "id", ctx);
    // The ids come from the template's own special_tokens map, as tokenizers reads them.
    RETAIN_CHECK(specials.contains(name), ctx, ": template names special token '", name,
                 "', which its special_tokens map does not define");
    auto ids = json_get<std::vector<int64_t>>(specials[name], "ids", ctx);
    for (int64_t id : ids)
      RETAIN_CHECK(id >= 0 && id < vocab_size_, ctx, ": special token '", name, "' has id ", id,
                   ", outside the vocabulary [0, ", vocab_size_, ")");
    auto& out = seen_text ? after : before;
    out.insert(out.end(), ids.begin(), ids.end());
  }
  prefix_ = std::move(before);
  suffix_ = std::move(after);
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
      if (split_special_ && added_[index].special) continue;
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
