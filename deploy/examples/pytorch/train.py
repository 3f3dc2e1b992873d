#!/usr/bin/python3
"""A small CNN on Fashion-MNIST with DistributedDataParallel (gloo, CPU): gantry's example
of a team's own PyTorch program (docs/programs.md).

gantry starts one process per rank with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set
(torch.distributed's env:// rendezvous) and GANTRY_CHECKPOINT_DIR, GANTRY_OUTPUT_DIR,
GANTRY_METRICS.  The script
  - reads Debian's dataset-fashion-mnist files (/usr/share/datasets/fashion-mnist),
  - checkpoints after every epoch (and on SIGTERM) to GANTRY_CHECKPOINT_DIR and resumes from it,
  - reports a point every 100 steps (step, epoch/epochs, loss, samples_per_s) and one per epoch with
    test_accuracy through gantry.job.report (GANTRY_METRICS: the job's curves and its progress),
  - saves a TorchScript model to GANTRY_OUTPUT_DIR/model.pt and prints test_accuracy.
A search's trial (docs/search.md) gets its parameters as LR, BATCH, WIDTH and its budget as
GANTRY_TRIAL_MAX_EPOCHS.  TRAIN_SIZE and TEST_SIZE (or --train-size, --test-size) train and test on the first
N images of each split, all of them by default: the real-torch search tests and the search benchmark's
--quick run use 3,000 and 1,000.
It uses gantry's in-job helpers (python/gantry/job.py): copy the package beside this script (the README
does: cp -r python/gantry .../pytorch/) or install it; without it a few lines below stand in for them.
By hand, two ranks on this machine:
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 /usr/bin/python3 train.py &
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 /usr/bin/python3 train.py
"""
import argparse
import gzip
import json
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    from gantry import job
except ImportError:  # gantry's package neither beside this script nor installed: the same, from the environment
    class job:
        _stop = []
        signal.signal(signal.SIGTERM, lambda *a: job._stop.append(1))
        rank = staticmethod(lambda: int(os.environ.get("RANK", "0")))
        world_size = staticmethod(lambda: int(os.environ.get("WORLD_SIZE", "1")))
        should_stop = staticmethod(lambda: bool(job._stop))

        @staticmethod
        def checkpoint_dir():
            os.makedirs(os.environ.get("GANTRY_CHECKPOINT_DIR", "checkpoint"), exist_ok=True)
            return os.environ.get("GANTRY_CHECKPOINT_DIR", "checkpoint")

        @staticmethod
        def output_dir():
            os.makedirs(os.environ.get("GANTRY_OUTPUT_DIR", "output"), exist_ok=True)
            return os.environ.get("GANTRY_OUTPUT_DIR", "output")

        @staticmethod
        def report(step=None, **metrics):
            point = dict(step=step, **metrics)
            if os.environ.get("GANTRY_METRICS"):
                with open(os.environ["GANTRY_METRICS"], "a") as f:
                    f.write(json.dumps(point) + "\n")
            return point


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y.astype(np.int64))


class Net(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, width)
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def save_checkpoint(path, model, opt, epoch, batch):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "batch": batch}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    # a search's trial (docs/search.md) gets its parameters as variables: LR, BATCH, WIDTH, and its budget
    env = os.environ.get
    ap.add_argument("--epochs", type=int, default=int(float(env("GANTRY_TRIAL_MAX_EPOCHS", "3"))))
    ap.add_argument("--batch", type=int, default=int(env("BATCH", "64")), help="per rank")
    ap.add_argument("--width", type=int, default=int(env("WIDTH", "128")), help="hidden units")
    ap.add_argument("--lr", type=float, default=float(os.environ.get("LR", "0.001")))
    ap.add_argument("--data", default=os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    ap.add_argument("--report-every", type=int, default=100, help="steps between metrics points")
    # a smaller run (tests, smoke runs of the search benchmark): the first N images of each split, 0 for all
    ap.add_argument("--train-size", type=int, default=int(env("TRAIN_SIZE", "0")), help="first N of the 60,000 training images")
    ap.add_argument("--test-size", type=int, default=int(env("TEST_SIZE", "0")), help="first N of the 10,000 test images")
    args = ap.parse_args()
    job.should_stop()  # the SIGTERM handler in place before the (slow) start
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)

    rank, world = job.rank(), job.world_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    ckpt_dir, out_dir = job.checkpoint_dir(), job.output_dir()
    ckpt = os.path.join(ckpt_dir, "checkpoint.pt")

    x, y = load(args.data, "train")
    tx, ty = load(args.data, "test")
    if args.train_size > 0:
        x, y = x[:args.train_size], y[:args.train_size]
    if args.test_size > 0:
        tx, ty = tx[:args.test_size], ty[:args.test_size]
    model = Net(args.width)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    start_epoch, skip = 0, 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_epoch, skip = state["epoch"], state["batch"]
        print(f"rank {rank}: resumed from epoch {start_epoch} batch {skip}", flush=True)
    ddp = DDP(model)

    per_rank = len(x) // world
    batches = per_rank // args.batch
    accuracy = None
    for epoch in range(start_epoch, args.epochs):
        g = torch.Generator().manual_seed(epoch)
        order = torch.randperm(len(x), generator=g)[rank * per_rank:(rank + 1) * per_rank]
        t0, seen, loss_sum = time.time(), 0, 0.0
        tw, wseen, wloss = t0, 0, 0.0  # the window since the last point
        for b in range(skip, batches):
            idx = order[b * args.batch:(b + 1) * args.batch]
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x[idx]), y[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            seen += 1
            wseen, wloss = wseen + 1, wloss + loss.item()
            step = epoch * batches + b + 1  # the curves' x: optimizer steps (the ranks take each together)
            if rank == 0 and step % args.report_every == 0:
                now = time.time()
                job.report(step=step, epoch=round(epoch + (b + 1) / batches, 4), epochs=args.epochs,
                           loss=round(wloss / wseen, 5), samples_per_s=round(wseen * args.batch * world / max(now - tw, 1e-9), 1))
                tw, wseen, wloss = now, 0, 0.0
            if b % 20 == 0:  # every rank stops at the same batch: one of them was told to
                flag = torch.tensor([1.0 if job.should_stop() else 0.0])
                dist.all_reduce(flag)
                if flag.item() > 0:
                    if rank == 0:
                        save_checkpoint(ckpt, model, opt, epoch, b + 1)
                    dist.barrier()
                    print(f"rank {rank}: SIGTERM: checkpointed at epoch {epoch} batch {b + 1}", flush=True)
                    return 0
        skip = 0
        rate = seen * args.batch * world / max(time.time() - t0, 1e-9)
        if rank == 0:
            accuracy = evaluate(model, tx, ty)
            save_checkpoint(ckpt, model, opt, epoch + 1, 0)
            point = job.report(step=(epoch + 1) * batches, epoch=epoch + 1, epochs=args.epochs,
                               loss=round(loss_sum / max(seen, 1), 5), test_accuracy=accuracy, samples_per_s=round(rate, 1))
            print(f"epoch {epoch + 1}: loss {point['loss']:.4f} test_accuracy {accuracy:.4f} ({rate:.0f} samples/s)",
                  flush=True)
        dist.barrier()

    if rank == 0:
        if accuracy is None:
            accuracy = evaluate(model, tx, ty)
        model.eval()
        torch.jit.trace(model, torch.zeros(1, 1, 28, 28)).save(os.path.join(out_dir, "model.pt"))
        print(f"test_accuracy={accuracy:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
