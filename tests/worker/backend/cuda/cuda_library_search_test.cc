// Where the node's CUDA libraries are looked for
// (worker/backend/cuda/cuda_library_search.h), with a fake environment and
// a stand-in library (a copy of zlib under another name) in a fake Python
// environment: runs in every build and on any machine.

#include "worker/backend/cuda/cuda_library_search.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Whether a mapping of this process is the file `path`.
bool Mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() >= path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0) {
      return true;
    }
  }
  return false;
}

// A real shared library to copy: zlib, which every binary here maps.
std::string SomeSharedLibrary() {
  void* handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return "";
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return "";
  return map->l_name;
}

class CudaLibrarySearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("cuda_library_search_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    // A venv as python3 -m venv makes it: bin/python3 and a site-packages.
    fs::create_directories(root_ / "venv/bin");
    std::ofstream(root_ / "venv/bin/python3") << "#!/bin/sh\n";
    site_ = root_ / "venv/lib/python3.11/site-packages";
    fs::create_directories(site_ / "nvidia/fake/lib");
    env_["PATH"] = (root_ / "venv/bin").string() + ":/usr/bin:/bin";
  }
  void TearDown() override { fs::remove_all(root_); }

  GetEnv Env() {
    return [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it != env_.end() ? it->second.c_str() : nullptr;
    };
  }

  fs::path root_;
  fs::path site_;
  std::map<std::string, std::string> env_;
};

TEST_F(CudaLibrarySearchTest, FindsAWheelOfThePython3OnPath) {
  const std::string real = SomeSharedLibrary();
  ASSERT_FALSE(real.empty()) << "no shared library to copy";
  // A name no dynamic linker knows, so only the wheel folder can have it.
  const fs::path copy = site_ / "nvidia/fake/lib/libtessera_fake_cuda.so.7";
  fs::copy_file(real, copy);
  const CudaLibrary fake = {"libtessera_fake_cuda.so.7",
                            "a fake CUDA library",
                            {},
                            {"nvidia/fake/lib"}};
  EXPECT_THAT(CudaLibraryFolders(fake, Env()),
              ::testing::Contains((site_ / "nvidia/fake/lib").string()));
  ASSERT_FALSE(Mapped(copy.string()));
  absl::StatusOr<void*> opened = OpenCudaLibrary(fake, Env());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(Mapped(copy.string()));
}

TEST_F(CudaLibrarySearchTest, TheCudaInstallComesBeforePythonPackages) {
  fs::create_directories(root_ / "cuda/lib64");
  env_["CUDA_HOME"] = (root_ / "cuda").string();
  const std::vector<std::string> folders =
      CudaLibraryFolders({"libx.so.1", "x", {}, {"nvidia/fake/lib"}}, Env());
  ASSERT_GE(folders.size(), 2u);
  EXPECT_EQ(folders[0], (root_ / "cuda/lib64").string());
  EXPECT_THAT(folders,
              ::testing::Contains((site_ / "nvidia/fake/lib").string()));
}

// A batch job's shell rarely activates the environment pip installed
// NVIDIA's wheels into.
TEST_F(CudaLibrarySearchTest, AnUnactivatedVenvInHomeCounts) {
  const fs::path wheel =
      root_ / "home/.venv/lib/python3.12/site-packages/nvidia/fake/lib";
  fs::create_directories(wheel);
  env_["HOME"] = (root_ / "home").string();
  env_["PATH"] = "/usr/bin:/bin";
  EXPECT_THAT(
      CudaLibraryFolders({"libx.so.1", "x", {}, {"nvidia/fake/lib"}}, Env()),
      ::testing::Contains(wheel.string()));
}

TEST_F(CudaLibrarySearchTest, AMissingLibraryNamesItAndEveryFolderTried) {
  absl::StatusOr<void*> opened = OpenCudaLibrary(
      {"libtessera_absent.so.3", "the absent library", {}, {"nvidia/fake/lib"}},
      Env());
  ASSERT_FALSE(opened.ok());
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();
  EXPECT_THAT(opened.status().message(), HasSubstr("libtessera_absent.so.3"));
  EXPECT_THAT(opened.status().message(), HasSubstr("the absent library"));
  EXPECT_THAT(opened.status().message(),
              HasSubstr((site_ / "nvidia/fake/lib").string()));
}

// A system pip on RHEL-family nodes installs platform wheels (NVIDIA's
// among them) under lib64/.
TEST_F(CudaLibrarySearchTest, FindsAWheelInALib64SitePackages) {
  const fs::path wheel =
      root_ / "usr/lib64/python3.9/site-packages/nvidia/fake/lib";
  fs::create_directories(wheel);
  fs::create_directories(root_ / "usr/bin");
  std::ofstream(root_ / "usr/bin/python3") << "#!/bin/sh\n";
  env_["PATH"] = (root_ / "usr/bin").string();
  EXPECT_THAT(
      CudaLibraryFolders({"libx.so.1", "x", {}, {"nvidia/fake/lib"}}, Env()),
      ::testing::Contains(wheel.string()));
}

// conda-forge's cuBLAS and NCCL put the libraries in $CONDA_PREFIX/lib.
TEST_F(CudaLibrarySearchTest, FindsALibraryInTheCondaEnvironmentsLib) {
  const std::string real = SomeSharedLibrary();
  ASSERT_FALSE(real.empty()) << "no shared library to copy";
  const fs::path conda = root_ / "miniforge/envs/train";
  fs::create_directories(conda / "lib");
  fs::create_directories(conda / "conda-meta");
  fs::copy_file(real, conda / "lib/libtessera_fake_conda.so.5");
  env_["CONDA_PREFIX"] = conda.string();
  const CudaLibrary fake = {"libtessera_fake_conda.so.5",
                            "a fake CUDA library",
                            {},
                            {"nvidia/fake/lib"},
                            "nvidia-fake"};
  EXPECT_THAT(CudaLibraryFolders(fake, Env()),
              ::testing::Contains((conda / "lib").string()));
  absl::StatusOr<void*> opened = OpenCudaLibrary(fake, Env());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(Mapped((conda / "lib/libtessera_fake_conda.so.5").string()));
}

// A node with only CUDA 12's wheels (common with torch) beside a build
// that needs CUDA 13's: the error, which --device=auto logs as its reason
// for training on the CPU, names what was found and what to install.
TEST_F(CudaLibrarySearchTest, AnotherMajorVersionIsNamedWithThePipPackage) {
  fs::create_directories(site_ / "nvidia/cublas/lib");
  std::ofstream(site_ / "nvidia/cublas/lib/libtessera_cublas.so.12") << "";
  std::ofstream(site_ / "nvidia/cublas/lib/libtessera_cublas.so.12.9.1") << "";
  absl::StatusOr<void*> opened =
      OpenCudaLibrary({"libtessera_cublas.so.13",
                       "cuBLAS",
                       {},
                       {"nvidia/cu13/lib", "nvidia/cublas/lib"},
                       "nvidia-cublas"},
                      Env());
  ASSERT_FALSE(opened.ok());
  const std::string message(opened.status().message());
  EXPECT_THAT(message,
              HasSubstr("found only another major version, which this build "
                        "cannot use: libtessera_cublas.so.12 in " +
                        (site_ / "nvidia/cublas/lib").string()));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("12.9.1")));
  EXPECT_THAT(message, HasSubstr("pip install nvidia-cublas"));
}

}  // namespace
}  // namespace tessera
