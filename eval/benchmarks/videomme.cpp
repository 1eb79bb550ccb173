#include "eval/benchmarks/videomme.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "data/parquet_table.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/mcq_extract.h"
#include "eval/benchmarks/scoring.h"
#include "eval/benchmarks/videomme_subtitles.h"
#include "eval/benchmarks/vision_prompt.h"
#include "eval/metrics.h"
#include "model/vision/video_decode.h"

namespace retain {

namespace {

std::vector<VideoMmeQuestion> read_parquet(const fs::path& file) {
  ParquetTable table(file);
  const std::vector<std::string> columns = {"videoID",      "duration",    "domain",
                                            "sub_category", "question_id", "task_type",
                                            "question",     "options",     "answer"};
  for (const auto& column : columns)
    RETAIN_CHECK(table.has_column(column), file.string(), ": no column '", column,
                 "' (expected Video-MME's columns video_id, duration, domain, sub_category, url, "
                 "videoID, question_id, task_type, question, options, answer)");
  std::map<std::string, std::vector<std::optional<std::string>>> text;
  for (const auto& column : columns)
    if (column != "options") text[column] = table.text_column(column);
  const auto options = table.json_column("options");
  std::vector<VideoMmeQuestion> out;
  for (size_t i = 0; i < options.size(); ++i) {
    VideoMmeQuestion q;
    q.where = str_cat(file.string(), " row ", i);
    auto need = [&](const char* key) {
      const auto& v = text.at(key)[i];
      RETAIN_CHECK(v.has_value(), q.where, ": '", key, "' is null");
      return *v;
    };
    q.video_id = need("videoID");
    q.duration = need("duration");
    q.domain = need("domain");
    q.sub_category = need("sub_category");
    q.question_id = need("question_id");
    q.task_type = need("task_type");
    q.question = need("question");
    q.answer = need("answer");
    RETAIN_CHECK(options[i].is_array() && !options[i].empty(), q.where,
                 ": 'options' must be a list of strings, found ", options[i].dump().substr(0, 80));
    for (const auto& o : options[i]) {
      RETAIN_CHECK(o.is_string(), q.where, ": 'options' must be a list of strings");
      q.options.push_back(o.get<std::string>());
    }
    RETAIN_CHECK(q.answer.size() == 1 && q.answer[0] >= 'A' &&
                     q.answer[0] < static_cast<char>('A' + q.options.size()),
                 q.where, ": answer '", q.answer, "' is not the letter of one of its ",
                 q.options.size(), " options");
    RETAIN_CHECK(
        q.video_id.find('/') == std::string::npos && q.video_id != ".." && !q.video_id.empty(),
        q.where, ": videoID '", q.video_id, "' is not a file name");
    out.push_back(std::move(q));
  }
  return out;
}

// Where the release's files are: DIR/videomme/*.parquet beside DIR/data and DIR/subtitle, or
// the parquet itself inside DIR/videomme/ (or beside data/).
fs::path data_root(const fs::path& data) {
  if (fs::is_directory(data)) return data;
  const fs::path parent = data.parent_path();
  return parent.filename() == "videomme" && !fs::exists(parent / "data") ? parent.parent_path()
                                                                         : parent;
}

}  // namespace

std::vector<VideoMmeQuestion> load_videomme(const fs::path& data,
                                            const std::vector<std::string>& durations,
                                            int64_t limit) {
  RETAIN_CHECK(fs::exists(data), data.string(),
               ": no such file or directory (expected Video-MME's directory, holding "
               "videomme/test-*.parquet, data/ and subtitle/, or its parquet file)");
  for (const auto& d : durations)
    RETAIN_CHECK(d == "short" || d == "medium" || d == "long", "--duration '", d,
                 "'; expected short, medium or long");
  std::vector<fs::path> files;
  if (fs::is_directory(data)) {
    const fs::path dir = fs::exists(data / "videomme") ? data / "videomme" : data;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".parquet") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    RETAIN_CHECK(!files.empty(), dir.string(),
                 ": no *.parquet (Video-MME's videomme/test-*.parquet)");
  } else {
    files.push_back(data);
  }
  std::vector<VideoMmeQuestion> out;
  std::map<std::string, std::string> seen;
  for (const auto& f : files)
    for (auto& q : read_parquet(f)) {
      auto [it, inserted] = seen.emplace(q.question_id, q.where);
      RETAIN_CHECK(inserted, q.where, ": question_id ", q.question_id, " again (first at ",
                   it->second, ")");
      if (!durations.empty() &&
          std::find(durations.begin(), durations.end(), q.duration) == durations.end())
        continue;
      out.push_back(std::move(q));
    }
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
  RETAIN_CHECK(!out.empty(), data.string(), ": no questions",
               durations.empty() ? "" : " of the chosen durations");
  return out;
}

std::string videomme_prompt_text(const VideoMmeQuestion& q, const std::string& format,
                                 bool with_subtitles, const std::string& subtitle) {
  std::string options;
  for (size_t i = 0; i < q.options.size(); ++i) options += (i ? "\n" : "") + q.options[i];
  const std::string subtitles =
      with_subtitles ? "This video's subtitles are listed below: \n" + subtitle + "\n" : "";
  if (format == "qwen3_vl")  // videomme_doc_to_text_qwen3vl with the qwen3_vl kwargs
    return subtitles + "Question: " + q.question + "\nOptions:\n" + options +
           "\nAnswer with the option letter only.";
  const std::string head =
      "Select the best answer to the following multiple-choice question based on the video and "
      "the subtitles. Respond with only the letter (A, B, C, or D) of the correct option.\n" +
      q.question + "\n" + options + "\n";
  // The plain task's default post_prompt; the subtitle task writes its own ending.
  return with_subtitles
             ? subtitles + head + "The best answer is:"
             : head + "\nAnswer with the option's letter from the given choices directly.";
}

namespace {

bool videomme_correct(const std::string& response, const std::string& answer) {
  return python_lower(extract_mcq_answer(response, {"A", "B", "C", "D"})) == python_lower(answer);
}

}  // namespace

Json videomme_metrics(const std::vector<Json>& records,
                      const std::function<std::string(size_t)>& where) {
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // key -> (correct, total)
  int64_t failed = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    const bool fail = r.value("failed", false);
    failed += fail ? 1 : 0;
    const bool right = !fail && videomme_correct(json_get<std::string>(r, "response", where(i)),
                                                 json_get<std::string>(r, "answer", where(i)));
    for (const auto& key :
         {std::string("overall"), "duration:" + json_get<std::string>(r, "duration", where(i)),
          "domain:" + json_get<std::string>(r, "domain", where(i)),
          "task:" + json_get<std::string>(r, "task_type", where(i))}) {
      counts[key].first += right;
      counts[key].second += 1;
    }
  }
  Json metrics = Json::object();
  for (const auto& [key, ct] : counts)
    metrics[key] =
        python_round(100.0 * static_cast<double>(ct.first) / static_cast<double>(ct.second), 1);
  metrics["questions"] = static_cast<int64_t>(records.size());
  metrics["failed"] = failed;
  return metrics;
}

namespace {

const std::vector<std::string>& durations_panels() {
  static const std::vector<std::string> kPanels = {"duration:short", "duration:medium",
                                                   "duration:long"};
  return kPanels;
}

class VideoMme final : public Benchmark {
 public:
  explicit VideoMme(const VideoMmeOptions& o) : o_(o) {}

  std::string name() const override { return "videomme"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    questions_ = load_videomme(o_.data, o_.durations, o_.limit);
    root_ = data_root(o_.data);
    std::set<std::string> videos;
    for (const auto& q : questions_) videos.insert(q.video_id);
    log_info("videomme: ", questions_.size(), " questions on ", videos.size(), " videos from ",
             o_.data, o_.subtitles ? " (with subtitles)" : "");
  }

  void prepare(const EvalModel& m) override {
    vision_.emplace(m, o_.sweep.model.model_dir, o_.chat, 0, o_.budget_scope, o_.sweep.budgets,
                    "eval videomme");
    vision_->use_videos(o_.sweep.model.model_dir, o_.video);
    RETAIN_CHECK(video_decoding_available(),
                 "eval videomme: this build of retain cannot read videos (no FFmpeg)");
    const bool qwen3 = m.model->config().multimodal->vision.family == VisionFamily::kQwen3;
    RETAIN_CHECK(o_.prompt_format == "auto" || o_.prompt_format == "default" ||
                     o_.prompt_format == "qwen3_vl",
                 "eval videomme: --prompt-format '", o_.prompt_format,
                 "'; expected auto, default or qwen3_vl");
    format_ = o_.prompt_format != "auto" ? o_.prompt_format : qwen3 ? "qwen3_vl" : "default";
    frame_num_ = o_.subtitle_frames != 0 ? o_.subtitle_frames : format_ == "qwen3_vl" ? 768 : 32;
    setting_ =
        vision_->setting(str_cat(",format=", format_, ",subtitles=", o_.subtitles,
                                 ",frame_num=", frame_num_, ",max_new_tokens=", o_.max_new_tokens));
  }

  Json config() const override {
    Json config = {{"data", o_.data},
                   {"subtitles", o_.subtitles},
                   {"prompt_format", format_},
                   {"subtitle_frames", frame_num_},
                   {"max_new_tokens", o_.max_new_tokens},
                   {"limit", o_.limit},
                   {"durations", o_.durations},
                   {"questions", questions_.size()}};
    config.update(vision_->config());
    return config;
  }

  size_t units() const override { return questions_.size(); }
  std::string unit_key(size_t i) const override {
    return str_cat(questions_[i].question_id, "|", setting_);
  }
  bool settings_in_keys() const override { return true; }
  std::string record_key(const Json& j) const override {
    return str_cat(j.at("question_id").get<std::string>(), "|", j.value("setting", ""));
  }
  bool records_failures() const override { return true; }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const VideoMmeQuestion& q = questions_[i];
    const auto video = processed(video_file(q));
    const std::string subtitle = o_.subtitles ? subtitle_text(q, *video) : "";
    return vision_->request(
        std::string(kQwenVideoBlock) + videomme_prompt_text(q, format_, o_.subtitles, subtitle), {},
        c, o_.max_new_tokens, {*video});
  }

  Json record(size_t i, const GenerationRequest& request, const GenerationResult& g, Json fields,
              const UnitContext& c) const override {
    Json r = base_record(i);
    r.update(fields);
    r.update({{"video_tokens", request.multimodal->video_tokens},
              {"image_tokens", request.multimodal->image_tokens},
              {"response", c.tokenizer.decode(g.tokens, true)}});
    r["pred_answer"] = extract_mcq_answer(r["response"].get<std::string>(), {"A", "B", "C", "D"});
    return r;
  }

  Json failed_record(size_t i, const std::string& error) const override {
    Json r = base_record(i);
    r.update({{"failed", true},
              {"error", error},
              {"response", ""},
              {"pred_answer", ""},
              {"video_tokens", 0},
              {"image_tokens", 0},
              {"peak_kv_bytes", 0}});
    return r;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    Json metrics =
        videomme_metrics(records, [](size_t i) { return str_cat("predictions.jsonl record ", i); });
    metrics.update(vision_record_means(records));
    return metrics;
  }

  std::optional<bool> unit_correct(const Json& record) const override {
    if (record.value("failed", false)) return false;
    return videomme_correct(record.at("response").get<std::string>(),
                            record.at("answer").get<std::string>());
  }

  PlotSpec plot() const override { return accuracy_plot("Video-MME", durations_panels()); }
  std::vector<std::string> table_columns() const override {
    auto columns = accuracy_columns(durations_panels());
    columns.push_back("failed");
    return columns;
  }

 private:
  Json base_record(size_t i) const {
    const VideoMmeQuestion& q = questions_[i];
    return {{"question_id", q.question_id}, {"setting", setting_}, {"video_id", q.video_id},
            {"duration", q.duration},       {"domain", q.domain},  {"sub_category", q.sub_category},
            {"task_type", q.task_type},     {"answer", q.answer}};
  }

  // videomme_doc_to_visual: data/<videoID>.mp4, else .MP4, else .mkv.
  fs::path video_file(const VideoMmeQuestion& q) const {
    for (const char* ext : {".mp4", ".MP4", ".mkv"}) {
      const fs::path p = root_ / "data" / (q.video_id + ext);
      if (fs::exists(p)) return p;
    }
    throw Error(str_cat(q.where, ": no video ", (root_ / "data" / (q.video_id + ".mp4")).string(),
                        " (nor .MP4, .mkv)"));
  }

  // The sweep asks for a unit's request once per cell (policy x budget), one unit after the
  // other: the last clip read is kept, so each clip is decoded once per unit, not once per cell.
  std::shared_ptr<const ProcessedVideo> processed(const fs::path& video) const {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cached_path_ != video || !cached_) {
      cached_.reset();  // the old clip's pixels go before the new one's are made
      cached_ = std::make_shared<const ProcessedVideo>(vision_->video(video.string()));
      cached_path_ = video;
    }
    return cached_;
  }

  // The clip's figures come from its preprocessing (no second pass over the file).
  std::string subtitle_text(const VideoMmeQuestion& q, const ProcessedVideo& video) const {
    const fs::path srt = root_ / "subtitle" / (q.video_id + ".srt");
    if (!fs::exists(srt)) return "No subtitles available";
    return videomme_subtitle_text(parse_srt(read_text_file(srt), srt.string()), video.container_fps,
                                  video.container_frames, frame_num_);
  }

  VideoMmeOptions o_;
  std::vector<VideoMmeQuestion> questions_;
  fs::path root_;
  std::optional<VisionPromptBuilder> vision_;
  std::string format_;
  int64_t frame_num_ = 32;
  std::string setting_;
  mutable std::mutex cache_mutex_;
  mutable fs::path cached_path_;
  mutable std::shared_ptr<const ProcessedVideo> cached_;
};

}  // namespace

int run_videomme_eval(const VideoMmeOptions& o) {
  check_budget_scope(o.budget_scope, o.sweep.budgets, "eval videomme");
  VideoMme benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

BenchmarkScoring videomme_scoring() {
  BenchmarkScoring s;
  s.name = "videomme";
  s.one_setting_per_group = true;
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    return videomme_metrics(records, where);
  };
  s.figure = [](const std::vector<ScoreRow>& rows, PlotSpec& plot,
                std::vector<std::string>& columns) {
    plot.percent = true;
    columns.push_back("overall");
    for (const auto& d : durations_panels()) {
      plot.panels.push_back({d, d});
      columns.push_back(d);
    }
    (void)rows;
  };
  return s;
}

}  // namespace retain
