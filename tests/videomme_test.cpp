// Video-MME against lmms-eval's own task code run on the same inputs
// (scripts/peers/videomme_official_cases.py -> tests/fixtures/videomme_official_cases.json):
// extract_mcq_answer on 50 responses, the prompts of both formats with and without subtitles
// (subtitles aligned to the committed clips, whose fps and frame count retain reads as OpenCV
// does), list(set(...))'s order, and the per-question scores and overall accuracy.
#include <fstream>

#include "core/json.h"
#include "eval/benchmarks/mcq_extract.h"
#include "eval/benchmarks/videomme.h"
#include "eval/benchmarks/videomme_subtitles.h"
#include "model/vision/video_decode.h"
#include "test_util.h"

namespace retain {
namespace {

const Json& cases() {
  static const Json j = read_json_file(fs::path(RETAIN_TEST_SOURCE_DIR) / "fixtures" /
                                       "videomme_official_cases.json");
  return j;
}

fs::path clip(const std::string& file) {
  return fs::path(RETAIN_TEST_SOURCE_DIR) / "fixtures" / "videomme_clips" / file;
}

VideoMmeQuestion question_of(const Json& doc) {
  VideoMmeQuestion q;
  q.video_id = doc["videoID"];
  q.question_id = doc["question_id"];
  q.duration = doc["duration"];
  q.domain = doc["domain"];
  q.sub_category = doc["sub_category"];
  q.task_type = doc["task_type"];
  q.question = doc["question"];
  q.answer = doc["answer"];
  q.options = doc["options"].get<std::vector<std::string>>();
  return q;
}

TEST(VideoMme, AnswerExtractionEqualsLmmsEval) {
  for (const auto& c : cases()["extraction"]) {
    const std::string response = c["response"];
    EXPECT_EQ(extract_mcq_answer(response, {"A", "B", "C", "D"}), c["official"].get<std::string>())
        << "response: " << Json(response).dump();
  }
}

TEST(VideoMme, SetOrderEqualsCPython) {
  for (const auto& c : cases()["sets"])
    EXPECT_EQ(python_int_set_order(c["items"].get<std::vector<int64_t>>()),
              c["order"].get<std::vector<int64_t>>())
        << c["items"].size() << " items";
}

// The subtitle text of a case's clip as retain writes it ("No subtitles available" without one).
std::string subtitles_for(const std::string& video_id, int64_t frame_num) {
  const Json& clips = cases()["clips"];
  if (!clips.contains(video_id)) return "No subtitles available";
  const Json& c = clips[video_id];
  if (!video_decoding_available()) return "";
  VideoReader reader = VideoReader::open_file(clip(c["file"]).string());
  return videomme_subtitle_text(parse_srt(c["srt"], video_id + ".srt"), reader.info().container_fps,
                                reader.info().container_frames, frame_num);
}

TEST(VideoMme, ClipFiguresEqualOpenCv) {
  if (!video_decoding_available()) GTEST_SKIP() << "this build has no FFmpeg";
  for (const auto& [id, c] : cases()["clips"].items()) {
    VideoReader reader = VideoReader::open_file(clip(c["file"]).string());
    EXPECT_NEAR(reader.info().container_fps, c["cv2_fps"].get<double>(), 1e-9) << id;
    EXPECT_EQ(reader.info().container_frames, c["cv2_frames"].get<int64_t>()) << id;
  }
}

TEST(VideoMme, PromptsEqualLmmsEval) {
  if (!video_decoding_available()) GTEST_SKIP() << "this build has no FFmpeg";
  for (const auto& p : cases()["prompts"]) {
    const VideoMmeQuestion q = question_of(p["doc"]);
    const std::string format = p["format"];
    SCOPED_TRACE(q.question_id + " " + format);
    EXPECT_EQ(videomme_prompt_text(q, format, false, ""), p["plain"].get<std::string>());
    const int64_t frames = p["frame_num"].is_null() ? 32 : p["frame_num"].get<int64_t>();
    EXPECT_EQ(videomme_prompt_text(q, format, true, subtitles_for(q.video_id, frames)),
              p["subtitled"].get<std::string>());
  }
  for (const auto& p : cases()["subtitle_frames"]) {
    const VideoMmeQuestion q = question_of(p["doc"]);
    const int64_t frames = p["frame_num"];
    EXPECT_EQ(videomme_prompt_text(q, "default", true, subtitles_for(q.video_id, frames)),
              p["subtitled"].get<std::string>())
        << "frame_num " << frames;
  }
}

TEST(VideoMme, ScoresEqualLmmsEval) {
  std::vector<Json> records;
  for (const auto& r : cases()["records"]) {
    EXPECT_EQ(extract_mcq_answer(r["response"], {"A", "B", "C", "D"}),
              r["pred_answer"].get<std::string>());
    records.push_back({{"response", r["response"]},
                       {"answer", r["answer"]},
                       {"duration", r["duration"]},
                       {"domain", r["category"]},
                       {"task_type", r["task_category"]}});
  }
  const Json m = videomme_metrics(records, [](size_t i) { return str_cat("record ", i); });
  EXPECT_DOUBLE_EQ(m["overall"].get<double>(),
                   std::round(cases()["overall"].get<double>() * 10) / 10);
  EXPECT_EQ(m["questions"].get<int64_t>(), 9);
  // A failed prediction counts, and counts wrong.
  records.push_back({{"failed", true},
                     {"response", ""},
                     {"answer", "A"},
                     {"duration", "short"},
                     {"domain", "Knowledge"},
                     {"task_type", "Counting Problem"}});
  const Json f = videomme_metrics(records, [](size_t i) { return str_cat("record ", i); });
  EXPECT_EQ(f["failed"].get<int64_t>(), 1);
  EXPECT_EQ(f["questions"].get<int64_t>(), 10);
}

TEST(VideoMme, MalformedSubtitlesAreClearErrors) {
  EXPECT_ERROR_CONTAINS(parse_srt("1\n00:00:01 --> 00:00:02,000\nhi\n", "x.srt"),
                        "x.srt block 1: the time '00:00:01' is not H:M:S,ms");
  EXPECT_ERROR_CONTAINS(parse_srt("1\n00:00:01,000 -> 00:00:02,000\nhi\n", "x.srt"),
                        "is not 'start --> end'");
  EXPECT_ERROR_CONTAINS(parse_srt("1\n00:0a:01,000 --> 00:00:02,000\nhi\n", "x.srt"),
                        "'0a' is not an integer");
  // Blocks of fewer than three lines are skipped, as lmms-eval skips them.
  EXPECT_TRUE(parse_srt("1\n00:00:01,000 --> 00:00:02,000\n\n\n", "x.srt").empty());
}

}  // namespace
}  // namespace retain
