// tessera_ctl: talks to a running coordinator.
//
//   tessera_ctl --coordinator=HOST:PORT status
//   tessera_ctl --coordinator=HOST:PORT schedule N    run N more steps
//   tessera_ctl --coordinator=HOST:PORT join          wait for every step
//   tessera_ctl --coordinator=HOST:PORT checkpoint    write one, print it
//   tessera_ctl --coordinator=HOST:PORT stop [REASON] stop cleanly
//   tessera_ctl --coordinator=HOST:PORT drain WORKER  a worker (index or
//                                                     HOST:PORT) finishes
//                                                     its steps and exits
//
// Calls carry the job's token (--job_token_file or $TESSERA_JOB_TOKEN) like
// every other process of the job. Exit codes as every tool's
// (common/exit_code.h): 0, 1 when the coordinator could not be reached or
// failed the command, 2 for a bad command line, a wrong address (a process
// that is not a coordinator) or a refused token.

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/short_call_deadline.h"
#include "coordinator/control/status_text.h"
#include "gflags/gflags.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator_service.grpc.pb.h"

DEFINE_string(coordinator, "", "The coordinator's address, HOST:PORT.");
DEFINE_bool(json, false, "Print status and join results as JSON.");
DEFINE_double(wait_s, 3600,
              "How long join and checkpoint wait for the job, in seconds.");

namespace tessera {
namespace {

void PrintStatus(const JobStatus& s) {
  if (FLAGS_json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(s, &json, options);
    std::printf("%s\n", json.c_str());
    return;
  }
  std::printf("%s", FormatJobStatus(s).c_str());
}

int Fail(const grpc::Status& status, const char* what) {
  absl::Status s = FromGrpcStatus(status, FLAGS_coordinator);
  if (absl::IsUnimplemented(s)) {
    // gRPC's own answer for a service the server does not have is an empty
    // UNIMPLEMENTED: the address is another process of the job.
    s = absl::UnimplementedError(absl::StrCat(
        FLAGS_coordinator,
        " does not serve the coordinator's control service (is it a "
        "parameter server or a worker? --coordinator takes the chief's "
        "address)",
        status.error_message().empty() ? "" : ": ", status.error_message()));
  }
  std::fprintf(stderr, "tessera_ctl %s: %s\n", what, s.ToString().c_str());
  return ExitCodeFor(s);
}

// A count after "schedule" that gflags would take for a flag ("-5"): said
// in the command's words before flags are parsed. Empty when there is none.
std::string NegativeCountError(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--") break;
    int64_t steps = 0;
    if (std::string(argv[i]) == "schedule" &&
        absl::SimpleAtoi(argv[i + 1], &steps) && steps <= 0) {
      return absl::StrCat(
          "tessera_ctl schedule: the number of steps must be a positive "
          "integer, got ",
          argv[i + 1]);
    }
  }
  return "";
}

// tessera_ctl schedule N.
int Schedule(Coordinator::Stub& stub, int argc, char** argv) {
  grpc::ClientContext context;
  int64_t steps = 0;
  if (argc != 3 || !absl::SimpleAtoi(argv[2], &steps) || steps <= 0) {
    std::fprintf(stderr,
                 "tessera_ctl schedule: the number of steps must be a "
                 "positive integer, got %s\n",
                 argc < 3 ? "none" : argv[2]);
    return kExitUserError;
  }
  SetDeadline(&context, kShortCallDeadlineS);
  ScheduleStepsRequest request;
  request.set_steps(steps);
  ScheduleStepsResponse response;
  grpc::Status s = stub.ScheduleSteps(&context, request, &response);
  if (!s.ok()) return Fail(s, "schedule");
  std::printf("scheduled %lld steps (%lld extra steps asked for in all)\n",
              static_cast<long long>(steps),
              static_cast<long long>(response.extra_steps_requested()));
  return 0;
}

// tessera_ctl drain WORKER.
int Drain(Coordinator::Stub& stub, int argc, char** argv) {
  grpc::ClientContext context;
  if (argc != 3) {
    std::fprintf(stderr,
                 "tessera_ctl drain: name one worker, by its index or its "
                 "address HOST:PORT (tessera_ctl status lists them)\n");
    return kExitUserError;
  }
  SetDeadline(&context, kShortCallDeadlineS);
  DrainWorkerRequest request;
  request.set_worker(argv[2]);
  DrainWorkerResponse response;
  grpc::Status s = stub.DrainWorker(&context, request, &response);
  if (!s.ok()) return Fail(s, "drain");
  std::printf(
      "worker %d is draining: it finishes the steps it holds, then exits "
      "(tessera_ctl status shows when it has drained)\n",
      response.worker_index());
  return 0;
}

int Run(int argc, char** argv, const ChannelSecurity& security) {
  if (FLAGS_coordinator.empty() || argc < 2) {
    std::fprintf(stderr, "%s\n", gflags::ProgramUsage());
    return kExitUserError;
  }
  if (absl::Status s = CheckTimeoutSeconds("--wait_s", FLAGS_wait_s); !s.ok()) {
    std::fprintf(stderr, "tessera_ctl: %s\n", std::string(s.message()).c_str());
    return kExitUserError;
  }
  const std::string command = argv[1];
  std::unique_ptr<Coordinator::Stub> stub =
      Coordinator::NewStub(MakeChannel(FLAGS_coordinator, security));
  grpc::ClientContext context;
  if (command == "status") {
    SetDeadline(&context, kShortCallDeadlineS);
    JobStatus status;
    grpc::Status s = stub->GetJobStatus(&context, JobStatusRequest(), &status);
    if (!s.ok()) return Fail(s, "status");
    PrintStatus(status);
    return 0;
  }
  if (command == "schedule") return Schedule(*stub, argc, argv);
  if (command == "join") {
    SetDeadline(&context, FLAGS_wait_s + kShortCallDeadlineS);
    JoinRequest request;
    request.set_timeout_s(FLAGS_wait_s);
    JobStatus status;
    grpc::Status s = stub->Join(&context, request, &status);
    if (!s.ok()) return Fail(s, "join");
    PrintStatus(status);
    return 0;
  }
  if (command == "checkpoint") {
    SetDeadline(&context, FLAGS_wait_s + kShortCallDeadlineS);
    CheckpointRequest request;
    request.set_timeout_s(FLAGS_wait_s);
    CheckpointResponse response;
    grpc::Status s = stub->Checkpoint(&context, request, &response);
    if (!s.ok()) return Fail(s, "checkpoint");
    std::printf("%s\n", response.path().c_str());
    return 0;
  }
  if (command == "stop") {
    SetDeadline(&context, kShortCallDeadlineS);
    StopRequest request;
    if (argc >= 3) request.set_reason(argv[2]);
    StopResponse response;
    grpc::Status s = stub->Stop(&context, request, &response);
    if (!s.ok()) return Fail(s, "stop");
    std::printf("stop requested\n");
    return 0;
  }
  if (command == "drain") return Drain(*stub, argc, argv);
  std::fprintf(stderr, "tessera_ctl: unknown command '%s'\n%s\n",
               command.c_str(), gflags::ProgramUsage());
  return kExitUserError;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "tessera_ctl --coordinator=HOST:PORT "
      "status|schedule N|join|checkpoint|stop [REASON]|drain WORKER");
  if (const std::string error = tessera::NegativeCountError(argc, argv);
      !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return tessera::kExitUserError;
  }
  tessera::ParseCommandLineOrExit(&argc, &argv);
  // The job token and the TLS flags, checked before any call: incomplete
  // TLS flags are a command-line error, not a connection to try anyway.
  absl::StatusOr<tessera::ChannelSecurity> security =
      tessera::ChannelSecurityFromFlags();
  if (!security.ok()) {
    std::fprintf(stderr, "tessera_ctl: %s\n",
                 std::string(security.status().message()).c_str());
    return tessera::kExitUserError;
  }
  return tessera::Run(argc, argv, *security);
}
