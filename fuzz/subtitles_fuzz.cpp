// libFuzzer target: Video-MME's subtitle files and model responses as retain reads them
// (eval/benchmarks/videomme_subtitles.h, eval/benchmarks/mcq_extract.h). Every input either
// parses, aligns to frames (a few frame rates and counts) and yields valid text, or throws
// retain::Error; the answer extraction on the same bytes returns "" or one of the choices.
#include <string>

#include "core/error.h"
#include "core/utf8.h"
#include "eval/benchmarks/mcq_extract.h"
#include "eval/benchmarks/videomme_subtitles.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto blocks = parse_srt(text, "fuzz.srt");
    for (const auto& [fps, frames, frame_num] :
         {std::tuple{25.0, int64_t{250}, int64_t{32}}, std::tuple{29.97, int64_t{1}, int64_t{-1}},
          std::tuple{0.5, int64_t{3000}, int64_t{768}}})
      (void)videomme_subtitle_text(blocks, fps, frames, frame_num);
  } catch (const Error&) {
  }
  if (find_invalid_utf8(text) == std::string::npos) {
    const std::string answer = extract_mcq_answer(text, {"A", "B", "C", "D"});
    fuzz::require(answer.empty() || (answer.size() == 1 && answer[0] >= 'A' && answer[0] <= 'D'));
  }
  return 0;
}
