#ifndef TESSERA_TESTS_COORDINATOR_MEMBERSHIP_FAKE_SEATS_H_
#define TESSERA_TESTS_COORDINATOR_MEMBERSHIP_FAKE_SEATS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "coordinator/membership/worker_seats.h"
#include "coordinator/worker_task.h"

namespace tessera::membership_testing {

// A worker that is only an address and counts the shutdowns it is told.
class AddressOnly : public WorkerTask {
 public:
  explicit AddressOnly(std::string address) : address_(std::move(address)) {}
  const std::string& address() const override { return address_; }
  absl::Status Configure(const WorkerConfig&, ConfigureResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Evaluate(const EvaluateRequest&, EvaluateResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Health(HealthResponse*, double) override {
    return absl::OkStatus();
  }
  absl::Status Shutdown(const std::string&) override {
    ++shutdowns;
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest&, StepResponse*) override {
    return absl::OkStatus();
  }
  WorkerHealth Probe() override { return WorkerHealth::kReady; }
  absl::Status Restore() override { return absl::OkStatus(); }

  int shutdowns = 0;

 private:
  std::string address_;
};

// Seats that only keep what they were asked, in order ("serve 2 0",
// "leave 1 draining"), and answer Serve and Leave with what a test sets.
class FakeSeats : public WorkerSeats {
 public:
  explicit FakeSeats(int seats, int queues = 2)
      : seats_(seats), queues_(queues) {}

  absl::StatusOr<int> AddSeat(std::unique_ptr<WorkerStub> worker) override {
    owned_.push_back(std::move(worker));
    calls.push_back(absl::StrCat("add ", seats_));
    return seats_++;
  }
  int num_queues() const override { return queues_; }
  int QueueForNewWorker() const override { return queues_ - 1; }
  absl::Status Serve(int worker, int queue) override {
    calls.push_back(absl::StrCat("serve ", worker, " ", queue));
    return serve;
  }
  absl::Status Leave(int worker, MemberState to) override {
    calls.push_back(absl::StrCat("leave ", worker, " ", MemberStateName(to)));
    return leave;
  }

  std::vector<std::string> calls;
  absl::Status serve;
  absl::Status leave;

 private:
  int seats_;
  const int queues_;
  std::vector<std::unique_ptr<WorkerStub>> owned_;
};

}  // namespace tessera::membership_testing

#endif  // TESSERA_TESTS_COORDINATOR_MEMBERSHIP_FAKE_SEATS_H_
