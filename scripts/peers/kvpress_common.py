"""What the kvpress drivers share (scripts/peers/kvpress_synthetic.py, kvpress_ruler.py): retain's
tokenizers as a driver needs them, retain's budget rounding, the kvpress press for a retain policy
spec, greedy answering under kvpress's semantics (the context compressed once after its prefill, the
question and generated tokens on top, uncompressed) and the side-by-side report."""
import json
import math
import os
import sys
import types

# kvpress imports `datasets` for two presses' calibration downloads, which the drivers never use.
_datasets = types.ModuleType("datasets")
_datasets.load_dataset = lambda *a, **k: (_ for _ in ()).throw(  # noqa: E731
    RuntimeError("datasets is not installed (kvpress calibration presses are not used here)"))
sys.modules.setdefault("datasets", _datasets)

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, DynamicCache  # noqa: E402

import kvpress  # noqa: E402
from kvpress.utils import compute_n_kept  # noqa: E402


def load_model(model_dir):
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    return model


class SentencePieceIds:
    """retain's SentencePieceTokenizer as the driver needs it: BOS where tokenizer_config.json's
    add_bos_token says so (true when it is absent, as transformers' LlamaTokenizer), then the
    text's pieces. The demo's base says false: a BOS put there by the driver shifted every position
    by one, which the full cache shrugged off (402/402 answers alike) but eviction did not."""

    def __init__(self, model_dir):
        import sentencepiece

        self.sp = sentencepiece.SentencePieceProcessor(model_file=f"{model_dir}/tokenizer.model")
        tc_path = f"{model_dir}/tokenizer_config.json"
        add_bos = True
        if os.path.exists(tc_path):
            add_bos = json.load(open(tc_path)).get("add_bos_token", True)
        self.prefix = [self.sp.bos_id()] if add_bos else []
        self.eos = {self.sp.eos_id()}

    def encode(self, text):
        return self.sp.encode(text)

    def decode(self, ids):
        return self.sp.decode(ids)


class TokenizerJsonIds:
    """retain's HfTokenizer as the driver needs it: encode_prompt is the post-processor's prefix
    (the special tokens its template puts before the text) and the text's ids without them;
    generation stops at config.json's EOS ids and the tokenizer's EOS, as retain's stop_ids."""

    def __init__(self, model_dir):
        from tokenizers import Tokenizer

        path = f"{model_dir}/tokenizer.json"
        self.tok = Tokenizer.from_file(path)
        post = json.load(open(path)).get("post_processor")
        self.prefix = []
        if post is not None and post.get("type") == "TemplateProcessing":
            for item in post["single"]:
                if "Sequence" in item:
                    break
                name = item["SpecialToken"]["id"]
                self.prefix += post["special_tokens"][name]["ids"]
        elif post is not None and post.get("type") not in ("ByteLevel",):
            sys.exit(f"{path}: post_processor {post.get('type')} is not handled by this driver "
                     "(TemplateProcessing, ByteLevel or none)")
        config = json.load(open(f"{model_dir}/config.json"))
        eos = config.get("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        tc_path = f"{model_dir}/tokenizer_config.json"
        if os.path.exists(tc_path):
            token = json.load(open(tc_path)).get("eos_token")
            token = token.get("content") if isinstance(token, dict) else token
            if token is not None and self.tok.token_to_id(token) is not None:
                self.eos.add(self.tok.token_to_id(token))

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True)


def load_ids(model_dir):
    if os.path.exists(f"{model_dir}/tokenizer.json"):
        return TokenizerJsonIds(model_dir)
    return SentencePieceIds(model_dir)


def add_ties_flag(parser):
    parser.add_argument("--ties", choices=("topk", "later"), default="topk",
                        help="how a scoring press orders equal scores: topk (kvpress as shipped: "
                             "torch.topk's order) or later (retain's: the later entry stays)")


def resolve_budget(budget, tokens):
    """retain's eval/cache_factory.cpp resolve_budget."""
    if budget >= 1:
        return int(budget)
    return max(1, int(math.floor(budget * tokens + 0.5)))


def top_k_ties_to_later(scores, k):
    """The k largest scores along the last dimension with ties going to the later entry: retain's
    eval/cache/ranking.cpp rule (a stable sort of the reversed scores), where kvpress takes
    `torch.topk`'s order, which is unspecified among equal scores."""
    order = scores.flip(-1).sort(dim=-1, descending=True, stable=True).indices[..., :k]
    return scores.shape[-1] - 1 - order


def _compress_ties_to_later(self, module, hidden_states, keys, values, attentions, kwargs):
    """kvpress's ScorerPress selection (score, keep compute_n_kept of them per KV head, gather)
    with retain's tie rule in place of torch.topk."""
    if self.compression_ratio == 0:
        return keys, values
    scores = self.score(module, hidden_states, keys, values, attentions, kwargs)
    n_kept = compute_n_kept(keys.shape[2], self.compression_ratio)
    indices = top_k_ties_to_later(scores, n_kept).unsqueeze(-1).expand(-1, -1, -1,
                                                                      module.head_dim)
    return keys.gather(2, indices).contiguous(), values.gather(2, indices).contiguous()


def make_press(spec, keep, context_len, ties="topk"):
    """kvpress's press for a retain policy spec, keeping `keep` of `context_len` entries; with
    ties="later" a scoring press breaks ties as retain does (top_k_ties_to_later)."""
    press = _make_press(spec, keep, context_len)
    if ties == "later" and press is not None:
        # Only a press that selects through ScorerPress.compress: PyramidKV and AdaKV select with
        # their own, which this would silently replace with uniform per-head selection.
        if type(press).compress is not kvpress.ScorerPress.compress:
            sys.exit(f"--ties later: {spec} is kvpress's {type(press).__name__}, which selects "
                     "with its own compress; the drivers give retain's tie rule only to presses "
                     "that select through ScorerPress (knorm, snapkv, streaming, "
                     "expected_attention without alloc)")
        press.compress = types.MethodType(_compress_ties_to_later, press)
    return press


def _make_press(spec, keep, context_len):
    name, _, opts = spec.partition(":")
    options = dict(kv.split("=") for kv in opts.split(",") if kv)
    # kvpress keeps int(n * (1 - ratio)) entries: aim half an entry above `keep` so that rounding
    # in floating point cannot drop one.
    ratio = 1.0 - (keep + 0.5) / context_len
    if name == "streaming":
        sinks = int(options.get("sinks", min(4, keep // 4)))
        return kvpress.StreamingLLMPress(compression_ratio=ratio, n_sink=sinks)
    alloc = options.get("alloc", "uniform")
    if name == "knorm":
        press = kvpress.KnormPress(compression_ratio=ratio)
    elif name == "snapkv":
        # retain's defaults: window min(32, M/2), kernel 7; pool=avg is kvpress's definition.
        window = int(options.get("window", min(32, keep // 2)))
        kernel = int(options.get("kernel", 7))
        if alloc == "pyramid":
            # kvpress falls back to uniform SnapKV when M / beta < window; retain never does.
            return kvpress.PyramidKVPress(compression_ratio=ratio, window_size=window,
                                          kernel_size=kernel,
                                          beta=float(options.get("pyramid_beta", 20)))
        press = kvpress.SnapKVPress(compression_ratio=ratio, window_size=window, kernel_size=kernel)
    elif name == "expected_attention":
        press = kvpress.ExpectedAttentionPress(
            compression_ratio=ratio, n_sink=int(options.get("sinks", min(4, keep // 4))),
            n_future_positions=int(options.get("n_future", 512)),
            use_covariance=options.get("covariance", "on") == "on",
            use_vnorm=options.get("vnorm", "on") == "on")
    else:
        return None
    if alloc == "adakv":
        return kvpress.AdaKVPress(press, alpha_safeguard=float(options.get("safeguard", 0.2)))
    return press


@torch.inference_mode()
def answer(model, context_ids, question_ids, press, max_new_tokens, eos_ids):
    cache = DynamicCache()
    ctx = torch.tensor([context_ids])
    if press is not None:
        with press(model):
            model(input_ids=ctx, past_key_values=cache, use_cache=True)
    else:
        model(input_ids=ctx, past_key_values=cache, use_cache=True)
    start = len(context_ids)
    ids = torch.tensor([question_ids])
    out_tokens = []
    for _ in range(max_new_tokens):
        n = ids.shape[1]
        positions = torch.arange(start, start + n).unsqueeze(0)
        cache_len = cache.get_seq_length()
        logits = model(
            input_ids=ids,
            past_key_values=cache,
            position_ids=positions,
            cache_position=torch.arange(cache_len, cache_len + n),
            use_cache=True,
        ).logits
        token = int(logits[0, -1].argmax())
        out_tokens.append(token)
        if token in eos_ids:
            break
        start += n
        ids = torch.tensor([[token]])
    return out_tokens


def press_for(policy, budget, context_len, ties="topk"):
    """kvpress's press for a retain record's policy and budget (None: the full cache)."""
    if policy.split(":")[0] == "full":
        return None
    press = make_press(policy, resolve_budget(float(budget), context_len), context_len, ties)
    if press is None:
        # Never the full cache under another policy's name.
        sys.exit(f"{policy}: the drivers map no kvpress press to it (full, streaming, knorm, "
                 "snapkv, expected_attention; alloc=adakv or pyramid)")
    return press


def answer_or_fail(model, context_ids, question_ids, press, max_new_tokens, eos_ids, cell):
    """The answer's tokens without the EOS that ended it, or None after counting a failure."""
    try:
        tokens = answer(model, context_ids, question_ids, press, max_new_tokens, eos_ids)
    except RuntimeError as e:
        # kvpress 0.5.5's PyramidKVPress leaves layers of different lengths, which the
        # question's attention mask (built for the first layer) then does not fit.
        cell["failed"] += 1
        cell.setdefault("error", str(e).splitlines()[0])
        return None
    if tokens and tokens[-1] in eos_ids:
        tokens = tokens[:-1]
    return tokens


def read_jsonl(path, what):
    """A JSON-lines file's records; a line that is not JSON exits naming the file and line."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{number}: {what} is not JSON ({e})")
    return rows


def new_cell(cells, policy, budget):
    """The tally of one (policy, budget): answers compared, both tools' summed scores, identical
    answers, kvpress failures."""
    return cells.setdefault((policy, json.dumps(budget)),
                            {"n": 0, "kv": 0.0, "retain": 0.0, "same": 0, "failed": 0})


def report(cells, answers, elapsed, scores_file, require_identical, score_name="EM"):
    """Prints the table and the same-run speed ratio; exits 1 when the full cache or a
    --require-identical policy answered differently anywhere."""
    width = max([40] + [len(policy) for policy, _ in cells])
    print(f"{'policy':<{width}} {'budget':>7} {'n':>4} {score_name + ' kvpress':>11} "
          f"{score_name + ' retain':>10} {'same answer':>12}")
    for (policy, budget), c in cells.items():
        n = c["n"]
        if n == 0:
            print(f"{policy:<{width}} {budget:>7} kvpress failed on all {c['failed']}: {c['error']}")
            continue
        print(f"{policy:<{width}} {budget:>7} {n:>4} {100 * c['kv'] / n:>11.1f} "
              f"{100 * c['retain'] / n:>10.1f} {c['same']:>7}/{n:<4}"
              + (f" (kvpress failed on {c['failed']} more)" if c["failed"] else ""))
    print(f"kvpress {kvpress.__version__ if hasattr(kvpress, '__version__') else ''}: "
          f"{answers} answers in {elapsed:.1f} s (model loaded before)")
    # The same-run ratio: retain's scores.json says how long its sweep generated (model load and
    # set-up aside, like the time above); run it with the same --policy list for like with like.
    run = json.load(open(scores_file)).get("run") if os.path.exists(scores_file) else None
    if run and run.get("generated", 0) == 0:
        # A sweep resumed whole (rerun to add --write-prompts) generated nothing this time.
        print(f"retain: {scores_file} records no answer generated by its last run (resumed): "
              "no speed ratio")
    elif run and run.get("generation_seconds", 0) > 0:
        ours = run["generated"] / run["generation_seconds"]
        theirs = answers / elapsed
        print(f"retain: {run['generated']} answers in {run['generation_seconds']:.1f} s (batch "
              f"size {run['batch_size']}): {ours:.3g}/s; kvpress: {theirs:.3g}/s; retain / kvpress "
              f"= {ours / theirs:.2f}x")
    full = [c for (p, _), c in cells.items() if p.split(":")[0] == "full"]
    if full and any(c["same"] != c["n"] for c in full):
        sys.exit("the full cache differs between kvpress and retain: the inputs do not match")
    required = {name for name in require_identical.split(",") if name}
    unknown = required - {p.split(":")[0] for p, _ in cells}
    if unknown:
        sys.exit(f"--require-identical: no predictions of {sorted(unknown)} were compared")
    differing = [f"{p} at {b}: {c['same']}/{c['n']}" for (p, b), c in cells.items()
                 if p.split(":")[0] in required and (c["same"] != c["n"] or c["failed"])]
    if differing:
        sys.exit("answers differ from kvpress's: " + "; ".join(differing))

