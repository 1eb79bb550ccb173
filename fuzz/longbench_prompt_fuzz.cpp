// libFuzzer target: LongBench's prompt template (first line of the input) filled with a record
// (the rest: one JSON object, as a line of data/<dataset>.jsonl), the way `eval longbench` fills
// it. Either the prompt and its question part come out, or retain::Error names the problem.
#include <map>

#include "core/error.h"
#include "core/json.h"
#include "eval/benchmarks/prompt_format.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const std::string input = fuzz::as_text(data, size);
  const size_t newline = input.find('\n');
  if (newline == std::string::npos) return 0;
  try {
    const Json record = parse_json(input.substr(newline + 1), "record");
    if (!record.is_object()) return 0;
    std::map<std::string, std::string> fields;
    for (const auto& [key, value] : record.items())
      fields[key] = value.is_string() ? value.get<std::string>() : value.dump();
    const std::string templ = input.substr(0, newline);
    const std::string prompt = format_prompt(templ, fields, "record");
    const std::string question = question_part(templ, fields, "record");
    // The question is the prompt's tail.
    if (prompt.size() < question.size() ||
        prompt.compare(prompt.size() - question.size(), question.size(), question) != 0)
      __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
