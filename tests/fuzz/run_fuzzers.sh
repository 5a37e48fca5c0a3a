#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz with clang and runs each one for
# a while on its seed corpus (tests/fuzz/corpus/<target>/), failing on the
# first crash, leak, sanitizer report, timeout or out-of-memory.
#
#   tests/fuzz/run_fuzzers.sh [seconds_per_target (20)] [build_dir (build-fuzz)]
#
# Exit status: 0 when every target ran clean, 1 on a finding or a build
# failure, 77 when clang++ is missing.
#
# New inputs the fuzzer finds go to a scratch corpus under the build
# directory, never into the source tree; a crashing input is written to
# <build_dir>/artifacts/ and its path printed. Set FUZZ_TARGETS to a
# space-separated subset to run only those.
set -euo pipefail

seconds="${1:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
build="${2:-${root}/build-fuzz}"

# 77: skipped, for CTest (fuzz_smoke), where clang is not installed.
if ! command -v clang++ >/dev/null; then
  echo "run_fuzzers: clang++ not found (apt-get install clang" \
       "libclang-rt-14-dev); skipping" >&2
  exit 77
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
CC=clang CXX=clang++ cmake -S "${here}" -B "${build}" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "${build}" -j "$(nproc)"

targets="${FUZZ_TARGETS:-cluster_spec_fuzzer hostlist_fuzzer idx_reader_fuzzer checkpoint_reader_fuzzer criteo_reader_fuzzer tf_record_reader_fuzzer example_parser_fuzzer csv_parser_fuzzer}"
mkdir -p "${build}/artifacts"
status=0
for target in ${targets}; do
  seeds="${here}/corpus/${target}"
  scratch="${build}/corpus/${target}"
  rm -rf "${scratch}"
  mkdir -p "${scratch}"
  dict=()
  [[ -f "${here}/${target}.dict" ]] && dict=(-dict="${here}/${target}.dict")
  echo "== ${target}: ${seconds}s"
  # One job; inputs up to 16 KiB; any input taking over 10 s or 2 GB fails.
  if ! "${build}/${target}" "${scratch}" "${seeds}" "${dict[@]}" \
      -max_total_time="${seconds}" -max_len=16384 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="${build}/artifacts/${target}-" \
      >"${build}/${target}.log" 2>&1; then
    echo "FAILED: ${target}; last lines of ${build}/${target}.log:" >&2
    tail -n 40 "${build}/${target}.log" >&2
    status=1
  else
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)" \
      "${build}/${target}.log" | tr '\n' ' '
    echo
  fi
done
exit "${status}"
