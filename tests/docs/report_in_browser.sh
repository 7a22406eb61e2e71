#!/usr/bin/env bash
# The grader's HTML report, or a profiler timeline page, in a real browser (the
# tests docs.report_in_browser and docs.timeline_in_browser):
#   report_in_browser.sh SAMPLE_PROGRAM OUT_DIR     (SAMPLE_PROGRAM writes the report: docs_report_sample)
#   report_in_browser.sh --html REPORT.html OUT_DIR (any report, e.g. workbook-grader grade --html)
#   report_in_browser.sh --timeline TRAIN_MLP OUT_DIR
#                        (runs TRAIN_MLP --device cuda --profile OUT_DIR/trace.json on the emulated GPU
#                         and opens the timeline page it writes beside the trace, OUT_DIR/trace.html)
# Headless Chromium opens the page and
#  1. its DOM (--dump-dom) has every <svg> chart of the file, each with a
#     polyline with points or a rect with a size;
#  2. a copy with a probe script appended proves each chart was laid out and
#     drawn: the <svg> has a size on the page, every polyline a length, every
#     bar a width (getBBox, getTotalLength); in a timeline (svg.timeline),
#     every lane has a height and at least one slice with a width, and some
#     slices carry their names;
#  3. a screenshot is saved: OUT_DIR/report.png (OUT_DIR/timeline.png for --timeline).
# Skipped (exit 77) when Chromium is not installed. Debian: apt-get install chromium;
# as root, WORKBOOK_INSTALL_BROWSER=1 makes this script install it first.
set -euo pipefail
timeline=''
if [[ $# -eq 3 && "$1" == --html ]]; then
  source_html=$2 out=$3 sample=''
elif [[ $# -eq 3 && "$1" == --timeline ]]; then
  timeline=$2 out=$3 sample='' source_html=''
elif [[ $# -eq 2 ]]; then
  sample=$1 out=$2 source_html=''
else
  echo "usage: $0 SAMPLE_PROGRAM OUT_DIR | --html REPORT.html OUT_DIR | --timeline TRAIN_MLP OUT_DIR" >&2
  exit 2
fi

find_browser() {
  local b
  for b in chromium chromium-browser google-chrome-stable google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then command -v "$b"; return 0; fi
  done
  return 1
}
browser=$(find_browser || true)
if [[ -z "$browser" && "${WORKBOOK_INSTALL_BROWSER:-0}" == 1 && "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing Debian's chromium (WORKBOOK_INSTALL_BROWSER=1)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || echo "could not install chromium"
  browser=$(find_browser || true)
fi
if [[ -z "$browser" ]]; then
  echo "SKIPPED: Chromium is not installed, so the report cannot be opened in a browser"
  echo "  (sudo apt-get install chromium; or, as root, WORKBOOK_INSTALL_BROWSER=1 ctest -R docs.report_in_browser)"
  exit 77
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
fail() { echo "FAILED: $*" >&2; exit 1; }
report="$out/report.html" shot="$out/report.png"
if [[ -n "$timeline" ]]; then
  # The example of docs/performance_model.md, on the digits (shipped in data/) to be quick.
  report="$out/trace.html" shot="$out/timeline.png"
  rm -f "$out/trace.json" "$report"
  TINY_FORCE_EMULATED_GPU=1 TINY_NUM_THREADS=2 "$timeline" --dataset digits --epochs 1 --batch-size 32 --device cuda \
    --profile "$out/trace.json" >"$out/train_mlp.log" 2>&1 || { cat "$out/train_mlp.log"; fail "$timeline failed"; }
  [[ -s "$out/trace.json" && -s "$report" ]] || fail "$timeline --profile $out/trace.json wrote no trace.html beside it"
  grep -q 'modelled step time: ' "$report" || fail "the timeline page shows no modelled step time: $report"
elif [[ -n "$sample" ]]; then
  "$sample" "$report"
else
  cp "$source_html" "$report"
fi

# One headless Chromium run; its own profile, so nothing of the user's is touched.
chrome() {
  timeout 120 "$browser" --headless --disable-gpu --no-sandbox --no-first-run --mute-audio \
    --user-data-dir="$out/profile" --hide-scrollbars "$@" 2>"$out/chromium.log"
}
echo "browser: $("$browser" --version 2>/dev/null | head -1)"

# 1. The report as shipped (no scripts): every chart is in the parsed DOM.
chrome --dump-dom "file://$report" >"$out/report.dom.html" || fail "chromium could not open $report (see $out/chromium.log)"
charts_in_file=$(grep -o '<svg' "$report" | wc -l)
charts_in_dom=$(grep -o '<svg' "$out/report.dom.html" | wc -l)
[[ $charts_in_file -gt 0 ]] || fail "the report has no charts (<svg>): $report"
[[ $charts_in_dom -eq $charts_in_file ]] || fail "the report has $charts_in_file charts but the browser's DOM $charts_in_dom"
# Each <svg>...</svg> of the DOM, one per line, must draw something.
tr '\n' ' ' <"$out/report.dom.html" | grep -o '<svg[^>]*>.*' | sed 's#</svg>#</svg>\n#g' | grep '<svg' >"$out/charts.txt" || true
n=0
while IFS= read -r svg; do
  n=$((n + 1))
  title=$(printf '%s' "$svg" | sed -n 's#.*<title>\([^<]*\)</title>.*#\1#p')
  if ! printf '%s' "$svg" | grep -Eq '<polyline[^>]* points="[0-9.-]+,[0-9.-]+ [0-9.-]+,[0-9.-]+|<rect[^>]* width="[0-9.]*[1-9]'; then
    fail "chart $n ($title) has no polyline with points and no bar with a width"
  fi
  if printf '%s' "$svg" | grep -Eq '<polyline[^>]* points=" *"'; then
    fail "chart $n ($title) has a polyline without points"
  fi
done <"$out/charts.txt"
[[ $n -eq $charts_in_file ]] || fail "found $n complete charts in the DOM, expected $charts_in_file"

# 2. Drawn, not only parsed: a copy with a probe that measures every chart.
probe="$out/report.probe.html"
{
  sed 's#</body>##; s#</html>##' "$report"
  cat <<'PROBE'
<pre id="probe"></pre><script>
(function () {
  var lines = [], bad = 0, charts = document.querySelectorAll("svg"), allLanes = 0, emptyLanes = 0, labels = 0;
  charts.forEach(function (svg, i) {
    var box = svg.getBoundingClientRect(), title = svg.querySelector("title");
    var name = "chart " + (i + 1) + " (" + (title ? title.textContent : "untitled") + ")";
    var lengths = [], widths = [];
    svg.querySelectorAll("polyline").forEach(function (p) { lengths.push(p.getTotalLength()); });
    svg.querySelectorAll("rect").forEach(function (r) { widths.push(r.getBBox().width); });
    var drawn = lengths.concat(widths);
    var ok = box.width > 0 && box.height > 0 && drawn.length > 0 && drawn.every(function (v) { return v > 0; });
    if (!ok) bad++;
    if (svg.classList.contains("timeline")) {  // a profiler timeline: lanes, not bars
      var lanes = svg.querySelectorAll("g.lane"), described = [];
      lanes.forEach(function (lane) {
        var h = lane.getBBox().height, slices = lane.querySelectorAll("g.slice rect"), wide = 0;
        slices.forEach(function (r) { if (r.getBBox().width > 0) wide++; });
        var lane_ok = h > 0 && slices.length > 0 && wide == slices.length;
        if (!lane_ok) emptyLanes++;
        described.push((lane_ok ? "" : "EMPTY ") + lane.getAttribute("data-lane") + " (" + Math.round(h) + " px high, " +
                       wide + " slices)");
      });
      allLanes += lanes.length;
      labels += svg.querySelectorAll("g.slice text").length;
      lines.push((ok ? "drawn " : "NOT DRAWN ") + name + ": " + Math.round(box.width) + "x" + Math.round(box.height) +
                 " px, " + lanes.length + " lanes: " + described.join("; "));
      return;
    }
    lines.push((ok ? "drawn " : "NOT DRAWN ") + name + ": " + Math.round(box.width) + "x" + Math.round(box.height) +
               " px, polyline lengths [" + lengths.map(Math.round) + "], bar widths [" + widths.map(Math.round) + "]");
  });
  if (allLanes > 0) lines.push("LANES: " + allLanes + " lanes, " + emptyLanes + " empty, " + labels + " slice labels");
  lines.push("PROBE: " + charts.length + " charts, " + bad + " not drawn");
  document.getElementById("probe").textContent = lines.join("\n");
})();
</script></body></html>
PROBE
} >"$probe"
chrome --dump-dom "file://$probe" >"$out/report.probe.dom.html" || fail "chromium could not open $probe"
sed -n '/<pre id="probe">/,/<\/pre>/p' "$out/report.probe.dom.html" | sed 's#<[^>]*>##g; /^$/d' >"$out/probe.txt"
cat "$out/probe.txt"
grep -q "^PROBE: $charts_in_file charts, 0 not drawn" "$out/probe.txt" || fail "not every chart was drawn (above)"
if [[ -n "$timeline" ]]; then
  # The whole trace and its last step alone, each with the host's thread, the stream and both copy engines.
  lanes=$(sed -n 's/^LANES: \([0-9]*\) lanes, \([0-9]*\) empty, \([0-9]*\) slice labels$/\1 \2 \3/p' "$out/probe.txt")
  read -r n_lanes n_empty n_labels <<<"${lanes:-0 -1 0}"
  [[ $n_lanes -ge 8 && $n_empty -eq 0 ]] || fail "the timeline's lanes were not all laid out and drawn: '$lanes' (above)"
  [[ $n_labels -gt 0 ]] || fail "no slice of the timeline carries its name"
fi

# 3. The screenshot, for a person to look at.
size=1280,2200
[[ -z "$timeline" ]] || size=1280,1000
chrome --window-size=$size --screenshot="$shot" "file://$report" >/dev/null || fail "no screenshot"
[[ -s "$shot" ]] && [[ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] \
  || fail "the screenshot $shot is not a PNG"
echo "ok: $charts_in_file charts rendered; screenshot: $shot ($(wc -c <"$shot") bytes)"
