#include "model/tokenizers/tokenize_command.h"

#include "model/vision/multimodal_prompt.h"
#include "model/vision/vision_config.h"

#include <chrono>
#include <iostream>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

int run_tokenize_command(const TokenizeCommandOptions& o) {
  const int inputs = o.text.has_value() + o.file.has_value() + o.decode.has_value();
  RETAIN_CHECK(inputs == 1 || (inputs == 0 && o.explain),
               "tokenize: give exactly one of --text, --file or --decode (or only --explain)");
  RETAIN_CHECK(!o.skip_special || o.decode, "tokenize: --skip-special applies to --decode");
  RETAIN_CHECK(!o.as_prompt || !o.decode, "tokenize: --as-prompt applies to --text/--file");
  auto tokenizer = load_tokenizer(o.model_dir);
  if (o.explain)
    for (const auto& line : tokenizer->explain()) std::cout << "# " << line << "\n";
  if (inputs == 0) return 0;
  if (o.decode) {
    // The text of the ids exactly (no trailing newline added beyond the one that ends the line).
    auto ids = parse_id_list(*o.decode, "tokenize --decode");
    for (size_t i = 0; i < ids.size(); ++i)
      RETAIN_CHECK(ids[i] < tokenizer->vocab_size(), "tokenize --decode: id ", ids[i], " (item ",
                   i + 1, ") is outside this tokenizer's vocabulary [0, ", tokenizer->vocab_size(),
                   ")");
    std::cout << tokenizer->decode(ids, o.skip_special) << "\n";
    return 0;
  }
  std::string text = o.text ? *o.text : read_text_file(*o.file);
  if (!o.images.empty() || !o.videos.empty())
    text = text_with_image_blocks(text, o.images.size(), o.videos.size());
  ChatFlags flags = o.chat;
  const bool chat = flags.chat || !flags.chat_template.empty();
  // Without a chat template: the tokenizer's full encoding (HF's tokenizer(text)), which is what
  // `prep` stores, or with --as-prompt what a generation prompt gets (no trailing EOS). A
  // rendered chat template is always a generation prompt.
  std::vector<int64_t> ids;
  if (chat) {
    ids = prompt_ids(o.model_dir, *tokenizer, text, flags);
  } else {
    RETAIN_CHECK(!flags.system, "tokenize: --system needs --chat");
    ids =
        o.as_prompt ? tokenizer->encode_prompt(text) : tokenizer->encode_with_special_tokens(text);
  }
  if (!o.images.empty() || !o.videos.empty()) {
    // Each image's and video's placeholder expanded as the processor expands it.
    const ModelConfig config = ModelConfig::load(o.model_dir);
    RETAIN_CHECK(config.multimodal, "tokenize: ", o.images.empty() ? "--video" : "--image",
                 " needs a vision-language model; ", o.model_dir, " is ", config.model_type);
    std::vector<ImageGrid> grids;
    for (const auto& image : load_images(o.model_dir, o.images)) grids.push_back(image.grid);
    const auto videos =
        load_videos(o.model_dir, config.multimodal->vision.family, o.videos, o.video);
    ids = expand_vision_placeholders(config, ids, grids, videos, tokenizer.get()).ids;
  }
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    std::cout << "\n";
  } else {
    for (int64_t id : ids)
      std::cout << id << "\t" << Json(tokenizer->id_to_token(id).value_or("")).dump() << "\n";
  }
  log_info(tokenizer->describe(), ": ", ids.size(), " tokens");
  return 0;
}

int run_bench_tokenize_command(const BenchTokenizeOptions& o) {
  RETAIN_CHECK(o.repeat >= 1, "bench tokenize: --repeat must be >= 1");
  auto tokenizer = load_tokenizer(o.model_dir);
  std::string text = read_text_file(o.file);
  const double mb = static_cast<double>(text.size()) / 1e6;
  using Clock = std::chrono::steady_clock;
  double best = 1e300;
  size_t count = 0;
  auto cold_start = Clock::now();
  count = tokenizer->encode(text).size();
  double cold = std::chrono::duration<double>(Clock::now() - cold_start).count();
  for (int r = 0; r < o.repeat; ++r) {
    auto start = Clock::now();
    count = tokenizer->encode(text).size();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::cout << "tokenizer: " << tokenizer->describe() << "\n"
            << "text: " << o.file << " (" << mb << " MB, " << count << " tokens)\n"
            << "first run: " << mb / cold << " MB/s; best of " << o.repeat << ": " << mb / best
            << " MB/s (" << static_cast<double>(count) / best / 1e6 << " M tokens/s), one thread\n";
  return 0;
}

}  // namespace retain
