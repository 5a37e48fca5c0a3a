// One bound NFQUEUE queue (libnetfilter_queue), as tessera_packet_delay
// uses it: the kernel hands this process the packets an iptables NFQUEUE
// rule sends to the queue, metadata only, and holds each one until this
// process gives its verdict.
//
// Queues are per network namespace: a process started with `ip netns exec`
// binds that namespace's queue. Needs CAP_NET_ADMIN there.
//
// Thread safety: none; one thread owns a queue.
#ifndef TESSERA_TESTS_TOOLS_NF_QUEUE_H_
#define TESSERA_TESTS_TOOLS_NF_QUEUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct nfq_handle;
struct nfq_q_handle;

namespace tessera {

struct NfQueueOptions {
  uint16_t queue_num = 0;
  // Packets the kernel may hold for this queue before it drops (or, with
  // fail_open, accepts) the next.
  uint32_t max_len = 65536;
  // Past max_len (or when a message cannot reach this process) the kernel
  // accepts the packet unqueued instead of dropping it.
  bool fail_open = false;
  // The netlink socket's receive buffer (SO_RCVBUFFORCE); a burst larger
  // than it makes the kernel drop (or, fail_open, pass) packets.
  int receive_buffer_bytes = 16 << 20;
};

// The kernel's counters of one queue (/proc/net/netfilter/nfnetlink_queue
// of this namespace).
struct NfQueueCounters {
  int64_t queue_dropped = 0;  // the queue was full (max_len)
  int64_t user_dropped = 0;   // the message did not fit the socket buffer
};

class NfQueue {
 public:
  // Binds the queue in copy-meta mode (no payload is copied to this
  // process) with NFQA_CFG_F_GSO (GSO packets arrive whole, not segmented
  // for us). Unavailable with the reason when the queue cannot be bound:
  // no CAP_NET_ADMIN, no nfnetlink_queue in the kernel, or another process
  // holds the queue.
  static absl::StatusOr<std::unique_ptr<NfQueue>> Bind(
      const NfQueueOptions& options);

  NfQueue(const NfQueue&) = delete;
  NfQueue& operator=(const NfQueue&) = delete;
  // Unbinds; the kernel drops the packets still waiting for a verdict.
  ~NfQueue();

  // The netlink socket, readable when packets are waiting.
  int fd() const { return fd_; }

  // Reads every message waiting on the socket without blocking and calls
  // on_packet with each packet's id. A receive buffer overrun (ENOBUFS) is
  // counted in overruns() and is not an error: the kernel has already
  // dropped or passed those packets.
  absl::Status ReadPending(const std::function<void(uint32_t)>& on_packet);

  // Lets packet `id` go on its way (NF_ACCEPT).
  absl::Status Accept(uint32_t id);

  int64_t overruns() const { return overruns_; }

  // NotFound when the kernel lists no such queue in this namespace.
  absl::StatusOr<NfQueueCounters> KernelCounters() const;

 private:
  explicit NfQueue(uint16_t queue_num);

  const uint16_t queue_num_;
  nfq_handle* handle_ = nullptr;
  nfq_q_handle* queue_ = nullptr;
  int fd_ = -1;
  int64_t overruns_ = 0;
  const std::function<void(uint32_t)>* on_packet_ = nullptr;  // in ReadPending
  std::vector<char> buffer_;
};

}  // namespace tessera

#endif  // TESSERA_TESTS_TOOLS_NF_QUEUE_H_
