// The epochs a job trained before this coordinator started: a restarted
// coordinator resumes from a checkpoint, and the job's totals (the summary,
// the charts) count the epochs an earlier coordinator of the job trained
// too. metrics.jsonl already holds them, one line per finished epoch.

#ifndef TESSERA_COORDINATOR_REPORT_METRICS_HISTORY_H_
#define TESSERA_COORDINATOR_REPORT_METRICS_HISTORY_H_

#include <optional>
#include <string>
#include <vector>

#include "coordinator/report/epoch_result.h"

namespace tessera {

// The lines of the metrics file at `path`: none when it is missing or not
// a regular file (a run folder's metrics.jsonl may be a link to /dev/full or
// a pipe, which would never end), at most its first 256 MiB.
std::vector<std::string> ReadMetricsLines(const std::string& path);

// The epoch of one metrics.jsonl line (its figures, staleness histogram and
// whether it has an accuracy), or nullopt for a line of extra steps or one
// that does not parse.
std::optional<EpochResult> EpochOfLine(const std::string& line);

// The epoch lines of the metrics file at `path`, in file order (lines of
// extra steps left out). A missing file has none; a line that does not
// parse (the last one, cut short by a kill) is skipped.
std::vector<EpochResult> ReadEpochHistory(const std::string& path);

// The job's epochs before `epoch` (where a coordinator resumes), one per
// epoch number in order: the last line of each, since an epoch trained
// again after a failure was written again.
std::vector<EpochResult> EpochsBefore(const std::vector<EpochResult>& lines,
                                      int epoch);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_METRICS_HISTORY_H_
