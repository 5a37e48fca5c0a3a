#include "tests/tools/nf_queue.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>
}

namespace tessera {
namespace {

// Messages are metadata only (a few hundred bytes); one read takes many.
constexpr size_t kReadBytes = 256 << 10;

absl::Status Failed(uint16_t queue_num, const std::string& what) {
  return absl::UnavailableError(absl::StrCat("NFQUEUE queue ", queue_num, ": ",
                                             what, ": ", std::strerror(errno)));
}

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* data, void* arg) {
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(data);
  // `arg` is the queue's on_packet_ slot (see Bind).
  const auto* handler =
      *static_cast<const std::function<void(uint32_t)>* const*>(arg);
  if (header != nullptr && handler != nullptr) {
    (*handler)(ntohl(header->packet_id));
  }
  return 0;
}

}  // namespace

NfQueue::NfQueue(uint16_t queue_num)
    : queue_num_(queue_num), buffer_(kReadBytes) {}

absl::StatusOr<std::unique_ptr<NfQueue>> NfQueue::Bind(
    const NfQueueOptions& options) {
  std::unique_ptr<NfQueue> q(new NfQueue(options.queue_num));
  q->handle_ = nfq_open();
  if (q->handle_ == nullptr) {
    return Failed(options.queue_num,
                  "cannot open an nfnetlink socket (needs CAP_NET_ADMIN and "
                  "CONFIG_NETFILTER_NETLINK_QUEUE)");
  }
  // The callback finds the handler through the on_packet_ slot, which
  // ReadPending points at its argument while it reads.
  q->queue_ = nfq_create_queue(q->handle_, options.queue_num, &OnPacket,
                               &q->on_packet_);
  if (q->queue_ == nullptr) {
    return Failed(options.queue_num,
                  "cannot bind it (is another process bound to it?)");
  }
  if (nfq_set_mode(q->queue_, NFQNL_COPY_META, 0) < 0) {
    return Failed(options.queue_num, "cannot set copy mode meta");
  }
  if (nfq_set_queue_maxlen(q->queue_, options.max_len) < 0) {
    return Failed(
        options.queue_num,
        absl::StrCat("cannot set the queue length ", options.max_len));
  }
  const uint32_t flags =
      NFQA_CFG_F_GSO | (options.fail_open ? NFQA_CFG_F_FAIL_OPEN : 0);
  if (nfq_set_queue_flags(q->queue_, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN,
                          flags) < 0) {
    return Failed(options.queue_num,
                  "cannot set the queue flags GSO and FAIL_OPEN");
  }
  if (nfnl_rcvbufsiz(nfq_nfnlh(q->handle_), options.receive_buffer_bytes) <
      static_cast<unsigned int>(options.receive_buffer_bytes)) {
    return Failed(options.queue_num,
                  absl::StrCat("cannot set a receive buffer of ",
                               options.receive_buffer_bytes, " bytes"));
  }
  q->fd_ = nfq_fd(q->handle_);
  return q;
}

NfQueue::~NfQueue() {
  if (queue_ != nullptr) nfq_destroy_queue(queue_);
  if (handle_ != nullptr) nfq_close(handle_);
}

absl::Status NfQueue::ReadPending(
    const std::function<void(uint32_t)>& on_packet) {
  for (;;) {
    const ssize_t got = recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::OkStatus();
      if (errno == ENOBUFS) {
        ++overruns_;
        continue;
      }
      return Failed(queue_num_, "recv");
    }
    on_packet_ = &on_packet;
    nfq_handle_packet(handle_, buffer_.data(), static_cast<int>(got));
    on_packet_ = nullptr;
  }
}

absl::Status NfQueue::Accept(uint32_t id) {
  if (nfq_set_verdict(queue_, id, NF_ACCEPT, 0, nullptr) < 0) {
    return Failed(queue_num_, absl::StrCat("verdict for packet ", id));
  }
  return absl::OkStatus();
}

absl::StatusOr<NfQueueCounters> NfQueue::KernelCounters() const {
  // queue_number peer_portid queue_total copy_mode copy_range queue_dropped
  // user_dropped id_sequence 1
  std::ifstream in("/proc/net/netfilter/nfnetlink_queue");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    int64_t num = -1, portid, total, mode, range;
    NfQueueCounters c;
    if (fields >> num >> portid >> total >> mode >> range >> c.queue_dropped >>
            c.user_dropped &&
        num == queue_num_) {
      return c;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "queue ", queue_num_, " is not in /proc/net/netfilter/nfnetlink_queue"));
}

}  // namespace tessera
