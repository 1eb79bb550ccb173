#include "model/tokenizers/bpe.h"

#include <cstdio>
#include <queue>

#include "core/error.h"
#include "model/tokenizers/byte_level.h"

namespace retain {

namespace {

// Bounded so a long document cannot grow it without limit; cleared when full.
constexpr size_t kCacheCapacity = 200'000;
// Only short words are cached (as in tokenizers): long ones rarely repeat, and without a
// pre-tokenizer a whole document is one word.
constexpr size_t kMaxCachedWord = 256;

}  // namespace

BpeModel::BpeModel(const Json& model, const std::string& where) {
  std::string ctx = where + ": model";
  RETAIN_CHECK(json_get<std::string>(model, "type", ctx) == "BPE", ctx, ": type '",
               json_get<std::string>(model, "type", ctx), "' is not supported (expected BPE)");
  RETAIN_CHECK(!json_get_optional<double>(model, "dropout", ctx).has_value(), ctx,
               ": BPE dropout is not supported (it makes encoding random)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto v = json_get_optional<std::string>(model, key, ctx);
    RETAIN_CHECK(!v || v->empty(), ctx, ": '", key, "' is not supported");
  }
  fuse_unk_ = json_get_optional<bool>(model, "fuse_unk", ctx).value_or(false);
  byte_fallback_ = json_get_optional<bool>(model, "byte_fallback", ctx).value_or(false);
  ignore_merges_ = json_get_optional<bool>(model, "ignore_merges", ctx).value_or(false);

  const Json& vocab = model.at("vocab");
  RETAIN_CHECK(vocab.is_object(), ctx, ": 'vocab' must be an object {token: id}");
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    RETAIN_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0, ctx, ": vocab id of '", token,
                 "' must be a non-negative integer");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  // Ids index a table (and an embedding): they may have gaps, not run far past the vocabulary.
  const auto entries = static_cast<int64_t>(vocab.size());
  RETAIN_CHECK(max_id < std::min<int64_t>(2 * entries + 65536, INT32_MAX), ctx, ": vocab id ",
               max_id, " is far beyond the ", entries, " entries of the vocabulary");
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : vocab.items()) {
    vocab_[token] = static_cast<int32_t>(id.get<int64_t>());
    id_to_token_[id.get<size_t>()] = token;
  }
  if (auto unk = json_get_optional<std::string>(model, "unk_token", ctx)) {
    auto it = vocab_.find(*unk);
    RETAIN_CHECK(it != vocab_.end(), ctx, ": unk_token '", *unk, "' is not in the vocabulary");
    unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(name);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }

  const Json& merges = model.at("merges");
  RETAIN_CHECK(merges.is_array(), ctx, ": 'merges' must be an array");
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string left, right;
    if (m.is_string()) {  // "a b"
      const auto& s = m.get_ref<const std::string&>();
      auto space = s.find(' ');
      RETAIN_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, ctx,
                   ": merge #", rank, " '", s, "' is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {  // ["a", "b"]
      RETAIN_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), ctx,
                   ": merge #", rank, " must be \"a b\" or [\"a\", \"b\"], found ", m.dump());
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    auto l = vocab_.find(left), r = vocab_.find(right), merged = vocab_.find(left + right);
    RETAIN_CHECK(l != vocab_.end() && r != vocab_.end(), ctx, ": merge #", rank,
                 " uses a token not in the vocabulary");
    RETAIN_CHECK(merged != vocab_.end(), ctx, ": merge #", rank, " makes '", left + right,
                 "', which is not in the vocabulary");
    merges_.emplace(pair_key(l->second, r->second), std::make_pair(rank, merged->second));
    ++rank;
  }
}

std::optional<int64_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int64_t id) const {
  if (id < 0 || id >= vocab_size() || id_to_token_[id].empty()) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() > kMaxCachedWord) {
    merge_word(word, out);
    return;
  }
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kCacheCapacity) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void BpeModel::merge_word(std::string_view word, std::vector<int64_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool last_was_unk = false;
  auto push = [&](int32_t id) {
    auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  for (size_t i = 0; i < word.size();) {
    size_t len = std::min(utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
    auto it = vocab_.find(std::string(word.substr(i, len)));
    if (it != vocab_.end()) {
      push(it->second);
      last_was_unk = false;
    } else {
      bool bytes_known = byte_fallback_;
      for (size_t k = 0; bytes_known && k < len; ++k)
        bytes_known = byte_ids_[static_cast<unsigned char>(word[i + k])] >= 0;
      if (bytes_known) {
        for (size_t k = 0; k < len; ++k) push(byte_ids_[static_cast<unsigned char>(word[i + k])]);
        last_was_unk = false;
      } else if (unk_id_) {
        if (!(fuse_unk_ && last_was_unk)) push(*unk_id_);
        last_was_unk = true;
      }
      // Without unk_token tokenizers drops the character, and its neighbours may merge (what
      // transformers' LlamaTokenizer rebuild, which has no unk_token, does with such text).
    }
    i += len;
  }
  if (!symbols.empty()) symbols.back().next = -1;

  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    auto it = merges_.find(pair_key(symbols[pos].id, symbols[symbols[pos].next].id));
    if (it != merges_.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (!left.alive || left.next < 0) continue;
    // Skip entries made stale by an earlier merge of either symbol.
    auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.second != c.new_id) continue;
    Symbol& right = symbols[left.next];
    left.id = c.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (const auto& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace retain
