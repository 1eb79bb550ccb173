#include "eval/benchmarks/prompt_format.h"

#include "core/error.h"

namespace retain {

std::string format_prompt(const std::string& templ,
                          const std::map<std::string, std::string>& fields,
                          const std::string& where) {
  std::string out;
  for (size_t i = 0; i < templ.size(); ++i) {
    char c = templ[i];
    if ((c == '{' || c == '}') && i + 1 < templ.size() && templ[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') fail(where, ": single '}' in the prompt template");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = templ.find('}', i);
    RETAIN_CHECK(close != std::string::npos, where, ": unclosed '{' in the prompt template");
    std::string name = templ.substr(i + 1, close - i - 1);
    auto it = fields.find(name);
    RETAIN_CHECK(it != fields.end(), where, ": the prompt template uses {", name,
                 "}, which the record lacks");
    out += it->second;
    i = close;
  }
  return out;
}

std::string question_part(const std::string& templ,
                          const std::map<std::string, std::string>& fields,
                          const std::string& where) {
  const std::string marker = "{context}";
  const size_t at = templ.find(marker);
  return at == std::string::npos ? std::string()
                                 : format_prompt(templ.substr(at + marker.size()), fields, where);
}

}  // namespace retain
