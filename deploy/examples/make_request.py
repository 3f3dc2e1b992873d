#!/usr/bin/env python3
"""Writes a ready-made Open Inference Protocol v2 request for the fashion-mlp model of the README's
inference example: real images from Fashion-MNIST's test set (the dataset the training example
trains on; Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist), each as 784 floats
in [0, 1] (the pixels / 255, row by row, as in training), shape [N, 1, 28, 28].  Standard library only.

    deploy/examples/make_request.py                      # test image 0 -> fashion-request.json
    deploy/examples/make_request.py --index 42 --count 8 -o batch.json
    curl -s -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \\
         --data @fashion-request.json $U/v2/models/fashion-mlp/infer

It prints each image's true label on stderr (to compare with the answer's "label" output)."""

import argparse
import gzip
import json
import os
import struct
import sys

DATASET = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path, ndims):
    """an IDX file (gzip): its dimensions and its bytes"""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08 or dims != ndims:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes with {ndims} dimensions")
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=int, default=0, help="the first test image (0 to 9999; default 0)")
    ap.add_argument("--count", type=int, default=1, help="how many images, one sample each (default 1, at most 1024)")
    ap.add_argument("--dataset", default=DATASET, help=f"the directory of the IDX files (default {DATASET})")
    ap.add_argument("-o", "--output", default="fashion-request.json", help="the request file (- for stdout)")
    args = ap.parse_args()

    (n, rows, cols), pixels = read_idx(os.path.join(args.dataset, "t10k-images-idx3-ubyte.gz"), 3)
    (nl,), labels = read_idx(os.path.join(args.dataset, "t10k-labels-idx1-ubyte.gz"), 1)
    if not 1 <= args.count <= 1024 or not 0 <= args.index or args.index + args.count > min(n, nl):
        ap.error(f"--index and --count must pick images among the {min(n, nl)} of the test set (--count at most 1,024)")
    size = rows * cols
    first = args.index * size
    data = [p / 255 for p in pixels[first:first + args.count * size]]
    request = {"inputs": [{"name": "input", "shape": [args.count, 1, rows, cols], "datatype": "FP32", "data": data}]}
    text = json.dumps(request, separators=(",", ":")) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    for i in range(args.index, args.index + args.count):
        print(f"test image {i}: label {labels[i]} ({CLASSES[labels[i]]})", file=sys.stderr)
    if args.output != "-":
        print(f"wrote {args.output}: {args.count} image{'s' if args.count > 1 else ''}, shape [{args.count}, 1, {rows}, {cols}]",
              file=sys.stderr)


if __name__ == "__main__":
    main()
