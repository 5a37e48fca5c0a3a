"""Real PyTorch's side of torch_check.sh: weights to import from, and the
round trip's comparisons. Each command exits 1 with FAIL lines when a
comparison fails; several run in one process when separated by "+"."""
import contextlib
import gzip
import json
import os
import shlex
import sys
import traceback

import numpy as np
import safetensors.torch
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
TOLERANCE = 1e-5


def make(name):
    return getattr(torch_models, name)()


def weights(name, path):
    """A state_dict with nothing at its default (BatchNorm's running
    statistics and affine weights drawn too), so a swapped or transposed
    tensor cannot pass the round trip."""
    torch.manual_seed(7)
    m = make(name)
    sd = m.state_dict()
    for k, v in sd.items():
        if v.dtype == torch.float32:
            if k.endswith("running_var"):
                sd[k] = torch.rand_like(v) + 0.5
            else:
                sd[k] = torch.randn_like(v) * 0.1
    torch.save(sd, path)


def inputs(name, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name == "TwoInput":
        return (torch.randn(n, 13, generator=g),
                torch.randint(0, 50, (n, 4), generator=g))
    if name == "Embed":
        return (torch.randn(n, 4, generator=g),
                torch.randint(0, 20, (n, 1), generator=g))
    shape = (n, 784) if name == "MLP" else (n, 1, 28, 28)
    return (torch.rand(shape, generator=g),)


def fashion(name, n):
    with gzip.open(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    # As Tessera's IDX reader: pixels / 255 as float32.
    x = images.reshape(-1, 784)[:n].astype(np.float32) / np.float32(255)
    x = torch.from_numpy(x)
    return (x if name == "MLP" else x.reshape(n, 1, 28, 28),)


def roundtrip(name, state, exported, predictions=None, csv=None):
    """The exported state_dict loaded into a new module (strict: no key or
    shape error) predicts as the module imported; and, given Tessera's own
    predictions (tessera_predict), so did Tessera."""
    a = make(name)
    a.load_state_dict(torch.load(state, weights_only=True))
    a.eval()
    b = make(name)
    b.load_state_dict(safetensors.torch.load_file(exported))
    b.eval()
    failures = []
    with torch.no_grad():
        x = inputs(name, 256)
        diff = (a(*x) - b(*x)).abs().max().item()
        print("%s: exported state_dict vs imported module: max |diff| %.3g "
              "over 256 examples" % (name, diff))
        if not diff <= TOLERANCE:
            failures.append("%s: the exported weights predict differently "
                            "(%.3g)" % (name, diff))
        if predictions:
            lines = [json.loads(l) for l in open(predictions)]
            n = len(lines)
            if csv:
                x = read_csv(csv, n)
            else:
                x = fashion(name, n)
            logits = a(*x)
            if logits.shape[1] == 1:
                p = torch.sigmoid(logits)
            else:
                p = torch.softmax(logits, dim=1)
            t = torch.tensor([l["probabilities"] for l in lines])
            if t.shape[1] == 1 and p.shape[1] == 1:
                pass
            elif t.shape[1] == 2 and p.shape[1] == 1:
                t = t[:, 1:]
            diff = (p - t).abs().max().item()
            print("%s: tessera_predict vs PyTorch: max |diff| %.3g over %d "
                  "examples" % (name, diff, n))
            if not diff <= TOLERANCE:
                failures.append("%s: Tessera's predictions differ from "
                                "PyTorch's (%.3g)" % (name, diff))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def evaluate(name, exported, n, tessera_accuracy):
    """The trained state_dict's test accuracy in PyTorch on the first n
    Fashion-MNIST test examples, which must be Tessera's to the last digit
    it printed."""
    m = make(name)
    m.load_state_dict(safetensors.torch.load_file(exported))
    m.eval()
    n = int(n)
    with gzip.open(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    with torch.no_grad():
        predicted = m(*fashion(name, n)).argmax(dim=1).numpy()
    accuracy = float(np.mean(predicted == labels))
    digits = len(tessera_accuracy.split(".")[1])
    mine = "%.*f" % (digits, accuracy)
    print("%s: test accuracy on %d examples: PyTorch %s, Tessera %s"
          % (name, n, mine, tessera_accuracy))
    if mine != tessera_accuracy:
        print("FAIL: %s: PyTorch's accuracy %s is not Tessera's %s"
              % (name, mine, tessera_accuracy))
        return 1
    return 0


def write_csv(path, n):
    dense, ids = inputs("TwoInput", n, seed=3)
    with open(path, "w") as f:
        # A bag's ids in one column, separated by '|' (Tessera's CSV).
        f.write(",".join(["d%d" % i for i in range(13)] + ["ids", "label"]) +
                "\n")
        for k in range(n):
            f.write(",".join(["%.9g" % v for v in dense[k].tolist()] +
                             ["|".join(str(v) for v in ids[k].tolist())] +
                             [str(k % 2)]) + "\n")


def read_csv(path, n):
    rows = [l.strip().split(",") for l in open(path)][1:n + 1]
    dense = torch.tensor([[float(v) for v in r[:13]] for r in rows])
    ids = torch.tensor([[int(v) for v in r[13].split("|")] for r in rows])
    return dense, ids


def cli_batch(listing):
    """Runs `python3 -m tessera_torch` once per line of `listing` ("NAME
    ARG...", shell-quoted) in this one interpreter: importing torch is
    most of each run's time. NAME.out and NAME.err beside the listing get
    the run's output and NAME.code its exit status as the module's
    __main__ gives it (main's return value, or SystemExit's code)."""
    from tessera_torch.cli import main
    folder = os.path.dirname(os.path.abspath(listing))
    for line in open(listing):
        words = shlex.split(line)
        if not words:
            continue
        base = os.path.join(folder, words[0])
        with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
            with contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                try:
                    code = main(words[1:])
                except SystemExit as e:
                    code = e.code
                    if code is not None and not isinstance(code, int):
                        print(code, file=sys.stderr)
                        code = 1
                except Exception:  # as an uncaught one ends the module
                    traceback.print_exc()
                    code = 1
        with open(base + ".code", "w") as f:
            f.write("%d\n" % (code or 0))


def run(argv):
    """One command of the list: its exit status."""
    cmd = argv[0]
    if cmd == "weights":
        weights(argv[1], argv[2])
    elif cmd == "csv":
        write_csv(argv[1], int(argv[2]))
    elif cmd == "cli":
        cli_batch(argv[1])
    elif cmd == "evaluate":
        return evaluate(*argv[1:5])
    elif cmd == "roundtrip":
        args = argv[1:] + [None] * (5 - len(argv[1:]))
        return roundtrip(*args[:5])
    else:
        print("FAIL: unknown command %r" % cmd)
        return 1
    return 0


if __name__ == "__main__":
    # Commands separated by "+", run in order in this one process (each
    # start imports torch again); exit 1 when any failed.
    status = 0
    command = []
    for word in sys.argv[1:] + ["+"]:
        if word != "+":
            command.append(word)
            continue
        if command and run(command):
            status = 1
        command = []
    sys.exit(status)
