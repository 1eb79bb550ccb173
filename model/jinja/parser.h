// Tokens -> statements, following jinja2's parser (parse_statement, parse_tuple, parse_expression
// and their precedence chain). Statements outside the subset (block, extends, include, import,
// from, with, autoescape, a recursive for) are refused here, naming the construct and the line.
// An unknown filter or test fails here too, as jinja2's compiler fails on it, unless it sits in an
// if statement or if-expression, where jinja2 (and the renderer) fail only when it runs.
#pragma once

#include <string>
#include <vector>

#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace retain::jinja {

Body parse_template(const std::vector<Token>& tokens, const std::string& name);

}  // namespace retain::jinja
