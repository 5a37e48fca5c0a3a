"""Writes Fashion-MNIST as TFRecord files of tf.train.Example with the
TFRecord writer TensorBoard bundles (plain, GZIP and ZLIB files in one data
set) and trains Tessera on them through tessera_local: files nobody here
wrote.

Usage: tf_examples_training_check.py <build dir> <scratch dir>
"""
import gzip
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "data",
                                "stream"))
from tf_examples_check import example_classes, write  # noqa: E402

FM = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
             for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def records(Example, images, labels):
    out = []
    for image, label in zip(images, labels):
        e = Example()
        e.features.feature["image"].float_list.value.extend(
            (image.reshape(-1) / 255.0).tolist())
        e.features.feature["label"].int64_list.value.append(int(label))
        out.append(e.SerializeToString())
    return out


def main():
    build, scratch = sys.argv[1], sys.argv[2]
    Example = example_classes()
    train_x = idx(FM + "/train-images-idx3-ubyte.gz")[:6000]
    train_y = idx(FM + "/train-labels-idx1-ubyte.gz")[:6000]
    test_x = idx(FM + "/t10k-images-idx3-ubyte.gz")[:2000]
    test_y = idx(FM + "/t10k-labels-idx1-ubyte.gz")[:2000]
    # Four training files, plain, GZIP, plain and ZLIB: compression is told
    # from the bytes, file by file.
    for k, compression in enumerate(("none", "gzip", "none", "zlib")):
        part = slice(k * 1500, (k + 1) * 1500)
        write(os.path.join(scratch, "train-%d.tfrecord" % k),
              records(Example, train_x[part], train_y[part]), compression)
    write(os.path.join(scratch, "test-0.tfrecord"),
          records(Example, test_x, test_y), "gzip")
    job = os.path.join(scratch, "job.textproto")
    with open(job, "w") as f:
        f.write('model { kind: "mlp" input_dim: 784 hidden_units: 128 '
                'num_classes: 10 }\n'
                'data { format: "tfrecord" train_files: "%s/train-*" '
                'test_files: "%s/test-*" label_feature: "label" }\n'
                'schedule { epochs: 2 batch_size: 64 seed: 1 }\n'
                % (scratch, scratch))
    run = os.path.join(scratch, "run")
    done = subprocess.run(
        [build + "/deploy/local/tessera_local", "--num_ps=1",
         "--num_workers=2", "--run_dir=" + run, "--", "--job_file=" + job],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print("\n".join(l for l in done.stdout.splitlines()
                    if l.startswith(("epoch", "final"))))
    if done.returncode != 0:
        print(done.stdout[-3000:])
        print("FAIL: tessera_local exited %d" % done.returncode)
        return 1
    with open(os.path.join(run, "metrics.jsonl")) as f:
        epochs = [json.loads(line) for line in f]
    if [e["examples"] for e in epochs] != [6000, 6000]:
        print("FAIL: examples per epoch %s, want 6000 each" %
              [e["examples"] for e in epochs])
        return 1
    if epochs[-1]["test_accuracy"] < 0.7:
        print("FAIL: test accuracy %.4f after 2 epochs" %
              epochs[-1]["test_accuracy"])
        return 1
    print("ok: trained on TensorBoard-written TFRecord files, test accuracy "
          "%.4f" % epochs[-1]["test_accuracy"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
