#include "Npy.h"

#include "Support/Errors.h"
#include "attnc/DType.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace attnc {
namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("attnc_npy_test_" + name);
}

TEST(Npy, RoundTripsEveryWritableDtype) {
  for (const char* dtype : {"f64", "f32", "f16", "i32", "u8"}) {
    HostTensor t(*parseDType(dtype), {2, 3});
    t.assign({1, 2, 3, 4, 5, 250});
    std::filesystem::path path = scratch(std::string(dtype) + ".npy");
    npy::write(path, t);
    HostTensor back = npy::read(path);
    EXPECT_EQ(back.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(dtypeName(back.dtype()), dtype);
    EXPECT_EQ(back.values(), t.values());
    std::filesystem::remove(path);
  }
}

TEST(Npy, Bfloat16IsWrittenAsFloat32) {
  HostTensor t(*parseDType("bf16"), {3});
  t.assign({1.5, -2, 0.25});
  std::filesystem::path path = scratch("bf16.npy");
  npy::write(path, t);
  HostTensor back = npy::read(path);
  EXPECT_EQ(dtypeName(back.dtype()), "f32");
  EXPECT_EQ(back.values(), t.values());
  std::filesystem::remove(path);
}

TEST(Npy, RejectsWhatItCannotRead) {
  std::filesystem::path path = scratch("bad.npy");
  std::ofstream(path) << "not numpy";
  EXPECT_THROW(npy::read(path), UsageError);
  EXPECT_THROW(npy::read(scratch("missing.npy")), UsageError);
  std::string header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }";
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(header.size()));
  out.put(0);
  out << header;
  out.close();
  try {
    npy::read(path);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("Fortran"), std::string::npos);
  }
  std::filesystem::remove(path);
}

} // namespace
} // namespace attnc
