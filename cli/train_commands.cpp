// train, export, import-gates (`retain launch` is parsed by hand in main.cpp).
#include <iostream>

#include "checkpoints/export.h"
#include "checkpoints/gate_file.h"
#include "cli/commands.h"
#include "core/error.h"
#include "trainer/recipe.h"
#include "trainer/trainer.h"

namespace retain::cli {

void register_train_commands(CLI::App& app, Commands& commands) {
  struct Train {
    std::string recipe;
    std::vector<std::string> overrides;
    bool keys = false;
  };
  auto train = std::make_shared<Train>();
  auto* train_cmd = app.add_subcommand(
      "train", "train retention gates (or the scorer) on a frozen model from a recipe");
  train_cmd->add_option("recipe", train->recipe, "recipe YAML");
  train_cmd->add_option("overrides", train->overrides, "key.sub=value overrides");
  train_cmd->add_flag("--keys", train->keys,
                      "print every recipe key with its default and meaning (markdown) and exit");
  commands.add(train_cmd, [train] {
    if (train->keys) {
      std::cout << recipe_keys_markdown();
      return 0;
    }
    RETAIN_CHECK(!train->recipe.empty(),
                 "train: a recipe YAML is required (retain train RECIPE [key=value ...]; "
                 "`retain train --keys` lists the keys)");
    return run_train(train->recipe, train->overrides);
  });

  struct Export {
    std::string checkpoint, out;
  };
  auto exp = std::make_shared<Export>();
  auto* export_cmd =
      app.add_subcommand("export", "write a checkpoint's gate or scorer file in usable form");
  export_cmd->add_option("checkpoint", exp->checkpoint, "RUN/step-N, or RUN for its newest step")
      ->required();
  export_cmd->add_option("--out", exp->out, "gate or scorer file (.safetensors)")->required();
  commands.add(export_cmd, [exp] {
    export_checkpoint(exp->checkpoint, exp->out);
    return 0;
  });

  struct Import {
    std::string official, model, out;
  };
  auto imp = std::make_shared<Import>();
  auto* import_cmd =
      app.add_subcommand("import-gates", "convert official TrimKV/DBTrimKV gate weights");
  import_cmd->add_option("official", imp->official, "official safetensors file")->required();
  import_cmd->add_option("--model", imp->model, "the base model directory")->required();
  import_cmd->add_option("--out", imp->out, "gate file to write")->required();
  commands.add(import_cmd, [imp] {
    import_official_gates(imp->official, imp->model, imp->out);
    return 0;
  });
}

}  // namespace retain::cli
