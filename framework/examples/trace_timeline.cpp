// Draws a Chrome trace as a page any browser opens, without a trace viewer:
//
//   trace_timeline trace.json [trace.html] [--title TEXT] [--width PX]
//
// The trace may be tiny's (tiny::profiler::profile::export_chrome_trace) or
// PyTorch's (prof.export_chrome_trace("trace.json")): one lane per host
// thread, stream and copy engine, slices coloured by category, a time axis in
// milliseconds, the step time when the trace has ProfilerStep ranges.
// Without an output path the page goes beside the trace (trace.json -> trace.html).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "tiny/error.h"
#include "tiny/profiler.h"

int main(int argc, char** argv) {
  CLI::App app{"Draw a Chrome trace (tiny's or PyTorch's) as an HTML page with an SVG timeline"};
  std::string trace_path, html_path;
  tiny::profiler::TimelineOptions options;
  options.title = "";
  app.add_option("trace", trace_path, "the Chrome trace JSON")->required();
  app.add_option("html", html_path, "the page to write (default: the trace's name with .html)");
  app.add_option("--title", options.title, "the page's heading (default: the trace's file name)");
  app.add_option("--width", options.width_px, "the drawing's width in pixels")->check(CLI::Range(400.0, 100000.0));
  CLI11_PARSE(app, argc, argv);
  if (html_path.empty()) {
    const std::string ext = ".json";
    const bool json = trace_path.size() > ext.size() &&
                      trace_path.compare(trace_path.size() - ext.size(), ext.size(), ext) == 0;
    html_path = (json ? trace_path.substr(0, trace_path.size() - ext.size()) : trace_path) + ".html";
  }
  if (options.title.empty()) options.title = "timeline of " + trace_path;
  try {
    tiny::profiler::write_timeline_html(trace_path, html_path, options);
  } catch (const tiny::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  std::cout << "timeline: " << html_path << " (open it in any browser)\n";
  return 0;
}
