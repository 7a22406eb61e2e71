/// @file targets.h
/// @brief The bodies of the fuzz targets: one function per reader of outside bytes.
///
/// Each function feeds `size` bytes to one reader the way a user's file would
/// reach it (in memory where the reader has an in-memory entry, otherwise
/// through a memfd or a scratch file) and uses what comes back. It returns
/// normally or throws: tiny::Error (or another std::exception) is the reader
/// rejecting bad input, which is expected. A crash, a sanitizer report, an
/// abort, a hang or a huge allocation is a bug. The libFuzzer programs
/// (fuzz_<name>.cpp) and the corpus replay tests (tests/framework and
/// tests/grader test_fuzz_corpus.cpp) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tiny_fuzz {

/// @brief `.npy`: io::detail::parse_npy from memory, then tiny::io::load_npy through a memfd.
void npy(const uint8_t* data, size_t size);
/// @brief safetensors: io::detail::parse_safetensors from memory, then tiny::load through a memfd.
void safetensors(const uint8_t* data, size_t size);
/// @brief IDX (plain or gzip): tiny::data::read_idx through a memfd, with 0, 1 and 3 expected dims.
void idx(const uint8_t* data, size_t size);
/// @brief The digits CSV: tiny::data::Digits over a scratch folder holding the bytes as digits.csv.
void digits_csv(const uint8_t* data, size_t size);

/// @brief The checker/runner exchange: workbook::Bundle::load of a folder whose values.json is the bytes
/// (the folder also holds t0.npy float32 (2, 3), t1.npy int64 (4,), t2.npy bool (2, 2) and bad.npy).
void bundle(const uint8_t* data, size_t size);
/// @brief The grader's recipe and a lesson.json: the bytes up to the first NUL are recipe.json (each
/// "@SRC@" replaced by a scratch source folder), the rest is lessons/1_a/lesson.json in that folder.
void recipe(const uint8_t* data, size_t size);
/// @brief What `grade --submission/--batch` reads of a submission folder: the bytes describe a small tree
/// (see fuzz/README.md), built in a scratch folder; then the lessons folder is found, quiz.txt is read,
/// and the results JSON and HTML report are made from them.
void submission(const uint8_t* data, size_t size);
/// @brief A submission that is an archive: workbook::read_archive from memory (small limits), then
/// workbook::unpack_archive of the bytes as a file into a scratch folder, which must then hold only plain
/// files and folders, none of them outside it, within the limits.
void archive(const uint8_t* data, size_t size);

}  // namespace tiny_fuzz
