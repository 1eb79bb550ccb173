#include "serve/engine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "eval/cache_factory.h"
#include "model/generate.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "serve/row_stack_cache.h"

namespace retain {

using Clock = std::chrono::steady_clock;

RequestEvent RequestHandle::wait_end() const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return state_.finished; });
  return state_;
}

RequestEvent RequestHandle::wait(size_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return state_.finished || state_.tokens.size() > seen; });
  return state_;
}

void RequestHandle::push(int64_t token) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_.tokens.push_back(token);
  }
  changed_.notify_all();
}

void RequestHandle::finish(const std::string& reason, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_.finished) return;
    state_.finished = true;
    state_.finish_reason = reason;
    state_.error = error;
  }
  changed_.notify_all();
}

struct ServeEngine::Active {
  ServeRequest request;
  std::shared_ptr<RequestHandle> handle;
  std::unique_ptr<KvCache> cache;
  int64_t reserved = 0;
  int64_t read = 0;  // prompt tokens read into the cache
  bool generating = false, done = false;
  std::vector<int64_t> tokens;
  std::optional<StopStringWatch> stop_watch;  // the text so far, when there are stop strings
  int64_t next = -1;                          // the token the next decode step reads
  SamplingOptions sampling;
  at::Generator generator;
  Clock::time_point submitted, last_token;
  int64_t row = -1;  // its static decode row (its own cache then freed), or -1
};

ServeEngine::ServeEngine(const Decoder& model, EngineOptions options)
    : model_(model), options_(std::move(options)) {
  RETAIN_CHECK(options_.max_batch >= 1, "serve: --max-batch must be >= 1");
  RETAIN_CHECK(options_.chunk >= 1, "serve: --chunk must be >= 1");
  RETAIN_CHECK(options_.kv_memory >= 0, "serve: --kv-memory must be >= 0");
  RETAIN_CHECK(options_.max_waiting >= 0, "serve: --max-queue must be >= 0");
  const ModelConfig& c = model_.config();
  const int64_t element = static_cast<int64_t>(c10::elementSize(model_.dtype()));
  bytes_per_token_ = 2 * c.num_layers * c.num_kv_heads * c.head_dim * element;
  open_static_rows();
  thread_ = std::thread([this] { loop(); });
}

ServeEngine::~ServeEngine() { stop(std::chrono::milliseconds(0)); }

void ServeEngine::open_static_rows() {
  if (!options_.slots)
    static_refused_ = "no server policy given";
  else if (options_.decode == DecodeMode::kEager)
    static_refused_ = "--decode eager";
  else if (options_.decode == DecodeMode::kAuto && !DecodeGraph::available(model_))
    static_refused_ = "no CUDA graphs on this device (--decode static uses the rows anyway)";
  else
    static_refused_ = SlotBatch::unsupported(model_, *options_.slots);
  if (static_refused_.empty()) {
    static_row_bytes_ = SlotBatch::row_bytes(model_, *options_.slots, options_.chunk);
    static_rows_ = options_.max_batch;
    // The rows are allocated up front: at most half of --kv-memory goes to them, so that requests
    // still have room to read their prompts in caches of their own.
    if (options_.kv_memory > 0)
      static_rows_ = std::min(static_rows_, options_.kv_memory / 2 / static_row_bytes_);
    if (static_rows_ == 0)
      static_refused_ = "one row (" + std::to_string(static_row_bytes_) +
                        " bytes) takes more than half of --kv-memory";
  }
  if (!static_refused_.empty()) {
    static_rows_ = 0;
    log_info("serve: every request decodes eagerly (static decode: ", static_refused_, ")");
    return;
  }
  c10::InferenceMode guard;
  slots_ = std::make_unique<SlotBatch>(model_, *options_.slots, static_rows_, options_.chunk);
  log_info("serve: requests with policy ", options_.slots->policy.text, " at budget ",
           resolve_budget(options_.slots->budget, 1), " decode in ", static_rows_, " ",
           slots_->mode(), " rows (", static_rows_bytes(), " bytes of K/V up front); others ",
           "eagerly");
}

void ServeEngine::reset_static_rows(const std::string& why) {
  for (auto& a : running_)
    if (a->row >= 0) {
      a->row = -1;  // its row is gone with the rows: retire must not leave it
      if (!a->done) retire(*a, "error", "static decode rows failed: " + why);
    }
  slots_.reset();
  try {
    c10::InferenceMode guard;
    slots_ = std::make_unique<SlotBatch>(model_, *options_.slots, static_rows_, options_.chunk);
    if (!why.empty()) log_warn("serve: static decode rows rebuilt after: ", why);
  } catch (const std::exception& e) {
    // Their bytes stay reserved (submit() checks against them from other threads).
    log_warn("serve: static decode rows could not be rebuilt (", e.what(),
             "); every request decodes eagerly from now on");
  }
}

int64_t ServeEngine::static_rows_reserved() const {
  return slots_ ? std::max(static_rows_bytes(), slots_->allocated_bytes()) : static_rows_bytes();
}

int64_t ServeEngine::reservation(const ServeRequest& r) const {
  const auto prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t tokens = prompt + r.max_new_tokens;
  if (!r.policy.budgeted()) return tokens * bytes_per_token_;
  // A head holds at most budget + buffer entries after a step, plus the step's own: a prefill
  // chunk, or the one decoded token. It never holds more than the tokens it has seen.
  const int64_t per_head =
      resolve_budget(r.budget, prompt) + r.policy.buffer + std::min(options_.chunk, prompt);
  return std::min(tokens, per_head) * bytes_per_token_;
}

std::shared_ptr<RequestHandle> ServeEngine::submit(ServeRequest request) {
  RETAIN_CHECK(!request.prompt.empty(), "the prompt is empty");
  RETAIN_CHECK(request.max_new_tokens >= 1, "max_tokens must be >= 1, found ",
               request.max_new_tokens);
  RETAIN_CHECK(request.stop_strings.empty() || options_.detokenize,
               "stop strings need the model's tokenizer");
  const int64_t reserved = reservation(request);
  RETAIN_CHECK(options_.kv_memory == 0 || reserved <= options_.kv_memory - static_rows_bytes(),
               "the request needs ", reserved, " bytes of KV cache (", request.prompt.size(),
               " prompt tokens, ", request.max_new_tokens, " new, policy ", request.policy.text,
               "), over the server's ", "--kv-memory of ", options_.kv_memory, " bytes",
               static_rows_ > 0 ? " less the " + std::to_string(static_rows_bytes()) +
                                      " bytes of its static decode rows"
                                : std::string());
  auto active = std::make_unique<Active>();
  active->reserved = reserved;
  active->handle = std::make_shared<RequestHandle>();
  active->sampling.max_new_tokens = request.max_new_tokens;
  active->sampling.temperature = request.temperature;
  active->sampling.top_p = request.top_p;
  active->sampling.top_k = request.top_k;
  active->sampling.seed = request.seed;
  active->generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  active->submitted = Clock::now();
  active->request = std::move(request);
  auto handle = active->handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw EngineRefusal("the server is shutting down", /*stopping=*/true);
    if (options_.max_waiting > 0 && static_cast<int64_t>(waiting_.size()) >= options_.max_waiting)
      throw EngineRefusal(str_cat("the server's queue is full: ", waiting_.size(),
                                  " requests wait for room (--max-queue); retry in a moment"),
                          /*stopping=*/false);
    waiting_.push_back(std::move(active));
    stats_.waiting = static_cast<int64_t>(waiting_.size());
  }
  work_.notify_all();
  return handle;
}

void ServeEngine::stop(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    work_.notify_all();
    // The engine's thread ends on its own once nothing is left; after `grace` it cancels.
    work_.wait_for(lock, grace, [&] { return waiting_.empty() && stats_.running == 0; });
    stop_now_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void ServeEngine::loop() {
  c10::InferenceMode guard;  // thread-local: the engine's own thread
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock,
                 [&] { return stop_now_ || stopping_ || !waiting_.empty() || !running_.empty(); });
      if (stop_now_ || (stopping_ && waiting_.empty() && running_.empty())) break;
    }
    iterate();
    work_.notify_all();  // stop() waits for the work to drain
  }
  // Whatever is left is cancelled.
  std::deque<std::unique_ptr<Active>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(waiting_);
  }
  for (auto& a : left) a->handle->finish("cancelled");
  for (auto& a : running_)
    if (!a->done) retire(*a, "cancelled");
  drop_finished();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.running = 0;
    stats_.waiting = 0;
  }
  work_.notify_all();
}

void ServeEngine::iterate() {
  for (auto& a : running_)
    if (!a->done && a->handle->cancelled()) retire(*a, "cancelled");
  drop_finished();
  admit();
  // The oldest request still reading its prompt reads one chunk; then every generating request
  // decodes one token.
  for (auto& a : running_)
    if (!a->done && !a->generating) {
      try {
        prefill_chunk(*a);
      } catch (const std::exception& e) {
        log_warn("serve: a request failed while reading its prompt: ", e.what());
        retire(*a, "error", e.what());
      }
      break;
    }
  decode_step();
  drop_finished();
  // A dbtrimkv head that outgrew the rows widened a layer for every row; they shrink back once
  // none holds a request.
  if (slots_ && slots_->occupied() == 0 && slots_->allocated_bytes() > static_rows_bytes())
    reset_static_rows("");
  // The figures /metrics reads. The caches' bytes cost a device read per request (a sync on a
  // GPU), so they are refreshed every 100 ms rather than every step; the rest is on the host.
  int64_t reserved = static_rows_reserved();
  for (const auto& a : running_) reserved += a->reserved;
  const auto now = Clock::now();
  const bool read_caches = now - kv_read_ >= std::chrono::milliseconds(100);
  int64_t live = 0, budget = 0;
  if (read_caches) {
    kv_read_ = now;
    for (const auto& a : running_)
      if (a->cache) {
        live += a->cache->live_bytes();
        budget += a->cache->budget_bytes();
      }
    if (slots_ && slots_->occupied() > 0) {
      live += slots_->live_bytes();
      budget += slots_->budget_bytes();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.reserved_kv_bytes = reserved;
  stats_.static_rows = static_rows_;
  stats_.static_rows_occupied = slots_ ? slots_->occupied() : 0;
  if (read_caches || running_.empty()) {
    stats_.live_kv_bytes = live;
    stats_.budget_kv_bytes = budget;
  }
}

void ServeEngine::admit() {
  int64_t reserved = static_rows_reserved();
  for (const auto& a : running_) reserved += a->reserved;
  for (;;) {
    std::unique_ptr<Active> a;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Requests cancelled while waiting leave the queue.
      for (auto it = waiting_.begin(); it != waiting_.end();)
        if ((*it)->handle->cancelled()) {
          (*it)->handle->finish("cancelled");
          ++stats_.requests_cancelled;
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= options_.max_batch) return;
      // First come, first served: a large request at the head waits for room, and the ones behind
      // it wait too (they would otherwise starve it).
      const int64_t need = waiting_.front()->reserved;
      if (options_.kv_memory > 0 && reserved + need > options_.kv_memory) return;
      a = std::move(waiting_.front());
      waiting_.pop_front();
    }
    try {
      const ServeRequest& r = a->request;
      a->cache = make_kv_cache(model_.config(), r.policy, r.budget,
                               static_cast<int64_t>(r.prompt.size()), options_.chunk, r.learned);
    } catch (const std::exception& e) {
      a->handle->finish("error", e.what());
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.requests_failed;
      continue;
    }
    reserved += a->reserved;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.prompt_tokens += static_cast<int64_t>(a->request.prompt.size());
    }
    running_.push_back(std::move(a));
  }
}

void ServeEngine::prefill_chunk(Active& a) {
  // As generate() reads a prompt: all but its last token in chunks counted back from that token
  // (the first chunk holds the remainder), then the last token alone after the cache cut back to
  // its budget; its logits give the first new token.
  const auto& prompt = a.request.prompt;
  const auto body = static_cast<int64_t>(prompt.size()) - 1;
  auto forward = [&](int64_t begin, int64_t len) {
    auto ids =
        at::tensor(std::vector<int64_t>(prompt.begin() + begin, prompt.begin() + begin + len),
                   at::kLong)
            .view({1, len});
    auto positions = at::arange(begin, begin + len, at::kLong).view({1, len});
    return model_.forward_hidden(ids, positions, ForwardContext{a.cache.get()});
  };
  if (a.read < body) {
    const int64_t len =
        a.read == 0 && body % options_.chunk != 0 ? body % options_.chunk : options_.chunk;
    forward(a.read, len);
    a.read += len;
    return;
  }
  a.cache->begin_generating_step();
  at::Tensor hidden = forward(body, 1);
  auto logits = model_.logits(hidden.select(1, hidden.size(1) - 1));  // (1, V)
  const int64_t first = a.sampling.temperature <= 0
                            ? logits.argmax(-1).to(at::kCPU)[0].item<int64_t>()
                            : sample_next_token(logits[0], a.sampling, a.generator);
  a.cache->end_prefill();
  a.read = body + 1;
  a.generating = true;
  take_token(a, first);
  if (!a.done) try_join_rows(a);
}

void ServeEngine::try_join_rows(Active& a) {
  if (!slots_) return;
  const ServeRequest& r = a.request;
  if (!r.policy.budgeted() ||
      !slots_->accepts(r.policy, resolve_budget(r.budget, static_cast<int64_t>(r.prompt.size())),
                       r.learned))
    return;
  const auto* cache = dynamic_cast<const BudgetedKvCache*>(a.cache.get());
  if (cache == nullptr) return;
  int64_t row = -1;
  try {
    row = slots_->join(*cache);
  } catch (const std::exception& e) {
    // A load that failed part-way leaves the rows untrustworthy; this request still has its own
    // cache and decodes eagerly.
    log_warn("serve: a request could not move into a static decode row: ", e.what());
    reset_static_rows(e.what());
    return;
  }
  if (row < 0) return;  // every row is taken (rows limited by --kv-memory): decode eagerly
  // Its entries now live in the row, which the rows' up-front bytes already count.
  a.row = row;
  a.cache.reset();
  a.reserved = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.static_rows_joined;
}

void ServeEngine::decode_step() {
  std::vector<Active*> in_rows, eager;
  for (auto& a : running_)
    if (!a->done && a->generating) (a->row >= 0 ? in_rows : eager).push_back(a.get());
  if (in_rows.empty() && eager.empty()) return;
  if (!in_rows.empty()) decode_static(in_rows);
  if (!eager.empty()) decode_eager(eager);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.steps;
}

void ServeEngine::take_tokens(const at::Tensor& logits, const std::vector<Active*>& requests,
                              const std::vector<int64_t>& rows) {
  at::Tensor greedy;
  for (size_t i = 0; i < requests.size(); ++i) {
    Active& a = *requests[i];
    int64_t next;
    if (a.sampling.temperature <= 0) {
      if (!greedy.defined()) greedy = logits.argmax(-1).to(at::kCPU);  // one read for all rows
      next = greedy[rows[i]].item<int64_t>();
    } else {
      next = sample_next_token(logits[rows[i]], a.sampling, a.generator);
    }
    take_token(a, next);
  }
}

void ServeEngine::decode_static(const std::vector<Active*>& requests) {
  std::vector<int64_t> tokens(static_cast<size_t>(slots_->rows()), 0);
  std::vector<int64_t> positions(tokens.size(), -1), rows;
  for (Active* a : requests) {
    tokens.at(a->row) = a->next;
    positions.at(a->row) = static_cast<int64_t>(a->request.prompt.size() + a->tokens.size()) - 1;
    rows.push_back(a->row);
  }
  try {
    take_tokens(slots_->step(tokens, positions), requests, rows);
  } catch (const std::exception& e) {
    // The rows share one cache: a step that failed part-way leaves none of them trustworthy.
    log_warn("serve: a static decode step of ", requests.size(), " requests failed: ", e.what());
    reset_static_rows(e.what());
  }
}

void ServeEngine::decode_eager(const std::vector<Active*>& requests) {
  const auto b = static_cast<int64_t>(requests.size());
  std::vector<KvCache*> caches;
  std::vector<int64_t> rows;
  auto token = at::zeros({b, 1}, at::kLong);
  auto position = at::zeros({b, 1}, at::kLong);
  for (int64_t r = 0; r < b; ++r) {
    const Active& a = *requests[r];
    caches.push_back(a.cache.get());
    rows.push_back(r);
    token[r][0] = a.next;
    position[r][0] = static_cast<int64_t>(a.request.prompt.size() + a.tokens.size()) - 1;
  }
  try {
    RowStackCache stack(caches);
    ForwardContext context{&stack};
    take_tokens(model_.logits(model_.forward_hidden(token, position, context)).squeeze(1), requests,
                rows);
  } catch (const std::exception& e) {
    log_warn("serve: a decode step of ", b, " requests failed: ", e.what());
    for (Active* a : requests)
      if (!a->done) retire(*a, "error", e.what());
  }
}

void ServeEngine::take_token(Active& a, int64_t token) {
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (a.tokens.empty())
      ttft_.add(std::chrono::duration<double>(now - a.submitted).count());
    else
      itl_.add(std::chrono::duration<double>(now - a.last_token).count());
    ++stats_.generated_tokens;
    recent_tokens_.push_back(now);
    while (now - recent_tokens_.front() > std::chrono::seconds(10)) recent_tokens_.pop_front();
  }
  a.last_token = now;
  a.tokens.push_back(token);
  a.handle->push(token);
  const auto& stops = a.request.stop_ids;
  bool stop = std::find(stops.begin(), stops.end(), token) != stops.end();
  if (!a.request.stop_strings.empty()) {
    if (!a.stop_watch) a.stop_watch.emplace(options_.detokenize, a.request.stop_strings);
    stop = a.stop_watch->push(token) || stop;
  }
  if (stop)
    retire(a, "stop");
  else if (static_cast<int64_t>(a.tokens.size()) >= a.request.max_new_tokens)
    retire(a, "length");
  else
    a.next = token;
}

void ServeEngine::retire(Active& a, const std::string& reason, const std::string& error) {
  a.done = true;
  a.handle->finish(reason, error);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reason == "cancelled")
      ++stats_.requests_cancelled;
    else if (reason == "error")
      ++stats_.requests_failed;
    else
      ++stats_.requests_finished;
  }
  if (a.row >= 0) {
    const int64_t row = a.row;
    a.row = -1;
    try {
      slots_->leave(row);
    } catch (const std::exception& e) {
      reset_static_rows(str_cat("emptying row ", row, ": ", e.what()));
    }
  }
}

void ServeEngine::drop_finished() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::unique_ptr<Active>& a) { return a->done; }),
                 running_.end());
}

EngineStats ServeEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats out = stats_;
  out.waiting = static_cast<int64_t>(waiting_.size());
  out.time_to_first_token = ttft_.summary();
  out.inter_token = itl_.summary();
  // Generated tokens over the last 10 seconds (or since the first of them, when sooner).
  const auto now = Clock::now();
  const auto first = std::find_if(recent_tokens_.begin(), recent_tokens_.end(),
                                  [&](auto t) { return now - t <= std::chrono::seconds(10); });
  const auto tokens = std::distance(first, recent_tokens_.end());
  const double span = tokens > 0 ? std::chrono::duration<double>(now - *first).count() : 0;
  out.tokens_per_second = span > 0 ? static_cast<double>(tokens) / span : 0;
  return out;
}

}  // namespace retain
