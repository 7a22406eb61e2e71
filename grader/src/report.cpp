#include "report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "harness/bundle.h"
#include "tiny/error.h"
#include "tiny/profiler.h"

namespace workbook {

namespace {

using nlohmann::json;

// HTML-escapes `text`, dropping terminal colour codes (ESC [ ... letter) and other control characters.
std::string esc(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\033') {
      if (i + 1 < text.size() && text[i + 1] == '[') {
        i += 2;
        while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      }
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
        if (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')) out += '\n';
    }
  }
  return out;
}

std::string num(double v, int precision = 3) {
  std::ostringstream s;
  s << std::setprecision(precision) << v;
  return s.str();
}

std::string fixed(double v, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << v;
  return s.str();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) b /= 1024, ++u;
  return (u == 0 ? fixed(b, 0) : num(b, 3)) + " " + units[u];
}

double median(const json& values) {
  std::vector<double> v;
  for (const json& x : values) {
    if (x.is_number()) v.push_back(x.get<double>());
  }
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double number_or(const json& j, const char* key, double fallback) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

const char* status_color(const std::string& status) {
  if (status == "passed") return "#1a7f37";
  if (status == "not started" || status == "skipped") return "#6e7781";
  if (status == "in progress") return "#9a6700";
  return "#cf222e";
}

const char* kYours = "#0969da";
const char* kReference = "#d1790a";

// ---------------------------------------------------------------- plots

struct Series {
  std::string label, color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;
};
struct Mark {
  double x;
  std::string label, color;
  std::string tag;  // what the plot writes at the mark ("3" for "yours: step 3"); the label when empty
  int group = 0;    // marks of one group share their rows of tags (yours, the reference's)
};

// Where each mark's tag goes: rows of tags above the plot, two for each group, each tag in the
// first of its group's rows where it clears the tag before it; -1 when it fits in neither (then
// the marks are listed under the plot). Returns how many rows are used.
int place_tags(const std::vector<Mark>& marks, const std::vector<double>& xs, std::vector<int>& rows) {
  rows.assign(marks.size(), -1);
  std::map<int, double> right;  // row -> where the last tag in it ends
  int used = 0;
  std::vector<size_t> order(marks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
  for (size_t i : order) {
    const std::string& text = marks[i].tag.empty() ? marks[i].label : marks[i].tag;
    const double width = 5.5 * static_cast<double>(text.size()) + 4;
    for (int sub = 0; sub < 2; ++sub) {
      const int row = 2 * marks[i].group + sub;
      if (right.count(row) == 0 || right[row] <= xs[i]) {
        rows[i] = row;
        right[row] = xs[i] + width;
        used = std::max(used, row + 1);
        break;
      }
    }
  }
  return used;
}

// Where each series' legend entry goes: (x, line), in as many lines of width W as the entries need.
std::vector<std::pair<double, int>> legend_layout(const std::vector<Series>& series, double W, int& legend_lines) {
  std::vector<std::pair<double, int>> legend_at;
  double legend_x = 8;
  for (const Series& s : series) {
    const double width = 30 + 6 * static_cast<double>(s.label.size());
    if (legend_x > 8 && legend_x + width > W) legend_x = 8, ++legend_lines;
    legend_at.emplace_back(legend_x, legend_lines - 1);
    legend_x += width;
  }
  return legend_at;
}

// The marks as vertical ticks at mark_x between the plot's top T and bottom B, each tagged on
// its row above the plot (tag_row, from place_tags).
void write_marks(std::ostringstream& o, const std::vector<Mark>& marks, const std::vector<double>& mark_x,
                 const std::vector<int>& tag_row, double T, double B) {
  for (size_t i = 0; i < marks.size(); ++i) {
    const Mark& m = marks[i];
    const double x = mark_x[i];
    o << "<g><title>" << esc(m.label) << "</title><line x1=\"" << fixed(x, 1) << "\" x2=\"" << fixed(x, 1) << "\" y1=\""
      << T << "\" y2=\"" << B << "\" stroke=\"" << m.color << "\" stroke-opacity=\"0.35\" stroke-dasharray=\"2 3\"/>"
      << "<line x1=\"" << fixed(x, 1) << "\" x2=\"" << fixed(x, 1) << "\" y1=\"" << B - 6 << "\" y2=\"" << B + 4
      << "\" stroke=\"" << m.color << "\"/>";
    if (tag_row[i] >= 0) {  // on its row above the plot, clear of its neighbours
      o << "<text x=\"" << fixed(x, 1) << "\" y=\"" << 9 + 11 * tag_row[i] << "\" font-size=\"9\" fill=\""
        << m.color << "\">" << esc(m.tag.empty() ? m.label : m.tag) << "</text>";
    }
    o << "</g>";
  }
}

// The marks listed under the plot, each with its x.
void write_marks_list(std::ostringstream& o, const std::vector<Mark>& marks, bool all_tagged,
                      const std::string& marks_note, const std::string& x_title) {
  if (marks.empty()) return;
  // Each mark with its time, readable without hovering: open when some tag found no room on the plot.
  o << "<details class=\"marks\"" << (all_tagged ? "" : " open") << "><summary>" << marks.size() << " markers"
    << (marks_note.empty() ? "" : ": " + esc(marks_note)) << (all_tagged ? "" : " (not all fit on the plot)")
    << "</summary><ul>";
  for (const Mark& m : marks) o << "<li>" << num(m.x, 4) << " " << esc(x_title) << ": " << esc(m.label) << "</li>";
  o << "</ul></details>";
}

// A line plot, its plotting area `plot_height` px tall: titled axes with min/max labels, one polyline per series, marks as vertical ticks
// (tagged on rows of their own above the plot, and listed under it), a legend.
std::string line_plot(const std::string& title, const std::vector<Series>& series, const std::vector<Mark>& marks,
                      bool bytes, bool y_from_zero, const std::string& x_title, const std::string& y_title,
                      const std::string& marks_note = "", double plot_height = 170) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = y_from_zero ? 0 : INFINITY, y1 = -INFINITY;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::ostringstream o;
  o << "<figure><figcaption>" << esc(title) << "</figcaption>";
  if (!(x0 <= x1)) return o.str() + "<p class=\"dim\">no data</p></figure>\n";
  if (x0 == x1) x0 -= 0.5, x1 += 0.5;
  if (!(y0 < y1)) y0 -= 0.5, y1 += 0.5;
  const double W = 460, L = 78, R = 14;  // two plots side by side in a check
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  // The marks' tags get rows of their own above the plot, so that they cover no line.
  std::vector<double> mark_x;
  for (const Mark& m : marks) mark_x.push_back(px(m.x));
  std::vector<int> tag_row;
  const int tag_rows = place_tags(marks, mark_x, tag_row);
  const bool all_tagged = std::find(tag_row.begin(), tag_row.end(), -1) == tag_row.end();
  int legend_lines = 1;
  const std::vector<std::pair<double, int>> legend_at = legend_layout(series, W, legend_lines);
  const double T = 10 + 11.0 * tag_rows, B = T + plot_height, H = B + 36 + 14.0 * legend_lines;
  auto py = [&](double y) { return B - (y - y0) / (y1 - y0) * (B - T); };
  auto ylabel = [&](double y) { return bytes ? human_bytes(y) : num(y, 4); };
  o << "<svg class=\"plot\" viewBox=\"0 0 " << W << " " << H << "\" width=\"" << W << "\" height=\"" << H
    << "\" role=\"img\"><title>" << esc(title) << "</title>"
    << "<path d=\"M" << L << " " << T << "V" << B << "H" << W - R << "\" stroke=\"#57606a\" fill=\"none\"/>"
    << "<text x=\"" << L - 4 << "\" y=\"" << T + 8 << "\" text-anchor=\"end\">" << esc(ylabel(y1)) << "</text>"
    << "<text x=\"" << L - 4 << "\" y=\"" << B << "\" text-anchor=\"end\">" << esc(ylabel(y0)) << "</text>"
    << "<text x=\"" << L << "\" y=\"" << B + 16 << "\" text-anchor=\"middle\">" << num(x0, 4) << "</text>"
    << "<text x=\"" << W - R << "\" y=\"" << B + 16 << "\" text-anchor=\"end\">" << num(x1, 4) << "</text>"
    << "<text x=\"" << fixed((L + W - R) / 2, 1) << "\" y=\"" << B + 16 << "\" text-anchor=\"middle\" "
    << "font-weight=\"600\">" << esc(x_title) << "</text>"
    << "<text transform=\"translate(12 " << fixed((T + B) / 2, 1) << ") rotate(-90)\" text-anchor=\"middle\" "
    << "font-weight=\"600\">" << esc(y_title) << "</text>";
  write_marks(o, marks, mark_x, tag_row, T, B);
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const double lx = legend_at[k].first, ly = B + 36 + 14.0 * legend_at[k].second;
    const std::string dash = s.dashed ? "\" stroke-dasharray=\"5 3" : "";
    if (s.points.size() == 1) {
      o << "<circle cx=\"" << fixed(px(s.points[0].first), 1) << "\" cy=\"" << fixed(py(s.points[0].second), 1)
        << "\" r=\"3\" fill=\"" << s.color << "\"/>";
    } else if (!s.points.empty()) {
      o << "<polyline fill=\"none\" stroke-width=\"1.6\" stroke=\"" << s.color << dash << "\" points=\"";
      for (const auto& [x, y] : s.points) o << fixed(px(x), 1) << "," << fixed(py(y), 1) << " ";
      o << "\"/>";
    }
    o << "<line x1=\"" << lx << "\" x2=\"" << lx + 22 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
      << "\" stroke-width=\"2\" stroke=\"" << s.color << dash << "\"/><text x=\"" << lx + 26 << "\" y=\"" << ly
      << "\">" << esc(s.label) << "</text>";
  }
  o << "</svg>";
  write_marks_list(o, marks, all_tagged, marks_note, x_title);
  return o.str() + "</figure>\n";
}

// Horizontal bars: the median of your rounds and of the reference's, and the ratio.
std::string timing_plot(const json& timing) {
  const double yours = median(timing.value("yours_ms", json::array()));
  const double ref = median(timing.value("reference_ms", json::array()));
  if (std::isnan(yours) || std::isnan(ref)) return "";
  const double ratio = yours / std::max(ref, 1e-6);  // of the very bars drawn
  const double most = std::max({yours, ref, 1e-9}), W = 460, L = 90, span = 250;
  std::ostringstream o;
  const std::string clock = timing.value("clock", "host");
  o << "<figure><figcaption>";
  if (clock.rfind("modelled ", 0) == 0) {
    o << "time on the " << esc(clock) << " (the same every run)";
  } else {
    o << "host time (median of " << timing.value("yours_ms", json::array()).size() << " rounds)";
  }
  o << "</figcaption><svg class=\"plot\" viewBox=\"0 0 " << W << " 84\" width=\"" << W
    << "\" height=\"84\" role=\"img\"><title>timing: yours vs reference</title>";
  const std::pair<const char*, double> rows[] = {{"yours", yours}, {"reference", ref}};
  for (int i = 0; i < 2; ++i) {
    const double w = std::max(1.0, rows[i].second / most * span), y = 6 + 26 * i;
    o << "<text x=\"" << L - 6 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">" << rows[i].first << "</text>"
      << "<rect x=\"" << L << "\" y=\"" << y << "\" width=\"" << fixed(w, 1) << "\" height=\"20\" fill=\""
      << (i == 0 ? kYours : kReference) << "\"/><text x=\"" << fixed(L + w + 6, 1) << "\" y=\"" << y + 14 << "\">"
      << num(rows[i].second, 4) << " ms</text>";
  }
  o << "<text x=\"" << L << "\" y=\"78\">" << fixed(ratio, 2) << "x the reference";
  if (timing.value("yours_ms", json::array()).size() > 1 && timing.contains("ratio_low") &&
      timing.contains("ratio_high")) {
    o << " (rounds from " << fixed(number_or(timing, "ratio_low", 0), 2) << "x to "
      << fixed(number_or(timing, "ratio_high", 0), 2) << "x)";
  }
  return o.str() + "</text></svg></figure>\n";
}

// Yours vs reference, each summed over its devices; rows that differ are highlighted.
std::string counters_table(const json& counters) {
  std::vector<std::string> keys = {"kernel_launches", "synchronizations", "bytes_host_to_device_pageable",
                                   "bytes_host_to_device_pinned", "bytes_device_to_host_pageable",
                                   "bytes_device_to_host_pinned", "bytes_device_to_device", "device_mallocs",
                                   "memory_allocated", "max_memory_allocated", "memory_reserved"};
  auto sum = [&](const char* who, const std::string& key) {
    double total = 0;
    if (!counters.contains(who) || !counters[who].is_object()) return total;
    for (const auto& [device, values] : counters[who].items()) total += number_or(values, key.c_str(), 0);
    return total;
  };
  for (const char* who : {"yours", "reference"}) {  // counters this list does not know yet
    if (!counters.contains(who) || !counters[who].is_object()) continue;
    for (const auto& [device, values] : counters[who].items()) {
      if (!values.is_object()) continue;
      for (const auto& [key, v] : values.items()) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
    }
  }
  // Only what differs is shown; the rows that agree fold away, and rows at zero in both are left out
  // (a report of one student once ran to 18,000 px, most of it tables of zeros).
  std::ostringstream differ, same;
  int n_differ = 0, n_same = 0, n_zero = 0;
  for (const std::string& key : keys) {
    const double y = sum("yours", key), r = sum("reference", key);
    if (y == 0 && r == 0) {
      ++n_zero;
      continue;
    }
    const bool bytes = key.find("bytes") != std::string::npos || key.find("memory") != std::string::npos;
    auto cell = [&](double v) { return fixed(v, 0) + (bytes && v >= 1024 ? " (" + human_bytes(v) + ")" : ""); };
    std::ostringstream& o = y != r ? differ : same;
    ++(y != r ? n_differ : n_same);
    o << "<tr" << (y != r ? " class=\"diff\"" : "") << "><td>" << esc(key) << "</td><td>" << cell(y) << "</td><td>"
      << cell(r) << "</td></tr>";
  }
  const std::string head = "<thead><tr><th>GPU counter (all devices)</th><th>yours</th><th>reference</th></tr></thead>";
  std::string out;
  if (n_differ > 0) out += "<table class=\"counters\">" + head + "<tbody>" + differ.str() + "</tbody></table>\n";
  if (n_same > 0 || n_zero > 0) {
    out += "<details class=\"counters\"><summary>" +
           (n_differ == 0 ? std::string("every GPU counter equals the reference's: ") : std::string()) +
           std::to_string(n_same) + " equal" + (n_zero > 0 ? ", " + std::to_string(n_zero) + " at zero in both" : "") +
           "</summary>";
    if (n_same > 0) out += "<table class=\"counters same\">" + head + "<tbody>" + same.str() + "</tbody></table>";
    out += "</details>\n";
  }
  return out;
}

std::vector<std::pair<double, double>> curve_points(const json& values) {
  std::vector<std::pair<double, double>> out;
  if (!values.is_array()) return out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_number() && std::isfinite(values[i].get<double>())) out.emplace_back(i, values[i].get<double>());
  }
  return out;
}

std::string memory_plot(const json& memory) {
  std::vector<Series> series;
  std::vector<Mark> marks;
  for (const char* who : {"yours", "reference"}) {
    const std::string color = std::string(who) == "yours" ? kYours : kReference;
    Series allocated{std::string(who) + " allocated", color, false, {}};
    Series reserved{std::string(who) + " reserved", color, true, {}};
    for (const json& p : memory.value(who, json::array())) {
      if (!p.is_object() || !p.contains("t") || !p["t"].is_number()) continue;
      const double t = p["t"].get<double>();
      const double a = number_or(p, "allocated", NAN), r = number_or(p, "reserved", NAN);
      if (!std::isnan(a)) allocated.points.emplace_back(t, a);
      if (!std::isnan(r)) reserved.points.emplace_back(t, r);
      if (p.contains("marker") && p["marker"].is_string()) {
        Mark m{t, std::string(who) + ": " + p["marker"].get<std::string>(), color, p["marker"].get<std::string>(),
               std::string(who) == "yours" ? 0 : 1};
        marks.push_back(m);
      }
    }
    series.push_back(allocated);
    series.push_back(reserved);
  }
  // "step 1", "step 2", ... tag their marks 1, 2, ... when every mark of the plot says "step N".
  std::string prefix;
  for (size_t i = 0; i < marks.size(); ++i) {
    const size_t space = marks[i].tag.rfind(' ');
    const std::string p = space == std::string::npos ? "" : marks[i].tag.substr(0, space + 1);
    if (i == 0) prefix = p;
    if (p != prefix) prefix.clear();
  }
  if (!prefix.empty()) {
    for (Mark& m : marks) m.tag = m.tag.substr(prefix.size());
  }
  const std::string note = prefix.empty() ? "" : "on the plot, " + prefix + "N is N; yours above the reference's";
  return line_plot("GPU memory over time", series, marks, true, true, "time (ms)", "GPU memory", note);
}

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo; "" when it cannot be read.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(" \t"));
      return name;
    }
  }
  return "";
}

// One lesson's devices, the runs of alike devices grouped: "cuda:0, cuda:1" and what they are.
struct DeviceGroup {
  std::string names;     // "cuda:0, cuda:1"
  size_t count = 0;
  bool emulated = false;
  std::string gpu;       // a real GPU's name and compute capability; "" when emulated
  double memory = 0;     // bytes, each
  std::string modelled;  // the GPU the emulator's clock models ("H100 SXM"); "" on a real GPU or when not recorded
};

std::vector<DeviceGroup> device_groups(const json& devices) {
  std::vector<DeviceGroup> groups;
  if (!devices.is_array()) return groups;
  for (const json& d : devices) {
    if (!d.is_object()) continue;
    DeviceGroup g;
    g.emulated = d.value("emulated", false);
    if (!g.emulated) {
      g.gpu = d.value("name", std::string("?")) + ", compute capability " + d.value("compute_capability", std::string("?"));
    }
    g.memory = number_or(d, "total_memory", 0);
    g.modelled = g.emulated ? d.value("modelled_gpu", std::string()) : std::string();
    const std::string name = d.value("device", std::string("?"));
    if (!groups.empty() && groups.back().emulated == g.emulated && groups.back().gpu == g.gpu &&
        groups.back().memory == g.memory && groups.back().modelled == g.modelled) {
      groups.back().names += ", " + name;
      ++groups.back().count;
    } else {
      g.names = name;
      g.count = 1;
      groups.push_back(g);
    }
  }
  return groups;
}

// "cuda:0, cuda:1: emulated, 2.94 GiB each, modelled on an H100 SXM" for one lesson's devices (HTML-escaped).
std::string device_line(const json& devices) {
  std::string out;
  for (const DeviceGroup& g : device_groups(devices)) {
    if (!out.empty()) out += "; ";
    out += esc(g.names) + ": " + (g.emulated ? std::string("emulated") : esc(g.gpu)) + ", " + human_bytes(g.memory) +
           (g.count > 1 ? " each" : "") + (g.modelled.empty() ? "" : ", its clock modelled on the " + esc(g.modelled));
  }
  return out.empty() ? "no GPU" : out;
}

// The machine the checks ran on: the host, then for each lesson the GPUs its checks ran on, as the
// checker recorded them from the reference's runs (the student's ran in the same settings): emulated or
// real, their memory, and the GPU an emulated one's clock models (a lesson may choose its own).
std::string machine_section(const std::vector<LessonResult>& results) {
  std::ostringstream o;
  o << "<h2>Machine</h2>\n<table class=\"machine\">\n<thead><tr><th></th><th>devices</th><th>GPU</th>"
    << "<th>memory</th><th>its clock models</th></tr></thead>\n<tbody>\n<tr><th>host</th><td colspan=\"4\">"
    << esc(cpu_model()) << (cpu_model().empty() ? "" : ", ") << std::thread::hardware_concurrency()
    << " cores</td></tr>\n";
  bool any_emulated = false;
  for (const LessonResult& r : results) {
    const std::string lesson = r.lesson ? "lesson " + std::to_string(r.lesson->number) : std::string("lesson ?");
    const std::vector<DeviceGroup> groups = device_groups(r.devices);
    if (groups.empty()) {
      bool ran = false;
      for (const CheckResult& c : r.checks) ran = ran || c.verdict == "pass" || c.verdict == "fail";
      o << "<tr><th>" << lesson << "</th><td colspan=\"4\" class=\"dim\">"
        << (!r.problem.empty() ? "no check ran (" + esc(r.status) + ")"
                               : ran ? std::string("no GPU recorded (the reference solution did not run)")
                                     : std::string("no check ran"))
        << "</td></tr>\n";
      continue;
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      const DeviceGroup& g = groups[i];
      any_emulated = any_emulated || g.emulated;
      o << "<tr>";
      if (i == 0) o << "<th rowspan=\"" << groups.size() << "\">" << lesson << "</th>";
      o << "<td>" << esc(g.names) << "</td><td>" << (g.emulated ? std::string("<b>emulated</b> on the host's CPU") : esc(g.gpu))
        << "</td><td>" << human_bytes(g.memory) << (g.count > 1 ? " each" : "") << "</td><td>"
        << (g.emulated ? (g.modelled.empty() ? std::string("? (not recorded)") : esc(g.modelled))
                       : std::string("nothing: a real GPU, timed by the host's clock"))
        << "</td></tr>\n";
    }
  }
  o << "</tbody>\n</table>\n";
  if (any_emulated) {
    o << "<p class=\"dim\">An emulated GPU runs on the host's CPU with a GPU's memory, asynchrony and rounding; "
      << "its clock models the GPU named (docs/performance_model.md), so timed checks are the same on every run.</p>\n";
  }
  return o.str();
}

const char* badge(const std::string& verdict) {
  if (verdict == "pass") return "PASS";
  if (verdict == "fail") return "FAIL";
  if (verdict == "todo") return "TODO";
  if (verdict == "skip") return "SKIP";
  return "ERROR";
}

const char* kStyle = R"(
body{font:15px/1.45 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#1f2328}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0} th,td{padding:.25em .7em;border-bottom:1px solid #d0d7de;text-align:left}
td.n{text-align:right} .status{font-weight:600} .dim,.secs{color:#6e7781}
.check{border:1px solid #d0d7de;border-radius:6px;padding:.5em .8em;margin:.7em 0}
.badge{display:inline-block;min-width:3.6em;text-align:center;border-radius:4px;color:#fff;
  font-size:.8em;font-weight:700;padding:.1em .3em;margin-right:.4em}
.pass{background:#1a7f37} .fail,.error{background:#cf222e} .todo{background:#9a6700} .skip{background:#6e7781}
pre{background:#f6f8fa;padding:.5em .7em;border-radius:4px;overflow-x:auto;white-space:pre-wrap;margin:.4em 0}
pre.note{background:#fff8c5} .counters td:not(:first-child){text-align:right;font-variant-numeric:tabular-nums}
tr.diff{background:#fff1e5;font-weight:600} figure{margin:.6em 0} figcaption{font-size:.85em;color:#57606a}
.timelines svg{max-width:100%;height:auto}
table.short td{vertical-align:top;border:none;padding:.2em .4em} table.short .dim{white-space:pre-wrap}
.check>figure{display:inline-block;vertical-align:top;max-width:100%;margin:.6em 10px .6em 0}
details.counters summary{color:#57606a;font-size:.9em;cursor:pointer;margin:.3em 0}
svg.plot{font:11px system-ui,sans-serif;fill:#1f2328;max-width:100%;height:auto}
)";

// The GPU timelines of a check, the student's and the reference's (issue 18):
// details["timelines"] = {"yours": TRACE, "reference": TRACE}, each a Chrome
// trace (tiny::profiler's, as an object or its JSON text), drawn by
// tiny::profiler::timeline_svg so that they read without a trace viewer, one
// above the other on the same scale, so that the slower one looks longer.
std::string timelines_section(const json& timelines) {
  std::map<std::string, json> traces;
  double span = 0;  // the longest trace's, in microseconds
  for (const char* who : {"yours", "reference"}) {
    if (!timelines.contains(who)) continue;
    json trace = timelines[who];
    if (trace.is_string()) trace = json::parse(trace.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    double t0 = INFINITY, t1 = -INFINITY;
    if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) {
      for (const json& e : trace["traceEvents"]) {
        if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("ts") || !e["ts"].is_number()) continue;
        t0 = std::min(t0, e["ts"].get<double>());
        t1 = std::max(t1, e["ts"].get<double>() + number_or(e, "dur", 0));
      }
    }
    if (t0 < t1) span = std::max(span, t1 - t0);
    traces[who] = timelines[who];
  }
  std::ostringstream o;
  o << "<div class=\"timelines\">";
  for (const char* who : {"yours", "reference"}) {
    if (!traces.count(who)) continue;
    const json& trace = traces[who];
    tiny::profiler::TimelineOptions options;
    options.title = std::string(who) + ": GPU timeline";
    options.width_px = 620;
    options.min_span_us = span;
    o << "<figure><figcaption>" << who << "</figcaption>";
    try {
      o << tiny::profiler::timeline_svg(trace.is_string() ? trace.get<std::string>() : trace.dump(), options);
    } catch (const tiny::Error& e) {
      o << "<p class=\"dim\">timeline not drawn: " << esc(e.what()) << "</p>";
    }
    o << "</figure>";
  }
  return o.str() + "</div>\n";
}

std::string lesson_number(const LessonResult& r) { return r.lesson ? std::to_string(r.lesson->number) : std::string("?"); }

// A row per lesson, then the total: the same points as results.json and
// gradebook.csv (lesson.json's weights).
void write_scoreboard(std::ostream& o, const std::vector<LessonResult>& results) {
  o << "<h2>Scoreboard</h2>\n<table class=\"scoreboard\">\n<thead><tr><th>#</th><th>lesson</th><th>status</th>"
    << "<th>checks</th><th>points</th><th>score</th><th>time</th></tr></thead>\n<tbody>\n";
  for (const LessonResult& r : results) {
    o << "<tr><td class=\"n\">" << lesson_number(r) << "</td><td><a href=\"#lesson-" << lesson_number(r) << "\">"
      << esc(r.lesson ? r.lesson->title : "") << "</a></td><td class=\"status\" style=\"color:"
      << status_color(r.status) << "\">" << esc(r.status) << "</td><td class=\"n\">" << r.passed << "/" << r.total
      << "</td><td class=\"n\">" << points_text(r.points) << " of " << points_text(r.max_points)
      << "</td><td class=\"n\">" << static_cast<int>(r.score() * 100 + 0.5) << "%</td><td class=\"n\">"
      << fixed(r.seconds, 1) << " s</td></tr>\n";
  }
  o << "</tbody>\n</table>\n";
  double points = 0, max_points = 0;
  for (const LessonResult& r : results) points += r.points, max_points += r.max_points;
  if (!results.empty()) {
    o << "<p>Total: <b>" << points_text(points) << "</b> of " << points_text(max_points) << " points ("
      << fixed(max_points > 0 ? 100 * points / max_points : 0, 1) << "%).</p>\n";
  }
  if (results.empty()) o << "<p class=\"dim\">No lessons were checked.</p>\n";
}

// A check's curves ("loss per step" and the like), one plot each.
void write_curves(std::ostream& o, const json& curves, const std::string& verdict) {
  for (const auto& [name, curve] : curves.items()) {
    if (!curve.is_object()) continue;
    // "loss per step": the quantity on the y axis, the steps on the x axis. Yours first, then the
    // series it is compared with, under whatever name the check gave it ("reference", "GradScaler").
    const size_t per = name.find(" per ");
    std::vector<Series> series;
    if (curve.contains("yours")) series.push_back({"yours", kYours, false, curve_points(curve["yours"])});
    const char* others[] = {kReference, "#8250df", "#57606a"};
    for (const auto& [who, values] : curve.items()) {
      if (who == "yours" || !values.is_array()) continue;
      series.push_back({who, others[std::min<size_t>(series.size() - (curve.contains("yours") ? 1 : 0), 2)],
                        true, curve_points(values)});
    }
    // "the scale after each step (an inf at step 2)": the scale against step.
    const size_t after = per == std::string::npos ? name.find(" after each ") : std::string::npos;
    const size_t cut = per != std::string::npos ? per : after;
    std::string x_title = cut == std::string::npos ? "point" : name.substr(cut + (per != std::string::npos ? 5 : 12));
    x_title = x_title.substr(0, x_title.find(" ("));
    const std::string y_title = cut == std::string::npos ? name : name.substr(0, cut);
    // A passing check's curve is a glance (it follows the reference's); a failing one's shows the detail.
    o << line_plot(name, series, {}, false, false, x_title, y_title, "", verdict == "pass" ? 90 : 170);
  }
}

// A check's box: its line, its message (`shared`, the lesson's problem, only
// referred to), its note and what its details draw.
void write_check(std::ostream& o, const CheckResult& c, const LessonResult& r, const std::string& shared) {
  o << "<div class=\"check\">\n<div><span class=\"badge " << esc(c.verdict) << "\">" << badge(c.verdict)
    << "</span><b>" << esc(c.name) << "</b>: " << esc(c.summary);
  if (c.seconds > 0) o << " <span class=\"secs\">" << fixed(c.seconds, 2) << " s</span>";
  o << "</div>\n";
  if (!c.message.empty()) {
    const bool same = !shared.empty() && (c.message == shared || c.message == cut_text(shared));
    o << "<pre>" << esc(same ? r.status + " (see above)" : c.message) << "</pre>\n";
  }
  if (!c.note.empty()) o << "<pre class=\"note\">" << esc(c.note) << "</pre>\n";
  const json& d = c.details;
  if (!d.is_object()) {
    o << "</div>\n";
    return;
  }
  if (d.contains("timing") && d["timing"].is_object()) o << timing_plot(d["timing"]);
  if (d.contains("counters") && d["counters"].is_object()) o << counters_table(d["counters"]);
  if (d.contains("curves") && d["curves"].is_object()) write_curves(o, d["curves"], c.verdict);
  if (d.contains("memory") && d["memory"].is_object()) o << memory_plot(d["memory"]);
  if (d.contains("timelines") && d["timelines"].is_object()) o << timelines_section(d["timelines"]);
  o << "</div>\n";
}

// A lesson's section: its line, its problem (once), then its checks.
void write_lesson(std::ostream& o, const LessonResult& r) {
  o << "<section id=\"lesson-" << lesson_number(r) << "\">\n<h2>Lesson " << lesson_number(r) << ": "
    << esc(r.lesson ? r.lesson->title : "") << " <span class=\"status\" style=\"color:" << status_color(r.status)
    << "\">" << esc(r.status) << "</span></h2>\n<p>" << r.passed << " of " << r.total << " checks pass";
  if (r.todo > 0) o << ", " << r.todo << " still to do";
  o << "; " << fixed(r.seconds, 1) << " s";
  if (r.devices.is_array() && !r.devices.empty()) o << "; ran on " << device_line(r.devices);
  o << ".</p>\n";
  // A lesson that does not compile gives every check the same message: show the log once.
  const std::string shared = r.problem.empty() ? "" : r.status + ":\n" + r.problem;
  if (!r.problem.empty()) o << "<pre class=\"problem\">" << esc(r.problem) << "</pre>\n";
  bool list_open = false;  // a table of the checks with nothing to show but a line (TODO, SKIP)
  for (const CheckResult& c : r.checks) {
    bool drawn = false;
    if (c.details.is_object()) {
      for (const char* key : {"timing", "counters", "curves", "memory", "timelines"}) drawn = drawn || c.details.contains(key);
    }
    if ((c.verdict == "todo" || c.verdict == "skip") && c.note.empty() && !drawn) {
      // One row, not a box: a stub's lesson is a list of what is left to do.
      if (!list_open) o << "<table class=\"short\"><tbody>\n";
      list_open = true;
      o << "<tr><td><span class=\"badge " << esc(c.verdict) << "\">" << badge(c.verdict) << "</span></td><td><b>"
        << esc(c.name) << "</b>: " << esc(c.summary);
      if (c.seconds > 0) o << " <span class=\"secs\">" << fixed(c.seconds, 2) << " s</span>";
      if (!c.message.empty()) {
        const bool same = !shared.empty() && (c.message == shared || c.message == cut_text(shared));
        o << "<br><span class=\"dim\">" << esc(same ? r.status + " (see above)" : c.message) << "</span>";
      }
      o << "</td></tr>\n";
      continue;
    }
    if (list_open) o << "</tbody></table>\n";
    list_open = false;
    write_check(o, c, r, shared);
  }
  if (list_open) o << "</tbody></table>\n";
  o << "</section>\n";
}

}  // namespace

std::string html_report(const std::vector<LessonResult>& results, uint64_t seed, const std::string& title,
                        const std::string& warning, const std::string& layout) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << esc(title)
    << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n<h1>" << esc(title) << "</h1>\n";
  // The sandbox's line: a warning when protections were missing, else what was in force.
  const bool in_force = warning.rfind("sandbox: every protection in force", 0) == 0;
  if (!warning.empty()) o << "<pre class=\"" << (in_force ? "sandbox" : "problem") << "\">" << esc(warning) << "</pre>\n";
  o
    << "<p>Checked with seed <b>" << seed << "</b> (rerun with <code>--seed " << seed << "</code> to repeat). "
    << "Timed checks on the emulated GPU use its modelled clock: what the same work would take on the modelled "
    << "GPU, an estimate (docs/performance_model.md), the same on every run; on a real GPU, the host's clock."
    << "</p>\n" << (layout.empty() ? std::string() : "<h2>Submission layout</h2>\n<pre>" + esc(layout) + "</pre>\n");
  write_scoreboard(o, results);
  o << machine_section(results);
  for (const LessonResult& r : results) write_lesson(o, r);
  o << "<p class=\"dim\">Made by the workbook grader.</p>\n</body>\n</html>\n";
  return o.str();
}

}  // namespace workbook
