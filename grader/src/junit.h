// JUnit XML for CI systems (GitLab, Jenkins, GitHub's test reporters): one
// <testsuite> per lesson inside a named <testsuites>, one <testcase> per check;
// a failing check's message in <failure message=...> (its first line) and whole
// in the element's text, an untouched stub and a requirement not met here as
// <skipped message=...> with the reason, the workbook's own faults as <error>.
#pragma once

#include <string>
#include <vector>

#include "grade.h"

namespace workbook {

// The document for one submission (`name`: the suite's name, e.g. the
// submission's folder), graded with `seed`. Well-formed whatever the messages
// hold: markup is escaped, characters XML 1.0 forbids and bytes that are not
// UTF-8 become U+FFFD. With `layout` (someone else's submission, intake.h), a first suite
// "submission_layout" holds one case, failed when a lesson was not found once, its text the layout.
std::string junit_xml(const std::vector<LessonResult>& results, const std::string& name, uint64_t seed,
                      const SubmissionLayout* layout = nullptr);

// `text` safe inside an XML attribute or element: escaped, and valid UTF-8 with no forbidden characters.
std::string xml_text(const std::string& text);

}  // namespace workbook
