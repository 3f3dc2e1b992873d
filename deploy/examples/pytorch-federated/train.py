#!/usr/bin/python3
"""Federated training of the PyTorch example's CNN (deploy/examples/pytorch/train.py) on a non-IID split of
Fashion-MNIST: gantry's example of a team's own model in a federated job (docs/federated.md, "Your own PyTorch
model").

gantry runs this script once on each site (GANTRY_FED_SITE of GANTRY_FED_SITES) and hands it the global model each
round through gantry.federated; the site's program trains it on the site's own part of the data and hands it back.
The sites' models are averaged by masked sums: no site, and not Redis, sees another site's model.

The split (non-IID, by site): the classes are dealt to the sites in turn (3 sites: {0, 3, 6, 9}, {1, 4, 7},
{2, 5, 8}); a site holds MAJOR (0.8) of its own classes' images and an equal share of the rest of the others'.
Each round a site trains STEPS (100) batches of BATCH (64) from the global model (Adam, LR 0.001, its state
kept across rounds).  Site 0 evaluates the global model it gets each round on EVAL (2000) test images, and the
final one on the whole test set: result.metrics.test_accuracy.  SUBSET (0: all) keeps that many training images
(the tests' short runs).  By hand, outside gantry: /usr/bin/python3 train.py trains site 0's part alone (ROUNDS
rounds, default 3).

It uses the CNN and the data loader of ../pytorch/train.py (copy both folders under the tenant's root, as the
README does) and gantry's package beside this script (cp -r python/gantry .../pytorch-federated/)."""
import importlib.util
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from gantry import federated, job

HERE = os.path.dirname(os.path.abspath(__file__))


def cnn_example():
    """../pytorch/train.py as a module: its Net, load and evaluate"""
    path = os.path.join(HERE, "..", "pytorch", "train.py")
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: copy deploy/examples/pytorch beside this folder (the README does)")
    spec = importlib.util.spec_from_file_location("pytorch_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def split(y, site, sites, major, seed=1):
    """this site's indices of a label-skewed split: each class belongs to site c % sites, which gets `major` of
    its images; the others share the rest equally"""
    rng = np.random.default_rng(seed)
    u = rng.random(len(y))  # one draw per image: every site computes the same split
    owner = y % sites
    mine = np.zeros(len(y), dtype=bool)
    own = owner == site
    mine[own] = u[own] < major
    share = (1 - major) / (sites - 1)
    for other in range(sites):
        if other == site:
            continue
        theirs = owner == other
        rank = (site - other - 1) % sites  # this site's slot among the sites that are not the owner
        mine[theirs] = (u[theirs] >= major + rank * share) & (u[theirs] < major + (rank + 1) * share)
    return np.nonzero(mine)[0]


def main():
    env = os.environ.get
    torch.set_num_threads(int(env("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    ex = cnn_example()
    data = env("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    x, y = ex.load(data, "train")
    tx, ty = ex.load(data, "test")
    subset = int(env("SUBSET", "0"))
    if subset:
        x, y = x[:subset], y[:subset]
    site, sites = federated.site(), federated.sites()
    if sites > 1:
        idx = torch.from_numpy(split(y.numpy(), site, sites, float(env("MAJOR", "0.8"))))
        x, y = x[idx], y[idx]
    counts = torch.bincount(y, minlength=10).tolist()
    print(f"site {federated.site_name()} ({site} of {sites}): {len(y)} images, per class {counts}", flush=True)

    batch, steps, lr = int(env("BATCH", "64")), int(env("STEPS", "100")), float(env("LR", "0.001"))
    n_eval = int(env("EVAL", "2000"))
    model = ex.Net()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(site)
    order, pos = torch.randperm(len(y), generator=g), 0
    for rnd in federated.rounds(model, rounds=int(env("ROUNDS", "3"))):
        if site == 0:  # the global model of this round, before local training
            acc = ex.evaluate(model, tx[:n_eval], ty[:n_eval])
            job.report(step=rnd.number - 1, round=rnd.number - 1, global_accuracy=acc)
        t0, loss_sum = time.time(), 0.0
        model.train()
        for _ in range(steps):
            if pos + batch > len(y):
                order, pos = torch.randperm(len(y), generator=g), 0
            b = order[pos:pos + batch]
            pos += batch
            opt.zero_grad()
            loss = F.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step()
            loss_sum += loss.item()
        print(f"round {rnd.number} of {rnd.total}: local loss {loss_sum / steps:.4f} ({time.time() - t0:.1f} s)",
              flush=True)
        rnd.submit(model, num_samples=steps * batch)
    if site == 0:  # the final global model
        acc = ex.evaluate(model, tx, ty)
        job.report(step=int(env("GANTRY_FED_ROUNDS", env("ROUNDS", "3"))), test_accuracy=acc)
        model.eval()
        torch.jit.trace(model, torch.zeros(1, 1, 28, 28)).save(os.path.join(job.output_dir(), "model.pt"))
        print(f"test_accuracy={acc:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
