// lmms-eval's shared multiple-choice answer extraction (lmms_eval/tasks/_task_utils/
// mcq_extract.py, extract_mcq_answer), which its Video-MME and VideoMMMU tasks score with:
// the response stripped (whitespace, then one pass each of , . ! ? ; : ' "), padded with a space
// on each side, then candidates in ten formats, each letter at its last occurrence: "(A)",
// "A.", "A:", "A)", "A ", a letter after an answer phrase ("the answer is", "i choose", "答案是",
// ...), a standalone letter at the start or the end, and, only when nothing else matched, any
// occurrence. The highest-priority format wins (start 10, end 9, phrase 7, parentheses 6,
// period 5, colon 4, right paren 3, space 2, fallback 0), then the later position. Positions
// and tests are in code points, as Python indexes a str. LibTorch-free.
// Checked against the official function on the same strings (scripts/peers/
// videomme_official_cases.py -> tests/fixtures/videomme_official_cases.json).
#pragma once

#include <string>
#include <vector>

namespace retain {

// The chosen letter, or "" when none is found.
std::string extract_mcq_answer(const std::string& response,
                               const std::vector<std::string>& choices = {"A", "B", "C", "D", "E",
                                                                          "F", "G", "H"});

}  // namespace retain
