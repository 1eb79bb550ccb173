// A Jinja template engine for the subset Hugging Face chat templates use, rendering as transformers'
// environment renders (jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
// loop controls, {% generation %}, raise_exception, strftime_now, namespace, dict and its tojson).
//
//   auto t = jinja::Template::parse(text, "chat_template.jinja");
//   std::string prompt = t.render(context);   // context: a JSON object of the template's variables
//
// Supported: text, {{ }}, comments, raw, whitespace control; if/elif/else, for (else, inline if,
// tuple targets, loop.*), set (names, tuples, namespace attributes, blocks), macro (defaults,
// varargs, kwargs, caller), call, filter blocks, break/continue, print, generation; Python
// literals, arithmetic, comparisons, in, and/or/not, ~, conditional expressions, attribute/item
// access and slices, calls with keywords; jinja2's tests; its filters except filesizeformat,
// format, groupby, pprint, random, striptags, truncate, urlencode, urlize, wordwrap, xmlattr; the
// methods of str, list and dict the sandbox allows (mutating ones are refused as unsafe, as the
// sandbox refuses them). Everything else is an error naming the construct, the template and the
// line: block, extends, include, import, with, recursive loops, % string formatting, format specs
// in str.format, ... Never a silently different prompt (docs/chat-templates.md).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/jinja/builtins.h"
#include "model/jinja/value.h"

namespace retain::jinja {

struct Stmt;

struct RenderOptions {
  Clock clock;  // what strftime_now formats; unset: the local time now
};

class Template {
 public:
  // Throws retain::Error "NAME:LINE: ..." on text jinja2 would not compile or that uses a
  // statement, filter or test outside the subset.
  static Template parse(const std::string& source, const std::string& name);

  // Throws retain::Error "NAME:LINE: ..." on what jinja2 would raise while rendering (an
  // undefined attribute, a type error, raise_exception(msg)) and on constructs outside the subset
  // met while rendering.
  std::string render(const Value& context, const RenderOptions& options = {}) const;
  std::string render(const nlohmann::ordered_json& context,
                     const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace retain::jinja
