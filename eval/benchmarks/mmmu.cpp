#include "eval/benchmarks/mmmu.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/scoring.h"
#include "eval/benchmarks/vision_prompt.h"
#include "eval/mmmu/mmmu_data.h"
#include "eval/mmmu/mmmu_scoring.h"
#include "model/vision/image_io.h"
#include "model/vision/multimodal_prompt.h"

namespace retain {

MmmuMessage mmmu_message(const MmmuQuestion& question, const std::string& images) {
  RETAIN_CHECK(images == "inline" || images == "first", "eval mmmu: --images is '", images,
               "'; expected inline or first");
  const std::string text = mmmu_prompt_text(question);
  MmmuMessage m;
  const auto tags = find_image_tags(text);
  if (images == "first") {
    // Each referenced image once, by number (lmms-eval's mmmu_doc_to_visual sorts the tags); the
    // text keeps its tags.
    for (const auto& tag : tags)
      if (std::find(m.images.begin(), m.images.end(), tag.number) == m.images.end())
        m.images.push_back(tag.number);
    std::sort(m.images.begin(), m.images.end());
    for (size_t k = 0; k < m.images.size(); ++k) m.text += kQwenImageBlock;
    m.text += text;
    return m;
  }
  size_t at = 0;
  for (const auto& tag : tags) {
    m.text += text.substr(at, tag.offset - at);
    m.text += kQwenImageBlock;
    m.images.push_back(tag.number);
    at = tag.offset + tag.length;
  }
  m.text += text.substr(at);
  return m;
}

namespace {

std::vector<std::string> disciplines() {
  std::vector<std::string> out;
  for (const auto& [discipline, subjects] : mmmu_disciplines()) out.push_back(discipline);
  return out;
}

class Mmmu final : public Benchmark {
 public:
  explicit Mmmu(const MmmuOptions& o) : o_(o) {}

  std::string name() const override { return "mmmu"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    MmmuLoadOptions load;
    load.split = o_.split;
    load.subjects = o_.subjects;
    load.limit = o_.limit;
    questions_ = load_mmmu(o_.data, load);
    for (const auto& q : questions_) mmmu_message(q, o_.images);  // checks --images
    log_info("mmmu: ", questions_.size(), " ", o_.split, " questions from ", o_.data);
  }

  void prepare(const EvalModel& m) override {
    vision_.emplace(m, o_.sweep.model.model_dir, o_.chat, o_.max_pixels, o_.budget_scope,
                    o_.sweep.budgets, "eval mmmu");
    setting_ =
        vision_->setting(str_cat(",images=", o_.images, ",max_new_tokens=", o_.max_new_tokens));
  }

  Json config() const override {
    Json config = {{"data", o_.data},
                   {"split", o_.split},
                   {"subjects", o_.subjects},
                   {"images", o_.images},
                   {"max_new_tokens", o_.max_new_tokens},
                   {"limit", o_.limit},
                   {"questions", questions_.size()}};
    config.update(vision_->config());
    return config;
  }

  size_t units() const override { return questions_.size(); }
  std::string unit_key(size_t i) const override { return questions_[i].id + "|" + setting_; }
  bool settings_in_keys() const override { return true; }
  std::string record_key(const Json& j) const override {
    return j.at("id").get<std::string>() + "|" + j.value("setting", "");
  }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const MmmuQuestion& q = questions_[i];
    const MmmuMessage message = mmmu_message(q, o_.images);
    std::vector<at::Tensor> images;
    for (int n : message.images) {
      const MmmuImage& image = q.images.at(n);
      images.push_back(image.bytes.empty()
                           ? read_image_rgb(image.file)
                           : decode_image_rgb(image.bytes, str_cat(q.where, " image_", n)));
    }
    return vision_->request(message.text, images, c, o_.max_new_tokens);
  }

  Json record(size_t i, const GenerationRequest& request, const GenerationResult& g, Json fields,
              const UnitContext& c) const override {
    const MmmuQuestion& q = questions_[i];
    fields.update({{"id", q.id},
                   {"setting", setting_},
                   {"subject", q.subject},
                   {"subfield", q.subfield},
                   {"question_type", q.question_type},
                   {"answers", q.answers},
                   {"options", q.options},
                   {"images", mmmu_message(q, o_.images).images.size()},
                   {"image_tokens", request.multimodal->image_tokens},
                   {"response", c.tokenizer.decode(g.tokens, true)}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    Json metrics =
        mmmu_metrics(records, [](size_t i) { return str_cat("predictions.jsonl record ", i); });
    metrics.update(vision_record_means(records));
    return metrics;
  }

  PlotSpec plot() const override { return accuracy_plot("MMMU", disciplines()); }
  std::vector<std::string> table_columns() const override {
    return accuracy_columns(disciplines());
  }

 private:
  MmmuOptions o_;
  std::vector<MmmuQuestion> questions_;
  std::optional<VisionPromptBuilder> vision_;
  std::string setting_;  // VisionPromptBuilder::setting
};

}  // namespace

int run_mmmu_eval(const MmmuOptions& o) {
  check_budget_scope(o.budget_scope, o.sweep.budgets, "eval mmmu");
  Mmmu benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

BenchmarkScoring mmmu_scoring() {
  BenchmarkScoring s;
  s.name = "mmmu";
  s.one_setting_per_group = true;
  s.order = [](std::vector<Json>& records) {
    // The official parser draws its random fallbacks in the official question order: subjects
    // as CAT_SHORT2LONG lists them, each subject's questions as stored (the file's order).
    const auto& subjects = mmmu_subjects();
    auto rank = [&](const Json& j) {
      const std::string subject = j.value("subject", "");
      return std::find(subjects.begin(), subjects.end(), subject) - subjects.begin();
    };
    std::stable_sort(records.begin(), records.end(),
                     [&](const Json& a, const Json& b) { return rank(a) < rank(b); });
  };
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    return mmmu_metrics(records, where);
  };
  s.figure = [](const std::vector<ScoreRow>&, PlotSpec& plot, std::vector<std::string>& columns) {
    // The disciplines; the 30 subjects stay in scores.json / scores.csv.
    plot.percent = true;
    columns.push_back("overall");
    for (const auto& [discipline, subjects] : mmmu_disciplines()) {
      plot.panels.push_back({discipline, discipline});
      columns.push_back(discipline);
    }
  };
  return s;
}

}  // namespace retain
