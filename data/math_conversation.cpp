#include "data/math_conversation.h"

#include "core/error.h"

namespace retain {

const char* const kMathInstruction =
    "Please reason step by step, and put your final answer within \\boxed{}.";

Json math_conversation(const Json& row, const std::string& instruction, const std::string& where) {
  RETAIN_CHECK(row.is_object(), where, ": expected an object, found ", row.type_name());
  if (row.contains("messages") && !row["messages"].is_null()) {
    RETAIN_CHECK(row["messages"].is_array() && !row["messages"].empty(), where,
                 ": 'messages' should be a non-empty list of {role, content}");
    bool answered = false;
    for (const auto& m : row["messages"])
      answered |= m.is_object() && m.contains("role") && m["role"] == "assistant";
    RETAIN_CHECK(answered, where, ": the conversation has no assistant turn (nothing to learn)");
    return {{"messages", row["messages"]}};
  }
  for (const char* key : {"problem", "solution"})
    RETAIN_CHECK(row.contains(key) && row[key].is_string(), where, ": no '", key,
                 "' string and no 'messages' (expected a math layout: problem + solution, or "
                 "messages)");
  std::string user = row["problem"].get<std::string>();
  if (!instruction.empty()) user += "\n" + instruction;
  return {{"messages",
           {{{"role", "user"}, {"content", user}},
            {{"role", "assistant"}, {"content", row["solution"].get<std::string>()}}}}};
}

}  // namespace retain
