// The `retain` command line by registration: each file here registers a group of commands (their
// flags and a handler); main.cpp parses and runs the handler of the command that was given.
// Handlers call the libraries' run_* functions, which take plain option structs, so the
// libraries know nothing of CLI11 and tests call them directly.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <utility>
#include <vector>

namespace retain::cli {

class Commands {
 public:
  // `run` runs when `command` was the command given, after every flag has been set.
  void add(CLI::App* command, std::function<int()> run) {
    handlers_.emplace_back(command, std::move(run));
  }
  // The handler of the command that was parsed (null when none was).
  const std::function<int()>* parsed() const {
    for (const auto& [command, run] : handlers_)
      if (command->parsed()) return &run;
    return nullptr;
  }

 private:
  std::vector<std::pair<CLI::App*, std::function<int()>>> handlers_;
};

void register_model_commands(CLI::App& app, Commands& commands);  // init-model, generate, tokenize
void register_data_commands(CLI::App& app, Commands& commands);   // synth, prep
void register_train_commands(CLI::App& app, Commands& commands);  // train, export, import-gates
void register_eval_commands(CLI::App& app, Commands& commands);   // eval *, policies
void register_bench_commands(CLI::App& app, Commands& commands);  // bench *
void register_env_command(CLI::App& app, Commands& commands);     // env
void register_serve_command(CLI::App& app, Commands& commands);   // serve

}  // namespace retain::cli
