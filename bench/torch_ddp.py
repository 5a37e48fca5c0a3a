"""bench/torch_ddp.sh's PyTorch side: the course MLP trained by PyTorch
DistributedDataParallel (gloo, 2 processes on this machine) on
Fashion-MNIST, from the initial weights Tessera's runs start from.

  python bench/torch_ddp.py init OUT.pt
  python bench/torch_ddp.py train INIT.pt EPOCHS BATCH PROCESSES

`train` prints one line: "ddp: final test accuracy A after E epochs;
N examples in T s of training (R examples/s)", as Tessera's summary."""
import gzip
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

FASHION = "/usr/share/datasets/fashion-mnist"


class MLP(nn.Module):
    """The course MLP (deploy/jobs/mlp_fashion_mnist.textproto's model)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def load(split):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(FASHION, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(FASHION, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    # As Tessera's IDX reader: pixels / 255 as float32.
    return (torch.from_numpy(x.astype(np.float32) / np.float32(255)),
            torch.from_numpy(y.astype(np.int64)))


def worker(rank, world, port, init, epochs, batch, result):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = MLP()
    model.load_state_dict(torch.load(init, weights_only=True))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=0.001)
    loss_fn = nn.CrossEntropyLoss()
    x, y = load("train")
    # Each process its own contiguous half, shuffled each epoch, as
    # Tessera's data plan gives each worker its range.
    n = len(x) // world
    x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
    g = torch.Generator().manual_seed(42 + rank)
    dist.barrier()
    start = time.time()
    seen = 0
    for _ in range(epochs):
        order = torch.randperm(n, generator=g)
        ddp.train()
        for i in range(0, n - batch + 1, batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            loss_fn(ddp(x[idx]), y[idx]).backward()
            opt.step()
            seen += batch
    dist.barrier()
    seconds = time.time() - start
    if rank == 0:
        tx, ty = load("test")
        model.eval()
        with torch.no_grad():
            accuracy = (model(tx).argmax(1) == ty).float().mean().item()
        result.put((accuracy, seen * world, seconds))
    dist.destroy_process_group()


def main():
    if sys.argv[1] == "init":
        torch.manual_seed(0)
        torch.save(MLP().state_dict(), sys.argv[2])
        return
    init, epochs, batch, world = sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    result = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, port, init, epochs, batch, result),
              nprocs=world)
    accuracy, examples, seconds = result.get()
    print("ddp: final test accuracy %.4f after %d epochs; %d examples in "
          "%.1f s of training (%.0f examples/s)"
          % (accuracy, epochs, examples, seconds, examples / seconds))


if __name__ == "__main__":
    main()
