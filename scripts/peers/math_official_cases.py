#!/usr/bin/env python3
"""The official MATH and GSM8K answer extraction and equivalence code, run on hand-written strings,
as a fixture for retain's C++ reimplementation (eval/math/).

This script contains no official code. It loads it from the user's own checkouts:

  --hendrycks-math DIR  https://github.com/hendrycks/math: modeling/dataset/util.py
      (last_boxed_only_string) and modeling/math_equivalence.py (_strip_string, is_equiv) are
      imported as they are; remove_boxed is defined only in modeling/eval_math_gpt.py and
      modeling/evaluate_gpt3.py, which cannot be imported without torch, transformers and openai
      (evaluate_gpt3.py also raises NameError at import: `openai.api_key = PUT_KEY_HERE`), so the
      `def remove_boxed` node is taken from eval_math_gpt.py with the `ast` module and executed
      unchanged (the script checks that evaluate_gpt3.py's definition is the same tree).
  --gsm DIR  https://github.com/openai/grade-school-math: grade_school_math/dataset.py imports torch
      for its Dataset class, so ANS_RE, INVALID_ANS and extract_answer (with the file's `import re`)
      are taken from it with `ast` and executed unchanged.
  --lm-eval DIR  https://github.com/EleutherAI/lm-evaluation-harness: the task config
      lm_eval/tasks/gsm8k/gsm8k.yaml is read with PyYAML; its "flexible-extract" filter list is
      built with lm_eval.filters.build_filter_ensemble exactly as lm_eval/api/task.py builds it
      (RegexFilter from lm_eval/filters/extraction.py, then TakeFirstFilter) and applied to
      lm_eval.api.instance.Instance objects holding one response each. The one stub:
      lm_eval/__init__.py is not run, because it calls importlib.metadata.version("lm_eval"), which
      fails for a checkout that is not pip-installed (it otherwise only sets two Hugging Face
      environment variables); the `lm_eval` package object is created empty with its __path__ at
      DIR/lm_eval, and every module below it is the checkout's own. exact_match_hf_evaluate is
      taken with `ast` from lm_eval/api/metrics.py (which imports sacrebleu at the top) and run with
      the yaml's exact_match settings to check each recorded string that the metric's processing
      leaves unchanged (it scores the filtered response against it as a reference: 1.0).

tests/fixtures/math_official_cases.json was produced from hendrycks/math commit
985bdc1696e88e8643f081a0ff4719da39f2ae2a, openai/grade-school-math commit
3101c7d5072418e28b9008a6636bde82a006892c and EleutherAI/lm-evaluation-harness commit
4e7e0d47f33bc71070c1d38394bafbb52b117163 (Python 3.11, numpy 2.4, PyYAML 6.0) with:

  M=/work/.mirror O=/tmp/math_official
  C1=985bdc1696e88e8643f081a0ff4719da39f2ae2a C2=3101c7d5072418e28b9008a6636bde82a006892c
  C3=4e7e0d47f33bc71070c1d38394bafbb52b117163
  for f in modeling/dataset/util.py modeling/math_equivalence.py modeling/eval_math_gpt.py \\
      modeling/evaluate_gpt3.py; do mkdir -p $O/math/$(dirname $f); \\
      git -C $M/hendrycks+math/repo show $C1:$f > $O/math/$f; done
  mkdir -p $O/gsm/grade_school_math && git -C $M/openai+grade-school-math/repo show \\
      $C2:grade_school_math/dataset.py > $O/gsm/grade_school_math/dataset.py
  for f in lm_eval/api/__init__.py lm_eval/api/filter.py lm_eval/api/instance.py \\
      lm_eval/api/registry.py lm_eval/api/metrics.py lm_eval/filters/__init__.py \\
      lm_eval/filters/custom.py lm_eval/filters/extraction.py lm_eval/filters/selection.py \\
      lm_eval/filters/transformation.py lm_eval/tasks/gsm8k/gsm8k.yaml; do \\
      mkdir -p $O/lm-eval/$(dirname $f); \\
      git -C $M/EleutherAI+lm-evaluation-harness/repo show $C3:$f > $O/lm-eval/$f; done
  ~/.cache/retain/venv/bin/python scripts/peers/math_official_cases.py \\
      --hendrycks-math $O/math --gsm $O/gsm --lm-eval $O/lm-eval \\
      --commit-hendrycks-math $C1 --commit-gsm $C2 --commit-lm-eval $C3 \\
      --out tests/fixtures/math_official_cases.json

(A --commit-* flag can be left out when its directory is a git checkout: the commit is then read
with git rev-parse HEAD there.)

Output: {"source", "notes", "boxed", "strip", "equiv", "gsm8k_extract", "flexible_extract"}, each
list in the order of the cases below.
  boxed: last_boxed_only_string(text), and remove_boxed(last_boxed_only_string(text)) as
      eval_math_gpt.py and evaluate_gpt3.py compose them (remove_boxed(None) is None).
  strip: _strip_string(input), null where it raises (the notes name the exception).
  equiv: is_equiv(a, b) (its "WARNING: Both None" print is swallowed).
  gsm8k_extract: extract_answer(text), null for "[invalid]".
  flexible_extract: the gsm8k "flexible-extract" filter's output, then the exact_match metric's
      own processing of a prediction (each of the yaml's regexes_to_ignore removed with re.sub in
      order, then lowercased: ignore_case), null where the filter gives its fallback "[invalid]".
"""

import argparse
import ast
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import string
import subprocess
import sys
import types

# ---------------------------------------------------------------------------------- boxed
BOXED = [
    # plain and nested
    r"\boxed{5}",
    r"The answer is \boxed{5}.",
    r"The answer is $\boxed{5}$.",
    r"\boxed{-3}",
    r"\boxed{\frac{1}{2}}",
    r"So $x = \boxed{\frac{\sqrt{3}}{2}}$.",
    r"\boxed{{5}}",
    r"\boxed{x^{2}+1}",
    r"\boxed{10^{10}}",
    r"\boxed{\left(1, 2\right)}",
    r"\boxed{(1, 2)}",
    r"\boxed{[0, 1)}",
    r"\boxed{x \in [2, 5)}",
    r"\boxed{\infty}",
    r"\boxed{\pi}",
    r"\boxed{2\pi}",
    r"\boxed{\sqrt{2}}",
    r"\boxed{\sqrt3}",
    r"\boxed{\frac12}",
    r"\boxed{\dfrac{1}{2}}",
    r"\boxed{\tfrac{1}{2}}",
    r"\boxed{-\frac{1}{2}}",
    r"\boxed{\frac{-1}{2}}",
    r"\boxed{1/2}",
    r"\boxed{0.5}",
    r"\boxed{.5}",
    r"\boxed{10,080}",
    r"\boxed{10{,}080}",
    r"\boxed{\$5}",
    r"\boxed{\$1,000}",
    r"\boxed{50\%}",
    r"\boxed{90^\circ}",
    r"\boxed{90^{\circ}}",
    r"\boxed{5\text{ cm}}",
    r"\boxed{5 \text{ cm}^2}",
    r"\boxed{\text{ m} \text{ s}}",
    r"\boxed{x = 3}",
    r"\boxed{k = 3}",
    r"\boxed{f(x)=x^2}",
    r"\boxed{\text{yes}}",
    r"\boxed{\text{(A)}}",
    r"\boxed{A}",
    r"\boxed{\textbf{(B)}}",
    r"\boxed{\mathbf{5}}",
    r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}",
    r"\boxed{3 \times 4}",
    # several boxes: the last wins
    r"\boxed{1} then \boxed{2}",
    r"\boxed{1}\boxed{2}",
    r"First \boxed{1}, final \boxed{\frac{3}{4}}.",
    r"$\boxed{7}$ is the answer, not $\boxed{8}$",
    r"\boxed{\frac{1}{2}} or \boxed{0.5}",
    "\\boxed{5} \\\\ \\boxed{6}",
    r"\boxed{a}{b}",
    r"\boxed{a}b}",
    r"\boxed{5}}",
    r"}\boxed{5}",
    r"{\boxed{5}",
    r"\boxed{5}{",
    # nesting of boxes
    r"\boxed{\boxed{5}}",
    r"\boxed{a \boxed{b} c}",
    r"\fbox{\boxed{5}}",
    r"\boxed{\fbox{5}}",
    r"\text{\boxed{5}}",
    r"\text{The answer is \boxed{5}}",
    r"\mathbf{\boxed{5}}",
    r"\overbrace{\boxed{3}}",
    # \fbox
    r"\fbox{7}",
    r"The answer is \fbox{7}.",
    r"\fbox{{1}}",
    r"\fbox{}",
    r"\fbox 5",
    r"text \fbox{1} more \fbox{2}",
    r"\boxed{3} and \fbox{4}",
    r"\fbox{4} and \boxed{3}",
    r"\boxed{5}\fbox",
    r"\fbox{5}\boxed",
    r"\fbox{\frac{1}{2}}",
    r"\fboxed{5}",
    # space form and other non-brace forms
    r"\boxed 5",
    r"The answer is \boxed 5.",
    r"\boxed 5 and \frac{1}{2}",
    r"\boxed 5}",
    r"\boxed {5}",
    r"\boxed  {5}",
    r"\boxed\{5\}",
    r"\boxed(5)",
    r"\boxed[5]",
    r"\boxed5",
    r"\boxedx{5}",
    r"\boxedfoo",
    r"\Boxed{5}",
    r"\BOXED{5}",
    r"boxed{5}",
    r"\\boxed{5}",
    # unterminated and empty
    r"\boxed{5",
    r"\boxed{",
    r"\boxed",
    r"\boxed{5} and then \boxed{",
    r"\boxed{\frac{a}{b}} + \boxed{c",
    r"\boxed{\frac{1}{2}",
    r"\boxed{5}\boxed",
    r"\boxed{}",
    r"\boxed{}}",
    r"\boxed{{}",
    r"\boxed{{}}",
    r"\boxed{ }",
    r"\boxed{ 5 }",
    r"\boxed{ 3 }",
    "\\boxed{\t5}",
    "\\boxed{3\n}",
    # escaped braces are counted as braces
    r"\boxed{\{1, 2\}}",
    r"\boxed{\{1,2,3\}}",
    r"\boxed{\}}",
    r"\boxed{\{}",
    r"\boxed{\{1,2}",
    r"\boxed{a\}b}",
    # text around
    "",
    "no box here",
    "The answer is 5.",
    "Step 1: add.\n\\boxed{12}\nDone.",
    "\\boxed{5}\n",
    "  \\boxed{5}  ",
    r"\boxed{5}.",
    r"\boxed{12}{,}",
    r"Thus $\boxed{\textdollar 5}$",
    r"\[ \boxed{x=2} \]",
    r"Final Answer: The final answer is $\boxed{42}$. I hope it is correct.",
    r"Final Answer: The final answer is $42$. I hope it is correct.",
    # unicode
    r"\boxed{é}",
    r"\boxed{−3}",
    r"\boxed{3×4}",
    r"\boxed{中文}",
    r"答案是\boxed{42}",
    r"答案是 $\boxed{\frac{1}{2}}$。",
    r"\boxed{½}",
    r"\boxed{∞}",
    r"\boxed{３}",
    "\\boxed{5\u200b}",
    "\\boxed{\u00a05}",
    r"\boxed{😀}",
    # longer solutions
    r"We have $2x + 3 = 7$, so $2x = 4$ and $x = \boxed{2}$.",
    r"The roots are $\boxed{1}$ and $\boxed{-1}$, so the sum is $\boxed{0}$.",
    r"The area is $\boxed{16\pi \text{ square units}}$.",
    r"$\frac{1}{2}\cdot\frac{2}{3}=\boxed{\frac{1}{3}}$",
    r"$$\boxed{\sqrt{\frac{1}{2}}}$$",
    r"\boxed{\frac{\frac{1}{2}}{\frac{3}{4}}}",
    r"\boxed{\left\{ x \mid x > 0 \right\}}",
    r"\boxed{\text{odd}}\text{ and }\boxed{\text{even}}",
    r"\boxed{1}\\\boxed{2}",
    r"\boxed{a}\boxed{}",
    r"\boxed{a}\boxed{ }",
    r"\boxed{\boxed{}}",
    r"\boxed{\boxed{5}",
    r"\boxed{5}\text{\boxed{6}}",
]

# ---------------------------------------------------------------------------------- strip
STRIP = [
    "",
    " ",
    "5",
    " 5 ",
    "05",
    "+5",
    "-3",
    "- 3",
    "−3",
    "5.0",
    "2.50",
    "0.5",
    " 0.5",
    "0.5 ",
    "0.50",
    "00.5",
    ".5",
    " .5",
    "-.5",
    "-0.5",
    "x = .5",
    "x=.5",
    "{.5}",
    "1.",
    "1.5",
    # \left \right
    r"\left(1, 2\right)",
    r"\left[1, 2\right)",
    r"\left( 3, 4 \right)",
    r"\left\{1,2\right\}",
    r"\left. 5 \right|",
    r"\leftarrow",
    r"\rightarrow",
    r"x \rightarrow \infty",
    r"\Leftrightarrow",
    # \! and \\ and newlines
    r"10\!000",
    r"\!5",
    r"\\!5",
    r"1\\2",
    r"1 \\ 2",
    r"\\frac{1}{2}",
    r"\\\frac{1}{2}",
    "a\nb",
    "5\n",
    "\n",
    "\t5",
    # degrees
    r"90^\circ",
    r"90^{\circ}",
    r"90 ^\circ",
    r"90^\circ C",
    r"50^\circ C",
    r"90^{ \circ}",
    r"\circ",
    "90°",
    # \$ and \%
    r"\$5",
    "$5",
    r"\$5.00",
    r"\$0.5",
    r"\$ 0.5",
    r"50\%",
    "50%",
    r"6\\%",
    r"0.5\%",
    r"\%",
    r"\$",
    # units
    r"5\text{ cm}",
    r"5 \text{ cm}",
    r"5\text{cm}",
    r"5\text{ cm}^2",
    r"5\text{ m}",
    r"\text{ cm}5",
    r"\text{ }",
    r"5\mbox{ cm}",
    r"\frac{1}{2}\text{ cm}",
    r"5\text{ m}\text{ s}",
    r"\text{ m} \text{ s}",
    r"5 \text{ dollars } \text{ each}",
    r"\text{(A)}",
    r"\text{yes}",
    r"\textbf{(B)}",
    # equations
    "k = 3",
    "k=3",
    "x=3",
    "x = 3",
    "y = 2x + 1",
    "xy = 3",
    "xy=3",
    "= 3",
    "y=",
    "x = y = 3",
    "f(x) = 2x",
    r"x \le 3",
    "a=b",
    " k = 3",
    "k =3 ",
    # sqrt
    r"\sqrt3",
    r"\sqrt{3}",
    r"\sqrt 3",
    r"\sqrt{ 3}",
    r"2\sqrt3",
    r"\sqrt3\sqrt5",
    r"\sqrt{}3",
    r"\sqrt",
    r"2\sqrt",
    r"\sqrt ",
    r"\sqrt\frac12",
    r"\sqrt{3}/2",
    r"\frac{\sqrt3}{2}",
    # frac
    r"\frac12",
    r"\frac{1}{2}",
    r"\frac 1 2",
    r"\frac{1}2",
    r"\frac1{72}",
    r"\frac{72}1",
    r"\frac123",
    r"\frac103",
    r"\frac ab",
    r"\frac1",
    r"\frac1 ",
    r"\frac",
    r"\frac ",
    r"3\frac",
    r"\frac12\frac",
    r"\frac{1}{2}\frac34",
    r"\dfrac{1}{2}",
    r"\tfrac{1}{2}",
    r"\dfrac12",
    r"-\dfrac12",
    "tfrac",
    "dfrac12",
    r"\dfrac",
    # slashes
    "3/4",
    "1/2",
    "-1/2",
    "1/-2",
    "1 / 2",
    " 1/2",
    "+1/2",
    "01/2",
    "1_0/2",
    "5/0",
    "6/8",
    "12/3",
    "a/b",
    "1.5/3",
    "1/2/3",
    "３/４",
    "1/2 ",
    # numbers and separators
    "10,080",
    "10{,}080",
    r"10\,080",
    "1 000",
    "1,000",
    "1{,}000",
    "3.",
    "1e5",
    "3.14",
    # unicode
    "é",
    "e\u0301",
    "3×4",
    r"3\times4",
    "中文",
    "中 文",
    "3\u3000",
    "\u00a05",
    "½",
    "∞",
    "π",
    "\ufeff5",
    # misc LaTeX
    r"\boxed{5}",
    r"\{1, 2\}",
    r"x^{2}",
    r"10^{10}",
    r"\pi",
    r"2 \pi",
    r"\infty",
    r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}",
    r"(-\infty, 3]",
    r"\$\frac{1}{2}\%",
]

# ---------------------------------------------------------------------------------- equiv
EQUIV = [
    ("5", "5"),
    ("5", " 5"),
    ("5", "5 "),
    ("5", "05"),
    ("5", "5.0"),
    ("5", "+5"),
    ("10,080", "10080"),
    ("10,080", "10{,}080"),
    (r"10\,080", "10080"),
    (r"10\!080", "10080"),
    ("1 000", "1000"),
    ("1,000", "1000"),
    ("-3", "- 3"),
    ("-3", "−3"),
    ("-3", "-3.0"),
    ("1/2", "0.5"),
    ("1/2", ".5"),
    ("1/2", r"\frac12"),
    ("1/2", r"\frac{1}{2}"),
    ("1/2", r"\dfrac{1}{2}"),
    ("1/2", r"\tfrac{1}{2}"),
    ("1/2", r"\frac 1 2"),
    ("1/2", r"\frac{1}2"),
    ("1/2", "2/4"),
    ("1/2", "1 / 2"),
    ("1/2", " 1/2"),
    ("1/2", "0.50"),
    ("1/2", r"\left(\frac{1}{2}\right)"),
    ("1/2", "x = 1/2"),
    ("1/2", "+1/2"),
    ("1/2", "01/2"),
    ("0.5", r"\frac{1}{2}"),
    (".5", "0.5"),
    ("0.5", "1/2"),
    ("0.5", "-0.5"),
    ("0.5 ", " 0.5"),
    ("00.5", "0.5"),
    ("x=.5", "1/2"),
    ("x = .5", "1/2"),
    ("x=.5", ".5"),
    ("2.50", "2.5"),
    ("2.5", "5/2"),
    ("5/2", r"\frac{5}{2}"),
    ("5/2", r"\dfrac52"),
    (r"\frac{-1}{2}", r"-\frac{1}{2}"),
    ("-1/2", r"\frac{-1}{2}"),
    ("-1/2", r"-\frac{1}{2}"),
    ("1/-2", r"\frac{1}{-2}"),
    ("-0.5", r"-\frac{1}{2}"),
    (r"-\frac{1}{2}", r"-\dfrac12"),
    (r"-\frac12", "-1/2"),
    (None, None),
    (None, "3"),
    ("3", None),
    (None, ""),
    ("", None),
    ("", ""),
    ("", " "),
    (" ", "\n"),
    ("k = 3", "3"),
    ("x=3", "3"),
    ("xy = 3", "3"),
    ("xy=3", "3"),
    ("x = y = 3", "3"),
    (r"x \le 3", "3"),
    ("x = 3", "y = 3"),
    ("= 3", "3"),
    ("k=3", "k = 3"),
    ("y = 2x + 1", "2x+1"),
    ("f(x) = 2x", "2x"),
    ("a=b", "b"),
    (r"\sqrt3", r"\sqrt{3}"),
    (r"\sqrt 3", r"\sqrt{3}"),
    (r"\sqrt 3", r"\sqrt{}3"),
    (r"\sqrt{ 3}", r"\sqrt{3}"),
    (r"2\sqrt3", r"2\sqrt{3}"),
    (r"\sqrt{3}/2", r"\frac{\sqrt{3}}{2}"),
    (r"\frac{\sqrt{3}}{2}", r"\frac{\sqrt3}{2}"),
    (r"\sqrt", r"\sqrt"),
    (r"\sqrt", r"\sqrt{}"),
    (r"2\sqrt", r"2 \sqrt"),
    (r"\frac12", r"\frac{1}{2}"),
    (r"\frac1{72}", r"\frac{1}{72}"),
    (r"\frac{72}1", r"\frac{72}{1}"),
    (r"\frac123", r"\frac{1}{2}3"),
    (r"\frac{10}{3}", r"\frac103"),
    (r"\frac ab", r"\frac{a}{b}"),
    (r"\frac", r"\frac"),
    (r"\frac", r"\frac "),
    (r"\frac1", r"\frac1"),
    (r"\frac1", r"\frac{1}"),
    (r"3\frac", "3"),
    (r"\frac{3}{4}", "3/4"),
    (r"\frac{3}{4}", r"\frac34"),
    (r"\frac{1}{2}", r"\frac{2}{4}"),
    (r"\dfrac{1}{2}", r"\tfrac{1}{2}"),
    ("tfrac", "frac"),
    ("3/4", "6/8"),
    ("3/4", "0.75"),
    ("12/3", "4"),
    ("a/b", r"\frac{a}{b}"),
    ("1.5/3", r"\frac{1.5}{3}"),
    ("5/0", r"\frac{5}{0}"),
    ("1/2/3", r"\frac{1}{2}/3"),
    ("1_0/2", "10/2"),
    ("３/４", "3/4"),
    (r"90^\circ", "90"),
    (r"90^{\circ}", "90"),
    ("90°", "90"),
    (r"90^\circ", r"90^{\circ}"),
    (r"50^\circ C", "50C"),
    (r"90 ^\circ", "90"),
    (r"\$5", "5"),
    ("$5", "5"),
    (r"\$5.00", "5"),
    (r"\$0.5", "1/2"),
    (r"50\%", "50"),
    ("50%", "50"),
    (r"6\\%", "6"),
    (r"0.5\%", "1/2"),
    (r"\%", ""),
    (r"\$", ""),
    (r"\$\frac{1}{2}\%", "0.5"),
    (r"5\text{ cm}", "5"),
    (r"5 \text{ cm}", "5"),
    (r"5\text{cm}", "5"),
    (r"5\text{ cm}", r"5\text{ m}"),
    (r"5\text{ cm}^2", "5"),
    (r"5\text{ m}\text{ s}", "5"),
    (r"5\text{ m}\text{ s}", r"5\text{ m}\text{ s}"),
    (r"\text{ cm}5", ""),
    (r"\text{ cm}5", "5"),
    (r"\text{ }", ""),
    (r"5\mbox{ cm}", "5"),
    (r"\frac{1}{2}\text{ cm}", "0.5"),
    (r"\text{(A)}", "(A)"),
    ("(A)", "A"),
    (r"\text{yes}", "yes"),
    (r"\left(1,2\right)", "(1,2)"),
    (r"\left[1,2\right)", "[1,2)"),
    ("(1, 2)", "(1,2)"),
    (r"\left( 3, 4 \right)", "(3,4)"),
    (r"\leftarrow", "arrow"),
    (r"\rightarrow", "arrow"),
    (r"x\rightarrow\infty", r"x\to\infty"),
    (r"x \in (0, 1)", "(0,1)"),
    (r"\{1,2\}", r"\{1, 2\}"),
    (r"\left\{1,2\right\}", r"\{1,2\}"),
    (r"\left. 5 \right|", "5"),
    (r"1\\2", r"1\2"),
    (r"\\frac{1}{2}", r"\frac{1}{2}"),
    (r"\\\frac{1}{2}", r"\frac{1}{2}"),
    ("a\nb", "ab"),
    (r"\!5", "5"),
    ("\t5", "5"),
    ("é", "é"),
    ("é", "e"),
    ("é", "e\u0301"),
    ("3×4", r"3\times4"),
    ("3×4", "3×4"),
    ("中文", "中文"),
    ("中 文", "中文"),
    ("3\u3000", "3"),
    ("\u00a05", "5"),
    ("½", "1/2"),
    ("∞", r"\infty"),
    ("π", r"\pi"),
    ("\ufeff5", "5"),
    ("10^{10}", "10^10"),
    ("x^2", "x^{2}"),
    (r"2\pi", r"2 \pi"),
    ("1.0", "1"),
    ("3", "3."),
    ("3.", "3.0"),
    ("1e5", "100000"),
    ("3.14", r"\pi"),
    ("i", r"\sqrt{-1}"),
    (r"\boxed{5}", "5"),
    ("1,000", "1{,}000"),
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix}1\\2\end{pmatrix}"),
    ("(-\\infty, 3]", "(-\\infty,3]"),
    ("A", "a"),
    ("Yes", "yes"),
]

# Groups of related spellings: every unordered pair within a group is a case too.
EQUIV_GROUPS = [
    ["1/2", "0.5", ".5", r"\frac12", r"\dfrac{1}{2}", r"\frac{1}{2}\text{ cm}", r"0.5\%"],
    ["-1/2", r"\frac{-1}{2}", r"-\frac{1}{2}", "-0.5", "-.5", r"-\dfrac12"],
    ["3", "k = 3", "x=3", " 3 ", r"3\text{ apples}", r"3^\circ", r"\$3", r"3\%", "3.0", "03"],
    [r"\sqrt{3}", r"\sqrt3", r"\sqrt 3", r"\sqrt{ 3 }", r"\sqrt{3}\text{ m}", "√3"],
    [r"\frac{3}{4}", r"\frac34", "3/4", r"\tfrac34", "0.75", r"\left(\frac34\right)"],
    ["10080", "10,080", "10{,}080", r"10\,080", r"10\!080", "10 080"],
    [r"(1,2)", r"\left(1,2\right)", r"( 1 , 2 )", r"\left( 1, 2 \right)", r"(1;2)"],
    [r"\frac", r"\sqrt", r"3\frac", r"2\sqrt", r"a\text{ b}\text{ c}"],
    ["2.5", "2.50", "5/2", r"\frac52", r"2\frac{1}{2}", r"2 \frac12"],
    ["é", "e\u0301", "e", "É", "×", "中"],
]

# ---------------------------------------------------------------------------------- gsm8k
GSM = [
    "#### 72",
    "#### -3",
    "#### 1,000",
    "#### 3.5",
    "#### $5",
    r"#### \$5",
    "The answer is 72",
    "#### 5\n#### 6",
    "#### 5 #### 6",
    "####72",
    "####  5",
    "#### 72.",
    "#### .5",
    "#### -0.5",
    "#### ,,,",
    "#### - 3",
    "#### --3",
    "#### +5",
    "#### 1 000",
    "#### 5\n",
    "#### 1e5",
    "#### ５",
    "#### −3",
    "##### 5",
    "# 5",
    "#### 72<|endoftext|>",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
    "",
    "####",
    "#### ",
    "#### abc 5",
    "#### 1,234,567",
    "#### 0",
    "#### 3-4",
    "#### 12,",
    "#### 1.2.3",
    "#### 5%",
    "#### 2/3",
    "#### \t5",
    "The answer is #### 18 dollars",
    "#### 007",
    "#### -",
    "#### .",
    "#### 1,000.50",
]

# ---------------------------------------------------------------------------------- flexible
FLEX = [
    "The answer is $1,234.",
    "so 5 apples",
    "-7",
    "3.14.",
    "no digits",
    "$5",
    "1 2 3",
    "#### 72",
    "The answer is 72",
    "",
    "5",
    "Hmm...",
    "The answer is 5...",
    "Wait... so 5",
    "$-5",
    "-$5",
    "--5",
    "- 7",
    "5%",
    "x=3, y=4.",
    "1.5e3",
    "Answer: 1,000.00",
    "  42  ",
    "The year 2024 had 5 events.",
    "It costs $12.50.",
    "12.50",
    "-0.5",
    "-.5",
    ".5",
    "1,2",
    "1,,2",
    "a-b",
    "-",
    "$",
    "$$",
    "..",
    ",",
    "3 - 4",
    "3-4",
    "10 - -3 = 13",
    "5\n\nQuestion: what is 6?",
    "Ⅻ",
    "５",
    "−7",
    "1e10",
    "The answer is (B) 4",
    "0x1F",
    "#### 1,000\nThe answer is 1000.",
    "$1,000,000",
    "1.",
    "1..",
    "ABC123DEF",
    "Total = 15 dollars. #### 15",
    "She has 3 apples and 4 oranges, so 7 fruits in total.",
    "The answer is 7. Question: 8",
    "It is 1/2",
    "$0.50",
    "5,",
    "5.00.",
]

NOTES = [
    "boxed: last_boxed_only_string takes the LAST '\\boxed' (str.rfind, case-sensitive, whatever "
    "follows it: '\\boxedx{5}' and '\\boxed {5}' are found); only when the string has no '\\boxed' "
    "at all is the last '\\fbox' taken ('\\fbox{5}\\boxed' gives null, not the fbox). From there it "
    "counts every '{' and '}' (escaped '\\{' '\\}' too) and cuts after the '}' that brings the count "
    "back to 0; with no such '}' the result is null, even if an earlier box was complete "
    "('\\boxed{5} and then \\boxed{' gives null; '\\boxed 5}' gives null: the count goes to -1). "
    "Nothing requires the first brace to follow '\\boxed' directly: '\\boxed 5 and \\frac{1}{2}' "
    "gives '\\boxed 5 and \\frac{1}'.",
    "boxed: remove_boxed(s) returns s[7:-1] only when s starts with '\\boxed{' and ends with '}', "
    "else null (None in, an exception caught, null out). So every \\fbox answer is null, and so are "
    "'\\boxed 5' (last_boxed_only_string already gives null: no brace), '\\boxed {5}' (the box is "
    "found, '\\boxed {5}', but does not start with '\\boxed{') and '\\boxed\\{5\\}'. '\\boxed{}' "
    "gives the empty string, not null; '\\boxed{\\}}' gives '\\' (the escaped brace closes the box); "
    "nothing is stripped ('\\boxed{ 5 }' gives ' 5 ').",
    "strip: _strip_string applies, in order: delete '\\n'; delete '\\!'; '\\\\' -> '\\'; "
    "'tfrac' -> 'frac', 'dfrac' -> 'frac' (no backslash needed: 'tfrac' becomes 'frac'); delete "
    "'\\left' and '\\right' as plain substrings ('\\leftarrow' becomes 'arrow', 'x \\rightarrow "
    "\\infty' becomes 'xarrow\\infty'; '\\Leftrightarrow' is untouched: case-sensitive); delete "
    "'^{\\circ}' and '^\\circ'; delete '\\$'; units: if '\\text{ ' (with the space) occurs, keep what "
    "precedes it, and when it occurs twice an assert raises; delete '\\%'; ' .' -> ' 0.' and "
    "'{.' -> '{0.'; return '' if empty; prefix '0' if the string starts with '.'; if splitting on "
    "'=' gives exactly 2 parts and the left one has at most 2 characters (spaces count: 'k = 3' "
    "ok, 'xy = 3' and ' k = 3' not), keep the right part; _fix_sqrt; delete all ' ' (only U+0020: "
    "tabs, NBSP, U+3000 stay); _fix_fracs; '0.5' -> '\\frac{1}{2}' (whole string only); "
    "_fix_a_slash_b.",
    "strip: the leading-'.' fix runs BEFORE the 'x =' split, so 'x=.5' gives '.5' (never '0.5', so "
    "not 1/2), while 'x = .5' gives 1/2 (' .' was already ' 0.'); '-.5' stays '-.5'; "
    "'\\left. 5 \\right|' gives '0.5|'.",
    "strip: _fix_sqrt runs before spaces are deleted, wrapping the one character after each "
    "'\\sqrt' that is not '{': '\\sqrt 3' gives '\\sqrt{ }3' then '\\sqrt{}3' (not '\\sqrt{3}'), "
    "'\\sqrt ' gives '\\sqrt{}', '\\sqrt\\frac12' gives '\\sqrt{\\}frac12' (the backslash is "
    "wrapped, and the '\\frac' is gone); '\\sqrt' at the very end raises IndexError.",
    "strip: _fix_fracs runs after spaces are deleted, so '\\frac 1 2' is '\\frac{1}{2}'. Per "
    "'\\frac': a following '{' is kept as is ('\\frac{1}2' stays); otherwise two characters a b "
    "become '{a}{b}' (or '{a}' + b when b is '{': '\\frac1{72}' -> '\\frac{1}{72}'; '\\frac103' -> "
    "'\\frac{1}{0}3'); a single character left returns the string as it was before _fix_fracs "
    "('\\frac1' stays); nothing left ('\\frac' at the end, also '\\dfrac') raises IndexError.",
    "strip: _fix_a_slash_b: exactly one '/', both sides int() and str(int(a)) + '/' + str(int(b)) "
    "equal to the string: '3/4' -> '\\frac{3}{4}', '-1/2' -> '\\frac{-1}{2}', '1/-2' -> "
    "'\\frac{1}{-2}', '5/0' -> '\\frac{5}{0}'; '+1/2', '01/2', '1_0/2', '\uff13/\uff14', '1.5/3', "
    "'a/b' unchanged. No reduction ('6/8' is not '3/4') and only the exact string '0.5' becomes a "
    "fraction ('0.50', '2.5', '-0.5' do not).",
    "equiv: is_equiv(None, None) is True (it prints 'WARNING: Both None'), one None is False; "
    "otherwise _strip_string(a) == _strip_string(b), and if either raises, a == b on the raw "
    "strings (so '\\frac' equals '\\frac', and '\\frac' is not '\\frac ' though both raise). Any "
    "unit text equals any other ('5\\text{ cm}' == '5\\text{ m}' == '5'); '\\text{ cm}5' strips to "
    "'' and equals ''; '0.5\\%' and '\\$0.5' equal 1/2; commas, '\\,', '{,}' are kept ('10,080' != "
    "'10080'); '\u2212' (U+2212) is not '-'; no Unicode normalization ('\u00e9' != 'e\u0301').",
    "gsm8k_extract: extract_answer = the first match of '#### (\\-?[0-9\\.\\,]+)' (re.search), "
    "group stripped, commas deleted; '[invalid]' (null here) without a match. Exactly one space "
    "after '####' ('####72', '####  5' are null); '$' or '+' before the digits is null; the match "
    "stops at the first other character ('#### 1 000' and '#### 1e5' give '1', '#### 3-4' gives "
    "'3'); a trailing '.' is kept ('#### 72.' gives '72.', '#### .' gives '.'); '#### ,,,' gives "
    "the empty string, not null; [0-9] is ASCII only ('#### \uff15' is null).",
    "flexible_extract: RegexFilter re.findall('(-?[$0-9.,]{2,})|(-?[0-9]+)'), the LAST match "
    "(group_select -1), its first non-empty group, .strip(); then take_first; then exact_match's "
    "regexes_to_ignore in order with re.sub: ',' deleted, '\\$' deleted, '(?s).*#### ' (cannot "
    "match a filtered string), '\\.$' (ONE trailing '.'); then lowercased. The first alternative "
    "takes runs of 2+ of '$', digits, '.', ',' (with an optional leading '-'), so '$$' gives '' "
    "(not null), '..' gives '.', 'Hmm...' gives '..', '5...' gives '5..'; single digits come from "
    "the second alternative ('1 2 3' gives '3'); '-$5', '$-5' and '--5' give '-5', '3-4' gives "
    "'-4' (the hyphen is taken as a sign), '- 7' and '\u22127' give '7', 'It is 1/2' gives '2', "
    "'1.5e3' gives '3', '0x1F' gives '1'; '1,2' gives '12'. [0-9] is ASCII only ('\uff15' is null).",
]


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def commit_of(directory, given):
    if given:
        return given
    try:
        out = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        sys.exit(f"{directory} is not a git checkout: give its commit with the --commit-* flag")
    return out.stdout.strip()


def require(directory, rel):
    path = os.path.join(directory, rel)
    if not os.path.isfile(path):
        sys.exit(f"no {path}")
    return path


def import_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def top_level_nodes(path, names, keep_imports=()):
    """The file's top-level imports of the modules in keep_imports, and its top-level definitions
    (functions, classes, assignments) of the given names, in file order."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    nodes, found = [], set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            if all(a.name.split(".")[0] in keep_imports for a in node.names):
                nodes.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            nodes.append(node)
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if targets & set(names):
                nodes.append(node)
                found |= targets
    missing = set(names) - found
    if missing:
        sys.exit(f"{path} defines no {sorted(missing)}")
    return nodes


def load_definitions(path, names, keep_imports=()):
    """Executes the official definitions, unchanged, in a fresh namespace."""
    nodes = top_level_nodes(path, names, keep_imports)
    module = ast.Module(body=nodes, type_ignores=[])
    namespace = {"__name__": "official_" + os.path.basename(path).replace(".", "_")}
    exec(compile(module, path, "exec"), namespace)
    return namespace


def import_lm_eval(lm_eval_dir):
    package_dir = os.path.join(lm_eval_dir, "lm_eval")
    package = types.ModuleType("lm_eval")
    package.__path__ = [package_dir]
    package.__file__ = os.path.join(package_dir, "__init__.py")
    sys.modules["lm_eval"] = package
    sys.path.insert(0, lm_eval_dir)
    import lm_eval.filters  # noqa: E402
    from lm_eval.api.instance import Instance  # noqa: E402

    return lm_eval.filters, Instance


def quote(s):
    return f"'{s}'" if s.isprintable() else repr(s)


def metric_processing(prediction, kwargs):
    """What exact_match_hf_evaluate does to one prediction before comparing."""
    for regex in kwargs.get("regexes_to_ignore") or []:
        prediction = re.sub(regex, "", prediction)
    if kwargs.get("ignore_case"):
        prediction = prediction.lower()
    if kwargs.get("ignore_punctuation"):
        prediction = prediction.translate(string.punctuation.maketrans("", "", string.punctuation))
    if kwargs.get("ignore_numbers"):
        prediction = prediction.translate(string.digits.maketrans("", "", string.digits))
    return prediction


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hendrycks-math", required=True, help="checkout of hendrycks/math")
    ap.add_argument("--gsm", required=True, help="checkout of openai/grade-school-math")
    ap.add_argument("--lm-eval", required=True, help="checkout of EleutherAI/lm-evaluation-harness")
    ap.add_argument("--commit-hendrycks-math")
    ap.add_argument("--commit-gsm")
    ap.add_argument("--commit-lm-eval")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    math_dir = os.path.abspath(args.hendrycks_math)
    gsm_dir = os.path.abspath(args.gsm)
    lm_dir = os.path.abspath(args.lm_eval)

    # ------------------------------------------------------------ hendrycks/math
    math_files = ["modeling/dataset/util.py", "modeling/math_equivalence.py",
                  "modeling/eval_math_gpt.py", "modeling/evaluate_gpt3.py"]
    math_paths = {rel: require(math_dir, rel) for rel in math_files}
    util = import_file("hendrycks_math_dataset_util", math_paths["modeling/dataset/util.py"])
    equivalence = import_file("hendrycks_math_equivalence",
                              math_paths["modeling/math_equivalence.py"])
    remove_boxed = load_definitions(math_paths["modeling/eval_math_gpt.py"],
                                    ["remove_boxed"])["remove_boxed"]
    trees = [[ast.dump(n) for n in top_level_nodes(math_paths[rel], ["remove_boxed"])]
             for rel in ("modeling/eval_math_gpt.py", "modeling/evaluate_gpt3.py")]
    if trees[0] != trees[1]:
        sys.exit("remove_boxed differs between eval_math_gpt.py and evaluate_gpt3.py")
    last_boxed_only_string = util.last_boxed_only_string
    strip_string = equivalence._strip_string
    is_equiv = equivalence.is_equiv

    # ------------------------------------------------------------ grade-school-math
    gsm_rel = "grade_school_math/dataset.py"
    gsm_path = require(gsm_dir, gsm_rel)
    gsm = load_definitions(gsm_path, ["ANS_RE", "INVALID_ANS", "extract_answer"], {"re"})

    # ------------------------------------------------------------ lm-evaluation-harness
    import yaml

    lm_files = ["lm_eval/api/__init__.py", "lm_eval/api/filter.py", "lm_eval/api/instance.py",
                "lm_eval/api/registry.py", "lm_eval/api/metrics.py", "lm_eval/filters/__init__.py",
                "lm_eval/filters/custom.py", "lm_eval/filters/extraction.py",
                "lm_eval/filters/selection.py", "lm_eval/filters/transformation.py",
                "lm_eval/tasks/gsm8k/gsm8k.yaml"]
    lm_paths = {rel: require(lm_dir, rel) for rel in lm_files}
    with open(lm_paths["lm_eval/tasks/gsm8k/gsm8k.yaml"], encoding="utf-8") as f:
        task_config = yaml.safe_load(f)
    filters, Instance = import_lm_eval(lm_dir)
    exact_match_hf_evaluate = load_definitions(
        lm_paths["lm_eval/api/metrics.py"], ["exact_match_hf_evaluate"],
        {"re", "string", "numpy"})["exact_match_hf_evaluate"]
    (filter_config,) = [c for c in task_config["filter_list"] if c["name"] == "flexible-extract"]
    components = []
    for function in filter_config["filter"]:  # as lm_eval/api/task.py builds filter pipelines
        kwargs = {key: function[key] for key in function if key != "function"}
        components.append([function["function"], kwargs])
    ensemble = filters.build_filter_ensemble(filter_config["name"], components)
    (metric_config,) = [m for m in task_config["metric_list"] if m["metric"] == "exact_match"]
    metric_kwargs = {key: metric_config[key] for key in metric_config
                     if key not in ["metric", "aggregation", "higher_is_better", "hf_evaluate"]}
    (regex_component,) = [c for c in components if c[0] == "regex"]
    fallback = regex_component[1].get("fallback", "[invalid]")

    # ------------------------------------------------------------ run
    boxed = []
    for text in BOXED:
        last = last_boxed_only_string(text)
        boxed.append({"text": text, "last_boxed_only_string": last,
                      "remove_boxed": remove_boxed(last)})

    strip = []
    raises = []
    for s in STRIP:
        try:
            out = strip_string(s)
        except Exception as e:  # noqa: BLE001  (the official is_equiv catches everything too)
            out = None
            raises.append(f"{quote(s)} ({type(e).__name__})")
        strip.append({"input": s, "strip_string": out})

    pairs = list(EQUIV)
    for group in EQUIV_GROUPS:
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                pairs.append((group[i], group[j]))
    seen = set()
    equiv = []
    for a, b in pairs:
        if (a, b) in seen:
            continue
        seen.add((a, b))
        with contextlib.redirect_stdout(io.StringIO()):
            result = is_equiv(a, b)
        if not isinstance(result, bool):
            sys.exit(f"is_equiv({a!r}, {b!r}) gave {result!r}")
        equiv.append({"a": a, "b": b, "is_equiv": result})
    for a, b in pairs:
        for s in (a, b):
            if s is None or s in STRIP:
                continue
            try:
                strip_string(s)
            except Exception as e:  # noqa: BLE001
                entry = f"{quote(s)} ({type(e).__name__})"
                if entry not in raises:
                    raises.append(entry)

    gsm8k_extract = []
    for text in GSM:
        out = gsm["extract_answer"](text)
        gsm8k_extract.append({"text": text,
                              "extract_answer": None if out == gsm["INVALID_ANS"] else out})

    instances = []
    for i, text in enumerate(FLEX):
        instance = Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=i)
        instance.resps = [text]
        instances.append(instance)
    ensemble.apply(instances)
    flexible_extract = []
    for text, instance in zip(FLEX, instances):
        filtered = instance.filtered_resps[filter_config["name"]]
        if not isinstance(filtered, str):
            sys.exit(f"flexible-extract gave {filtered!r} for {text!r}")
        answer = None if filtered == fallback else metric_processing(filtered, metric_kwargs)
        if answer is not None and metric_processing(answer, metric_kwargs) == answer:
            score = exact_match_hf_evaluate(predictions=[filtered], references=[answer],
                                            **metric_kwargs)["exact_match"]
            if score != 1.0:
                sys.exit(f"exact_match_hf_evaluate disagrees on {text!r}: {filtered!r} {answer!r}")
        flexible_extract.append({"text": text, "answer": answer})

    notes = list(NOTES)
    notes.append("strip: inputs on which _strip_string raises (null in 'strip'; is_equiv then "
                 "compares the raw strings): " + ", ".join(raises) + ".")

    doc = {
        "source": {
            "hendrycks_math": {
                "commit": commit_of(math_dir, args.commit_hendrycks_math),
                "files": {rel: sha256_of(p) for rel, p in math_paths.items()},
            },
            "grade_school_math": {
                "commit": commit_of(gsm_dir, args.commit_gsm),
                "files": {gsm_rel: sha256_of(gsm_path)},
            },
            "lm_evaluation_harness": {
                "commit": commit_of(lm_dir, args.commit_lm_eval),
                "files": {rel: sha256_of(p) for rel, p in lm_paths.items()},
            },
        },
        "notes": notes,
        "boxed": boxed,
        "strip": strip,
        "equiv": equiv,
        "gsm8k_extract": gsm8k_extract,
        "flexible_extract": flexible_extract,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(boxed)} boxed, {len(strip)} strip ({len(raises)} raising inputs), "
          f"{len(equiv)} equiv ({sum(e['is_equiv'] for e in equiv)} true), "
          f"{len(gsm8k_extract)} gsm8k_extract, {len(flexible_extract)} flexible_extract "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
