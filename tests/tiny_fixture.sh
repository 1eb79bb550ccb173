# Sourced by the training shell tests: a random tiny qwen3 and HDF5 shards of random word
# documents, in the current directory (model/, docs.jsonl, shards/).
# Usage: make_tiny_fixture RETAIN PYTHON SEED DOCS
make_tiny_fixture() {
  local retain=$1 python=$2 seed=$3 docs=$4
  "$retain" init-model --arch qwen3 --preset tiny --seed "$seed" --out model 2>/dev/null || fail "init-model"
  "$python" - "$seed" "$docs" <<'PY'
import json, random, sys
r = random.Random(int(sys.argv[1]))
words = "alpha beta gamma delta key value door cache the a of reads keeps".split()
with open("docs.jsonl", "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(json.dumps({"text": " ".join(r.choice(words) for _ in range(r.randint(10, 90)))}) + "\n")
PY
  "$retain" prep --tokenizer model --input docs.jsonl --format jsonl --out shards 2>/dev/null || fail "prep"
}
