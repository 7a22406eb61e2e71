// The fuzz targets of tiny's readers (fuzz/framework_targets.cpp) over their committed corpora,
// so that every input libFuzzer once crashed on stays fixed in the ordinary build.
#include <gtest/gtest.h>

#include <filesystem>

#include "replay.h"
#include "targets.h"
#include "tiny/data/datasets.h"

namespace {

const std::filesystem::path kCorpus = TINY_FUZZ_CORPUS;

TEST(FuzzCorpus, Npy) { EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "npy", tiny_fuzz::npy), 10u); }
TEST(FuzzCorpus, Safetensors) {
  EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "safetensors", tiny_fuzz::safetensors), 8u);
}
TEST(FuzzCorpus, Idx) { EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "idx", tiny_fuzz::idx), 10u); }
TEST(FuzzCorpus, DigitsCsv) {
  EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "digits_csv", tiny_fuzz::digits_csv), 8u);
}

// The one valid digits file is the shipped one (too big for the corpus): the target accepts it.
TEST(FuzzCorpus, DigitsCsvAcceptsTheShippedFile) {
  const auto bytes = tiny_fuzz::read_bytes(std::filesystem::path(tiny::data::default_data_dir()) / "digits" / "digits.csv");
  ASSERT_GT(bytes.size(), 100000u);
  EXPECT_NO_THROW(tiny_fuzz::digits_csv(bytes.data(), bytes.size()));
}

// Found while writing the IDX target: dimensions whose product is 2^64 wrapped to 0 and matched an
// empty data section, so read_idx returned a 4194304 x 2097152 x 2097152 "image set" of 0 bytes.
TEST(FuzzRegression, IdxDimensionsOverflowingSixtyFourBitsAreRejected) {
  const uint8_t header[] = {0, 0, 8, 3, 0, 0x40, 0, 0, 0, 0x20, 0, 0, 0, 0x20, 0, 0};
  tiny_fuzz::MemFile file(header, sizeof header);
  try {
    tiny::data::read_idx(file.path(), 3);
    FAIL() << "read_idx accepted dimensions that multiply to 2^64 bytes with no data";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("4194304 x 2097152 x 2097152... multiply to more than 2^64 bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
