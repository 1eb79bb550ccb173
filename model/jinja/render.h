// Executes a parsed template against a context, with jinja2's scoping: a for loop's body, a macro,
// a call / filter / set block and {% generation %} each run in a scope of their own, so a `set`
// inside them does not leak out (which is why templates carry state in a namespace()); an `if`
// shares its scope. Names resolve through the enclosing scopes at the time of use, then the
// globals. Macros see the scope they were defined in, not their caller's.
#pragma once

#include <string>

#include "model/jinja/ast.h"
#include "model/jinja/builtins.h"

namespace retain::jinja {

// Renders `body` with `context` (a dict) as the template's variables. Errors propagate as
// RenderError carrying the line of the construct that failed.
std::string render_template(const Body& body, const Value& context, const Clock& clock);

}  // namespace retain::jinja
