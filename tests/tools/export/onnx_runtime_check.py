"""Checks an ONNX model tessera_export wrote against tessera_predict.

onnx's checker validates the model; ONNX Runtime (CPU) runs it on the
examples tessera_predict wrote with --write_inputs, and its outputs are
compared with tessera_predict's predictions: the largest relative
difference must be <= 1e-5 (absolute <= 1e-6 where Tessera's value is
below 1e-6), and the accuracy and AUC from ONNX Runtime's outputs must equal
the ones tessera_predict printed, to 4 decimals.

With POOLED.onnx (an export with --embeddings=pooled_inputs) and
TABLES_DIR (its --tables_dir), the pooled model is held to the same
bounds, fed the pooled embeddings tessera_predict wrote, and every table
file must hold exactly the ids and rows of MODEL.onnx's table.

Usage: onnx_runtime_check.py JOB MODEL.onnx INPUTS.jsonl PREDICTIONS.jsonl
           METRICS.txt [POOLED.onnx TABLES_DIR]
Prints a line per model: job, largest differences, metrics from both sides.
"""
import os
import json
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort

REL_TOL = 1e-5
ABS_TOL = 1e-6


def roc_auc(scores, labels):
    """Average-rank Mann-Whitney AUC, ties counting one half."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) >= 0.5
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=np.float64)
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    pos = labels.sum()
    neg = len(labels) - pos
    return (ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg)


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
            dims = [len(rows)] + [d for d in arg.shape[1:]]
            feeds[arg.name] = np.asarray(rows, dtype=np.float32).reshape(dims)
    return feeds


def check_tables(model, tables_dir):
    """Each table file holds the ONNX model's table: ids and rows."""
    from onnx import numpy_helper
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    keys = {}
    for node in model.graph.node:
        if node.op_type == "LabelEncoder":
            for a in node.attribute:
                if a.name == "keys_int64s":
                    keys[node.input[0]] = list(a.ints)
    files = sorted(f for f in os.listdir(tables_dir) if f.endswith(".tsv"))
    assert files, f"no table files in {tables_dir}"
    for name in files:
        table = name[:-len(".tsv")]
        rows = values[f"{table}/rows"][:-1]  # the last row is the zero row
        ids, vectors = [], []
        with open(os.path.join(tables_dir, name)) as f:
            for line in f:
                i, v = line.rstrip("\n").split("\t")
                ids.append(int(i))
                vectors.append([float(x) for x in v.split(" ")])
        got = np.asarray(vectors, dtype=np.float32)
        assert got.shape == rows.shape, (table, got.shape, rows.shape)
        assert np.array_equal(got, rows), f"{table}: rows differ"
        if any(k for k in keys.values()):
            matching = [k for k in keys.values() if k == ids]
            assert matching or ids == list(range(len(ids))), \
                f"{table}: ids differ from the model's LabelEncoder keys"
    return len(files)


def main():
    job, model_path, inputs_path, predictions_path, metrics_path = sys.argv[1:6]
    check(job, model_path, inputs_path, predictions_path, metrics_path)
    if len(sys.argv) > 7:
        pooled_path, tables_dir = sys.argv[6:8]
        check(job + " (pooled inputs)", pooled_path, inputs_path,
              predictions_path, metrics_path)
        n = check_tables(onnx.load(model_path), tables_dir)
        print(f"{job}: {n} table files match the model's tables")


def check(job, model_path, inputs_path, predictions_path, metrics_path):
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    opsets = {o.domain: o.version for o in model.opset_import}
    assert model.ir_version == 8, model.ir_version
    assert opsets.get("", 0) == 17, opsets

    with open(inputs_path) as f:
        examples = [json.loads(line) for line in f]
    with open(predictions_path) as f:
        tessera = [json.loads(line) for line in f]
    assert len(examples) == len(tessera) > 0
    expected = np.asarray([t["probabilities"] for t in tessera],
                          dtype=np.float64)
    labels = np.asarray([e["label"] for e in examples], dtype=np.float64)

    session = ort.InferenceSession(model_path,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None,
                                          feeds_for(session, examples))))
    got = outputs["probabilities"].astype(np.float64)
    assert got.shape == expected.shape, (got.shape, expected.shape)

    diff = np.abs(got - expected)
    big = np.abs(expected) >= ABS_TOL
    max_rel = float((diff[big] / np.abs(expected[big])).max()) if big.any() else 0.0
    max_abs_small = float(diff[~big].max()) if (~big).any() else 0.0

    with open(metrics_path) as f:
        printed = f.read()
    tessera_acc = float(re.search(r"accuracy ([0-9.]+)", printed).group(1))
    ort_class = outputs["class"]
    if got.shape[1] == 1:
        ort_acc = float(np.mean(ort_class == (labels >= 0.5)))
    else:
        ort_acc = float(np.mean(ort_class == labels.astype(np.int64)))
    line = (f"{job}: max_rel_diff {max_rel:.3g} max_abs_diff_near_zero "
            f"{max_abs_small:.3g} accuracy tessera {tessera_acc:.4f} "
            f"onnxruntime {ort_acc:.4f}")
    ok = max_rel <= REL_TOL and max_abs_small <= ABS_TOL
    ok = ok and f"{tessera_acc:.4f}" == f"{ort_acc:.4f}"
    auc = re.search(r"auc ([0-9.]+)", printed)
    if auc:
        ort_auc = roc_auc(got[:, 0], labels)
        line += f" auc tessera {float(auc.group(1)):.4f} onnxruntime {ort_auc:.4f}"
        ok = ok and f"{float(auc.group(1)):.4f}" == f"{ort_auc:.4f}"
    print(line)
    if not ok:
        print(f"FAIL: {job}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
