// Expansion of the two compressed lists Slurm writes into a step's
// environment: host lists (SLURM_STEP_NODELIST, e.g. "node[01-04,07],login1")
// and task counts (SLURM_STEP_TASKS_PER_NODE, e.g. "2(x3),1").
//
// Contract:
//  - Pure functions of their argument; thread-safe.
//  - The order of the result is Slurm's order, the order `scontrol show
//    hostnames` prints (checked against Slurm 22.05). Nothing is sorted or
//    de-duplicated: n[9-10] gives n9, n10 (TensorFlow sorted hosts as strings
//    and put n10 first).
//  - Every malformed input is InvalidArgument quoting the whole text and
//    naming the 0-based position or the part that is wrong. Where Slurm is
//    lenient with text it never writes itself ("a,,b", "n[1-]", whitespace as
//    a separator, numbers that overflow, which it clamps), these functions
//    are strict: the input comes from Slurm, so anything odd is a mistake
//    better reported than guessed at.
#ifndef TESSERA_COMMON_HOSTLIST_H_
#define TESSERA_COMMON_HOSTLIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// Largest number of values one range may stand for ("n[0-65535]" is the
// most), as Slurm's MAX_RANGE.
inline constexpr int kMaxHostRange = 64 * 1024;
// Largest number of names (or task counts) one list may expand to.
inline constexpr int kMaxExpandedHosts = 1 << 20;

// Expands a Slurm host list into host names.
//
// Syntax (Slurm's): names separated by commas outside brackets. A name is
// literal text with any number of bracket groups, each followed by more
// literal text except the last, which must end the name (Slurm rejects
// "a[1-2]b" too). A group is a comma-separated list of single numbers "7"
// and ranges "1-4" (start <= end). A value is zero-padded to the width of
// the text of its range's start, as Slurm does: node[009-011] gives node009,
// node010, node011; n[9-011] gives n9, n10, n11; n[01-3,7] gives n01, n02,
// n03, n7.
//
// Several groups give the cartesian product in Slurm's order. With two
// groups the left one is outermost: rack[1-2]-node[01-02] gives
// rack1-node01, rack1-node02, rack2-node01, rack2-node02. With more, Slurm's
// recursion puts the next-to-last group outermost, then the groups before it
// from right to left, and the last group innermost: a[1-2]b[3-4]c[5-6] gives
// a1b3c5, a1b3c6, a2b3c5, a2b3c6, a1b4c5, a1b4c6, a2b4c5, a2b4c6.
//
// InvalidArgument for: an empty list or an empty name ("a,,b", a trailing
// comma); whitespace or control characters; an unbalanced or nested bracket;
// an empty group "[]" or an empty range in one ("[1,]"); a value that is not
// a decimal number ("[a]", "[1-]", "[-3]"); a reversed range ("[5-3]"); a
// number too large for 64 bits; text after the last group; a range of more
// than kMaxHostRange values; more than kMaxExpandedHosts names in all.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(
    absl::string_view hostlist);

// Expands Slurm's task counts per node: comma-separated parts, each a count
// "N" or a repeated count "N(xR)" standing for R copies of N. "2(x3),1"
// gives {2, 2, 2, 1}.
//
// InvalidArgument for: an empty list or part; a count or repeat that is not
// a decimal number or does not fit in an int; a count or repeat of 0
// ("0", "2(x0)"); a malformed repeat ("2(3)", "2(x3", "2x3"); more than
// kMaxExpandedHosts counts in all.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(
    absl::string_view tasks_per_node);

}  // namespace tessera

#endif  // TESSERA_COMMON_HOSTLIST_H_
