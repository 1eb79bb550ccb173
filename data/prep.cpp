#include "data/prep.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/answer_spans.h"
#include "data/math_conversation.h"
#include "data/parquet_table.h"
#include "data/prep_records.h"
#include "data/shards.h"
#include "model/chat_template.h"
#include "model/model_config.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/image_io.h"
#include "model/vision/image_processor.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/vision_config.h"

namespace retain {

namespace {

struct DocImage {
  std::vector<uint8_t> bytes;
  ImageGrid grid;
};

struct Document {
  std::vector<int64_t> ids;
  std::vector<uint8_t> mask;  // empty: all labels count
  std::vector<DocImage> images;
};

class ShardSink {
 public:
  ShardSink(fs::path dir, ShardMeta meta, int64_t shard_tokens, bool with_mask)
      : dir_(std::move(dir)),
        meta_(std::move(meta)),
        shard_tokens_(shard_tokens),
        with_mask_(with_mask) {}

  void add(const Document& doc) {
    for (const auto& image : doc.images) {
      current_.image_bytes.insert(current_.image_bytes.end(), image.bytes.begin(),
                                  image.bytes.end());
      current_.image_offsets.push_back(static_cast<int64_t>(current_.image_bytes.size()));
      current_.image_grids.insert(current_.image_grids.end(),
                                  {image.grid.t, image.grid.h, image.grid.w});
      current_.image_docs.push_back(static_cast<int64_t>(current_.doc_offsets.size()) - 1);
      summary_.images += 1;
    }
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
  // The vision-language model's placeholder id and merge size, once a document has an image.
  void set_image_meta(int64_t image_token_id, int64_t merge) {
    meta_.image_token_id = image_token_id;
    meta_.spatial_merge_size = merge;
  }

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

// What chat documents with images need: the model's placeholder id, merge size and image
// preprocessing (read from the model directory when the first image comes).
struct VisionPrep {
  int64_t image_token_id = -1, merge = 0, patch = 0;
  ImageProcessorConfig processor;
};

// Each placeholder of `doc` becomes its image's merged-patch count of placeholders (labels as
// the placeholder's: none in a user turn).
void expand_images(Document& doc, const VisionPrep& v, const std::string& where) {
  std::vector<int64_t> ids;
  std::vector<uint8_t> mask;
  size_t image = 0;
  for (size_t i = 0; i < doc.ids.size(); ++i) {
    const int64_t copies =
        doc.ids[i] == v.image_token_id
            ? (image < doc.images.size() ? doc.images[image].grid.tokens(v.merge) : int64_t{1})
            : int64_t{1};
    if (doc.ids[i] == v.image_token_id) ++image;
    ids.insert(ids.end(), static_cast<size_t>(copies), doc.ids[i]);
    mask.insert(mask.end(), static_cast<size_t>(copies), doc.mask[i]);
  }
  RETAIN_CHECK(image == doc.images.size(), where, ": ", doc.images.size(), " image item(s) but ",
               image,
               " image placeholder(s) in the rendered conversation (a literal <|image_pad|> in "
               "the text?)");
  doc.ids = std::move(ids);
  doc.mask = std::move(mask);
}

// Chat messages -> ids with an assistant-only mask (data/prep_records.h). Images are rendered as
// one placeholder each (which tokenizes stably too), then expanded.
Document chat_document(const Json& line, const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                       const std::string& where, const fs::path& base,
                       const std::function<const VisionPrep*(bool)>& vision,
                       const std::string& model_dir) {
  ChatLine chat = read_chat_line(line, base, where, kQwenImageBlock);
  std::vector<std::vector<uint8_t>>& images = chat.images;
  ChatTokens tokens = chat_tokens(chat.messages, tmpl, tokenizer);
  Document doc;
  doc.ids = std::move(tokens.ids);
  doc.mask = std::move(tokens.mask);
  if (tokenizer.eos_id() && (doc.ids.empty() || doc.ids.back() != *tokenizer.eos_id())) {
    doc.ids.push_back(*tokenizer.eos_id());
    doc.mask.push_back(1);
  }
  const VisionPrep* v = vision(!images.empty());
  RETAIN_CHECK(v != nullptr || images.empty(), where, ": the conversation holds images but ",
               model_dir,
               " is not a vision-language model directory (a text-only model, or no config.json; "
               "give --tokenizer the vision-language model's directory)");
  if (v == nullptr) return doc;
  for (size_t k = 0; k < images.size(); ++k) {
    const std::string image_where = str_cat(where, " image ", k);
    const at::Tensor rgb = decode_image_rgb(images[k], image_where);
    // The grid the processor makes (transformers' smart_resize; one frame).
    const auto [height, width] = smart_resize(rgb.size(0), rgb.size(1), v->patch * v->merge,
                                              v->processor.min_pixels, v->processor.max_pixels);
    doc.images.push_back({std::move(images[k]), ImageGrid{1, height / v->patch, width / v->patch}});
  }
  // Also for a document without images: a placeholder typed into its text has no image.
  expand_images(doc, *v, where);
  return doc;
}

// A jsonl document whose labels are the tokens inside byte ranges of its text. A token is inside
// when it lies between the token counts of the text's prefixes up to the range's ends (tokenizers
// split prefixes ending at these boundaries the same way as the whole text).
Document spans_document(const std::string& text, const Json& spans, const Tokenizer& tokenizer,
                        const std::string& where, const std::string& field) {
  Document doc;
  doc.ids = tokenizer.encode_with_special_tokens(text);
  doc.mask = answer_span_mask(text, spans, doc.ids, tokenizer, where, field);
  const bool ends_in_span =
      !spans.empty() && spans.back()[1].get<int64_t>() == static_cast<int64_t>(text.size());
  if (end_with_eos(doc, tokenizer, /*masked=*/true))
    doc.mask.back() = ends_in_span ? 1 : 0;  // a text ending in an answer learns to stop
  return doc;
}

}  // namespace

PrepSummary run_prep(const PrepOptions& o) {
  RETAIN_CHECK(
      o.format == "text" || o.format == "jsonl" || o.format == "chat" || o.format == "math",
      "prep: --format '", o.format, "' is not supported (expected text, jsonl, chat or math)");
  const bool conversations = o.format == "chat" || o.format == "math";
  RETAIN_CHECK(!o.inputs.empty(), "prep: no --input files");
  RETAIN_CHECK(o.shard_tokens > 0, "prep: --shard-tokens must be positive");
  RETAIN_CHECK(!o.out.empty(), "prep: --out is required");
  fs::path out(o.out);
  RETAIN_CHECK(!fs::exists(out) || fs::is_empty(out), "prep: ", out.string(),
               " already exists and is not empty");
  // prep writes OUT.tmp beside OUT, then renames it.
  ensure_writable_dir(out.has_parent_path() ? out.parent_path() : fs::path("."), "prep: --out");
  for (const auto& in : o.inputs)
    RETAIN_CHECK(fs::is_regular_file(in), "prep: input ", in, " does not exist");

  auto tokenizer = load_tokenizer(o.tokenizer_dir);
  // A vision-language model's image settings, read once when a chat document comes (null for a
  // text model, or a tokenizer directory without config.json).
  std::optional<std::optional<VisionPrep>> vision_prep;
  std::string config_error;                          // why config.json did not load
  std::function<void(const VisionPrep&)> on_vision;  // set once the sink exists
  // `for_images`: the document has images, so a config.json that does not load is the error.
  auto vision = [&](bool for_images) -> const VisionPrep* {
    if (!vision_prep) {
      vision_prep.emplace();
      std::optional<ModelConfig> config;
      try {
        // A config.json retain cannot read (or none) only matters for images.
        if (fs::exists(fs::path(o.tokenizer_dir) / "config.json"))
          config = ModelConfig::load(o.tokenizer_dir);
      } catch (const Error& e) {
        config_error = e.what();
      }
      if (config && config->multimodal != nullptr) {
        VisionPrep v;
        v.image_token_id = config->multimodal->image_token_id;
        v.merge = config->multimodal->vision.spatial_merge_size;
        v.processor = ImageProcessorConfig::load(o.tokenizer_dir);
        v.patch = v.processor.patch_size;
        vision_prep->emplace(v);
        on_vision(**vision_prep);
      }
    }
    RETAIN_CHECK(!for_images || config_error.empty(), "prep: the conversations hold images but ",
                 config_error);
    return *vision_prep ? &**vision_prep : nullptr;
  };
  std::optional<ChatTemplate> tmpl;
  RETAIN_CHECK(o.chat_template.empty() || conversations,
               "prep: --chat-template needs --format chat or math");
  RETAIN_CHECK(!o.instruction || o.format == "math", "prep: --instruction needs --format math");
  const std::string instruction = o.instruction.value_or(kMathInstruction);
  if (conversations) tmpl = load_chat_template(o.tokenizer_dir, o.chat_template);
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
    ShardSink sink(tmp, meta, o.shard_tokens, conversations || !o.label_spans.empty());
    on_vision = [&](const VisionPrep& v) { sink.set_image_meta(v.image_token_id, v.merge); };
    auto plain_document = [&](const std::string& text) {
      Document d;
      d.ids = tokenizer->encode_with_special_tokens(text);
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
      if (o.format == "math" && fs::path(in).extension() == ".parquet") {
        const ParquetTable table(in);
        std::vector<std::vector<Json>> columns;
        const std::vector<std::string> names = {"messages", "problem", "solution"};
        for (const auto& name : names)
          columns.push_back(table.has_column(name) ? table.json_column(name)
                                                   : std::vector<Json>(table.rows()));
        for (int64_t r = 0; r < table.rows() && !done(); ++r) {
          Json row = Json::object();
          for (size_t c = 0; c < names.size(); ++c)
            if (!columns[c][r].is_null()) row[names[c]] = columns[c][r];
          const std::string where = str_cat(in, " row ", r);
          sink.add(chat_document(math_conversation(row, instruction, where), *tmpl, *tokenizer,
                                 where, fs::path(in).parent_path(), vision, o.tokenizer_dir));
        }
        bar.update(static_cast<int64_t>(fs::file_size(in)));
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
          sink.add(chat_document(o.format == "math" ? math_conversation(j, instruction, where) : j,
                                 *tmpl, *tokenizer, where, fs::path(in).parent_path(), vision,
                                 o.tokenizer_dir));
        }
      }
    }
    sink.flush();
    bar.finish();
    PrepSummary summary = sink.summary();
    RETAIN_CHECK(summary.docs > 0, "prep: the inputs hold no document");
    write_json_file_atomic(tmp / "prep.json",
                           {{"tokenizer", o.tokenizer_dir},
                            {"tokenizer_sha256", meta.tokenizer_sha256},
                            {"format", o.format},
                            {"chat_template", o.chat_template},
                            {"instruction", o.format == "math" ? Json(instruction) : Json(nullptr)},
                            {"label_spans", o.label_spans},
                            {"inputs", o.inputs},
                            {"docs", summary.docs},
                            {"images", summary.images},
                            {"tokens", summary.tokens},
                            {"shards", summary.shards}});
    if (fs::exists(out)) fs::remove(out);
    fs::rename(tmp, out);
    log_info("prep: ", summary.docs, " docs, ", summary.tokens, " tokens, ", summary.images,
             " images, ", summary.shards, " shards -> ", out.string());
    return summary;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

}  // namespace retain
