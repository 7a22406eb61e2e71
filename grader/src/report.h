// The HTML report: one student's results as a single self-contained page
// (inline CSS and SVG, no scripts, no external files): a scoreboard, then each
// lesson's checks with their messages, and plots of what the checks measured
// (timings, GPU counters, curves, memory over time) where the data is there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grade.h"

namespace workbook {

// The page for `results` (checked with `seed`), headed `title`, with `warning`
// (what the sandbox lacked, "unproctored: ...") on top when there is one. Every
// string that comes from the results is HTML-escaped. `layout` (SubmissionLayout::text(), "" for
// the student's own tree) is shown first, under "Submission layout".
std::string html_report(const std::vector<LessonResult>& results, uint64_t seed, const std::string& title,
                        const std::string& warning = "", const std::string& layout = "");

}  // namespace workbook
