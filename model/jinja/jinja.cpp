#include "model/jinja/jinja.h"

#include <ctime>

#include "core/error.h"
#include "model/jinja/lexer.h"
#include "model/jinja/parser.h"
#include "model/jinja/render.h"

namespace retain::jinja {

namespace {

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

Template Template::parse(const std::string& source, const std::string& name) {
  Template t;
  t.name_ = name;
  t.body_ = std::make_shared<const Body>(parse_template(tokenize(source, name), name));
  return t;
}

std::string Template::render(const Value& context, const RenderOptions& options) const {
  const Clock clock = options.clock ? options.clock : Clock(local_now);
  try {
    return render_template(*body_, context, clock);
  } catch (const RenderError& e) {
    if (e.raised_by_template)
      fail(name_, ":", e.line, ": the template raised an error: ", e.what());
    fail(name_, ":", e.line, ": ", e.what());
  }
}

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& options) const {
  Value v;
  try {
    v = Value::from_json(context);
  } catch (const RenderError& e) {
    fail(name_, ": ", e.what());
  }
  return render(v, options);
}

}  // namespace retain::jinja
