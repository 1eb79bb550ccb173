// Template text -> tokens, with the whitespace rules of transformers' environment: trim_blocks and
// lstrip_blocks on, `-` and `+` whitespace control on every delimiter, newlines normalised to
// "\n", one trailing newline of the source dropped (keep_trailing_newline=False), `{% raw %}`
// kept verbatim, comments dropped. Mirrors jinja2's lexer rule for rule, so the data between tags
// is exactly the text jinja2 emits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace retain::jinja {

enum class TokenType {
  kData,        // text between tags
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,  // value: the decoded literal
  kInt,
  kFloat,
  kOp,  // value: the operator text ("+", "//", "(", ...)
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws retain::Error naming `name` and the line on text jinja2's lexer rejects too (an
// unterminated string or comment, an unexpected character or bracket).
std::vector<Token> tokenize(const std::string& source, const std::string& name);

// How a token reads in a message, as jinja2 describes it: a name's text, an operator's symbol,
// "end of statement block", "string", "integer", ...
std::string describe_token(const Token& token);

}  // namespace retain::jinja
