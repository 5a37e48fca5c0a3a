#include "worker/backend/cuda/cuda_library_search.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "(no reason given)";
}

bool IsDir(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

bool Exists(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

std::string Env(const GetEnv& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr ? value : "";
}

// <prefix>/{lib,lib64}/python3*/{site,dist}-packages, newest Python
// first.
std::vector<fs::path> SitePackagesOf(const fs::path& prefix) {
  std::vector<fs::path> pythons;
  for (const char* lib : {"lib", "lib64"}) {
    std::error_code error;
    for (fs::directory_iterator it(prefix / lib, error), end;
         !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("python3", 0) == 0 && IsDir(it->path())) {
        pythons.push_back(it->path());
      }
    }
  }
  // python3.12 before python3.11; python3 (Debian's dist-packages) last.
  std::sort(pythons.begin(), pythons.end(),
            [](const fs::path& a, const fs::path& b) {
              const std::string x = a.filename().string();
              const std::string y = b.filename().string();
              if (x.size() != y.size()) return x.size() > y.size();
              if (x != y) return x > y;
              return a.parent_path() < b.parent_path();  // lib before lib64
            });
  std::vector<fs::path> sites;
  for (const fs::path& python : pythons) {
    for (const char* kind : {"site-packages", "dist-packages"}) {
      if (IsDir(python / kind)) sites.push_back(python / kind);
    }
  }
  return sites;
}

// "libcublas.so.12 in /x" for each file of `folders` named like
// `soname` but for another major version ("libcublas.so.13").
std::vector<std::string> OtherVersions(
    const std::string& soname, const std::vector<std::string>& folders) {
  std::vector<std::string> found;
  const size_t so = soname.find(".so.");
  if (so == std::string::npos) return found;
  const std::string stem = soname.substr(0, so + 4);  // "libcublas.so."
  for (const std::string& folder : folders) {
    std::error_code error;
    for (fs::directory_iterator it(folder, error), end; !error && it != end;
         it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.rfind(stem, 0) != 0 || name == soname) continue;
      // One entry per major version: libcublas.so.12, not also .12.9.1.
      const std::string version = name.substr(stem.size());
      if (version.empty() || version.find('.') != std::string::npos) continue;
      found.push_back(absl::StrCat(name, " in ", folder));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<std::string> CudaLibraryFolders(const CudaLibrary& library,
                                            const GetEnv& getenv) {
  std::vector<fs::path> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = Env(getenv, var);
    if (!root.empty()) candidates.push_back(fs::path(root) / "lib64");
  }
  candidates.push_back("/usr/local/cuda/lib64");
#ifdef TESSERA_CUDA_LIBRARY_DIR
  // Where the build found the toolkit, as a linked library's RUNPATH would
  // have said.
  candidates.push_back(TESSERA_CUDA_LIBRARY_DIR);
#endif

  // Python prefixes, most specific first: an activated environment, then
  // whichever python3 the user would run, then the per-user and system
  // installs.
  std::vector<fs::path> prefixes;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const std::string prefix = Env(getenv, var);
    if (!prefix.empty()) prefixes.push_back(prefix);
  }
  for (absl::string_view dir :
       absl::StrSplit(Env(getenv, "PATH"), ':', absl::SkipEmpty())) {
    const fs::path bin(std::string{dir});
    if (Exists(bin / "python3")) prefixes.push_back(bin.parent_path());
  }
  // Where environments are commonly made but not activated (a batch job's
  // shell rarely activates one).
  const std::string home = Env(getenv, "HOME");
  std::error_code error;
  const fs::path cwd = fs::current_path(error);
  for (const fs::path& base :
       {home.empty() ? fs::path() : fs::path(home), error ? fs::path() : cwd}) {
    if (base.empty()) continue;
    prefixes.push_back(base / ".venv");
    prefixes.push_back(base / "venv");
  }
  if (!home.empty()) prefixes.push_back(fs::path(home) / ".local");
  prefixes.push_back("/opt/conda");
  prefixes.push_back("/usr/local");
  prefixes.push_back("/usr");
  const std::string conda = Env(getenv, "CONDA_PREFIX");
  for (const fs::path& prefix : prefixes) {
    if ((!conda.empty() && prefix == fs::path(conda)) ||
        IsDir(prefix / "conda-meta")) {
      candidates.push_back(prefix / "lib");
    }
    for (const fs::path& site : SitePackagesOf(prefix)) {
      for (const std::string& wheel_dir : library.wheel_dirs) {
        candidates.push_back(site / wheel_dir);
      }
    }
  }

  std::vector<std::string> folders;
  for (const fs::path& candidate : candidates) {
    const std::string folder = candidate.lexically_normal().string();
    if (IsDir(folder) &&
        std::find(folders.begin(), folders.end(), folder) == folders.end()) {
      folders.push_back(folder);
    }
  }
  return folders;
}

absl::StatusOr<void*> OpenCudaLibrary(const CudaLibrary& library) {
  return OpenCudaLibrary(library, [](const char* name) -> const char* {
    return std::getenv(name);
  });
}

absl::StatusOr<void*> OpenCudaLibrary(const CudaLibrary& library,
                                      const GetEnv& getenv) {
  if (void* handle = dlopen(library.soname.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    return handle;
  }
  const std::string linker_said = DlError();
  const std::vector<std::string> folders = CudaLibraryFolders(library, getenv);
  for (const std::string& folder : folders) {
    const fs::path file = fs::path(folder) / library.soname;
    if (!Exists(file)) continue;
    for (const std::string& need : library.needs) {
      const fs::path beside = fs::path(folder) / need;
      // A failure shows in the library's own dlopen below.
      if (Exists(beside)) dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return handle;
    }
    return absl::UnavailableError(absl::StrCat(
        "cannot load ", file.string(), " (", library.what, "): ", DlError()));
  }
  const std::vector<std::string> others =
      OtherVersions(library.soname, folders);
  return absl::UnavailableError(absl::StrCat(
      "cannot load ", library.soname, " (", library.what,
      "): the dynamic linker says \"", linker_said, "\", and it is in none of ",
      folders.empty() ? "the CUDA or Python package folders (none exists)"
                      : absl::StrJoin(folders, ", "),
      others.empty()
          ? ""
          : absl::StrCat("; found only another major version, which this "
                         "build cannot use: ",
                         absl::StrJoin(others, ", ")),
      "; put the folder of ", library.soname,
      " on LD_LIBRARY_PATH, or install NVIDIA's Python package of it",
      library.pip_package.empty()
          ? ""
          : absl::StrCat(" (pip install ", library.pip_package, ")")));
}

}  // namespace tessera
