"""python3 -m tessera_torch import: an nn.Module in, a Tessera job out.

  python3 -m tessera_torch import --module=model.py:Net
      [--state_dict=weights.safetensors|weights.pt]
      --inputs=dense:13:float32,ids:4:int64
      --loss=bce_with_logits|cross_entropy|mse|model.py:loss_fn
      --optimizer=adam:0.001|model.py:make_optimizer
      --output=job.textproto --weights_out=init.safetensors
      [--checkpoint_out=DIR] [--data_from=JOB]

Writes the job file (text-format JobConfig) and the module's state_dict as
safetensors, which `tessera_coordinator --init_weights` starts from (or,
with --checkpoint_out, a step-0 checkpoint for --init_checkpoint, written
by tessera_torch_checkpoint). Exit 2, with the module and what Tessera
lacks, for anything it cannot express; nothing is written then.
"""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys

import torch

from .convert import InputSpec, Refusal, convert_module
from .training import (loss_flag_of, loss_text, optimizer_of_flag,
                       optimizer_of_object, optimizer_text)


def parse_inputs(text):
    """name:DIMS:dtype,... with DIMS "13" or "1x28x28" (PyTorch's order)."""
    specs = []
    for part in filter(None, text.split(",")):
        fields = part.split(":")
        if len(fields) != 3:
            raise Refusal("--inputs: %r is not name:dims:dtype" % part)
        name, dims, dtype = fields
        try:
            shape = tuple(int(d) for d in dims.split("x"))
        except ValueError:
            raise Refusal("--inputs: %r: dims %r are not sizes like 13 or "
                          "1x28x28" % (part, dims))
        if dtype not in ("float32", "int64"):
            raise Refusal("--inputs: %r: dtype %r is neither float32 nor "
                          "int64" % (part, dtype))
        if not name or any(d <= 0 for d in shape) or len(shape) not in (1, 3):
            raise Refusal("--inputs: %r: a name and [d] or [C, H, W]" % part)
        specs.append(InputSpec(name, shape, dtype))
    if not specs:
        raise Refusal("--inputs is required (name:dims:dtype,...)")
    return specs


def load_python(path_and_name, what):
    """The object `name` of the Python file `path` ("model.py:Net")."""
    path, sep, name = path_and_name.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise Refusal("%s=%s: not file.py:Name" % (what, path_and_name))
    if not os.path.isfile(path):
        raise Refusal("%s: no file %s" % (what, path))
    spec = importlib.util.spec_from_file_location(
        "tessera_user_" + os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file: say which and why
        raise Refusal("%s: %s does not run: %s: %s"
                      % (what, path, type(e).__name__, e))
    if not hasattr(module, name):
        raise Refusal("%s: %s has no %s" % (what, path, name))
    return getattr(module, name)


def load_module(text):
    if text.endswith((".pt", ".pth")) and ":" not in text:
        # A pickled module: the user's own file, so its code is trusted.
        m = torch.load(text, weights_only=False)
    else:
        m = load_python(text, "--module")
        if isinstance(m, type) or callable(m) and not isinstance(
                m, torch.nn.Module):
            try:
                m = m()
            except Exception as e:
                raise Refusal("--module=%s: %s() fails (it is made with no "
                              "arguments): %s: %s" % (text, m.__name__,
                                                      type(e).__name__, e))
    if not isinstance(m, torch.nn.Module):
        raise Refusal("--module=%s is a %s, not an nn.Module"
                      % (text, type(m).__name__))
    return m


def load_state_dict(module, path):
    if path.endswith(".safetensors"):
        import safetensors.torch
        sd = safetensors.torch.load_file(path)
    else:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    try:
        module.load_state_dict(sd)
    except RuntimeError as e:
        raise Refusal("--state_dict=%s: %s" % (path, str(e).splitlines()[0]))


def data_section(specs, label_kind, data_from):
    if data_from:
        text = open(data_from).read()
        block = _block(text, "data")
        if block is None:
            raise Refusal("--data_from=%s has no data section" % data_from)
        return "# The data section of %s.\n%s\n" % (data_from, block)
    dense = [s for s in specs if s.dtype == "float32"]
    if len(specs) == 1 and dense and label_kind == "CLASS_INDEX":
        return ("# The examples. Format \"idx\" reads MNIST-format files: "
                "these\n# stand for Fashion-MNIST's (--data_dir=DIR reads a "
                "folder of\n# them). For your own data use format "
                "\"tfrecord\" or \"csv\", or\n# import again with "
                "--data_from=JOB.\ndata { format: \"idx\" }\n")
    return ("# The examples: REPLACE the globs below with your files "
            "(TFRecord\n# files of tf.train.Example, a feature per model "
            "input named as the\n# input, the label in feature \"label\"; or "
            "format \"csv\"), or\n# import again with --data_from=JOB.\n"
            "data {\n  format: \"tfrecord\"\n"
            "  train_files: \"REPLACE_ME/train-*.tfrecord\"\n"
            "  test_files: \"REPLACE_ME/test-*.tfrecord\"\n"
            "  label_feature: \"label\"\n}\n")


def _block(text, name):
    """The text of the top-level block `name { ... }` of a text proto."""
    i, depth, start, n = 0, 0, None, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            if depth == 0 and text[:i].rstrip().endswith(name):
                head = text[:i].rstrip()
                if head == name or not (head[-len(name) - 1].isalnum() or
                                        head[-len(name) - 1] == "_"):
                    start = len(head) - len(name)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start is not None:
                return text[start:i + 1]
        i += 1
    return None


def find_tool(name, tessera_bin):
    candidates = []
    if tessera_bin:
        candidates.append(os.path.join(tessera_bin, name))
    build = os.environ.get("TESSERA_BUILD_DIR")
    if build:
        candidates.append(os.path.join(build, "worker", "torch", name))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "worker",
                                   "torch", name))
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found:
        return found
    raise Refusal("--checkpoint_out needs %s: build it (cmake --build build "
                  "--target %s), or name its folder with --tessera_bin"
                  % (name, name))


def run_import(args):
    specs = parse_inputs(args.inputs)
    module = load_module(args.module)
    if args.state_dict:
        load_state_dict(module, args.state_dict)
    loss = args.loss
    if loss and ".py:" in loss:
        loss = loss_flag_of(load_python(loss, "--loss"))
    if args.optimizer and ".py:" in args.optimizer:
        factory = load_python(args.optimizer, "--optimizer")
        opt = optimizer_of_object(factory(module.parameters()))
    else:
        opt = optimizer_of_flag(args.optimizer or "adam:0.001")
    converted = convert_module(module, specs)
    label, loss_def = loss_text(loss or "cross_entropy", converted.output)
    label_kind = label.split()[3]
    model = "\n".join(
        ["model_def {"] + ["  " + t for t in converted.inputs] +
        ["  " + label] + ["  " + t for t in converted.layers] +
        ["  " + loss_def, "}"])
    init = ""
    if args.weights_out:
        init = ("# The module's weights: start from them with\n"
                "#   tessera_coordinator --init_weights=%s\n"
                % args.weights_out)
    text = (
        "# Imported from %s by tessera_torch import (PyTorch %s).\n%s%s\n%s"
        "%s\n# --epochs and --batch_size override these.\n"
        "schedule { epochs: %d batch_size: %d seed: %d }\n"
        % (args.module, torch.__version__, init, model,
           data_section(specs, label_kind, args.data_from), optimizer_text(opt),
           args.epochs, args.batch_size, args.seed))
    state = {k: v.detach().contiguous().cpu()
             for k, v in module.state_dict().items()}
    for k, v in state.items():
        if v.dtype not in (torch.float32, torch.int64):
            raise Refusal("state_dict entry %s is %s: Tessera's variables are "
                          "float32" % (k, v.dtype))
    tool = None
    if args.checkpoint_out:
        if not args.weights_out:
            raise Refusal("--checkpoint_out needs --weights_out")
        tool = find_tool("tessera_torch_checkpoint", args.tessera_bin)
    with open(args.output, "w") as f:
        f.write(text)
    if args.weights_out:
        import safetensors.torch
        safetensors.torch.save_file(state, args.weights_out,
                                    metadata={"format": "pt"})
    for note in converted.notes:
        print("note:", note)
    summary = "tessera_torch: wrote %s (%d inputs, %d layers)" % (
        args.output, len(converted.inputs), len(converted.layers))
    if args.weights_out:
        summary += "; weights %s (%d tensors)" % (args.weights_out, len(state))
    if tool:
        r = subprocess.run([tool, "--job_file=" + args.output,
                            "--init_weights=" + args.weights_out,
                            "--checkpoint_out=" + args.checkpoint_out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            return r.returncode
        summary += "; checkpoint %s" % r.stdout.strip().split("wrote ")[-1]
    print(summary)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m tessera_torch",
        description="PyTorch modules in Tessera (docs/pytorch.md).")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("import", help="an nn.Module as a Tessera job")
    p.add_argument("--module", required=True,
                   help="model.py:ClassName (made with no arguments), or a "
                   "pickled module (.pt)")
    p.add_argument("--state_dict", default="",
                   help="weights.safetensors or weights.pt loaded into the "
                   "module first (else its own initial weights)")
    p.add_argument("--inputs", required=True,
                   help="forward's inputs in order: name:dims:dtype,... "
                   "(dims 13 or 1x28x28 as PyTorch's; dtype float32, or "
                   "int64 for the ids of an Embedding/EmbeddingBag)")
    p.add_argument("--loss", default="cross_entropy",
                   help="cross_entropy, bce_with_logits, mse, or "
                   "file.py:NAME of a loss module")
    p.add_argument("--optimizer", default="adam:0.001",
                   help="adam:LR, adamw:LR[:WD], sgd:LR[:MOMENTUM[:nesterov]],"
                   " adagrad:LR, or file.py:FUNC making a torch.optim "
                   "optimizer from the parameters")
    p.add_argument("--output", required=True, help="the job file to write")
    p.add_argument("--weights_out", default="",
                   help="the module's state_dict as safetensors")
    p.add_argument("--checkpoint_out", default="",
                   help="also a step-0 checkpoint under this root, for "
                   "tessera_coordinator --init_checkpoint")
    p.add_argument("--data_from", default="",
                   help="copy the data section of this job file")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tessera_bin", default="",
                   help="the folder of tessera_torch_checkpoint")
    args = parser.parse_args(argv)
    try:
        return run_import(args)
    except Refusal as e:
        sys.stderr.write("tessera_torch: %s\n" % e)
        return 2
