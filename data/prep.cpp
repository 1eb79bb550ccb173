#include "data/prep.h"

#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/answer_spans.h"
#include "data/shards.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

namespace retain {

namespace {

struct Document {
  std::vector<int64_t> ids;
  std::vector<uint8_t> mask;  // empty: all labels count
};

class ShardSink {
 public:
  ShardSink(fs::path dir, ShardMeta meta, int64_t shard_tokens, bool with_mask)
      : dir_(std::move(dir)),
        meta_(std::move(meta)),
        shard_tokens_(shard_tokens),
        with_mask_(with_mask) {}

  void add(const Document& doc) {
    for (size_t i = 0; i < doc.ids.size(); ++i) {
      current_.tokens.push_back(static_cast<int32_t>(doc.ids[i]));
      if (with_mask_) current_.loss_mask.push_back(doc.mask.empty() ? 1 : doc.mask[i]);
    }
    current_.doc_offsets.push_back(static_cast<int64_t>(current_.tokens.size()));
    summary_.docs += 1;
    summary_.tokens += static_cast<int64_t>(doc.ids.size());
    if (static_cast<int64_t>(current_.tokens.size()) >= shard_tokens_) flush();
  }
  void flush() {
    if (current_.doc_offsets.size() < 2) return;
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%05lld.h5", static_cast<long long>(summary_.shards));
    write_shard(dir_ / name, current_, meta_);
    summary_.shards += 1;
    current_ = ShardContents();
  }
  const PrepSummary& summary() const { return summary_; }

 private:
  fs::path dir_;
  ShardMeta meta_;
  int64_t shard_tokens_;
  bool with_mask_;
  ShardContents current_;
  PrepSummary summary_;
};

// Documents are packed into shards, so each ends in EOS: the tokenizer's own EOS when its full
// encoding ends in one (a post-processor that appends it), else one appended here (`masked`: the
// document has a label mask, which grows with it). Returns false when the tokenizer has no EOS.
bool end_with_eos(Document& doc, const Tokenizer& tokenizer, bool masked) {
  if (!tokenizer.eos_id()) return false;
  if (doc.ids.empty() || doc.ids.back() != *tokenizer.eos_id()) {
    doc.ids.push_back(*tokenizer.eos_id());
    if (masked) doc.mask.push_back(0);
  }
  return true;
}

// Chat messages -> ids with an assistant-only mask. Each assistant turn's tokens are found by
// rendering the conversation up to the turn (with the generation prompt) and through the turn;
// the templates put special tokens at turn boundaries, so the prefixes tokenize stably.
Document chat_document(const Json& line, const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                       const std::string& where) {
  RETAIN_CHECK(line.contains("messages") && line["messages"].is_array(), where,
               ": expected {\"messages\": [...]}");
  std::vector<ChatMessage> messages;
  for (const auto& m : line["messages"])
    messages.push_back(
        {json_get<std::string>(m, "role", where), json_get<std::string>(m, "content", where)});
  RETAIN_CHECK(!messages.empty(), where, ": empty conversation");
  ChatOptions closed;
  closed.add_generation_prompt = false;
  Document doc;
  doc.ids = tokenizer.encode(tmpl.render(messages, closed));
  doc.mask.assign(doc.ids.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    std::vector<ChatMessage> before(messages.begin(), messages.begin() + static_cast<long>(i));
    std::vector<ChatMessage> through(messages.begin(), messages.begin() + static_cast<long>(i) + 1);
    size_t begin = tokenizer.encode(tmpl.render(before, ChatOptions{})).size();
    size_t end = std::min(doc.ids.size(), tokenizer.encode(tmpl.render(through, closed)).size());
    for (size_t k = begin; k < end; ++k) doc.mask[k] = 1;
  }
  if (tokenizer.eos_id() && (doc.ids.empty() || doc.ids.back() != *tokenizer.eos_id())) {
    doc.ids.push_back(*tokenizer.eos_id());
    doc.mask.push_back(1);
  }
  return doc;
}

// A jsonl document whose labels are the tokens inside byte ranges of its text. A token is inside
// when it lies between the token counts of the text's prefixes up to the range's ends (tokenizers
// split prefixes ending at these boundaries the same way as the whole text).
Document spans_document(const std::string& text, const Json& spans, const Tokenizer& tokenizer,
                        const std::string& where, const std::string& field) {
  Document doc{tokenizer.encode_with_special_tokens(text), {}};
  doc.mask = answer_span_mask(text, spans, doc.ids.size(), tokenizer, where, field);
  const bool ends_in_span =
      !spans.empty() && spans.back()[1].get<int64_t>() == static_cast<int64_t>(text.size());
  if (end_with_eos(doc, tokenizer, /*masked=*/true))
    doc.mask.back() = ends_in_span ? 1 : 0;  // a text ending in an answer learns to stop
  return doc;
}

}  // namespace

PrepSummary run_prep(const PrepOptions& o) {
  RETAIN_CHECK(o.format == "text" || o.format == "jsonl" || o.format == "chat", "prep: --format '",
               o.format, "' is not supported (expected text, jsonl or chat)");
  RETAIN_CHECK(!o.inputs.empty(), "prep: no --input files");
  RETAIN_CHECK(o.shard_tokens > 0, "prep: --shard-tokens must be positive");
  RETAIN_CHECK(!o.out.empty(), "prep: --out is required");
  fs::path out(o.out);
  RETAIN_CHECK(!fs::exists(out) || fs::is_empty(out), "prep: ", out.string(),
               " already exists and is not empty");
  for (const auto& in : o.inputs)
    RETAIN_CHECK(fs::is_regular_file(in), "prep: input ", in, " does not exist");

  auto tokenizer = load_tokenizer(o.tokenizer_dir);
  std::optional<ChatTemplate> tmpl;
  if (o.format == "chat") tmpl = load_chat_template(o.tokenizer_dir);
  ShardMeta meta{tokenizer_sha256(o.tokenizer_dir), tokenizer->vocab_size(), kShardFormatVersion};

  fs::path tmp = out;
  tmp += ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  int64_t total_bytes = 0;
  for (const auto& in : o.inputs) total_bytes += static_cast<int64_t>(fs::file_size(in));
  ProgressBar bar("prep", total_bytes, "B");
  try {
    RETAIN_CHECK(o.label_spans.empty() || o.format == "jsonl",
                 "prep: --label-spans needs --format jsonl");
    ShardSink sink(tmp, meta, o.shard_tokens, o.format == "chat" || !o.label_spans.empty());
    auto plain_document = [&](const std::string& text) {
      Document d{tokenizer->encode_with_special_tokens(text), {}};
      end_with_eos(d, *tokenizer, /*masked=*/false);
      return d;
    };
    auto done = [&] { return o.max_docs > 0 && sink.summary().docs >= o.max_docs; };
    for (const auto& in : o.inputs) {
      if (done()) break;
      if (o.format == "text") {
        std::string text = read_text_file(in);
        if (!text.empty()) sink.add(plain_document(text));
        bar.update(static_cast<int64_t>(text.size()));
        continue;
      }
      std::ifstream file(in);
      std::string line;
      for (int64_t line_no = 1; std::getline(file, line) && !done(); ++line_no) {
        bar.update(static_cast<int64_t>(line.size()) + 1);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = str_cat(in, ":", line_no);
        Json j = parse_json(line, where);
        RETAIN_CHECK(j.is_object(), where, ": expected a JSON object per line");
        if (o.format == "jsonl") {
          RETAIN_CHECK(j.contains(o.field) && j[o.field].is_string(), where, ": field '", o.field,
                       "' is missing or not a string (choose it with --field)");
          if (o.label_spans.empty()) {
            sink.add(plain_document(j[o.field].get<std::string>()));
          } else {
            RETAIN_CHECK(j.contains(o.label_spans), where, ": field '", o.label_spans,
                         "' (--label-spans) is missing");
            sink.add(spans_document(j[o.field].get<std::string>(), j[o.label_spans], *tokenizer,
                                    where, o.label_spans));
          }
        } else {
          sink.add(chat_document(j, *tmpl, *tokenizer, where));
        }
      }
    }
    sink.flush();
    bar.finish();
    PrepSummary summary = sink.summary();
    RETAIN_CHECK(summary.docs > 0, "prep: the inputs hold no document");
    write_json_file_atomic(tmp / "prep.json", {{"tokenizer", o.tokenizer_dir},
                                               {"tokenizer_sha256", meta.tokenizer_sha256},
                                               {"format", o.format},
                                               {"label_spans", o.label_spans},
                                               {"inputs", o.inputs},
                                               {"docs", summary.docs},
                                               {"tokens", summary.tokens},
                                               {"shards", summary.shards}});
    if (fs::exists(out)) fs::remove(out);
    fs::rename(tmp, out);
    log_info("prep: ", summary.docs, " docs, ", summary.tokens, " tokens, ", summary.shards,
             " shards -> ", out.string());
    return summary;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

}  // namespace retain
