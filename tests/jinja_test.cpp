// The Jinja engine (model/jinja) against jinja2 3.1.6 in transformers' environment
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, its tojson, namespace,
// raise_exception, strftime_now): every expected string below is what
// transformers.utils.chat_template_utils._compile_jinja_template(template).render(**context)
// returned for the same template and context (strftime_now at 2024-07-26 10:11:12), copied from
// that run. Then what retain refuses (constructs outside the subset) and how its errors read.
// tests/chat_template_test.cpp compares whole chat templates with transformers.
#include <ctime>

#include "model/jinja/jinja.h"
#include "test_util.h"

namespace retain {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct Case {
  const char* source;
  const char* context;  // JSON object, or empty
  const char* expected;
};

struct ErrorCase {
  const char* source;
  const char* context;
  const char* message;  // "t:LINE: ..."; jinja2's words unless marked
};

// strftime_now's clock in every case: 2024-07-26 10:11:12 (a Friday, day 208).
std::tm fixed_now() {
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

std::string render(const std::string& source, const std::string& context = "") {
  jinja::RenderOptions options;
  options.clock = fixed_now;
  auto t = jinja::Template::parse(source, "t");
  return t.render(context.empty() ? OrderedJson::object() : OrderedJson::parse(context), options);
}

template <size_t N>
void expect_renders(const Case (&cases)[N]) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      EXPECT_EQ(render(c.source, c.context), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

// whitespace
const Case kWhitespace[] = {
    {"a\n{% if true %}\nb\n{% endif %}\nc", "", "a\nb\nc"},
    {"  {% if true %}x{% endif %}  y", "", "x  y"},
    {"a  {%- if true -%}  b  {%- endif -%}  c", "", "abc"},
    {"a  {{- 'x' -}}  b\n{{ 'y' }}\nz", "", "axb\ny\nz"},
    {"a\n  {%+ if true %}b{% endif %}", "", "a\n  b"},
    {"{% if true +%}\nb{% endif %}", "", "\nb"},
    {"line\n    {# comment #}\nnext", "", "line\nnext"},
    {"a {#- c -#} b {#+ d +#} e", "", "ab  e"},
    {"{% raw %}{{ x }}{% if %}{% endraw %}", "", "{{ x }}{% if %}"},
    {"a\n  {% raw %}\n{{ y }}\n  {% endraw %}\nz", "", "a\n\n{{ y }}\nz"},
    {"a {%- raw -%} {{ y }} {%- endraw -%} z", "", "a{{ y }}z"},
    {"abc\n", "", "abc"},
    {"abc\n\n", "", "abc\n"},
    {"a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\rd", "", "a\nb\nc\nd"},
    {"a\u3000\u00a0{%- if true %}b{% endif %}", "", "ab"},
    {"x\n  {{ 'y' }}", "", "x\n  y"},
    {"\t{% if true %}t{% endif %}", "", "t"},
    {"a {% if true %}b{% endif %}", "", "a b"},
    {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", "", "  1\n  2\n"},
    {"{%- for m in messages -%}\n  [{{ m.role }}]\n{%- endfor %}\n",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", "
     "\"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}, {\"role\": "
     "\"user\", \"content\": \"Q?\"}]}",
     "[system][user][assistant][user]"},
    {"{{ 'a' }}\n\n{#- x #}\nb", "", "ab"},
    {"A{% if true %}\n{% endif %}\nB", "", "AB"},
    {"{% if true %}   \n{% endif %}X", "", "   \nX"},
};

// expressions
const Case kExpressions[] = {
    {"{{ 'a\\n\\t\\x41\\u00e9\\101\\q\\\\' }}|{{ \"it's\" }}|{{ 'x' 'y' }}", "",
     "a\n\tA\u00e9A\\q\\|it's|xy"},
    {"{{ 0x10 }} {{ 0o17 }} {{ 0b11 }} {{ 1_000 }} {{ 1.5e3 }} {{ 2e-3 }}", "",
     "16 15 3 1000 1500.0 0.002"},
    {"{{ 10 / 4 }} {{ 10 // 4 }} {{ -10 // 4 }} {{ 10 % 3 }} {{ -10 % 3 }} {{ 2 ** 8 }} {{ 7.5 % 2 "
     "}} {{ -7.5 // 2 }} {{ 2 ** -1 }}",
     "", "2.5 2 -3 1 2 256 1.5 -4.0 0.5"},
    {"{{ [1, 2] + [3] }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ {'a': 1, 2: 'b', none: true} }}", "",
     "[1, 2, 3] (1, 2) (1,) () {'a': 1, 2: 'b', None: True}"},
    {"{{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [0] * 3 }} {{ 'x' * -1 }} {{ true + true }} {{ 1 + 1.5 }}",
     "", "ababab ababab [0, 0, 0]  2 2.5"},
    {"{{ true }} {{ True }} {{ none }} {{ None }} {{ false and 1 }} {{ 0 or 'x' }} {{ 'a' and 'b' "
     "}} {{ not 0 }} {{ [] or {} }}",
     "", "True True None None False x b True {}"},
    {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} }} "
     "{{ 1 == 1.0 }} {{ [1, 2] < [1, 3] }} {{ 'B' < 'a' }}",
     "", "True False True True True True True True"},
    {"{{ 'x' if false }}|{{ 'y' if false else 'z' }}|{{ 1 if true else 2 if true else 3 }}|{{ (1 "
     "if false) is defined }}",
     "", "|z|1|False"},
    {"{{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ not 1 == 2 }} {{ 1 ~ 2 ~ 3 }} {{ -3|abs "
     "}}",
     "", "7 4 64 True 123 3"},
    {"{{ [1, 2, 3][1:] }} {{ 'hello'[::-1] }} {{ 'hello'[-3:-1] }} {{ [1, 2, 3, 4, 5][::2] }} {{ "
     "[1, 2, 3][5:] }} {{ 'abc'[1] }} {{ 'h\u00e9llo'[1] }} {{ [1, 2, 3][-1] }} {{ "
     "'abcdef'[4:1:-1] }}",
     "", "[2, 3] olleh ll [1, 3, 5] [] b \u00e9 3 edc"},
    {"{{ d['items'] }} {{ d.a }} {{ d['a'] }} {{ d.get('a') }} {{ d.get('z', 9) }} {{ d.get('z') "
     "}} [{{ d.z }}] {{ d[1] }} {{ l.1 }} {{ l[-1] }} [{{ l[9] }}]",
     "{\"d\": {\"items\": 1, \"a\": 2}, \"l\": [5, 6, 7]}", "1 2 2 2 9 None []  6 7 []"},
    {"{{ 1, 2 }} {{ ('a', [1, 'b'], {'k': none}) }} {{ {'q': \"it's\", 'e': '\u00e9\\n'} }} {{ "
     "[1.0, 1e20, 1e-05, 0.1, -0.0, 123456789.123] }}",
     "",
     "(1, 2) ('a', [1, 'b'], {'k': None}) {'q': \"it's\", 'e': '\u00e9\\n'} [1.0, 1e+20, 1e-05, "
     "0.1, -0.0, 123456789.123]"},
    {"{{ x }} {{ x.y }} {{ x.y.z }}", "{\"x\": {\"y\": {\"z\": [true, null, 1.5]}}}",
     "{'y': {'z': [True, None, 1.5]}} {'z': [True, None, 1.5]} [True, None, 1.5]"},
    {"{{ range(4) }} {{ range(1, 9, 3) }} {{ range(3)|list == [0, 1, 2] }} {{ range(3) == range(3) "
     "}} {{ range(3)[1] }} {{ range(3) is sequence }} {{ {'a': 1}.keys() }}",
     "", "range(0, 4) range(1, 9, 3) True True 1 True dict_keys(['a'])"},
};

// undefined
const Case kUndefined[] = {
    {"[{{ u }}] {{ u is defined }} {{ u is undefined }} {{ u|length }} [{% for a in u %}x{% endfor "
     "%}] {{ u == u }} {{ u != 1 }} {{ u|default('d') }} {{ 'a' in u }} {{ u ~ 'a' }} {{ not u }} "
     "{{ u is none }} {{ u|string }} {{ u|list }}",
     "", "[] False True 0 [] True True d False a True False  []"},
    {"{% set g = [1, 2]|select %}{% for a in g %}{{ a }}{% endfor %}|{% for a in g %}{{ a }}{% "
     "endfor %}|{{ [1]|select|list }}{{ 1 if [] |select }}",
     "", "12||[1]1"},
    {"{{ d.missing is defined }} {{ d.missing|default('dflt') }} [{{ d['missing'] }}] [{{ none.x "
     "}}] [{{ 'abc'.x }}] [{{ [1].x }}]",
     "{\"d\": {}}", "False dflt [] [] [] []"},
};

// statements
const Case kStatements[] = {
    {"{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}", "{\"x\": 2}", "two"},
    {"{% for c in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
     "}}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ "
     "loop.cycle('x', 'y') }}{{ loop.depth }};{% endfor %}",
     "", "1032TrueFalse3bx1;2121FalseFalse3acy1;3210FalseTrue3bx1;"},
    {"{% for i in range(6) if i is odd %}{{ i }}{{ loop.index }}/{{ loop.length }},{% else "
     "%}none{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}",
     "", "11/3,32/3,53/3,|empty"},
    {"{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for k, v in d.items() %}{{ k "
     "}}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d|dictsort %}{{ k "
     "}}{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2}}", "1234|b=1;a=2;|ba|ab"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% "
     "endif %}{{ i }}{% endfor %}",
     "", "0134"},
    {"{% for i in [1, 1, 2, 3, 3] %}{% if loop.changed(i) %}{{ i }}{% endif %}{% endfor %}", "",
     "123"},
    {"{% for i in [1, 2] %}{{ loop.index }}{% for j in 'ab' %}{{ loop.index }}{{ i }}{{ j }}{% "
     "endfor %}|{% endfor %}",
     "", "111a21b|212a22b|"},
    {"{% set a, b = [1, 2] %}{% set c = 3, 4 %}{{ a }}{{ b }}{{ c }}{% set x %}block {{ a }}{% "
     "endset %}[{{ x }}]{% set y | upper | trim %} up {% endset %}[{{ y }}]",
     "", "12(3, 4)[block 1][UP]"},
    {"{% filter upper %}abc {{ 'def' }}{% endfilter %}|{% filter trim|replace('a', 'b') %}  aaa  "
     "{% endfilter %}",
     "", "ABC DEF|bbb"},
    {"{% print 1 + 1 %}|{% generation %}gen{{ 1 }}{% endgeneration %}|{% if true %}{% endif %}", "",
     "2|gen1|"},
};

// scoping
const Case kScoping[] = {
    {"{% set c = 0 %}{% for i in [1, 2, 3] %}{{ c }}{% set c = c + i %}{{ c }},{% endfor %}{{ c }}",
     "", "01,02,03,0"},
    {"{% set ns = namespace(c=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.c = ns.c + i %}{% "
     "set ns.items = ns.items + [i] %}{% endfor %}{{ ns.c }} {{ ns.items }} {{ ns }} {{ ns.missing "
     "is defined }} {{ ns['c'] }}",
     "", "6 [1, 2, 3] <Namespace {'c': 6, 'items': [1, 2, 3]}> False 6"},
    {"{% if true %}{% set w = 9 %}{% endif %}{{ w }}|{% filter upper %}{% set z = 3 %}a{% "
     "endfilter %}[{{ z }}]|{% set q %}{% set inner = 1 %}{% endset %}[{{ inner }}]",
     "", "9|A[]|[]"},
    {"{% set x = 'outer' %}{% for i in [1] %}{{ x }}{% set x = 'inner' %}{{ x }}{% endfor %}{{ x "
     "}}|{% set i = 'kept' %}{% for i in [1] %}{% endfor %}{{ i }}",
     "", "outerinnerouter|kept"},
    {"{% macro m() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ m() }}|{% for y in [7] %}[{{ m() }}]{% "
     "endfor %}|{% set y = 1 %}{% macro n() %}{% set y = 2 %}{{ y }}{% endmacro %}{{ n() }}{{ y }}",
     "", "5|[5]|21"},
    {"{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}|{% set a = 1 "
     "%}{% generation %}{% set a = 2 %}{{ a }}{% endgeneration %}{{ a }}",
     "", "12|21"},
};

// macros
const Case kMacros[] = {
    {"{% macro m(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ "
     "m(b=5, a=4) }}|{{ m() }}|{{ m(1, c=9) }}",
     "", "121|131|454|2|129"},
    {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3, "
     "k='v') }}",
     "", "1(){}|1(2, 3){'k': 'v'}"},
    {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}|{% "
     "macro a() %}{{ b() }}{% endmacro %}{% macro b() %}B{% endmacro %}{{ a() }}",
     "", "321|B"},
    {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') "
     "%}bold{% endcall %}|{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% "
     "endfor %}{% endmacro %}{% call(v, i) each('ab') %}{{ i }}={{ v }};{% endcall %}",
     "", "<b>bold</b>|1=a;2=b;"},
    {"{% macro m() %}x{% endmacro %}{{ m() ~ m() }} {{ m is callable }} {{ (m() + 'y')|upper }}",
     "", "xx True XY"},
};

// filters
const Case kFilters[] = {
    {"{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hELLO "
     "wORLD'|capitalize }}|{{ 'hello world-foo(bar [x]<y' |title }}|{{ 'stra\u00dfe'|upper }}",
     "", "a b|a|AB|ab|Hello world|Hello World-Foo(Bar [X]<Y|STRASSE"},
    {"{{ 'abc'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ 'h\u00e9'|length }} {{ [3, 1, "
     "2]|first }} {{ [3, 1, 2]|last }} {{ 'abc'|first }} [{{ []|first }}] {{ 'abc'|list }} {{ "
     "{'a': 1, 'b': 2}|list }}",
     "", "3 2 1 2 3 2 a [] ['a', 'b', 'c'] ['a', 'b']"},
    {"{{ 42|string }} {{ [1, 'a']|string }} {{ '3'|int + 1 }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ "
     "'3.9'|int }} {{ 3.9|int }} {{ ' 12 '|int }} {{ '3.5'|float }} {{ 2|float }} {{ 'x'|float }} "
     "{{ true|int }}",
     "", "42 [1, 'a'] 4 0 7 3 3 12 3.5 2.0 0.0 1"},
    {"{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ [1, 2, 3]|join('-') }} "
     "{{ ['a', 'b']|join }} {{ [{'n': 'x'}, {'n': 'y'}]|join(', ', attribute='n') }}",
     "", "a+b+c bba 1-2-3 ab x, y"},
    {"{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') "
     "}} {{ 0|d(5, true) }} {{ false|default('no') }}",
     "", "d  d None 5 False"},
    {"{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %} {{ d|dictsort }} {{ "
     "d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }} {{ d|dictsort(true) }} [{% for k, v "
     "in u|items %}x{% endfor %}]",
     "{\"d\": {\"b\": 1, \"A\": 3, \"a\": 2}}",
     "b1A3a2 [('A', 3), ('a', 2), ('b', 1)] [('b', 1), ('A', 3), ('a', 2)] [('b', 1), ('a', 2), "
     "('A', 3)] [('A', 3), ('a', 2), ('b', 1)] []"},
    {"{{ xs|selectattr('a')|list }} {{ xs|selectattr('a', 'equalto', 1)|list }} {{ "
     "xs|rejectattr('a')|list }} {{ xs|selectattr('a', 'defined')|list }} {{ xs|rejectattr('a', "
     "'none')|list }} {{ xs|map(attribute='a')|list }} {{ xs|map(attribute='a', default='-')|list "
     "}}",
     "{\"xs\": [{\"a\": 1}, {\"b\": 2}, {\"a\": 0}, {\"a\": null}]}",
     "[{'a': 1}] [{'a': 1}] [{'b': 2}, {'a': 0}, {'a': None}] [{'a': 1}, {'a': 0}, {'a': None}] "
     "[{'a': 1}, {'b': 2}, {'a': 0}] [1, Undefined, 0, None] [1, '-', 0, None]"},
    {"{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', "
     "'a']|select|list }} {{ ['a', 'b']|map('upper')|list }} {{ [1, 2, 3]|select('gt', 1)|list }} "
     "{{ ['x', 'yy']|map('length')|list }}",
     "", "[1, 3] [1, 3] [1, 'a'] ['A', 'B'] [2, 3] [1, 2]"},
    {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) "
     "}} {{ [3, 1, 2]|sort(reverse=true) }} {{ xs|sort(attribute='n') }} {{ "
     "xs|sort(attribute='n,m') }}",
     "{\"xs\": [{\"n\": 2, \"m\": 1}, {\"n\": 1, \"m\": 2}, {\"n\": 1, \"m\": 1}]}",
     "[1, 2, 3] ['A', 'a', 'b'] ['A', 'a', 'b'] [3, 2, 1] [{'n': 1, 'm': 2}, {'n': 1, 'm': 1}, "
     "{'n': 2, 'm': 1}] [{'n': 1, 'm': 1}, {'n': 1, 'm': 2}, {'n': 2, 'm': 1}]"},
    {"{{ [1, 2, 2, 'a', 'A']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ "
     "[3, 1]|min }} {{ [3, 1]|max }} {{ ['b', 'A']|min }} {{ [1, 2]|sum }} {{ [1.5, "
     "2]|sum(start=10) }} {{ xs|sum(attribute='n') }} [{{ []|max }}]",
     "{\"xs\": [{\"n\": 2}, {\"n\": 3}]}", "[1, 2, 'a'] ['a', 'A'] 1 3 A 3 13.5 5 []"},
    {"{{ [1, 2]|reverse|list }} {{ 'abc'|reverse }} {{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ "
     "3.5|round }} {{ 3.14159|round(2) }} {{ 2.7|round(method='floor') }} {{ 2.1|round(0, 'ceil') "
     "}} {{ 5|round }}",
     "", "[2, 1] cba 3 2.5 2.0 4.0 3.14 2.0 3.0 5"},
    {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, "
     "blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'a b c'|wordcount }} {{ 'abc'|center(9) }}|{{ "
     "'x'|center(4) }}",
     "", "a\n  b\n\n  c|  a\n  b|a\n  \n  b|a\n> b|3    abc   | x  "},
    {"{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape|length }} {{ ('<b>'|safe) is escaped }} {{ "
     "'<b>' is escaped }} {{ '<b>'|forceescape }} {{ d|attr('a') }} [{{ d|attr('zz') }}] {{ "
     "'x'|attr('upper') is callable }}",
     "{\"d\": {\"a\": 1}}",
     "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; 9 True False &lt;b&gt;  [] True"},
    {"{{ ('<a>'|safe) + '<b>' }}|{{ '<a>' + ('b'|safe) }}|{{ ('a'|safe) ~ '<b>' }}|{{ "
     "(('<'|safe)|trim) + '<' }}|{{ ('x'|safe) + 'y' + '<' }}|{{ ('x'|safe).upper() + '&' }}|{{ "
     "('a,b'|safe).split(',')|join('<') }}",
     "", "<a>&lt;b&gt;|&lt;a&gt;b|a<b>|<&lt;|xy&lt;|X&amp;|a<b"},
    {"{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }} {{ [1, 2, 3, 4, "
     "5]|slice(2)|list }} {{ [1, 2, 3]|slice(2, 0)|list }}",
     "", "[[1, 2], [3, 4], [5]] [[1, 2], [3, 'x']] [[1, 2, 3], [4, 5]] [[1, 2], [3, 0]]"},
};

// tojson
const Case kTojson[] = {
    {"{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ "
     "d|tojson(separators=(',', ':')) }}|{{ [1, [2, {}], []]|tojson(indent=2) }}|{{ "
     "d|tojson(indent='\\t') }}",
     "{\"d\": {\"b\": [1, 2.5, null, true], \"a\": \"x\"}}",
     "{\"b\": [1, 2.5, null, true], \"a\": \"x\"}|{\n  \"b\": [\n    1,\n    2.5,\n    null,\n    "
     "true\n  ],\n  \"a\": \"x\"\n}|{\"a\": \"x\", \"b\": [1, 2.5, null, "
     "true]}|{\"b\":[1,2.5,null,true],\"a\":\"x\"}|[\n  1,\n  [\n    2,\n    {}\n  ],\n  "
     "[]\n]|{\n\t\"b\": [\n\t\t1,\n\t\t2.5,\n\t\tnull,\n\t\ttrue\n\t],\n\t\"a\": \"x\"\n}"},
    {"{{ 'caf\u00e9 \"q\" \\\\ / \\n\\u0001 \U0001f642'|tojson }}|{{ 'caf\u00e9 "
     "\U0001f642'|tojson(ensure_ascii=true) }}|{{ [1e16, 1e-07, 0.1, -0.0, 3.0]|tojson }}|{{ {1: "
     "'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}|{{ (1, 2)|tojson }}|{{ 'x'|safe|tojson }}|{{ "
     "d|tojson(indent=0) }}",
     "{\"d\": {\"k\": [1]}}",
     "\"caf\u00e9 \\\"q\\\" \\\\ / \\n\\u0001 \U0001f642\"|\"caf\\u00e9 \\ud83d\\ude42\"|[1e+16, "
     "1e-07, 0.1, -0.0, 3.0]|{\"1\": \"c\", \"2.5\": \"b\", \"null\": \"d\"}|[1, "
     "2]|\"x\"|{\n\"k\": [\n1\n]\n}"},
};

// tests
const Case kTests[] = {
    {"{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ none is "
     "none }}{{ true is boolean }}{{ 1 is boolean }}{{ false is false }}{{ 0 is false }}{{ true is "
     "true }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ true is number }}{{ 'a' "
     "is number }}",
     "", "TrueFalseTrueFalseTrueTrueFalseTrueFalseTrueTrueFalseTrueTrueFalse"},
    {"{{ 'a' is string }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is sequence }}{{ 'a' is "
     "sequence }}{{ {} is sequence }}{{ 1 is sequence }}{{ [] is iterable }}{{ 1 is iterable }}{{ "
     "none is iterable }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 'Ab' is lower }}{{ 1 is in [1, "
     "2] }}{{ 'a' is in 'cat' }}",
     "", "TrueTrueFalseTrueTrueTrueFalseTrueFalseFalseTrueTrueFalseTrueTrue"},
    {"{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is greaterthan 3 }}{{ "
     "2 is ge 2 }}{{ 1 is lt 2 }}{{ 1 is lessthan 0 }}{{ 2 is le 2 }}{{ none is sameas none }}{{ x "
     "is sameas x }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ range is "
     "callable }}{{ 1 is not none }}{{ 'x' is not string }}",
     "{\"x\": [1]}", "TrueFalseTrueTrueFalseTrueTrueFalseTrueTrueTrueTrueFalseTrueTrueTrueFalse"},
    {"{{ [1, 2]|selectattr('0') is defined }}{{ ([1, 2]|select) is sequence }}{{ ([1, 2]|select) "
     "is iterable }}{{ x.items() is sequence }}",
     "{\"x\": {\"a\": 1}}", "TrueFalseTrueFalse"},
};

// methods
const Case kMethods[] = {
    {"{{ '  a  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a  '.lstrip() }}|{{ '  a  '.rstrip() "
     "}}|{{ 'a\\n'.rstrip('\\n') }}|{{ '\u3000a\u3000'.strip() }}",
     "", "a|a|a  |  a|a|a"},
    {"{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ "
     "'a,b,c'.rsplit(',', 1) }} {{ ' a b '.split(none, 1) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ "
     "'a</think>b</think>c'.split('</think>')[-1] }}",
     "",
     "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a,b', 'c'] ['a', 'b '] ['a', 'b', 'c'] c"},
    {"{{ 'hello'.startswith('he') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('lo') "
     "}}{{ 'hello'.startswith('l', 2) }}{{ 'hello'.endswith('l', 0, 4) }}",
     "", "TrueTrueTrueTrueTrue"},
    {"{{ 'a-b-c'.replace('-', '') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.replace('', '.') }} "
     "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ "
     "'h\u00e9llo'.find('l') }} {{ 'hello'.count('l') }} {{ 'hello'.index('e') }}",
     "", "abc baa .a.b. 2 3 -1 2 2 1"},
    {"{{ 'hELLO wORLD'.title() }} {{ \"they're\".title() }} {{ 'hELLO'.capitalize() }} {{ "
     "'Ab'.swapcase() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ '12'.isdigit() }} {{ "
     "'a1'.isalnum() }} {{ 'ab'.isalpha() }} {{ '  '.isspace() }} {{ 'ab'.islower() }} {{ "
     "'AB'.isupper() }}",
     "", "Hello World They'Re Hello aB AB ab True True True True True True"},
    {"{{ ', '.join(['a', 'b']) }} {{ '-'.join('abc') }} {{ '{} and {}'.format(1, 'x') }} {{ "
     "'{0}{0}{n}'.format(1, n=2) }} {{ '{!r}'.format('a') }} {{ '{{}}{}'.format(1) }} {{ '{0[k]} "
     "{0.k}'.format({'k': 'v'}) }}",
     "", "a, b a-b-c 1 and x 112 'a' {}1 v v"},
    {"{{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4) }}| {{ 'ab'.rjust(4) }} {{ '42'.zfill(5) }} {{ "
     "'-4'.zfill(4) }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ "
     "'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}",
     "", "**ab** ab  |   ab 00042 -004 ('a', '=', 'b=c') ('a=b', '=', 'c') x x"},
    {"{{ d.items() }} {{ d.keys() }} {{ d.values() }} {{ d.keys()|list }} {{ 'a' in d.keys() }} {{ "
     "d.copy() }} {{ l.count(1) }} {{ l.index(2) }} {{ (1, 2, 1).count(1) }}",
     "{\"d\": {\"a\": 1, \"b\": 2}, \"l\": [1, 2, 1]}",
     "dict_items([('a', 1), ('b', 2)]) dict_keys(['a', 'b']) dict_values([1, 2]) ['a', 'b'] True "
     "{'a': 1, 'b': 2} 2 1 2"},
};

// globals
const Case kGlobals[] = {
    {"{{ range(3)|list }} {{ range(1, 10, 3)|list }} {% for i in range(2, -1, -1) %}{{ i }}{% "
     "endfor %} {{ dict(a=1, b=2) }} {{ dict([('x', 1)], y=2) }} {{ dict() }}",
     "", "[0, 1, 2] [1, 4, 7] 210 {'a': 1, 'b': 2} {'x': 1, 'y': 2} {}"},
    {"{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %d %j') }} {{ strftime_now('%d %B %Y') }}", "",
     "2024-07-26 10:11:12 Fri Jul 26 208 26 July 2024"},
    {"{{ bos_token }}{{ messages|length }}{% for m in messages %}<{{ m['role'] }}:{{ m.content "
     "}}>{% endfor %}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", "
     "\"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}, {\"role\": "
     "\"user\", \"content\": \"Q?\"}], \"bos_token\": \"<s>\"}",
     "<s>4<system:S><user:Hi><assistant:Hello><user:Q?>"},
};

// errors
const Case kErrors[] = {
    {"{{ x.__class__ }}", "{\"x\": 1}", ""},
    {"{% if false %}{{ 1|nope }}{% endif %}ok", "", "ok"},
    {"{{ 'x'|join(1) }}", "", "x"},
};

const ErrorCase kJinja2Errors[] = {
    {"{{ raise_exception('bad role: ' ~ 1) }}", "",
     "t:1: the template raised an error: bad role: 1"},
    {"{{ u.attr }}", "", "t:1: 'u' is undefined"},
    {"{{ u + 1 }}", "", "t:1: 'u' is undefined"},
    {"{{ u() }}", "", "t:1: 'u' is undefined"},
    {"{{ u[0] }}", "", "t:1: 'u' is undefined"},
    {"{{ u|tojson }}", "", "t:1: Object of type Undefined is not JSON serializable"},
    {"{{ {}.a.b }}", "", "t:1: 'dict object' has no attribute 'a'"},
    {"{{ 'a' + 1 }}", "", "t:1: can only concatenate str (not \"int\") to str"},
    {"{{ [1] + (2,) }}", "", "t:1: can only concatenate list (not \"tuple\") to list"},
    {"{{ 1 < 'a' }}", "", "t:1: '<' not supported between instances of 'int' and 'str'"},
    {"{{ none + 1 }}", "", "t:1: unsupported operand type(s) for +: 'NoneType' and 'int'"},
    {"{{ 1 in none }}", "", "t:1: argument of type 'NoneType' is not iterable"},
    {"{{ 1 in 'abc' }}", "", "t:1: 'in <string>' requires string as left operand, not int"},
    {"{{ 1 ~ 2 + 3 }}", "", "t:1: can only concatenate str (not \"int\") to str"},
    {"{{ 1 / 0 }}", "", "t:1: division by zero"},
    {"{{ 1 // 0 }}", "", "t:1: integer division or modulo by zero"},
    {"{{ [1].append(2) }}", "", "t:1: access to attribute 'append' of 'list' object is unsafe."},
    {"{{ {'a': 1}.update({}) }}", "",
     "t:1: access to attribute 'update' of 'dict' object is unsafe."},
    {"{{ [1].pop() }}", "", "t:1: access to attribute 'pop' of 'list' object is unsafe."},
    {"{{ [1, 2]|select|length }}", "", "t:1: object of type 'generator' has no len()"},
    {"{% set a, b = [1, 2, 3] %}", "", "t:1: too many values to unpack (expected 2)"},
    {"{% set a, b = [1] %}", "", "t:1: not enough values to unpack (expected 2, got 1)"},
    {"{% set x = 1 %}{% set x.a = 2 %}", "",
     "t:1: cannot assign attribute on non-namespace object"},
    {"{% set ns = namespace(_a=1) %}", "",
     "t:1: Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
     "'_a'. Please rename the attribute."},
    {"{% set ns = namespace() %}{% set ns._b = 1 %}", "",
     "t:1: Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
     "'_b'. Please rename the attribute."},
    {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "",
     "t:1: macro 'm' takes not more than 1 argument(s)"},
    {"{% macro m(a) %}{% endmacro %}{{ m(c=2) }}", "",
     "t:1: macro 'm' takes no keyword argument 'c'"},
    {"{{ m() }}{% macro m() %}M{% endmacro %}", "", "t:1: 'm' is undefined"},
    {"{{ 1|nope }}", "", "t:1: No filter named 'nope'."},
    {"{% if true %}{{ 1|nope }}{% endif %}", "", "t:1: No filter named 'nope' found."},
    {"{{ 1 is nope }}", "", "t:1: No test named 'nope'."},
    {"{% foo %}", "", "t:1: Encountered unknown tag 'foo'."},
    {"line1\n{% if true %}\nunclosed", "",
     "t:3: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' "
     "or 'endif'. The innermost block that needs to be closed is 'if'."},
    {"{{ 'abc }}", "", "t:1: unexpected char \"'\" at 3"},
    {"{{ 1 + }}", "", "t:1: unexpected 'end of print statement'"},
    {"{% for x in [1] %}{% endif %}", "",
     "t:1: Encountered unknown tag 'endif'. Jinja was looking for the following tags: 'endfor' or "
     "'else'. The innermost block that needs to be closed is 'for'."},
    {"{% break %}", "", "t:1: 'break' outside loop"},  // jinja2 words it differently
    {"{% for i in [1] %}{% generation %}{% break %}{% endgeneration %}{% endfor %}", "",
     "t:1: 'break' outside loop"},  // jinja2 words it differently
    {"a {# unclosed", "", "t:1: Missing end of comment tag"},
    {"{{ range(1, 200000)|length }}", "",
     "t:1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
    {"{{ 'abc'.split('') }}", "", "t:1: empty separator"},
    {"{{ [1, 2][1:2:0] }}", "", "t:1: slice step cannot be zero"},
    {"{% for a in x|items %}{% endfor %}", "{\"x\": [1]}",
     "t:1: Can only get item pairs from a mapping."},
    {"{{ [[1]]|unique|list }}", "", "t:1: unhashable type: 'list'"},
    {"{{ {[1]: 2} }}", "", "t:1: unhashable type: 'list'"},
    {"{{ none <= none }}", "",
     "t:1: '<=' not supported between instances of 'NoneType' and 'NoneType'"},
    {"{% set a = {} %}{{ a >= a }}", "",
     "t:1: '>=' not supported between instances of 'dict' and 'dict'"},
    {"{% set a = 1 %}{{ a[1:] }}", "", "t:1: 'int' object is not subscriptable"},
    {"{% set a = {} %}{{ a[1:] }}", "", "t:1: unhashable type: 'slice'"},
    {"{% set a = 10.0 %}{{ a ** 400 }}", "", "t:1: (34, 'Numerical result out of range')"},
    {"{% set a = true %}{{ a[-1] >= 1 }}", "", "t:1: bool object has no element -1"},
    {"{{ u|int }}", "", "t:1: 'u' is undefined"},
    {"{{ {}.items()|tojson }}", "", "t:1: Object of type dict_items is not JSON serializable"},
};

TEST(Jinja, WhitespaceControl) { expect_renders(kWhitespace); }
TEST(Jinja, Expressions) { expect_renders(kExpressions); }
TEST(Jinja, UndefinedAsJinja2Default) { expect_renders(kUndefined); }
TEST(Jinja, Statements) { expect_renders(kStatements); }
TEST(Jinja, Scoping) { expect_renders(kScoping); }
TEST(Jinja, Macros) { expect_renders(kMacros); }
TEST(Jinja, Filters) { expect_renders(kFilters); }
TEST(Jinja, Tojson) { expect_renders(kTojson); }
TEST(Jinja, Tests) { expect_renders(kTests); }
TEST(Jinja, PythonMethods) { expect_renders(kMethods); }
TEST(Jinja, Globals) { expect_renders(kGlobals); }

// What jinja2 raises, retain raises as retain::Error naming the template and the line.
TEST(Jinja, ErrorsJinja2AlsoRaises) {
  for (const ErrorCase& c : kJinja2Errors) {
    SCOPED_TRACE(c.source);
    EXPECT_ERROR_CONTAINS(render(c.source, c.context), c.message);
  }
}

// Constructs jinja2 renders but this engine does not implement fail naming the construct and the
// line; the rest of a template renders when they are not reached.
TEST(Jinja, RefusesWhatIsOutsideTheSubset) {
  const ErrorCase cases[] = {
      {"a\n{% block body %}x{% endblock %}", "", "t:2: the 'block' statement is outside"},
      {"{% extends 'base.jinja' %}", "", "t:1: the 'extends' statement is outside"},
      {"{% include 'x.jinja' %}", "", "t:1: the 'include' statement is outside"},
      {"{% import 'x.jinja' as x %}", "", "t:1: the 'import' statement is outside"},
      {"{% from 'x.jinja' import y %}", "", "t:1: the 'from' statement is outside"},
      {"{% with a = 1 %}{{ a }}{% endwith %}", "", "t:1: the 'with' statement is outside"},
      {"{% autoescape true %}{% endautoescape %}", "", "t:1: the 'autoescape' statement"},
      {"{% for x in [1] recursive %}{{ loop(x) }}{% endfor %}", "", "t:1: a recursive for loop"},
      {"\n\n{{ '%s!' % 'x' }}", "", "t:3: the % string formatting operator is outside"},
      {"{{ '{:>5}'.format('a') }}", "", "t:1: the format spec '>5' in str.format is outside"},
      {"{{ xs|groupby('a') }}", R"({"xs": []})", "t:1: the filter 'groupby' is outside"},
      {"{{ 'abcdef'|truncate(3) }}", "", "t:1: the filter 'truncate' is outside"},
      {"{{ 'a b c'|wordwrap(3) }}", "", "t:1: the filter 'wordwrap' is outside"},
      {"{% set r = range(5) %}{{ r[1:] }}", "", "t:1: slicing a range is outside"},
      {"{% set d = {'a': 1} %}{{ d.keys() - ['a'] }}", "", "t:1: set operations on dict views"},
      {"{{ 'ABC'.casefold() }}", "", "t:1: the method str.casefold is outside"},
      {"{{ cycler('a', 'b') }}", "", "t:1: the global 'cycler' is outside"},
      {"{{ f(*args) }}", "", "t:1: *args / **kwargs in a call is outside"},
      {"{% for a, (b, c) in x %}{% endfor %}", "", "t:1: a nested tuple as an assignment target"},
      {"{{ x[1, 2] }}", "", "t:1: a subscript with several indices is outside"},
      {"{{ [1, 2]|select }}", "", "t:1: printing a generator"},
      {"{% macro m() %}{% endmacro %}{{ m }}", "", "t:1: printing macro 'm' (a function object)"},
      {"{{ 2 ** 64 }}", "", "t:1: integer arithmetic beyond 64 bits is outside"},
      {"{{ (-8) ** 0.5 }}", "", "t:1: complex numbers"},
      {"{{ 'x' * 100000000 }}", "", "t:1: a string repeated beyond 64 MiB"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.source);
    EXPECT_ERROR_CONTAINS(render(c.source, c.context), c.message);
  }
  EXPECT_EQ(render("{% if false %}{{ x|wordwrap }}{{ 'a'.casefold() }}{% endif %}ok"), "ok");
}

TEST(Jinja, ErrorsNameTheTemplateAndTheLine) {
  const std::string source =
      "{%- for m in messages %}\n{{ m.role }}\n{%- if m.role == 'tool' %}\n"
      "{{ raise_exception('no tools here: ' ~ m.content) }}\n{%- endif %}\n"
      "{%- endfor %}";
  auto t = jinja::Template::parse(source, "models/x/tokenizer_config.json (chat_template)");
  OrderedJson context = {{"messages", {{{"role", "user"}}, {{"role", "tool"}, {"content", "42"}}}}};
  EXPECT_ERROR_CONTAINS(t.render(context),
                        "models/x/tokenizer_config.json (chat_template):4: the template raised an "
                        "error: no tools here: 42");
  EXPECT_ERROR_CONTAINS(jinja::Template::parse("a\nb\n{{ x |}}", "f.jinja"),
                        "f.jinja:3: expected token 'name'");
  EXPECT_ERROR_CONTAINS(render("{{ x }}\n\n{{ x.y.z }}", R"({"x": {}})"),
                        "t:3: 'dict object' has no attribute 'y'");
}

TEST(Jinja, StrftimeNowReadsTheClock) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
  // Without a clock it is the local time now.
  std::string year =
      jinja::Template::parse("{{ strftime_now('%Y') }}", "t").render(OrderedJson::object());
  EXPECT_EQ(year.size(), 4u);
}

TEST(Jinja, ContextFromOrderedJsonKeepsKeyOrder) {
  OrderedJson context =
      OrderedJson::parse(R"({"d": {"z": 1, "a": {"y": [1.5, null], "b": true}}})");
  EXPECT_EQ(render("{{ d|tojson }}|{% for k in d %}{{ k }}{% endfor %}", context.dump()),
            R"({"z": 1, "a": {"y": [1.5, null], "b": true}}|za)");
}

// Bytes that are not UTF-8 pass through unchanged; a runaway recursion or nesting fails cleanly.
TEST(Jinja, HostileInputFailsCleanly) {
  EXPECT_EQ(render("\xff{{ 'a\xfe' }}\xc3"),
            "\xff"
            "a\xfe"
            "\xc3");
  EXPECT_ERROR_CONTAINS(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
                        "maximum recursion depth exceeded");
  EXPECT_ERROR_CONTAINS(render("{{ " + std::string(400, '(') + "1" + std::string(400, ')') + " }}"),
                        "t:1: expressions or blocks nested beyond");
  std::string ifs;
  for (int i = 0; i < 400; ++i) ifs = "{% if true %}" + ifs + "{% endif %}";
  EXPECT_ERROR_CONTAINS(render(ifs), "nested beyond");
  EXPECT_ERROR_CONTAINS(
      render("{% set ns = namespace(v=[]) %}{% for i in range(600) %}{% set ns.v = [ns.v] %}"
             "{% endfor %}"),
      "nested beyond 500 levels");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'me': <Namespace {...}>}>");
}

}  // namespace
}  // namespace retain
