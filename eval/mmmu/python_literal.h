// The Python literals MMMU stores as text: its `options` column is the repr of a list of strings
// ("['$6', '$7']", read by the official code with eval()), and a few open answers are such a list
// of accepted answers. This reads exactly that subset of Python's grammar, as ast.literal_eval
// does: a list (or tuple) of string literals, ' " ''' """ quotes, r/u prefixes, adjacent literals
// concatenated, every escape of a non-raw literal (\n \t \xhh \ooo \uXXXX \UXXXXXXXX, line
// continuations; unknown escapes kept as written, as Python does); \N{name} is refused (it needs
// the Unicode name table).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace retain {

// The strings of `text`, or nullopt with `error` saying what is wrong and where (byte offset).
std::optional<std::vector<std::string>> parse_python_string_list(const std::string& text,
                                                                 std::string* error = nullptr);

}  // namespace retain
