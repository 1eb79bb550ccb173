#!/usr/bin/env python3
"""MMMU's official answer parsing and scoring, run on hand-written responses, as a fixture for
retain's C++ reimplementation (eval/mmmu/mmmu_scoring.cpp).

This script contains no MMMU code: it imports `utils.eval_utils` from the user's own checkout of
https://github.com/MMMU-Benchmark/MMMU (the directory given by --mmmu-repo; its `mmmu/` folder is
put first on sys.path) and runs the cases below through it exactly as the official
mmmu/main_parse_and_eval.py does, sample by sample in order: parse_multi_choice_response(response,
all_choices, index2ans) for multiple choice, parse_open_response(response) otherwise; then
evaluate() per subject (with num_example added, as main_parse_and_eval.py does) and
calculate_ins_level_acc() over the subjects. eval_utils calls random.seed(42) when it is imported
and draws from the global `random` generator whenever a multiple-choice response names no option,
so this script imports it fresh in its own process and does nothing random before; the draws then
depend on the order of the cases, which is the order of the list below.

tests/fixtures/mmmu_official_cases.json was produced from MMMU commit
bb0b95a945998d91dfef37e969e07d49d1139438 with:

  mkdir -p /tmp/mmmu/mmmu/utils && R=/work/.mirror/MMMU-Benchmark+MMMU/repo && \\
  for f in mmmu/utils/eval_utils.py mmmu/utils/data_utils.py; do \\
      git -C $R show HEAD:$f > /tmp/mmmu/$f; done
  ~/.cache/retain/venv/bin/python scripts/peers/mmmu_official_cases.py --mmmu-repo /tmp/mmmu \\
      --commit $(git -C $R rev-parse HEAD) --out tests/fixtures/mmmu_official_cases.json

(--commit can be left out when --mmmu-repo is a git checkout; it is then read with git rev-parse.)

Output: {"source", "random_seed", "eval_utils_sha256", "notes", "cases", "per_subject",
"overall_acc"}. Each case has subject, id, question_type ("multiple-choice" or "open"),
options/all_choices/index2ans (multiple choice only), answer (the gold: a letter for multiple
choice; a string or a list of strings for open), response, parsed_pred, random_fallback (whether the
official parser drew from `random`; random_draw is then the 0-based ordinal of that draw in the run),
correct, and why (what the case exercises). For open questions the official parsed_pred is
list(set(...)) in no defined order: here it is sorted, numbers first (ascending, NaN last), then
strings (code point order). Finite numbers are JSON numbers; infinities and NaN, which JSON lacks,
are written as {"nonfinite": "inf" | "-inf" | "nan"}.
"""

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys

ACC, LIT, MATH = "Accounting", "Literature", "Math"

ABCD = ["Debit cash", "Credit revenue", "Debit expense", "Credit liability"]
PLAYS = ["Hamlet", "Macbeth", "Othello", "King Lear"]


def mc(subject, options, answer, response, why):
    return {"subject": subject, "question_type": "multiple-choice", "options": options,
            "answer": answer, "response": response, "why": why}


def op(subject, answer, response, why):
    return {"subject": subject, "question_type": "open", "answer": answer, "response": response,
            "why": why}


CASES = [
    # ---------------------------------------------------------------- Accounting
    mc(ACC, ABCD, "B", "(B)", "bracketed letter"),
    mc(ACC, ABCD, "C", "The answer is (C).", "bracketed letter inside a sentence, trailing '.' stripped"),
    mc(ACC, ABCD, "B", "B", "bare letter (the response is padded with spaces)"),
    mc(ACC, ABCD, "D", "Answer: D", "bare letter after a colon"),
    mc(ACC, ABCD, "C", "(A) is tempting but (C) is correct", "several bracketed candidates: the last (rfind) wins"),
    mc(ACC, ABCD, "D", "(A) seems right, yet D is also plausible",
       "a bracketed candidate suppresses bare letters entirely, even later ones"),
    mc(ACC, ABCD, "D", "A is wrong, B is wrong, so D", "several bare letters: the last occurrence wins"),
    mc(ACC, ABCD, "B", "B is correct, not A", "the last bare letter wins even when it is negated"),
    mc(ACC, ["Debit cash", "Credit revenue", "the entry is correct", "None of the above"], "C",
       "Because the ledger balances, the entry is correct overall",
       "'B' inside 'Because' is no candidate; > 5 words so option text is searched"),
    mc(ACC, ABCD, "B", "B.", "trailing '.' stripped"),
    op(ACC, "1234", "1,234", "thousands separator: 1234 (and 234 from the simple-number regex)"),
    op(ACC, "234", "The total is 1,234", "the simple-number regex also extracts 234 from 1,234"),
    mc(ACC, ABCD, "C", "'C'", "quotes stripped (\"'\" is the last strip character)"),
    mc(ACC, ABCD, "B", "B!?", "strip order , . ! ? ; : ' - '!' is tried before '?' so 'B!' remains: no candidate"),
    mc(ACC, ABCD, "B", "B?!", "strip '!' then '?': 'B' remains"),
    mc(ACC, ["Debit cash", "Credit revenue", "Debit expense", "Credit liability", "Debit equity"], "B",
       "B,.", "strip(',') does nothing (ends with '.'), strip('.') leaves 'B,': no candidate"),
    op(ACC, "1000", "$1,000", "currency sign before a comma number"),
    op(ACC, "50", "50%", "percent after a number: \\b still matches"),
    op(ACC, "1234", "12,34", "commas anywhere are removed before float(): the whole response is 1234"),
    op(ACC, "234.56", "1,234.56", "comma number and decimal: 1234.56, 1234 and 234.56"),
    mc(ACC, ["Debit cash", "Credit revenue", "Debit expense"], "A", "**B**", "markdown bold: no candidate"),
    mc(ACC, ["True", "False"], "A", "(b)", "lowercase letter in brackets: no candidate"),
    mc(ACC, ["Debit cash", "Credit revenue", "Debit expense", "Credit liability", "Debit equity",
             "Credit equity"], "F", "", "empty response: no candidate"),
    mc(ACC, ["a1", "a2", "a3", "a4", "a5", "a6", "a7"], "G", "I am not sure",
       "four words, no letter among the choices (I is not one): no candidate"),
    mc(ACC, ["a1", "a2", "a3", "a4", "a5", "a6", "a7"], "B", "B\n",
       "a trailing newline is not stripped: ' B\\n ' has no ' B '"),
    mc(ACC, ["12", "15", "120", "1.5"], "C", "After computing the total we get 120 units in stock",
       "numeric options: '12' and '120' both start at the same place; np.argmax takes the first: A"),
    mc(ACC, ["3", "4", "5", "6"], "B", "there are 4 of them in total here", "numeric option found as text"),
    op(ACC, "-12", "The temperature change is -12 degrees", "negative integer followed by a unit"),
    op(ACC, "0", "-0.001", "round(-0.001, 2) is -0.0, which equals 0.0"),

    # ---------------------------------------------------------------- Literature
    mc(LIT, PLAYS, "B", "I believe the play described is clearly MACBETH by Shakespeare",
       "option text, case-insensitive"),
    mc(LIT, PLAYS, "B", "Not Hamlet and not Othello, the answer must be Macbeth",
       "several option texts: the last occurrence wins"),
    mc(LIT, PLAYS, "B", "The play is clearly Macbeth", "exactly 5 words: option texts are not searched"),
    mc(LIT, ["London", "New London", "Paris", "Rome"], "B", "The story is set in the town of New London",
       "'London' occurs later (inside 'New London') than 'New London': A"),
    mc(LIT, ["Othello", "Hamlet", "Macbeth", "King Lear"], "B", "I think A good answer is Hamlet here",
       "the article 'A' is a bare letter, which beats option text"),
    mc(LIT, ["True", "False"], "B", "It depends on the reading", "5 words, no candidate"),
    mc(LIT, ["Epic", "Sonnet", "Ode"], "C", "Hmm.", "no candidate"),
    mc(LIT, ["Epic", "Sonnet", "Ode", "Elegy", "Ballad"], "D", "none", "no candidate"),
    mc(LIT, ["Epic", "Sonnet", "Ode", "Elegy", "Ballad", "Haiku"], "C", "[C]", "square brackets: no candidate"),
    mc(LIT, ["Epic", "Sonnet", "Ode", "Elegy", "Ballad", "Haiku", "Limerick"], "C", "C)",
       "a closing parenthesis only: no candidate"),
    mc(LIT, ["<image 1>", "<image 2>", "<image 3>", "<image 4>"], "C",
       "The figure that matches the description is <image 3> clearly", "image-placeholder option text"),
    mc(LIT, ["alpha", "beta", "gamma", "delta"], "B", "i would say the answer is b",
       "lowercase letter; more than 5 words but no option text: no candidate"),
    mc(LIT, PLAYS, "B", "The answer is E", "a letter outside the choices: no candidate"),
    mc(LIT, PLAYS, "B", "...B", "leading dots stripped"),
    mc(LIT, PLAYS, "B", "The answer is (A) or (B)", "two bracketed letters: the last"),
    mc(LIT, PLAYS, "B", "Not (E) but B", "bracketed letter outside the choices does not count; bare B does"),
    mc(LIT, ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"], "C", "C, I believe",
       "nine choices: the pronoun 'I' is choice I; ' C,' is no bare C"),
    mc(LIT, ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"], "C", "I believe it is C",
       "nine choices: 'I' and 'C' both candidates, C is later"),
    mc(LIT, ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8"], "E", "unsure",
       "eight choices, no candidate: _randbelow(8) draws 4 bits"),
    mc(LIT, ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"], "E", "unsure",
       "nine choices, no candidate"),
    op(LIT, "Paris", "Paris is the capital", "the text before the last 'is ' is dropped: prediction 'the capital'"),
    op(LIT, "Transformation", "Transformations occur here", "no key phrase: the whole response; gold is a substring"),
    op(LIT, "a", "a", "one-character gold padded to [' a', 'a ']; the prediction too"),
    op(LIT, "a", "banana", "one-character gold: neither ' a' nor 'a ' is in 'banana'"),
    op(LIT, "a", "The answer is a", "key phrase 'is ': prediction 'a'"),
    op(LIT, "C", "C", "one-letter open answer"),
    op(LIT, "C", "The answer is (C)", "prediction '(c)' contains neither ' c' nor 'c '"),
    op(LIT, ["Tampa", "Florida"], "The city is Tampa", "gold list: any element"),
    op(LIT, "['Tampa', 'Florida']", "The city is Tampa",
       "gold list written as a string (as in the Hugging Face dataset): one lowercased string, not a list"),
    op(LIT, "Café", "The word is CAFÉ", "Unicode lowercasing (É)"),
    op(LIT, "Ⅳ", "The numeral is Ⅳ", "Ⅳ lowercases to ⅳ, a single code point: padded"),
    op(LIT, "answer", "The answer is :", "a trivial key (':') is dropped: the whole response is the prediction"),
    op(LIT, "Paris", "The capital of France. The answer is Paris.\n",
       "trailing whitespace then dots stripped"),

    # ---------------------------------------------------------------- Math
    op(MATH, "1500", "1.5e3", "scientific notation: 1500 (and 1 and 3 from the simple regex)"),
    op(MATH, "3", "The rate is 1.5e3", "the simple regex extracts 1 and 3 from 1.5e3"),
    op(MATH, "5", "1e5", "1e5 gives 100000 and 5"),
    op(MATH, "-3.5", "-3.5", "negative decimal"),
    op(MATH, "0.5", ".5", "leading dots of the whole response are stripped: '.5' becomes 5"),
    op(MATH, "0.10", ".1", "leading dot stripped: 1, not gold '0.10' = 0.1"),
    op(MATH, "0.5", "The value is .5", "a leading-dot decimal inside the response"),
    op(MATH, "9.20", "The result is 9.2", "gold '9.20' is 9.2"),
    op(MATH, "3", "3.", "trailing dot stripped"),
    op(MATH, "5", "5 cm", "number followed by a unit with a space"),
    op(MATH, "5", "5cm", "no \\b between 5 and c: no number extracted"),
    op(MATH, "5", "5.0cm", "a decimal needs no \\b: 5.0 extracted"),
    op(MATH, "3.14", "the answer is 3.14159", "rounded to 2 decimals"),
    op(MATH, "2.68", "2.675", "round(2.675, 2) = 2.67 (2.675 is below the half in binary)"),
    op(MATH, "0.13", "0.125", "round(0.125, 2) = 0.12 (exact half, to even)"),
    op(MATH, "0.12", "The value is 0.125", "round(0.125, 2) = 0.12"),
    op(MATH, "1", "1.005", "round(1.005, 2) = 1.0"),
    op(MATH, "0.42", "0.425", "round(0.425, 2) = 0.42 where floor(x*100+0.5)/100 gives 0.43"),
    op(MATH, "5", "x = 5\ny = 7", "'=' is a key only in the last line: the first line gives nothing"),
    op(MATH, "5", "The mass is 5 kg. The answer is 7",
       "the sentence split needs [A-Z] after lower(): one sentence, prediction 7"),
    op(MATH, "12", "First compute.\nSo the value is 12\nTherefore the final answer is 42",
       "each line gives its own key: 12 and 42"),
    op(MATH, "12", "The value is 12 so the result is \nok",
       "'is ' gives '' first, which is falsy, so the longer 'is' (after 'result ') replaces it: 12 lost"),
    op(MATH, "3", "v = 3 m/s\nt = 4 s\nd = 12 m", "only the last line's '=' counts"),
    op(MATH, "8", "It could be 7 or 8", "'could be ' key: both numbers"),
    op(MATH, "10", "The final value 10", "'final ' key"),
    op(MATH, "4", "Thus x=4", "'=' gives a shorter key than 'thus '"),
    op(MATH, "9", "It also equals 9 meters", "'so ' inside 'also'"),
    op(MATH, ["24/7", "3.429"], "3.43", "gold list: 3.429 rounds to 3.43"),
    op(MATH, ["24/7", "3.429"], "The probability is 24/7", "gold list: text element"),
    op(MATH, "['24/7', '3.429']", "3.43", "gold list written as a string is never a number"),
    op(MATH, "inf", "inf", "float('inf') == float('inf')"),
    op(MATH, "inf", "Infinity", "float() accepts 'infinity'"),
    op(MATH, "-inf", "The limit is -inf", "negative infinity"),
    op(MATH, "nan", "nan", "NaN never equals NaN (list membership on distinct NaN objects)"),
    op(MATH, "1000", "1_000", "float() accepts digit-group underscores"),
    op(MATH, "0", "The count is 1_000", "the simple regex extracts 000 from 1_000: 0.0"),
    op(MATH, "3", "３", "full-width digit: float() accepts it"),
    op(MATH, "32", "The answer is ３２", "full-width digits: \\d matches Unicode digits"),
    op(MATH, "0", "", "empty response: prediction ['']"),
    op(MATH, "-5", "−5", "U+2212 minus sign is not '-'"),
    op(MATH, "-3", "5-3", "a hyphen makes the second number negative"),
    op(MATH, "42", "The answer is 42...", "trailing dots stripped"),
    mc(MATH, ["12", "15", "120", "1.5"], "D", "The result comes out to exactly 1.5 here",
       "numeric option text"),
]


def letters(n):
    return [chr(ord("A") + i) for i in range(n)]


def sort_key(v):
    if isinstance(v, float):
        return (0, 1 if math.isnan(v) else 0, 0.0 if math.isnan(v) else v, "")
    return (1, 0, 0.0, v)


def to_json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"nonfinite": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    return v


NOTES = [
    "Multiple choice: the response is stripped of each of , . ! ? ; : ' in that order, one "
    "str.strip(char) per character (so 'B,.' keeps 'B,' and 'B!?' keeps 'B!', while 'B?!' gives 'B'); "
    "whitespace is not stripped ('B\\n' has no bare B).",
    "Multiple choice: '(X)' candidates are looked for first; only if there is none are bare letters "
    "' X ' looked for (in the response padded with one space each side, case-sensitive, so the "
    "article 'A' and the pronoun 'I' count as letters when they are choices); only if there is none "
    "and the padded response has more than 5 whitespace-separated words are option texts searched "
    "(case-insensitive substring, str.lower()).",
    "Multiple choice with several candidates: the candidate whose rfind position is largest wins; "
    "np.argmax takes the first of equal positions, in all_choices / index2ans order: options '12' and "
    "'120' both found at '120' give '12' (A); an option that is a suffix of another ('London' in "
    "'New London') starts later and wins.",
    "Multiple choice with no candidate: random.choice(all_choices) from the global generator seeded "
    "once with 42 at import; every such draw advances it, so each draw depends on all earlier ones in "
    "the run. random.choice(seq) = seq[_randbelow(len(seq))], _randbelow(n): k = n.bit_length(), "
    "r = getrandbits(k) (MT19937 32-bit output >> (32 - k)) until r < n. random.seed(42) seeds "
    "MT19937 with init_by_array([42]).",
    "Open: get_key_subresponses lowercases the response before re.split(r'\\.\\s(?=[A-Z])|\\n'), so "
    "the sentence split never fires and only newlines split ('The mass is 5 kg. The answer is 7' is "
    "one piece, its key '7').",
    "Open: the response is str.strip() then strip('.') - all leading AND trailing dots - before "
    "splitting, so a response '.5' is parsed as '5' (5.0) and '.1' as 1.0, while 'The value is .5' "
    "gives 0.5; the pieces between newlines are not stripped.",
    "Open: per piece, for each indicator in order 'could be ', 'so ', 'is ', 'thus ', 'therefore ', "
    "'final ', 'answer ', 'result ' (plus '=' for the last piece only) found anywhere as a substring "
    "(also inside words: 'this ', 'also ', 'basis '), the text after its LAST occurrence, stripped, "
    "is a key if shorter than the key so far; but an empty key is falsy, so any later indicator "
    "replaces it even if longer ('the value is 12 so the result is ' gives 'is', not ''). A key that "
    "strips to one of : , . ! ? ; ' is dropped; an empty key is dropped. With no key at all the whole "
    "(lowercased, stripped) response is the one key ('Paris is the capital' -> 'the capital', losing "
    "'paris').",
    "Open: predictions are the keys plus every number extract_numbers finds in each key, all through "
    "normalize_str, then list(set(...)). The three regexes run independently and overlap: '1,234' "
    "gives '1,234' and '234'; '1.5e3' gives '1.5e3', '1' and '3'; '1e5' gives '1e5' and '5'; "
    "'1_000' gives '000' (0.0); '$1,000' gives 1000.0 and 0.0; '5-3' gives '5' and '-3'; "
    "'\u22125' (minus sign) gives 5.0; '5cm' gives nothing (no \\b between 5 and c) but "
    "'5.0cm' gives '5.0'. \\d and \\b are Unicode-aware ('３２' is found).",
    "normalize_str: str.strip() (Unicode whitespace), then if float(s.replace(',', '')) succeeds the "
    "value is round(x, 2) - Python's float() accepts surrounding whitespace, a sign, '_' between "
    "digits, inf/infinity/nan in any case, and Unicode decimal digits (full-width '３'), and commas "
    "are removed anywhere ('12,34' is 1234.0); otherwise str.lower() and, if exactly one code point "
    "long, [' ' + s, s + ' '].",
    "round(x, 2) is correctly rounded from the exact binary value, ties (exactly representable halves) "
    "to even: round(2.675, 2) = 2.67, round(1.005, 2) = 1.0, round(0.125, 2) = 0.12, "
    "round(0.425, 2) = 0.42, round(-0.001, 2) = -0.0 (equal to 0.0). floor(x*100+0.5)/100 is wrong "
    "for 0.125 and 0.425; printf('%.2f') then strtod matches.",
    "eval_open: a number prediction is right when it equals (==) a number among the normalized gold "
    "answers; a text prediction is right when a text gold answer is a substring of it (gold "
    "'transformation' in 'transformations occur here'; gold 'c' -> [' c', 'c '] is not in '(c)'). "
    "Numbers never match text.",
    "NaN: normalize_str gives a new float object each time, and list membership compares with 'is' "
    "then '==', so a NaN prediction never matches a NaN gold; inf matches inf (and 'infinity').",
    "Gold lists: evaluate() checks isinstance(answer, list): a real list (as in answer_dict_val.json, "
    "e.g. ['24/7', '3.429']) normalizes each element; the same list written as a string "
    "(\"['24/7', '3.429']\", as the Hugging Face dataset stores it) is one lowercased text answer and "
    "practically never matches. Multiple-choice gold lists are also accepted by eval_multi_choice "
    "(any element equal), not exercised here.",
    "Per subject acc = correct / n (evaluate); overall = calculate_ins_level_acc = "
    "sum(acc * num_example) / sum(num_example).",
    "Non-finite floats are written as {\"nonfinite\": ...} since JSON has no NaN/Infinity; -0.0 is "
    "written as -0.0.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mmmu-repo", required=True, help="checkout of MMMU-Benchmark/MMMU")
    ap.add_argument("--commit", help="the checkout's commit (default: git rev-parse HEAD in it)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    mmmu_dir = os.path.join(os.path.abspath(args.mmmu_repo), "mmmu")
    eval_utils_path = os.path.join(mmmu_dir, "utils", "eval_utils.py")
    if not os.path.isfile(eval_utils_path):
        sys.exit(f"no {eval_utils_path}")
    commit = args.commit
    if not commit:
        commit = subprocess.run(["git", "-C", args.mmmu_repo, "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
    with open(eval_utils_path, "rb") as f:
        eval_utils_sha256 = hashlib.sha256(f.read()).hexdigest()

    sys.path.insert(0, mmmu_dir)
    from utils import eval_utils  # noqa: E402  (seeds random with 42)

    subjects = []
    by_subject = {}
    seen_ids = {}
    cases = []
    draws = 0
    for case in CASES:
        subject = case["subject"]
        if subject not in by_subject:
            subjects.append(subject)
            by_subject[subject] = []
        elif subjects[-1] != subject:
            sys.exit(f"cases of subject {subject} are not contiguous")
        seen_ids[subject] = seen_ids.get(subject, 0) + 1
        out = {"subject": subject, "id": f"validation_{subject}_{seen_ids[subject]}",
               "question_type": case["question_type"]}
        response = case["response"]
        if case["question_type"] == "multiple-choice":
            all_choices = letters(len(case["options"]))
            index2ans = dict(zip(all_choices, case["options"]))
            before = random.getstate()
            parsed = eval_utils.parse_multi_choice_response(response, all_choices, index2ans)
            fallback = random.getstate() != before
            out.update(options=case["options"], all_choices=all_choices, index2ans=index2ans)
        else:
            before = random.getstate()
            parsed = eval_utils.parse_open_response(response)
            fallback = False
            assert random.getstate() == before
        out.update(answer=case["answer"], response=response, random_fallback=fallback)
        if fallback:
            out["random_draw"] = draws
            draws += 1
        sample = {"id": out["id"], "question_type": case["question_type"],
                  "answer": case["answer"], "response": response, "parsed_pred": parsed}
        by_subject[subject].append(sample)
        out["parsed_pred"] = parsed
        out["why"] = case["why"]
        cases.append(out)

    results = {}
    for subject in subjects:
        judge, metric = eval_utils.evaluate(by_subject[subject])
        metric.update({"num_example": len(by_subject[subject])})
        results[subject] = metric
        for out in cases:
            if out["subject"] == subject:
                out["correct"] = judge[out["id"]] == "Correct"
    overall = eval_utils.calculate_ins_level_acc(results)

    for out in cases:
        if out["question_type"] != "multiple-choice":
            out["parsed_pred"] = [to_json_value(v) for v in sorted(out["parsed_pred"], key=sort_key)]

    doc = {
        "source": f"official MMMU eval_utils.py at commit {commit}",
        "eval_utils_sha256": eval_utils_sha256,
        "random_seed": 42,
        "generator": "scripts/peers/mmmu_official_cases.py",
        "notes": NOTES,
        "cases": cases,
        "per_subject": {s: {"acc": r["acc"], "num_example": r["num_example"]} for s, r in results.items()},
        "overall_acc": overall,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1, allow_nan=False)
        f.write("\n")
    n_mc = sum(c["question_type"] == "multiple-choice" for c in cases)
    print(f"{len(cases)} cases ({n_mc} multiple choice, {len(cases) - n_mc} open), "
          f"{draws} random draws, overall acc {overall:.4f} -> {args.out}")


if __name__ == "__main__":
    main()
