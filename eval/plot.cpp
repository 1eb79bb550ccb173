#include "eval/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "core/error.h"

namespace retain {

namespace {

using Draw = std::function<void(cairo_t*)>;

struct Rgb {
  double r, g, b;
};
// Tableau 10: distinguishable, and readable on white.
constexpr Rgb kPalette[] = {{0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17},
                            {1.00, 0.50, 0.05}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                            {0.89, 0.47, 0.76}, {0.09, 0.75, 0.81}, {0.74, 0.74, 0.13},
                            {0.50, 0.50, 0.50}};
constexpr Rgb kFullColor = {0.25, 0.25, 0.25};
constexpr const char* kFont = "DejaVu Sans";

void set_color(cairo_t* cr, Rgb c, double alpha = 1.0) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void check_cairo(cairo_status_t status, const fs::path& path) {
  // cairo's write error does not say why; its stdio write left the system's reason in errno.
  RETAIN_CHECK(status == CAIRO_STATUS_SUCCESS, "cannot draw ", path.string(), ": ",
               cairo_status_to_string(status),
               status == CAIRO_STATUS_WRITE_ERROR ? str_cat(" (", std::strerror(errno), ")")
                                                  : std::string());
}

using Surface = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using Context = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

// One drawing into DIR/STEM.png and DIR/STEM.svg, each written atomically.
void write_figure(const fs::path& dir, const std::string& stem, int width, int height,
                  const Draw& draw) {
  write_file_atomic(dir / (stem + ".png"), [&](const fs::path& tmp) {
    // Drawn at twice the size: crisp on high-density screens and in slides.
    Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 2 * width, 2 * height),
                    cairo_surface_destroy);
    Context cr(cairo_create(surface.get()), cairo_destroy);
    cairo_scale(cr.get(), 2, 2);
    draw(cr.get());
    check_cairo(cairo_status(cr.get()), tmp);
    check_cairo(cairo_surface_write_to_png(surface.get(), tmp.c_str()), tmp);
  });
  write_file_atomic(dir / (stem + ".svg"), [&](const fs::path& tmp) {
    Surface surface(cairo_svg_surface_create(tmp.c_str(), width, height), cairo_surface_destroy);
    {
      Context cr(cairo_create(surface.get()), cairo_destroy);
      draw(cr.get());
      check_cairo(cairo_status(cr.get()), tmp);
    }
    cairo_surface_finish(surface.get());
    check_cairo(cairo_surface_status(surface.get()), tmp);
  });
}

enum class Align { kLeft, kCenter, kRight };

void text(cairo_t* cr, double x, double y, const std::string& s, double size,
          Align align = Align::kLeft, bool bold = false, double angle = 0) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t ext;
  cairo_text_extents(cr, s.c_str(), &ext);
  const double shift = align == Align::kLeft     ? 0
                       : align == Align::kCenter ? ext.x_advance / 2
                                                 : ext.x_advance;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  cairo_move_to(cr, -shift, 0);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

std::string number(double v) {
  char buf[32];
  if (std::fabs(v) >= 100 || v == std::floor(v))
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// A budget below 1 is a share of each prompt.
std::string budget_label(double b) { return b < 1 ? number(100 * b) + "%" : number(b); }

std::string bytes_label(double v) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) v /= 1000, ++u;
  return number(v) + " " + units[u];
}

// A linear or logarithmic map of [lo, hi] onto [a, b].
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v, double a, double b) const {
    const double t =
        log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
    return a + t * (b - a);
  }
};

struct Point {
  double x, y;
  std::optional<std::pair<double, double>> interval;
};

std::optional<std::pair<double, double>> interval_of(const ScoreRow& row,
                                                     const std::string& metric) {
  if (!row.intervals.contains(metric)) return std::nullopt;
  const Json& iv = row.intervals[metric];
  return std::make_pair(iv[0].get<double>(), iv[1].get<double>());
}

bool is_percent_metric(const std::string& metric, double lo, double hi) {
  return lo >= 0 && hi <= 100 &&
         (metric.rfind("em", 0) == 0 || metric.find("acc") != std::string::npos ||
          metric.find("score") != std::string::npos || metric == "f1" || metric == "rouge_l" ||
          metric == "avg" || metric == "overall");
}

// The y axis of a panel: 0-100 for percentages, else the data's range (intervals included)
// with a margin.
Axis y_axis(const std::vector<const ScoreRow*>& rows, const std::string& metric, bool percent) {
  double lo = 1e300, hi = -1e300;
  for (const ScoreRow* r : rows) {
    if (!r->metrics.contains(metric) || !r->metrics[metric].is_number()) continue;
    const double v = r->metrics[metric].get<double>();
    lo = std::min(lo, v), hi = std::max(hi, v);
    if (auto iv = interval_of(*r, metric))
      lo = std::min(lo, iv->first), hi = std::max(hi, iv->second);
  }
  if (lo > hi) return {0, 1, false};
  if (lo >= 0 && hi <= 100 && (percent || is_percent_metric(metric, lo, hi)))
    return {0, 100, false};
  if (lo == hi) lo -= 1, hi += 1;
  const double pad = 0.06 * (hi - lo);
  return {lo - pad, hi + pad, false};
}

void dashed(cairo_t* cr, bool on) {
  const double dash[] = {5.0, 3.0};
  cairo_set_dash(cr, on ? dash : nullptr, on ? 2 : 0, 0);
}

void marker(cairo_t* cr, double x, double y, double r, MarkerShape shape) {
  cairo_new_sub_path(cr);
  switch (shape) {
    case MarkerShape::kCircle:
      cairo_arc(cr, x, y, r, 0, 2 * M_PI);
      break;
    case MarkerShape::kSquare:
      cairo_rectangle(cr, x - r, y - r, 2 * r, 2 * r);
      break;
    case MarkerShape::kTriangle:
      cairo_move_to(cr, x, y - 1.3 * r);
      cairo_line_to(cr, x + 1.2 * r, y + 0.9 * r);
      cairo_line_to(cr, x - 1.2 * r, y + 0.9 * r);
      cairo_close_path(cr);
      break;
  }
  cairo_fill(cr);
}

void error_bar(cairo_t* cr, double x, double y0, double y1) {
  cairo_set_line_width(cr, 1.0);
  cairo_move_to(cr, x, y0), cairo_line_to(cr, x, y1);
  cairo_move_to(cr, x - 2.5, y0), cairo_line_to(cr, x + 2.5, y0);
  cairo_move_to(cr, x - 2.5, y1), cairo_line_to(cr, x + 2.5, y1);
  cairo_stroke(cr);
}

struct Series {
  std::string label;
  Rgb color;
  MarkerShape shape;
  std::vector<const ScoreRow*> rows;  // budgeted rows, by budget
};

struct Layout {
  std::vector<Series> series;
  std::vector<const ScoreRow*> full;  // rows without a budget
};

Layout layout(const std::vector<ScoreRow>& rows) {
  std::vector<std::string> specs;
  for (const auto& r : rows)
    if (std::find(specs.begin(), specs.end(), r.policy) == specs.end()) specs.push_back(r.policy);
  const auto labels = short_policy_labels(specs);
  Layout out;
  for (const auto& spec : specs) {
    Series s{labels.at(spec), {}, MarkerShape::kCircle, {}};
    for (const auto& r : rows)
      if (r.policy == spec) (r.budget ? s.rows : out.full).push_back(&r);
    if (s.rows.empty()) continue;
    std::sort(s.rows.begin(), s.rows.end(),
              [](const ScoreRow* a, const ScoreRow* b) { return *a->budget < *b->budget; });
    const SeriesStyle style = series_style(out.series.size());
    s.color = {style.r, style.g, style.b};
    s.shape = style.shape;
    out.series.push_back(std::move(s));
  }
  return out;
}

// The labels the legend shows: the full cache rows first, then every series.
std::vector<std::string> legend_labels(const Layout& l) {
  std::vector<std::string> out;
  for (const ScoreRow* r : l.full) out.push_back(r->policy + " cache");
  for (const auto& s : l.series) out.push_back(s.label);
  return out;
}

// The width the legend takes right of its swatches' left edge: room for its longest label (a
// policy told apart by its gate file can be long), at least 200 px.
double legend_room(const Layout& l) {
  Surface scratch(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1), cairo_surface_destroy);
  Context cr(cairo_create(scratch.get()), cairo_destroy);
  cairo_select_font_face(cr.get(), kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr.get(), 11);
  double widest = 0;
  for (const auto& label : legend_labels(l)) {
    cairo_text_extents_t ext;
    cairo_text_extents(cr.get(), label.c_str(), &ext);
    widest = std::max(widest, ext.x_advance);
  }
  return std::max(200.0, 28 + widest + 14);
}

// The legend, top-down from (x, y): the full cache rows first, then every series.
void legend(cairo_t* cr, const Layout& l, double x, double y) {
  cairo_set_line_width(cr, 1.8);
  for (const ScoreRow* r : l.full) {
    set_color(cr, kFullColor);
    dashed(cr, true);
    cairo_move_to(cr, x, y - 4), cairo_line_to(cr, x + 22, y - 4);
    cairo_stroke(cr);
    dashed(cr, false);
    set_color(cr, {0, 0, 0});
    text(cr, x + 28, y, r->policy + " cache", 11);
    y += 17;
  }
  for (const auto& s : l.series) {
    set_color(cr, s.color);
    cairo_move_to(cr, x, y - 4), cairo_line_to(cr, x + 22, y - 4);
    cairo_stroke(cr);
    marker(cr, x + 11, y - 4, 2.6, s.shape);
    set_color(cr, {0, 0, 0});
    text(cr, x + 28, y, s.label, 11);
    y += 17;
  }
}

void frame_and_grid(cairo_t* cr, double x0, double y0, double x1, double y1, const Axis& ya) {
  cairo_set_line_width(cr, 0.6);
  for (int i = 0; i <= 4; ++i) {
    const double v = ya.lo + (ya.hi - ya.lo) * i / 4;
    const double y = ya.map(v, y1, y0);
    set_color(cr, {0.88, 0.88, 0.88});
    cairo_move_to(cr, x0, y), cairo_line_to(cr, x1, y);
    cairo_stroke(cr);
    set_color(cr, {0.25, 0.25, 0.25});
    text(cr, x0 - 5, y + 3.5, number(v), 9.5, Align::kRight);
  }
  set_color(cr, {0, 0, 0});
  cairo_set_line_width(cr, 1.0);
  cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
  cairo_stroke(cr);
}

Axis budget_axis(const Layout& l) {
  double lo = 1e300, hi = -1e300;
  for (const auto& s : l.series)
    for (const ScoreRow* r : s.rows) lo = std::min(lo, *r->budget), hi = std::max(hi, *r->budget);
  if (lo > hi) return {0, 1, false};
  if (lo == hi) return {lo * 0.5, hi * 1.5 + (hi == 0 ? 1 : 0), false};
  // Budgets spanning decades read better in log; a margin keeps the end points off the frame.
  if (lo > 0 && hi / lo > 3) return {lo / 1.25, hi * 1.25, true};
  const double pad = 0.06 * (hi - lo);
  return {lo - pad, hi + pad, false};
}

void draw_panel(cairo_t* cr, const Layout& l, const PlotPanel& panel, bool percent, const Axis& xa,
                const std::set<double>& budgets, double x0, double y0, double x1, double y1) {
  std::vector<const ScoreRow*> all = l.full;
  for (const auto& s : l.series) all.insert(all.end(), s.rows.begin(), s.rows.end());
  const Axis ya = y_axis(all, panel.metric, percent);
  frame_and_grid(cr, x0, y0, x1, y1, ya);
  set_color(cr, {0, 0, 0});
  text(cr, (x0 + x1) / 2, y0 - 7, panel.label, 12, Align::kCenter, /*bold=*/true);
  set_color(cr, {0.25, 0.25, 0.25});
  cairo_set_line_width(cr, 0.8);
  for (double b : budgets) {
    const double x = xa.map(b, x0, x1);
    cairo_move_to(cr, x, y1), cairo_line_to(cr, x, y1 + 4);
    cairo_stroke(cr);
    text(cr, x, y1 + 15, budget_label(b), 9.5, Align::kCenter);
  }
  auto value = [&](const ScoreRow* r) -> std::optional<double> {
    if (!r->metrics.contains(panel.metric) || !r->metrics[panel.metric].is_number())
      return std::nullopt;
    return r->metrics[panel.metric].get<double>();
  };
  cairo_save(cr);
  cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
  cairo_clip(cr);
  for (const ScoreRow* r : l.full) {
    auto v = value(r);
    if (!v) continue;
    if (auto iv = interval_of(*r, panel.metric)) {
      set_color(cr, kFullColor, 0.12);
      const double top = ya.map(iv->second, y1, y0), bottom = ya.map(iv->first, y1, y0);
      cairo_rectangle(cr, x0, top, x1 - x0, bottom - top);
      cairo_fill(cr);
    }
    set_color(cr, kFullColor);
    cairo_set_line_width(cr, 1.8);
    dashed(cr, true);
    cairo_move_to(cr, x0, ya.map(*v, y1, y0)), cairo_line_to(cr, x1, ya.map(*v, y1, y0));
    cairo_stroke(cr);
    dashed(cr, false);
  }
  for (const auto& s : l.series) {
    std::vector<Point> pts;
    for (const ScoreRow* r : s.rows)
      if (auto v = value(r)) pts.push_back({*r->budget, *v, interval_of(*r, panel.metric)});
    set_color(cr, s.color);
    cairo_set_line_width(cr, 1.8);
    for (size_t i = 0; i < pts.size(); ++i) {
      const double x = xa.map(pts[i].x, x0, x1), y = ya.map(pts[i].y, y1, y0);
      i == 0 ? cairo_move_to(cr, x, y) : cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
    for (const auto& p : pts) {
      const double x = xa.map(p.x, x0, x1);
      marker(cr, x, ya.map(p.y, y1, y0), 2.8, s.shape);
      if (p.interval)
        error_bar(cr, x, ya.map(p.interval->first, y1, y0), ya.map(p.interval->second, y1, y0));
    }
  }
  cairo_restore(cr);
}

void draw_score_figure(cairo_t* cr, const Layout& l, const PlotSpec& spec, int width, int columns,
                       double panel_w, double panel_h) {
  set_color(cr, {1, 1, 1});
  cairo_paint(cr);
  set_color(cr, {0, 0, 0});
  text(cr, 20, 28, spec.title, 15, Align::kLeft, /*bold=*/true);
  const Axis xa = budget_axis(l);
  std::set<double> budgets;
  for (const auto& s : l.series)
    for (const ScoreRow* r : s.rows) budgets.insert(*r->budget);
  const bool shares = !budgets.empty() && *budgets.rbegin() < 1;
  for (size_t i = 0; i < spec.panels.size(); ++i) {
    const double px = 70 + static_cast<double>(i % columns) * (panel_w + 60);
    const double py = 70 + static_cast<double>(i / columns) * (panel_h + 70);
    draw_panel(cr, l, spec.panels[i], spec.percent, xa, budgets, px, py, px + panel_w,
               py + panel_h);
    set_color(cr, {0.15, 0.15, 0.15});
    text(cr, px + panel_w / 2, py + panel_h + 32,
         shares ? "budget (share of the prompt)" : "budget (KV entries per head)", 10,
         Align::kCenter);
    if (i % columns == 0)
      text(cr, px - 48, py + panel_h / 2, spec.y_label, 10, Align::kCenter, false, -M_PI / 2);
  }
  legend(cr, l, width - legend_room(l), 80);
}

void draw_memory_figure(cairo_t* cr, const Layout& l, const PlotSpec& spec, int width, int height) {
  const std::string& metric = spec.panels.front().metric;
  set_color(cr, {1, 1, 1});
  cairo_paint(cr);
  set_color(cr, {0, 0, 0});
  text(cr, 20, 28, spec.title + ": " + spec.panels.front().label + " vs peak KV cache", 15,
       Align::kLeft, /*bold=*/true);
  auto get = [](const ScoreRow* r, const std::string& key) -> std::optional<double> {
    if (!r->metrics.contains(key) || !r->metrics[key].is_number()) return std::nullopt;
    return r->metrics[key].get<double>();
  };
  double lo = 1e300, hi = -1e300;
  std::vector<const ScoreRow*> all = l.full;
  for (const auto& s : l.series) all.insert(all.end(), s.rows.begin(), s.rows.end());
  for (const ScoreRow* r : all)
    if (auto m = get(r, spec.memory_metric); m && *m > 0)
      lo = std::min(lo, *m), hi = std::max(hi, *m);
  if (lo > hi) lo = 1, hi = 10;
  const Axis xa{lo / 1.3, hi * 1.3, true};
  const Axis ya = y_axis(all, metric, spec.percent);
  const double x0 = 80, y0 = 60, x1 = width - legend_room(l) - 30, y1 = height - 60;
  frame_and_grid(cr, x0, y0, x1, y1, ya);
  set_color(cr, {0.25, 0.25, 0.25});
  for (double decade = std::pow(10.0, std::floor(std::log10(xa.lo))); decade <= xa.hi; decade *= 10)
    for (double m : {1.0, 2.0, 3.0, 5.0}) {
      const double v = decade * m;
      if (v < xa.lo || v > xa.hi) continue;
      const double x = xa.map(v, x0, x1);
      cairo_set_line_width(cr, 0.8);
      cairo_move_to(cr, x, y1), cairo_line_to(cr, x, y1 + 4);
      cairo_stroke(cr);
      text(cr, x, y1 + 15, bytes_label(v), 9.5, Align::kCenter);
    }
  text(cr, (x0 + x1) / 2, y1 + 36, spec.memory_metric + " (bytes, log scale)", 10, Align::kCenter);
  text(cr, x0 - 50, (y0 + y1) / 2, spec.y_label, 10, Align::kCenter, false, -M_PI / 2);
  for (const auto& s : l.series) {
    set_color(cr, s.color);
    cairo_set_line_width(cr, 1.8);
    bool first = true;
    for (const ScoreRow* r : s.rows) {
      auto m = get(r, spec.memory_metric);
      auto v = get(r, metric);
      if (!m || !v || *m <= 0) continue;
      const double x = xa.map(*m, x0, x1), y = ya.map(*v, y1, y0);
      first ? cairo_move_to(cr, x, y) : cairo_line_to(cr, x, y);
      first = false;
    }
    cairo_stroke(cr);
    for (const ScoreRow* r : s.rows) {
      auto m = get(r, spec.memory_metric);
      auto v = get(r, metric);
      if (!m || !v || *m <= 0) continue;
      const double x = xa.map(*m, x0, x1);
      marker(cr, x, ya.map(*v, y1, y0), 2.8, s.shape);
      if (auto iv = interval_of(*r, metric))
        error_bar(cr, x, ya.map(iv->first, y1, y0), ya.map(iv->second, y1, y0));
    }
  }
  for (const ScoreRow* r : l.full) {
    auto m = get(r, spec.memory_metric);
    auto v = get(r, metric);
    if (!m || !v || *m <= 0) continue;
    const double x = xa.map(*m, x0, x1), y = ya.map(*v, y1, y0);
    set_color(cr, kFullColor);
    cairo_move_to(cr, x - 5, y - 5), cairo_line_to(cr, x + 5, y + 5);
    cairo_move_to(cr, x - 5, y + 5), cairo_line_to(cr, x + 5, y - 5);
    cairo_set_line_width(cr, 2.0);
    cairo_stroke(cr);
    if (auto iv = interval_of(*r, metric))
      error_bar(cr, x, ya.map(iv->first, y1, y0), ya.map(iv->second, y1, y0));
    text(cr, x - 8, y - 8, r->policy + " cache", 10, Align::kRight);
  }
  legend(cr, l, width - legend_room(l), 80);
}

std::pair<std::string, std::vector<std::pair<std::string, std::string>>> split_spec(
    const std::string& spec) {
  const size_t colon = spec.find(':');
  std::vector<std::pair<std::string, std::string>> args;
  if (colon == std::string::npos) return {spec, args};
  size_t at = colon + 1;
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string::npos) comma = spec.size();
    const std::string kv = spec.substr(at, comma - at);
    const size_t eq = kv.find('=');
    if (!kv.empty())
      args.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    at = comma + 1;
  }
  return {spec.substr(0, colon), args};
}

}  // namespace

std::map<std::string, std::string> short_policy_labels(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& spec : specs) by_name[split_spec(spec).first].push_back(spec);
  std::map<std::string, std::string> labels;
  for (const auto& [name, group] : by_name) {
    if (group.size() == 1) {
      labels[group.front()] = name;
      continue;
    }
    // An argument tells the specs of the group apart unless every one of them has it with the
    // same value.
    std::map<std::string, std::set<std::string>> values;
    std::map<std::string, size_t> present;
    for (const auto& spec : group)
      for (const auto& [k, v] : split_spec(spec).second) values[k].insert(v), ++present[k];
    for (const auto& spec : group) {
      std::string label = name;
      char sep = ':';
      for (const auto& [k, v] : split_spec(spec).second) {
        if (values[k].size() == 1 && present[k] == group.size()) continue;
        label += sep + k + "=" + (k == "gates" ? fs::path(v).stem().string() : v);
        sep = ',';
      }
      labels[spec] = label;
    }
  }
  return labels;
}

SeriesStyle series_style(size_t index) {
  // Two series sharing a colour (a sweep of 11-30 policies; the demo has 11 budgeted ones) differ
  // in their markers.
  const size_t colours = std::size(kPalette);
  const Rgb c = kPalette[index % colours];
  return {c.r, c.g, c.b, static_cast<MarkerShape>(std::min<size_t>(index / colours, 2))};
}

void write_score_plots(const fs::path& dir, const std::vector<ScoreRow>& rows,
                       const PlotSpec& spec) {
  RETAIN_CHECK(!spec.panels.empty(), "a plot needs at least one panel");
  const Layout l = layout(rows);
  const int n = static_cast<int>(spec.panels.size());
  const int columns = n == 1 ? 1 : n <= 4 ? 2 : 3;
  const int panel_rows = (n + columns - 1) / columns;
  const double panel_w = 300, panel_h = 210;
  // The legend starts 30 px into the last column's gap, as wide as its longest label needs.
  const int width = static_cast<int>(70 + columns * (panel_w + 60) + legend_room(l) - 30);
  const int height = static_cast<int>(70 + panel_rows * (panel_h + 70) + 10);
  write_figure(dir, "plot", width, height, [&](cairo_t* cr) {
    draw_score_figure(cr, l, spec, width, columns, panel_w, panel_h);
  });
  if (spec.memory_metric.empty()) return;
  const bool any = std::any_of(rows.begin(), rows.end(), [&](const ScoreRow& r) {
    return r.metrics.contains(spec.memory_metric) && r.metrics[spec.memory_metric].is_number();
  });
  const int memory_width = static_cast<int>(660 + legend_room(l));
  if (any)
    write_figure(dir, "memory", memory_width, 480,
                 [&](cairo_t* cr) { draw_memory_figure(cr, l, spec, memory_width, 480); });
}

std::pair<double, double> panel_y_range(const std::vector<ScoreRow>& rows,
                                        const std::string& metric, bool percent) {
  std::vector<const ScoreRow*> all;
  for (const auto& r : rows) all.push_back(&r);
  const Axis a = y_axis(all, metric, percent);
  return {a.lo, a.hi};
}

}  // namespace retain
