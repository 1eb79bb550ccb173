// `retain prep`: text -> HDF5 token shards.
//   text:  every input file is one document
//   jsonl: one JSON object per line, the document is the string at --field; with --label-spans
//          only the tokens inside the listed byte ranges get a label
//   chat:  one {"messages": [{"role", "content"}, ...]} per line, rendered with the model's chat
//          template; only assistant tokens get a label (loss_mask). A content may be a list of
//          {"type": "text", "text"} and {"type": "image", "image": PATH | data:...;base64,...}
//          items (a path relative to the JSONL file): with a vision-language model's directory
//          as --tokenizer, each image is stored whole in the shard with its patch grid and its
//          placeholder repeated once per merged patch (data/shards.h)
//   math:  math rows (JSONL lines or parquet rows) as conversations (data/math_conversation.h):
//          OpenR1-Math's messages as they are, or problem + solution with --instruction on the
//          problem; rendered and labelled as chat (the assistant's tokens only)
// Every document is BOS (when the tokenizer adds one) + tokens + EOS. Output goes to a temp
// directory renamed into place at the end, so a failed run leaves nothing behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retain {

struct PrepOptions {
  std::string tokenizer_dir;
  std::vector<std::string> inputs;
  std::string out;
  std::string format = "text";
  std::string field = "text";
  // jsonl: a field holding [[begin, end], ...] byte ranges of the text; only tokens inside them
  // are labels (loss_mask), e.g. the answers of `retain synth`'s corpus. Empty: every token.
  std::string label_spans;
  std::string chat_template;  // chat, math: a Jinja file or chatml instead of the dir's
  // math: appended to a problem (problem + solution rows); unset: kMathInstruction, what
  // `eval math` appends, so the gates learn on the prompts they are evaluated with.
  std::optional<std::string> instruction;
  int64_t shard_tokens = int64_t{1} << 24;
  int64_t max_docs = 0;  // 0: all
};

struct PrepSummary {
  int64_t docs = 0, tokens = 0, shards = 0, images = 0;
};

PrepSummary run_prep(const PrepOptions& options);

}  // namespace retain
