// The serving engine: continuous batching over per-request budgeted caches. One thread owns the
// model; requests join the running batch and leave it between steps. Each iteration admits what
// fits in the KV memory, reads one prefill chunk of the oldest request still reading its prompt,
// then runs one decode step for every request that is generating (a RowStackCache stacks their
// own caches). A request's tokens are the ones `retain generate` gives for its prompt and settings
// alone: its cache sees the same chunks and steps, and its sampler its own seeded generator.
//
// Admission is by KV bytes: a request reserves the most its cache can hold (the prompt plus
// max_tokens for the full cache; budget + buffer + chunk entries per head under a budget, or its
// tokens when fewer), so memory is bounded by budgets, not prompt lengths.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eval/policies/policy_registry.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "serve/latency.h"
#include "serve/slot_batch.h"

namespace retain {

struct ServeRequest {
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 16;
  double temperature = 0;  // 0: greedy
  double top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  std::vector<int64_t> stop_ids;
  std::vector<std::string> stop_strings;  // checked on the detokenized new text, as generate does
  PolicySpec policy;
  double budget = 0;  // entries per KV head, or a fraction of the prompt below 1
  LearnedModules learned;
};

// What the engine tells a request's reader: new tokens as they come, then the end.
struct RequestEvent {
  std::vector<int64_t> tokens;  // every token so far
  bool finished = false;
  std::string finish_reason;  // "stop" | "length" | "cancelled" | "error"
  std::string error;          // finish_reason "error": what went wrong
};

// Shared by the engine and the request's reader (an HTTP handler).
class RequestHandle {
 public:
  // Blocks until there is more than `seen` tokens or the request ended, or `timeout` passes.
  RequestEvent wait(size_t seen, std::chrono::milliseconds timeout) const;
  // Blocks until the request ended.
  RequestEvent wait_end() const;
  // The reader is gone (a closed stream): the engine drops the request at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // The engine's side.
  void push(int64_t token);
  void finish(const std::string& reason, const std::string& error = "");

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  RequestEvent state_;
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int64_t kv_memory = 0;   // bytes of K/V the running requests may reserve together (0: no bound)
  int64_t max_batch = 16;  // requests decoding at once
  int64_t chunk = 512;     // prefill chunk in tokens
  // Detokenizes new tokens for stop strings (required when a request has some).
  TextDecoder detokenize;
  // Static decode (serve/slot_batch.h) for the requests with the server's policy and budget:
  // kAuto where CUDA graphs can replay the steps, kStatic also on the CPU, kEager never. Without
  // `slots` (or where they cannot decode statically) every request decodes eagerly.
  DecodeMode decode = DecodeMode::kAuto;
  std::optional<SlotPolicy> slots;
  // Requests waiting for admission at once (0: no bound); submit refuses one more.
  int64_t max_waiting = 0;
};

// submit()'s refusal of a request that could run at another time: the queue is full (a client
// should retry: 429) or the engine is stopping (503).
class EngineRefusal : public Error {
 public:
  EngineRefusal(const std::string& message, bool stopping) : Error(message), stopping(stopping) {}
  bool stopping;
};

// Figures for /metrics, read at any time.
struct EngineStats {
  int64_t waiting = 0, running = 0;
  int64_t live_kv_bytes = 0, reserved_kv_bytes = 0, budget_kv_bytes = 0;
  int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0;
  int64_t static_rows = 0, static_rows_occupied = 0;  // static decode's rows (0: none)
  int64_t static_rows_joined = 0;                     // requests that decoded in a row
  int64_t prompt_tokens = 0, generated_tokens = 0, steps = 0;
  double tokens_per_second = 0;  // generated, over the last 10 seconds
  LatencySummary time_to_first_token, inter_token;
};

class ServeEngine {
 public:
  ServeEngine(const Decoder& model, EngineOptions options);
  ~ServeEngine();
  ServeEngine(const ServeEngine&) = delete;
  ServeEngine& operator=(const ServeEngine&) = delete;

  // The bytes a request reserves; a request larger than kv_memory less the static rows' bytes can
  // never run (checked by submit).
  int64_t reservation(const ServeRequest& request) const;
  // Static decode's rows and what they take of kv_memory up front (0 rows: every request decodes
  // eagerly), and why there are none ("" when there are).
  int64_t static_rows() const { return static_rows_; }
  int64_t static_rows_bytes() const { return static_rows_ * static_row_bytes_; }
  const std::string& static_rows_refused() const { return static_refused_; }
  // How the rows decode: "cuda-graph" or "static" ("" without rows).
  std::string static_rows_mode() const { return slots_ ? slots_->mode() : ""; }
  // Queues a request; throws EngineRefusal when the queue is full or the engine is stopping,
  // retain::Error when it can never run.
  std::shared_ptr<RequestHandle> submit(ServeRequest request);
  // Stops admitting; lets running and queued requests finish for up to `grace`, then cancels the
  // rest and joins the engine's thread.
  void stop(std::chrono::milliseconds grace);
  EngineStats stats() const;

 private:
  struct Active;
  void loop();
  // One iteration: admit, one prefill chunk, one decode step.
  void iterate();
  void admit();
  void open_static_rows();
  // Ends every request in a row (their entries are in the rows) with an error naming `why`, then
  // allocates the rows anew: after a failed step or load, or to shrink rows a dbtrimkv head
  // widened once none holds a request (`why` empty).
  void reset_static_rows(const std::string& why);
  // What the rows take of kv_memory now: their up-front bytes, or more once widened.
  int64_t static_rows_reserved() const;
  void prefill_chunk(Active& a);
  void decode_step();
  void decode_static(const std::vector<Active*>& requests);
  void decode_eager(const std::vector<Active*>& requests);
  // Each request's next token from its row of logits (B, V).
  void take_tokens(const at::Tensor& logits, const std::vector<Active*>& requests,
                   const std::vector<int64_t>& rows);
  // After its first token: a request with the rows' policy moves into a free row.
  void try_join_rows(Active& a);
  // Appends a picked token to a request, ends it when a stop rule says so.
  void take_token(Active& a, int64_t token);
  void retire(Active& a, const std::string& reason, const std::string& error = "");
  void drop_finished();

  const Decoder& model_;
  EngineOptions options_;
  int64_t bytes_per_token_;  // K/V bytes of one token in every layer and KV head
  int64_t static_rows_ = 0, static_row_bytes_ = 0;
  std::string static_refused_;
  std::unique_ptr<SlotBatch> slots_;  // owned by the engine's thread once it runs

  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::unique_ptr<Active>> waiting_;  // guarded by mutex_
  bool stopping_ = false, stop_now_ = false;     // guarded by mutex_
  // Owned by the engine's thread.
  std::vector<std::unique_ptr<Active>> running_;
  // Stats, guarded by mutex_.
  EngineStats stats_;
  LatencyWindow ttft_, itl_;
  std::deque<std::chrono::steady_clock::time_point> recent_tokens_;  // each token's, 10 s
  std::chrono::steady_clock::time_point kv_read_;  // when the caches' bytes were last read
  std::thread thread_;
};

}  // namespace retain
