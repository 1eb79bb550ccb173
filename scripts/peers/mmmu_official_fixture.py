#!/usr/bin/env python3
"""The official MMMU prompts and scores of tests/fixtures/make_mmmu_fixture.py's questions.

Contains no MMMU code: imports `utils.data_utils` and `utils.eval_utils` from the user's checkout
of https://github.com/MMMU-Benchmark/MMMU (--mmmu-repo; its mmmu/ folder first on sys.path) and
reads its configs/llava1.5.yaml. For each question, in the fixture's order (the official subject
order): construct_prompt(sample, config)['final_input_prompt'] with the config's one-element
lists unwrapped as run_llava.py does; the response parsed as main_parse_and_eval.py does
(parse_multi_choice_response with all_choices / index2ans from construct_prompt, or
parse_open_response); evaluate() per subject with the gold answers as main_eval_only.py gets
them from answer_dict_val.json (an answer written as a list literal is that list); each
discipline's and the overall calculate_ins_level_acc, and round(acc, 3) as main_eval_only.py
prints them. eval_utils seeds `random` with 42 at import: this process draws nothing before.

tests/fixtures/mmmu_official_fixture.json was produced from MMMU commit
bb0b95a945998d91dfef37e969e07d49d1139438 with:

  mkdir -p /tmp/mmmu/mmmu/utils /tmp/mmmu/mmmu/configs && R=/work/.mirror/MMMU-Benchmark+MMMU/repo
  for f in mmmu/utils/eval_utils.py mmmu/utils/data_utils.py mmmu/configs/llava1.5.yaml; do \\
      git -C $R show HEAD:$f > /tmp/mmmu/$f; done
  ~/.cache/retain/venv/bin/python scripts/peers/mmmu_official_fixture.py --mmmu-repo /tmp/mmmu \\
      --commit $(git -C $R rev-parse HEAD) --out tests/fixtures/mmmu_official_fixture.json
"""

import argparse
import ast
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mmmu-repo", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    mmmu_dir = os.path.join(os.path.abspath(args.mmmu_repo), "mmmu")
    sys.path.insert(0, mmmu_dir)
    from utils import eval_utils  # noqa: E402  (seeds random with 42)
    from utils import data_utils  # noqa: E402

    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures"))
    from make_mmmu_fixture import QUESTIONS  # noqa: E402

    config = data_utils.load_yaml(os.path.join(mmmu_dir, "configs", "llava1.5.yaml"))
    for key, value in config.items():  # run_llava.py
        if key != "eval_params" and type(value) == list:
            assert len(value) == 1
            config[key] = value[0]

    questions, by_subject, subjects = [], {}, []
    for item in QUESTIONS:
        sample = {k: item[k] for k in ("id", "question", "options", "answer", "question_type")}
        prompt = data_utils.construct_prompt(sample, config)
        response = item["response"]
        if item["question_type"] == "multiple-choice":
            parsed = eval_utils.parse_multi_choice_response(response, prompt["all_choices"],
                                                            prompt["index2ans"])
        else:
            parsed = eval_utils.parse_open_response(response)
        answer = item["answer"]
        if answer.startswith("["):
            answer = ast.literal_eval(answer)  # answer_dict_val.json's lists
        subject = "_".join(item["id"].split("_")[1:-1])
        if subject not in by_subject:
            subjects.append(subject)
            by_subject[subject] = []
        by_subject[subject].append({"id": item["id"], "question_type": item["question_type"],
                                    "answer": answer, "parsed_pred": parsed})
        questions.append({"id": item["id"], "prompt": prompt["final_input_prompt"],
                          "parsed": parsed if isinstance(parsed, str) else None})

    results, judged = {}, {}
    for subject in subjects:
        judge, metric = eval_utils.evaluate(by_subject[subject])
        metric["num_example"] = len(by_subject[subject])
        results[subject] = metric
        judged.update(judge)
    for entry in questions:
        entry["correct"] = judged[entry["id"]] == "Correct"
    printed = {s: round(r["acc"], 3) for s, r in results.items()}
    for domain, members in data_utils.DOMAIN_CAT2SUB_CAT.items():
        inside = {s: results[s] for s in members if s in results}
        if inside:
            printed[domain] = round(eval_utils.calculate_ins_level_acc(inside), 3)
    printed["overall"] = round(eval_utils.calculate_ins_level_acc(results), 3)
    doc = {"source": f"official MMMU data_utils.py / eval_utils.py at commit {args.commit}",
           "generator": "scripts/peers/mmmu_official_fixture.py",
           "questions": questions, "accuracy": printed}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(questions)} questions, overall {printed['overall']} -> {args.out}")


if __name__ == "__main__":
    main()
