// The main of every lesson's checker program (lesson_N_checks).
#include "checker.h"

int main(int argc, char** argv) { return workbook::checker_main(argc, argv); }
