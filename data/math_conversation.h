// What a math row becomes for training (`retain prep --format math`) and the instruction a math
// prompt carries (`retain eval math`), so that the gates train on the prompts they are evaluated
// with. The layouts of math corpora on the hub:
//   messages            a conversation as it stands (OpenR1-Math: the problem, then the model's
//                       reasoning and answer as one assistant turn), used unchanged
//   problem + solution  the MATH / NuminaMath / OpenR1-Math layout: a user turn "problem\n" +
//                       instruction, then the solution as the assistant turn
#pragma once

#include <string>

#include "core/json.h"

namespace retain {

// The instruction DeepSeek-R1's, Qwen2.5-Math's and lighteval's math evaluations append.
extern const char* const kMathInstruction;

// {"messages": [...]} for a row of either layout; a row of neither is refused naming the fields
// it lacks and `where` (file:line or file row N).
Json math_conversation(const Json& row, const std::string& instruction, const std::string& where);

}  // namespace retain
