// LongBench's prompt templates (config/dataset2prompt.json): Python's str.format with named fields,
// as pred.py fills them. LibTorch-free, so the fuzzer builds it on its own.
#pragma once

#include <map>
#include <string>

namespace retain {

// The filled template text after {context} ("" when the template has no {context}): what
// --protect-question keeps.
std::string question_part(const std::string& templ,
                          const std::map<std::string, std::string>& fields,
                          const std::string& where);

// Python's str.format with named fields only ({name}, {{ and }}); unknown fields are an error.
std::string format_prompt(const std::string& templ,
                          const std::map<std::string, std::string>& fields,
                          const std::string& where);

}  // namespace retain
