/// @file temp_folders.h
/// @brief The temporary folders of make_temp_folder (process.h): made with
/// their process's PID and start time in the name, swept when that process
/// was killed outright.
#pragma once

#include <sys/types.h>

namespace workbook {

/// @brief When process `pid` started (clock ticks since boot, /proc/PID/stat's
/// 22nd field), or 0 when there is no such process (or only its zombie: it is dead).
unsigned long long start_time_of(pid_t pid);

}  // namespace workbook
