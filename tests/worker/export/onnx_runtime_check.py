"""Checks an ONNX model tessera_export wrote against tessera_predict.

onnx's checker validates the model; ONNX Runtime (CPU) runs it on the
examples tessera_predict wrote with --write_inputs, and its outputs are
compared with tessera_predict's predictions: the largest relative
difference must be <= 1e-5 (absolute <= 1e-6 where Tessera's value is
below 1e-6), and the accuracy and AUC from ONNX Runtime's outputs must equal
the ones tessera_predict printed, to 4 decimals.

Usage: onnx_runtime_check.py JOB MODEL.onnx INPUTS.jsonl PREDICTIONS.jsonl
           METRICS.txt
Prints one line: job, largest differences, metrics from both sides.
"""
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
            width = max(1, max(len(r) for r in rows))
            ids = np.full((len(rows), width), -1, dtype=np.int64)
            for b, r in enumerate(rows):
                ids[b, :len(r)] = r
            feeds[arg.name] = ids
        else:
            dims = [len(rows)] + [d for d in arg.shape[1:]]
            feeds[arg.name] = np.asarray(rows, dtype=np.float32).reshape(dims)
    return feeds


def main():
    job, model_path, inputs_path, predictions_path, metrics_path = sys.argv[1:6]
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
