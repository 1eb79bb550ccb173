// Chat templates rendered by the Jinja engine as transformers' apply_chat_template renders them:
// every template gathered by tests/fixtures/make_chat_template_cases.py (llama.cpp's collection of
// real models' templates, the ones in its vocab GGUFs, the fixtures', transformers' own) with a
// dozen conversations each; then how a model directory's template and special tokens are found,
// and the context the template sees. Expected strings come from transformers 5.23 runs.
// tests/fixtures/check_chat_templates.py also compares `retain tokenize --chat` ids end to end.
#include <algorithm>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>

#include "core/json.h"
#include "model/chat_template.h"
#include "model/generate.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The clock the fixture gave strftime_now: 2024-07-26 10:11:12.
std::tm fixture_now() {
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 10;
  now.tm_min = 11;
  now.tm_sec = 12;
  timegm(&now);
  return now;
}

TEST(ChatTemplate, RendersAsTransformersOnEveryTemplateGathered) {
  if (auto why = testing::fixture_skipped("chat_template_cases"); !why.empty()) GTEST_SKIP() << why;
  const fs::path path = testing::fixture_dir("chat_template_cases") / "cases.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path;
  const OrderedJson doc = OrderedJson::parse(in);
  ASSERT_EQ(doc["now"], "2024-07-26T10:11:12");
  jinja::RenderOptions options;
  options.clock = fixture_now;

  std::vector<std::unique_ptr<ChatTemplate>> templates;
  std::vector<std::string> parse_errors;
  size_t refused = 0;
  for (const auto& t : doc["templates"]) {
    const std::string name = t["name"];
    try {
      templates.push_back(std::make_unique<ChatTemplate>(t["source"].get<std::string>(), name,
                                                         t["special_tokens"]));
      parse_errors.emplace_back();
    } catch (const Error& e) {
      templates.push_back(nullptr);
      parse_errors.emplace_back(e.what());
    }
    if (t.contains("compile_error")) {
      EXPECT_FALSE(parse_errors.back().empty()) << name << ": jinja2 refuses it, retain did not";
      ++refused;
    } else if (!t.contains("outside_subset")) {
      EXPECT_EQ(parse_errors.back(), "") << name;
    }
  }

  std::map<std::string, int> failures;
  size_t texts = 0, errors = 0;
  for (const auto& c : doc["cases"]) {
    const size_t index = c["template"];
    const OrderedJson& t = doc["templates"][index];
    const std::string name = t["name"];
    std::string text, error = parse_errors[index];
    if (templates[index]) {
      try {
        text = templates[index]->render_json(c["messages"], c["add_generation_prompt"], c["tools"],
                                             c["kwargs"], options);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    bool ok;
    std::string expected;
    if (t.contains("outside_subset")) {
      // transformers renders it; retain must refuse, naming the construct.
      expected =
          "an error: outside the Jinja subset (" + t["outside_subset"].get<std::string>() + ")";
      ok = error.find("outside the Jinja subset") != std::string::npos;
    } else if (c.contains("text")) {
      expected = c["text"];
      ok = error.empty() && text == expected;
      texts += ok;
    } else {
      // What transformers raised (the template's raise_exception or jinja2's own error), in its words.
      expected = "an error containing: " + c["error"]["message"].get<std::string>();
      ok = !error.empty() &&
           error.find(c["error"]["message"].get<std::string>()) != std::string::npos;
      errors += ok;
    }
    if (!ok && ++failures[name] <= 2)
      ADD_FAILURE() << name << ", conversation " << c["conversation"]
                    << ", add_generation_prompt=" << c["add_generation_prompt"] << ", kwargs "
                    << c["kwargs"].dump() << "\n  expected " << OrderedJson(expected).dump()
                    << "\n  retain   " << (error.empty() ? OrderedJson(text).dump() : error);
  }
  // A fixture without llama.cpp's templates would pass trivially.
  EXPECT_GE(doc["templates"].size(), 80u);
  EXPECT_GE(doc["cases"].size(), 2000u);
  EXPECT_TRUE(failures.empty()) << failures.size() << " templates differ";
  std::cout << "chat templates: " << doc["templates"].size() << " templates (" << refused
            << " refused by jinja2 too), " << doc["cases"].size() << " cases: " << texts
            << " texts and " << errors << " errors as transformers gives them\n";
}

// The fixture directories' templates and special tokens, as AutoTokenizer's apply_chat_template
// renders them (its special_tokens_map: bos/eos of Llama-3, eos/pad of Qwen, bos/eos/unk of
// Mistral).
TEST(ChatTemplate, LoadsTheDirectorysTemplateAndSpecialTokens) {
  const fs::path dir = testing::fixture_dir("tokenizers");
  const std::vector<ChatMessage> conversation = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Q?"}};
  ChatOptions closed;
  closed.add_generation_prompt = false;
  closed.enable_thinking = false;

  ChatTemplate llama3 = load_chat_template(dir / "bytelevel_llama3");
  EXPECT_EQ(llama3.special_tokens(),
            OrderedJson({{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}));
  EXPECT_EQ(llama3.origin(),
            (dir / "bytelevel_llama3" / "tokenizer_config.json").string() + " (chat_template)");
  EXPECT_EQ(llama3.render(conversation, {}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ?"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");

  ChatTemplate qwen = load_chat_template(dir / "bytelevel_qwen2");
  EXPECT_EQ(qwen.special_tokens(),
            OrderedJson({{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}}));
  EXPECT_EQ(qwen.render(conversation, closed),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n");

  ChatTemplate mistral = load_chat_template(dir / "spm_bpe_bytefallback");
  EXPECT_EQ(mistral.special_tokens(),
            OrderedJson({{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}}));
  const std::vector<ChatMessage> alternating(conversation.begin() + 1, conversation.end());
  EXPECT_EQ(mistral.render(alternating, {}), "<s>[INST] Hi [/INST]Hello!</s>[INST] Q? [/INST]");
  // The template's own raise_exception, with its message.
  EXPECT_ERROR_CONTAINS(mistral.render(conversation, {}),
                        "(chat_template):1: the template raised an error: Conversation roles must "
                        "alternate user/assistant/user/assistant/...");
}

// Where the template comes from, as transformers looks: chat_template.jinja first, then the
// config's entry (a string, or named templates whose "default" is taken); --chat-template gives a
// file or the built-in chatml instead. The special tokens are the config's named ones.
TEST(ChatTemplate, ChoosesTheTemplateAsTransformersDoes) {
  testing::TempDir tmp;
  EXPECT_FALSE(has_chat_template(tmp.path()));
  EXPECT_ERROR_CONTAINS(load_chat_template(tmp.path()), "no chat template");

  write_text_file_atomic(tmp / "tokenizer_config.json", R"({
    "chat_template": "C{{ bos_token }}{{ image_token }}{{ audio_token }}{{ pad_token }}",
    "bos_token": {"__type": "AddedToken", "content": "<B>", "lstrip": false},
    "eos_token": null, "image_token": "<img>", "add_bos_token": true,
    "extra_special_tokens": {"audio_token": "<aud>"}, "pad_token": "<pad>"})");
  write_text_file_atomic(tmp / "special_tokens_map.json", R"({"pad_token": "<PAD>"})");
  EXPECT_TRUE(has_chat_template(tmp.path()));
  EXPECT_EQ(load_special_tokens(tmp.path()), OrderedJson({{"audio_token", "<aud>"},
                                                          {"bos_token", "<B>"},
                                                          {"image_token", "<img>"},
                                                          {"pad_token", "<PAD>"}}));
  EXPECT_EQ(load_chat_template(tmp.path()).render({}, {}), "C<B><img><aud><PAD>");

  write_text_file_atomic(tmp / "chat_template.jinja", "J{{ messages|length }}\n");
  EXPECT_EQ(load_chat_template(tmp.path()).render({{"user", "x"}}, {}), "J1");
  EXPECT_EQ(load_chat_template(tmp.path()).origin(), (tmp / "chat_template.jinja").string());
  fs::remove(tmp / "chat_template.jinja");

  write_text_file_atomic(tmp / "tokenizer_config.json", R"({"chat_template": [
    {"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(load_chat_template(tmp.path()).render({}, {}), "D");
  write_text_file_atomic(tmp / "tokenizer_config.json",
                         R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  EXPECT_ERROR_CONTAINS(load_chat_template(tmp.path()), "none named 'default'");

  EXPECT_EQ(load_chat_template(tmp.path(), "chatml").render({{"user", "Hi"}}, {}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  write_text_file_atomic(tmp / "mine.jinja", "{{ messages[0].content|upper }}");
  EXPECT_EQ(
      load_chat_template(tmp.path(), (tmp / "mine.jinja").string()).render({{"user", "hi"}}, {}),
      "HI");
  EXPECT_ERROR_CONTAINS(load_chat_template(tmp.path(), "qwen2"),
                        "--chat-template 'qwen2': expected the path of a Jinja chat template file, "
                        "or 'chatml'");

  write_text_file_atomic(tmp / "tokenizer_config.json",
                         R"({"chat_template": "a\n{% block x %}{% endblock %}"})");
  EXPECT_ERROR_CONTAINS(load_chat_template(tmp.path()),
                        "tokenizer_config.json (chat_template):2: the 'block' statement is outside "
                        "the Jinja subset retain supports");
  write_text_file_atomic(tmp / "tokenizer_config.json", R"({"chat_template": 7})");
  EXPECT_ERROR_CONTAINS(load_chat_template(tmp.path()), "chat_template must be a string");
}

// The context apply_chat_template builds: None-valued keys dropped, reasoning aliased as thinking
// and reasoning_content, tools and documents None unless given, enable_thinking only when passed.
TEST(ChatTemplate, ContextAsApplyChatTemplate) {
  ChatTemplate t(
      "{{ messages|tojson }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking is defined }}|{{ bos_token }}",
      "context", {{"bos_token", "<s>"}});
  const OrderedJson messages = OrderedJson::parse(R"([
    {"role": "user", "content": "Hi", "name": null},
    {"role": "assistant", "content": "4", "reasoning": "2+2", "tool_calls": null},
    {"role": "assistant", "content": "5", "thinking": "t", "reasoning_content": "r"}])");
  EXPECT_EQ(
      t.render_json(messages, true),
      R"([{"role": "user", "content": "Hi"}, {"thinking": "2+2", "role": "assistant", )"
      R"("content": "4", "reasoning": "2+2", "reasoning_content": "2+2"}, {"thinking": "t", )"
      R"("role": "assistant", "content": "5", "reasoning_content": "r"}]|None|None|True|False|<s>)");
  ChatTemplate plain(
      "{{ messages|tojson }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking is defined }}|{{ bos_token }}",
      "context", OrderedJson::object());
  OrderedJson kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(
      plain.render_json(OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])"), false,
                        OrderedJson::parse(R"([{"type": "function", "function": {"name": "f"}}])"),
                        kwargs),
      R"([{"role": "user", "content": "Hi"}]|[{'type': 'function', 'function': {'name': 'f'}}]|None|False|True|)");
  ChatOptions no_thinking;
  no_thinking.enable_thinking = false;
  EXPECT_EQ(ChatTemplate("{{ enable_thinking }}", "t", {}).render({}, no_thinking), "False");
  EXPECT_EQ(ChatTemplate("{{ enable_thinking is defined }}", "t", {}).render({}, {}), "False");
  EXPECT_ERROR_CONTAINS(t.render_json(OrderedJson::parse("[1]"), true),
                        "context: chat messages must be objects");
}

// What a chat reply shows, on every family's real template: the tokens a model generates after
// the generation prompt are the template's own text for the assistant turn, up to and with the
// family's end-of-turn token (ChatML's <|im_end|>, Llama-3's <|eot_id|>, Mistral's </s>); the reply
// text is the message as written, without that token, as OpenAI's and vLLM's replies are.
// Qwen3's <think> block is not special to its tokenizer, so it stays, as transformers' decode
// with skip_special_tokens=True keeps it. Special tokens inside a reply are skipped unless kept;
// the one that stopped generation is never shown.
TEST(ChatTemplate, RepliesEndBeforeTheEndOfTurnToken) {
  const fs::path dir = testing::fixture_dir("tokenizers");
  struct Family {
    std::string name, reply, special_inside;
    ChatOptions options;
  };
  ChatOptions thinking;  // Qwen3's template with its default, thinking on
  const std::vector<Family> families = {
      {"bytelevel_llama3", "The capital of France is Paris.", "<|begin_of_text|>", {}},
      {"bytelevel_qwen2", "<think>\nFrance: Paris.\n</think>\n\nThe capital of France is Paris.",
       "<|im_start|>", thinking},
      {"spm_bpe_bytefallback", "The capital of France is Paris.", "", {}},
  };
  for (const Family& f : families) {
    SCOPED_TRACE(f.name);
    const auto tokenizer = load_tokenizer(dir / f.name);
    const ChatTemplate chat = load_chat_template(dir / f.name);
    const std::vector<int64_t> stop_ids = {*tokenizer->eos_id()};
    const std::vector<ChatMessage> question = {{"user", "What is the capital of France?"}};
    std::vector<ChatMessage> answered = question;
    answered.push_back({"assistant", f.reply});
    ChatOptions closed = f.options;
    closed.add_generation_prompt = false;
    const std::string prompt = chat.render(question, f.options);
    const std::string whole = chat.render(answered, closed);
    ASSERT_EQ(whole.substr(0, prompt.size()), prompt);
    // What the model would generate: the assistant turn's tokens through the end-of-turn token.
    std::vector<int64_t> generated = tokenizer->encode(whole.substr(prompt.size()));
    const auto stop = std::find(generated.begin(), generated.end(), stop_ids.front());
    ASSERT_NE(stop, generated.end())
        << "the template ends the turn with " << *tokenizer->id_to_token(stop_ids.front());
    generated.erase(stop + 1, generated.end());
    EXPECT_EQ(reply_text(*tokenizer, generated, stop_ids, {}), f.reply);
    EXPECT_EQ(reply_text(*tokenizer, generated, stop_ids, {}, /*skip_special=*/false), f.reply);
    // Without the stop ids (--ignore-eos) the end-of-turn token is text like any other: skipped
    // as special, shown when special tokens are kept.
    EXPECT_EQ(reply_text(*tokenizer, generated, {}, {}), f.reply);
    EXPECT_EQ(reply_text(*tokenizer, generated, {}, {}, false),
              f.reply + *tokenizer->id_to_token(stop_ids.front()));
    EXPECT_EQ(reply_text(*tokenizer, generated, stop_ids, {" is P"}),
              f.reply.substr(0, f.reply.find(" is P")));
    if (!f.special_inside.empty()) {
      std::vector<int64_t> inside = tokenizer->encode("Paris" + f.special_inside + ".");
      inside.push_back(stop_ids.front());
      EXPECT_EQ(reply_text(*tokenizer, inside, stop_ids, {}), "Paris.");
      EXPECT_EQ(reply_text(*tokenizer, inside, stop_ids, {}, false),
                "Paris" + f.special_inside + ".");
    }
  }
}

}  // namespace
}  // namespace retain
