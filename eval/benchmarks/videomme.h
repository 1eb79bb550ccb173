// `retain eval videomme --data DIR`: Video-MME (900 videos of 11 s to 1 h, short / medium / long,
// 2,700 four-option questions) under eviction policies, on a vision-language model, as
// lmms-eval's videomme and videomme_w_subtitle tasks run it.
//   data      the HF release laid out as lmms-eval unpacks it: videomme/test-*.parquet (columns
//             video_id, duration, domain, sub_category, url, videoID, question_id, task_type,
//             question, options (list of "A. ..."), answer), data/<videoID>.mp4 (or .MP4, .mkv)
//             and, for --subtitles, subtitle/<videoID>.srt; DIR may also be the parquet file
//             beside data/ and subtitle/
//   prompt    the video, then lmms-eval's text for the model's family: Qwen2.5-VL takes the
//             task's default ("Select the best answer ... based on the video and the
//             subtitles. Respond with only the letter (A, B, C, or D) of the correct option."
//             + question + options + "\nAnswer with the option's letter from the given choices
//             directly."), Qwen3-VL its qwen3_vl format ("Question: " + question + "\nOptions:\n"
//             + options + "\nAnswer with the option letter only."); with --subtitles, "This
//             video's subtitles are listed below: \n" + the frame-aligned subtitles
//             (videomme_subtitles.h; frame_num 32, Qwen3-VL 768) first, and the default ends
//             with "The best answer is:" instead
//   scoring   lmms-eval's extract_mcq_answer (mcq_extract.h) with choices A-D, right when it
//             equals the answer (case-insensitive, as its per-question score); accuracy (percent)
//             overall, per duration, per domain and per task type. A video that cannot be read
//             is its questions' failed predictions (recorded with the error, counted wrong), not
//             the sweep's end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/sweep.h"
#include "model/prompt.h"
#include "model/vision/video_options.h"

namespace retain {

struct VideoMmeQuestion {
  std::string question_id, video_id, duration, domain, sub_category, task_type, question, answer;
  std::vector<std::string> options;
  std::string where;  // file and row, for messages
};

struct VideoMmeOptions {
  SweepSettings sweep = sweep_defaults(2048);
  ChatFlags chat;
  std::string data;
  bool subtitles = false;
  std::string prompt_format = "auto";  // auto (by family) | default | qwen3_vl
  int64_t subtitle_frames = 0;         // frame_num (0: lmms-eval's for the format, 32 or 768)
  VideoOptions video;
  std::vector<std::string> durations;  // short, medium, long (empty: all)
  std::string budget_scope = "all";
  int64_t max_new_tokens = 16;
  int64_t limit = 0;
};

int run_videomme_eval(const VideoMmeOptions& options);

// The questions of the release's parquet (or of DIR holding videomme/*.parquet), in file order.
std::vector<VideoMmeQuestion> load_videomme(const fs::path& data,
                                            const std::vector<std::string>& durations = {},
                                            int64_t limit = 0);

// The text after the video (lmms-eval's doc_to_text); `subtitle` is used with `with_subtitles`.
std::string videomme_prompt_text(const VideoMmeQuestion& question, const std::string& format,
                                 bool with_subtitles, const std::string& subtitle);

// A cell's accuracies (percent) from records {duration, domain, task_type, answer, response}.
Json videomme_metrics(const std::vector<Json>& records,
                      const std::function<std::string(size_t)>& where);

}  // namespace retain
