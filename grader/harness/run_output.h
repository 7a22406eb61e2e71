/// @file run_output.h
/// @brief What a run writes: its folder and unlinked files measured while it
/// runs (ProcessOptions::output_limit), its tmpfs copied back into its folder
/// when it ends well, what a stopped run wrote removed, the tail of its log.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "cgroup.h"

namespace workbook {

/// @brief Bytes in the files under `dir` but the log (`log_fd`, counted as we
/// write it), each the larger of its size and its blocks (a sparse file counts
/// for what it claims); past 100000 entries, `full` + 1 (a flood of empty files).
size_t tree_bytes(const std::string& dir, size_t full, int log_fd);

/// @brief The same for a folder held by descriptor (a run's tmpfs), never
/// following a link, but the names of `skip` (where its inputs were bound).
size_t tree_bytes_at(int dir_fd, size_t full, size_t& entries, const std::vector<std::string>& skip, int depth = 0);

/// @brief Bytes in the files the processes `pids` hold open once unlinked
/// (O_TMPFILE, made and deleted), memfds excepted (memory, bounded by the memory cgroup).
size_t unlinked_bytes(const std::vector<pid_t>& pids);

/// @brief The processes of a run: those of its cgroup, else those of its own uid (`own_uid`), else those of its process group.
std::vector<pid_t> processes_of_run(const Cgroups& cgroups, unsigned own_uid, pid_t group);

/// @brief Copies what a run left in its tmpfs (`from`) into its folder (`to`),
/// as root, once every process of it is gone: files, folders and symbolic
/// links as links, nothing else, never following a link; `skip`: its inputs'
/// names; `budget`: the bytes it may still copy.
void copy_back(int from, int to, const std::vector<std::string>& skip, size_t& budget, int depth = 0);

/// @brief Removes what a stopped run wrote into its folder (the names not in `before`), at once.
void remove_new_entries(const std::filesystem::path& dir, const std::vector<std::string>& before);

/// @brief Bytes used in a tmpfs held by descriptor.
size_t tmpfs_used(int fd);

/// @brief The last `max_lines` lines of what is in `fd` (from its last 64 KiB), each cut to 200 characters, 4000 in all.
std::string tail_of_fd(int fd, size_t max_lines);

}  // namespace workbook
