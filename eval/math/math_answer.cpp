#include "eval/math/math_answer.h"

#include "model/tokenizers/regex.h"

namespace retain {

std::optional<std::string> last_boxed_only_string(const std::string& text) {
  size_t start = text.rfind("\\boxed");
  if (start == std::string::npos) start = text.rfind("\\fbox");
  if (start == std::string::npos) return std::nullopt;
  // Braces are ASCII, so counting bytes counts what Python's characters count.
  int64_t open = 0;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] == '{') ++open;
    if (text[i] == '}' && --open == 0) return text.substr(start, i - start + 1);
  }
  return std::nullopt;
}

std::optional<std::string> remove_boxed(const std::optional<std::string>& boxed) {
  static const std::string kLeft = "\\boxed{";
  if (!boxed || !boxed->starts_with(kLeft) || !boxed->ends_with("}")) return std::nullopt;
  // "\boxed{" alone ends with its own brace: Python's s[len(left):-1] is then "".
  if (boxed->size() <= kLeft.size()) return std::string();
  return boxed->substr(kLeft.size(), boxed->size() - kLeft.size() - 1);
}

std::optional<std::string> last_boxed_answer(const std::string& text) {
  return remove_boxed(last_boxed_only_string(text));
}

namespace {

std::string erase_all(std::string text, char c) {
  std::erase(text, c);
  return text;
}

}  // namespace

std::optional<std::string> gsm8k_extract_answer(const std::string& text) {
  // ANS_RE = "#### (\-?[0-9\.\,]+)", searched: the first "#### " followed by the class; the
  // lookbehind makes the match group 1 itself.
  static const Regex answer(R"((?<=#### )-?[0-9.,]+)", "gsm8k extract_answer");
  const auto matches = answer.find_all(text);
  if (matches.empty()) return std::nullopt;
  const auto [begin, end] = matches.front();
  return erase_all(text.substr(begin, end - begin), ',');
}

std::optional<std::string> last_number(const std::string& text) {
  // Each alternative is the whole of its group, so the match is the group findall keeps.
  static const Regex number(R"((-?[$0-9.,]{2,})|(-?[0-9]+))", "gsm8k flexible-extract");
  const auto matches = number.find_all(text);
  if (matches.empty()) return std::nullopt;
  const auto [begin, end] = matches.back();
  std::string out = erase_all(erase_all(text.substr(begin, end - begin), ','), '$');
  if (out.ends_with('.')) out.pop_back();
  return out;
}

std::string answer_text(const std::string& response) {
  const size_t close = response.rfind("</think>");
  return close == std::string::npos ? response : response.substr(close + 8);
}

}  // namespace retain
