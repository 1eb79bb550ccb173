// Video-MME's subtitles as lmms-eval's videomme task puts them into the prompt
// (lmms_eval/tasks/videomme/utils.py: load_subtitles, extract_subtitles,
// videomme_doc_to_text_subtitle), reproduced exactly, LibTorch-free (the fuzzer reads them):
//   - the .srt file read as Python reads text (universal newlines), cut at blank lines ("\n\n"),
//     a block of >= 3 lines giving (start, end) from its second line "H:M:S,ms --> H:M:S,ms" and
//     its text as the rest joined by spaces; blocks with the same (start, end) keep the first
//     one's place and the last one's text (a dict);
//   - start and end as frames, int(seconds * fps); `frame_num` frames sampled by
//     np.linspace(0, total - 1, frame_num, dtype=int); every block whose [start, end) holds a
//     sampled frame, each once, in the order CPython's set gives them (list(set(...)): by the
//     slot of each index in a hash table, not by time), then the first
//     <font color="white" size=".72c">...</font> of each block's text, one per line.
// fps and total come from the clip (lmms-eval reads them with OpenCV: the stream's average frame
// rate and its header frame count).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace retain {

struct SrtBlock {
  double start = 0, end = 0;  // seconds
  std::string text;
};

// The blocks of an .srt file's bytes; a malformed time line is an error naming `where` and the
// block (lmms-eval would stop with Python's ValueError).
std::vector<SrtBlock> parse_srt(const std::string& bytes, const std::string& where);

// The order list(set(items)) iterates non-negative ints in on CPython 3 (a table of 8 slots
// growing x4 at 60% fill, hash(i) = i, 9 linear probes then perturbed probing).
std::vector<int64_t> python_int_set_order(const std::vector<int64_t>& items);

// The subtitle text videomme_doc_to_text_subtitle writes for a clip of `total_frames` at `fps`.
std::string videomme_subtitle_text(const std::vector<SrtBlock>& blocks, double fps,
                                   int64_t total_frames, int64_t frame_num);

}  // namespace retain
