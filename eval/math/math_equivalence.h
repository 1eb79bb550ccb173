// When a math answer equals the gold one: the MATH dataset's official rule (hendrycks/math,
// modeling/math_equivalence.py: `_strip_string` normalisation, then string equality, the raw
// strings compared where the normalisation raises), reproduced quirk for quirk, and retain's
// numeric equivalence beside it (equal exact values of integers, decimals and simple fractions),
// which the official rule lacks ("0.5" = "\frac{1}{2}" is its one special case). LibTorch-free.
// Checked against the official code on the same strings: scripts/peers/math_official_cases.py,
// tests/fixtures/math_official_cases.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace retain {

// `_strip_string(s)`: line breaks, `\!`, `\left`/`\right`, degrees, `\$`, `\%` and spaces removed,
// `\\` -> `\`, tfrac/dfrac -> frac, the units after "\text{ " cut, a leading "." made "0.", a
// short "k = " prefix dropped, `\sqrt3` -> `\sqrt{3}`, `\frac12` -> `\frac{1}{2}`, "0.5" ->
// `\frac{1}{2}`, "a/b" of two integers -> `\frac{a}{b}`. nullopt where the official function
// raises (two "\text{ ", a trailing `\sqrt` or `\frac`), so is_equiv compares the raw strings.
// Character positions count code points, as Python's do.
std::optional<std::string> math_strip_string(const std::string& text);

// `is_equiv(a, b)`: the stripped strings equal, or (where stripping raises) the raw ones; two
// absent answers are equal, one is not.
bool math_is_equiv(const std::optional<std::string>& a, const std::optional<std::string>& b);

// An exact rational p / q (q > 0, in lowest terms).
struct MathNumber {
  int64_t numerator = 0, denominator = 1;
  bool operator==(const MathNumber&) const = default;
};

// `text` read as one number, exactly: an integer or a decimal (optional sign, digits grouped by
// commas in threes allowed: "10,080"), or `\frac{a}{b}` / `a/b` of such (a minus sign before
// either). nullopt for anything else, a zero denominator, more than 36 significant digits on a
// side, or a value whose numerator or denominator in lowest terms leaves 64 bits.
std::optional<MathNumber> parse_math_number(const std::string& text);

// The MATH dataset's rule or, failing it, equal numbers: both answers (stripped where the
// official normalisation succeeds) read by parse_math_number to the same value.
bool math_answers_equal(const std::string& answer, const std::string& gold);

// The form two answers share when math_answers_equal holds for the usual cases: the number as
// "p/q" (or "p") when the stripped answer is one, else the stripped answer (the raw one where
// stripping raises). maj@N votes with it.
std::string math_vote_key(const std::string& answer);

}  // namespace retain
