"""ONNX Runtime's side of bench/predict_throughput.sh: examples/s of an
exported model on the CPU at a given batch size, over the examples
tessera_predict --write_inputs wrote. Times session.run only (the feeds are
built first), best of 3 passes.

Usage: predict_throughput_ort.py MODEL.onnx INPUTS.jsonl BATCH
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort


def feeds_for(session, examples):
    feeds = {}
    for arg in session.get_inputs():
        rows = [e[arg.name] for e in examples]
        if arg.type == "tensor(int64)":
            # An embedding_bag layer's ids, [fields][hotness] per example,
            # padded with -1 to the widest example's hotness.
            fields = len(rows[0])
            width = max(1, max(len(bag) for r in rows for bag in r))
            ids = np.full((len(rows), fields, width), -1, dtype=np.int64)
            for b, r in enumerate(rows):
                for f, bag in enumerate(r):
                    ids[b, f, :len(bag)] = bag
            feeds[arg.name] = ids
        else:
            dims = [len(rows)] + list(arg.shape[1:])
            feeds[arg.name] = np.asarray(rows, dtype=np.float32).reshape(dims)
    return feeds


def main():
    model, inputs, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(inputs) as f:
        examples = [json.loads(line) for line in f]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    batches = [feeds_for(session, examples[i:i + batch])
               for i in range(0, len(examples), batch)]
    session.run(None, batches[0])  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for feeds in batches:
            session.run(None, feeds)
        best = min(best, time.perf_counter() - start)
    print(f"{len(examples) / best:.0f}")


if __name__ == "__main__":
    main()
