# Sourced by the training shell tests: a fresh work directory, `fail`, a free port, a random tiny
# qwen3 with HDF5 shards of random word documents, and the tiny gate recipe they train.

fail() { echo "FAIL $*"; exit 1; }

# Empties DIR and makes it the current directory.
enter_work_dir() { rm -rf "$1" && mkdir -p "$1" && cd "$1" || fail "cannot use $1"; }

# A TCP port nothing listens on now. Usage: free_port PYTHON
free_port() { "$1" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# model/, docs.jsonl, shards/ in the current directory. Usage: make_tiny_fixture RETAIN PYTHON SEED DOCS
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

# recipe.yaml: the tiny gates, loss and optimiser every training test uses, plus the lines given
# (model, data, train, checkpoint, dist ...). Usage: write_tiny_recipe 'model: {path: model}' ...
write_tiny_recipe() {
  {
    echo "gates: {arch: mlp3, width: 16, bias_init: 3.0}"
    echo "loss: {memory: 8, logit_block_size: 64}"
    echo "optim: {warmup_steps: 2, lr: 5.0e-3}"
    printf '%s\n' "$@"
  } > recipe.yaml
}
