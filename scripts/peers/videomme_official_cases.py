#!/usr/bin/env python3
"""lmms-eval's Video-MME prompts, subtitles and answer extraction on retain's test cases.

Contains no lmms-eval code: imports `lmms_eval.tasks.videomme.utils` and
`lmms_eval.tasks._task_utils.mcq_extract` from the user's checkout (--lmms-eval; its
videomme.yaml / videomme_w_subtitle.yaml read for the prompt kwargs) and runs them:
  - extract_characters_regex (extract_mcq_answer with A-D) on RESPONSES;
  - videomme_doc_to_text / videomme_doc_to_text_subtitle on DOCS with the YAMLs' `default` and
    `qwen3_vl` lmms_eval_specific_kwargs, the subtitle task's frame_num included, over the clips
    in --clips (HF_HOME points at a scratch copy laid out as lmms-eval expects:
    videomme/data/<videoID>.mp4 and videomme/subtitle/<videoID>.srt);
  - cv2's CAP_PROP_FPS / CAP_PROP_FRAME_COUNT of each clip (what the subtitles align with);
  - list(set(x)) on integer lists (the order subtitle blocks come out in).
It needs cv2 (opencv-python-headless), numpy, PyYAML; `datasets` and loguru are stubbed when
absent (used at import only for an annotation and a logger).

tests/fixtures/videomme_official_cases.json was produced from lmms-eval commit
75571cfe0fa36ca5ec2e6aa2bb268f9d38295af3 with:

  R=/work/.mirror/EvolvingLMMs-Lab+lmms-eval/repo; mkdir -p /tmp/lmms
  for f in lmms_eval/tasks/videomme/utils.py lmms_eval/tasks/videomme/videomme.yaml \\
      lmms_eval/tasks/videomme/videomme_w_subtitle.yaml lmms_eval/tasks/_task_utils/mcq_extract.py; do \\
      mkdir -p /tmp/lmms/$(dirname $f); git --git-dir=$R show HEAD:$f > /tmp/lmms/$f; done
  pip install --target /tmp/cvpkg opencv-python-headless loguru
  PYTHONPATH=/tmp/cvpkg ~/.cache/retain/venv/bin/python scripts/peers/videomme_official_cases.py \\
      --lmms-eval /tmp/lmms --commit $(git --git-dir=$R rev-parse HEAD) \\
      --clips tests/fixtures/videomme_clips --out tests/fixtures/videomme_official_cases.json
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import types

RESPONSES = [
    "A", "B.", "(C)", "D) because", "The answer is B.", "the best answer is: C", "I choose D",
    "Answer: A", "C: the dog", " b ", "", "   ", "None of them", "E", "A and B", "Option (B)",
    "My answer is (D).", "BA", "The correct option is C, not A.", "答案是B", "选 C", "정답은 D",
    "答えは A", "(A) or maybe (C)", "Because of B. Final: D", "A.\nB.", "Apple", "xyz C",
    "ABCD", "\"B\"", "'D'", "B!", "?A?", "The video shows a cat. D", "It is not A; it is B",
    "A:", "answer is", "The answer is", "D.\n\nExplanation: the man in A is wrong",
    "İ think the answer is C", "Ünder B", "A)", "(B", "C.D", "choice is A, choice is B",
    "I pick option B. I select C.", "Answer with B", "Bold", "CAT", "a cat in D",
]

DOCS = [
    {"videoID": "a", "question_id": "001-1", "duration": "short", "domain": "Knowledge",
     "sub_category": "Astronomy", "task_type": "Counting Problem",
     "question": "How many planets are shown in the video?",
     "options": ["A. 3.", "B. 4.", "C. 5.", "D. 6."], "answer": "B"},
    {"videoID": "b", "question_id": "002-2", "duration": "medium", "domain": "Multilingual",
     "sub_category": "Multilingual", "task_type": "OCR Problems",
     "question": "What does the sign say?\nRead it carefully.",
     "options": ["A. Stop", "B. Go", "C. Wait", "D. 停"], "answer": "D"},
    {"videoID": "missing", "question_id": "003-1", "duration": "long", "domain": "Life Record",
     "sub_category": "Food", "task_type": "Action Reasoning", "question": "Why?",
     "options": ["A. x", "B. y", "C. z", "D. w"], "answer": "A"},
]


def srt_time(seconds):
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def make_srt(seed, blocks, duration, crlf=False):
    """`blocks` subtitles over `duration` s: most in the font tag lmms-eval extracts, some not,
    one (start, end) written twice (the dict keeps the first place and the last text)."""
    rng = random.Random(seed)
    lines = []
    t = 0.0
    for i in range(blocks):
        start = t
        end = min(duration, start + rng.uniform(0.02, 2 * duration / blocks))
        t = end
        if i % 11 == 5:
            text = f"plain line {i} without the tag"
        else:
            text = f'<font color="white" size=".72c">line {i}: {rng.choice(["hello", "world", "über", "猫"])}</font>'
        if i % 7 == 3:
            text += "\nsecond line"
        lines.append(f"{i + 1}\n{srt_time(start)} --> {srt_time(end)}\n{text}\n")
        if i == blocks // 2:
            lines.append(f"{i + 1}b\n{srt_time(start)} --> {srt_time(end)}\n"
                         f'<font color="white" size=".72c">repeated {i}</font>\n')
    out = "\n".join(lines)
    return out.replace("\n", "\r\n") if crlf else out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmms-eval", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--clips", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    for name in ("datasets", "loguru"):
        try:
            __import__(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.Dataset = object
            stub.logger = types.SimpleNamespace(info=print, warning=print, debug=print)
            sys.modules[name] = stub
    home = tempfile.mkdtemp()
    os.environ["HF_HOME"] = home
    sys.path.insert(0, os.path.abspath(args.lmms_eval))
    import cv2
    import yaml
    from lmms_eval.tasks._task_utils.mcq_extract import extract_mcq_answer  # noqa: F401
    from lmms_eval.tasks.videomme import utils

    def kwargs_of(task):
        path = os.path.join(args.lmms_eval, "lmms_eval/tasks/videomme", task + ".yaml")
        text = "".join(l for l in open(path) if "!function" not in l)
        return yaml.safe_load(text)["lmms_eval_specific_kwargs"]

    plain, subtitled = kwargs_of("videomme"), kwargs_of("videomme_w_subtitle")
    os.makedirs(os.path.join(home, "videomme", "data"))
    os.makedirs(os.path.join(home, "videomme", "subtitle"))
    clips = {}
    for clip, blocks, crlf in (("a.mp4", 160, False), ("b.mkv", 40, True)):
        vid = clip.split(".")[0]
        dst = os.path.join(home, "videomme", "data", vid + ".mp4")
        shutil.copy(os.path.join(args.clips, clip), dst)
        cap = cv2.VideoCapture(dst)
        fps, frames = cap.get(cv2.CAP_PROP_FPS), int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        srt = make_srt(len(vid), blocks, frames / fps, crlf)
        with open(os.path.join(home, "videomme", "subtitle", vid + ".srt"), "w", newline="") as f:
            f.write(srt)
        clips[vid] = {"file": clip, "cv2_fps": fps, "cv2_frames": frames, "srt": srt}

    prompts = []
    for doc in DOCS:
        for fmt, kw_plain, kw_sub in (("default", plain["default"], subtitled["default"]),
                                      ("qwen3_vl", plain["qwen3_vl"], subtitled["qwen3_vl"])):
            entry = {"doc": doc, "format": fmt, "plain": utils.videomme_doc_to_text(doc, kw_plain)}
            if doc["videoID"] != "missing":
                entry["subtitled"] = utils.videomme_doc_to_text_subtitle(doc, kw_sub)
                entry["frame_num"] = kw_sub.get("frame_num")
            else:
                entry["subtitled"] = utils.videomme_doc_to_text_subtitle(doc, kw_sub)
                entry["frame_num"] = kw_sub.get("frame_num")
            prompts.append(entry)
    # Other frame counts on the long subtitle file (the set order wraps past 128 blocks).
    extra = []
    for frame_num in (1, 7, 32, 100, 768, -1):
        kw = dict(subtitled["default"], frame_num=frame_num)
        extra.append({"doc": DOCS[0], "frame_num": frame_num,
                      "subtitled": utils.videomme_doc_to_text_subtitle(DOCS[0], kw)})

    rng = random.Random(7)
    sets = []
    for n in (0, 1, 5, 8, 20, 33, 77, 200, 1000):
        items = [rng.randrange(0, rng.choice([10, 130, 600, 5000])) for _ in range(n)]
        sets.append({"items": items, "order": list(set(items))})

    extraction = [{"response": r, "official": utils.extract_characters_regex(r)} for r in RESPONSES]
    records = []
    for doc, response in zip(DOCS * 3, ["B", "The answer is D", "(A)", "C", "D.", "A", "B", "", "A"]):
        record = utils.videomme_process_results(doc, [response])["videomme_perception_score"]
        records.append(dict(record, response=response))
    overall = utils.videomme_aggregate_results(records)

    with open(args.out, "w") as f:
        json.dump({"lmms_eval_commit": args.commit, "python": sys.version.split()[0],
                   "opencv": cv2.__version__, "clips": clips, "prompts": prompts,
                   "subtitle_frames": extra, "sets": sets, "extraction": extraction,
                   "records": records, "overall": overall}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    shutil.rmtree(home)
    print(f"wrote {args.out}: {len(extraction)} responses, {len(prompts)} prompts, "
          f"{len(extra)} subtitle frame counts, {len(sets)} sets, overall {overall:.2f}")


if __name__ == "__main__":
    main()
