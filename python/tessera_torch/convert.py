"""An nn.Module traced with torch.fx and written as Tessera's ModelDef.

Python only converts: the training loop is Tessera's C++. The layers are
named after the modules that made them ("features.0"), so the state_dict
keys are the module's own (tools/torch/state_dict.h is the C++ owner of
the names and layouts both ways); the initial weights are the module's
state_dict as it is.

Images: PyTorch's per-example [C, H, W] is Tessera's [H, W, C] (the same
bytes for one channel). A Conv2d's weight is transposed by the C++ side; a
flatten of a [C, H, W] image keeps PyTorch's column order in the Linear
that reads it (the C++ side permutes its weight), so such a flatten may
only reach a Linear through activations and dropout.

Anything that does not map is a Refusal naming the module (or function)
and what Tessera lacks.
"""
import operator
from dataclasses import dataclass, field

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp


class Refusal(Exception):
    """A model, loss or optimizer Tessera cannot express; the message names
    it and says why. The command line exits 2 with it."""


@dataclass
class InputSpec:
    name: str
    dims: tuple  # per example, PyTorch's order ([C, H, W] for an image)
    dtype: str  # float32 or int64


@dataclass
class Value:
    tensor: str  # Tessera's tensor name
    shape: tuple  # PyTorch's per-example shape
    image: bool = False  # [C, H, W] held as Tessera's [H, W, C]
    permuted: bool = False  # the flatten of an image, in Tessera's order
    ids: bool = False  # a sparse input (ids), read by an embedding
    input: InputSpec = None


@dataclass
class Converted:
    inputs: list = field(default_factory=list)  # text of InputDefs
    layers: list = field(default_factory=list)  # text of LayerDefs
    output: Value = None
    vocab: dict = field(default_factory=dict)  # ids input -> vocab size
    notes: list = field(default_factory=list)


# The module table (docs/pytorch.md prints it).
MODULES = [
    ("nn.Linear", "dense"),
    ("nn.Embedding (one id per example)", "embedding_bag (sum) + reshape [1, dim]"),
    ("nn.EmbeddingBag (sum, mean; 2-D ids, one bag per row)", "embedding_bag"),
    ("nn.Conv2d (groups 1, dilation 1, padding 0 or 'same')", "conv2d (NHWC)"),
    ("nn.MaxPool2d (padding 0, floor)", "max_pool2d"),
    ("nn.BatchNorm1d / nn.BatchNorm2d", "batch_norm (momentum 1 - m)"),
    ("nn.LayerNorm (last axis)", "layer_norm"),
    ("nn.Dropout", "dropout"),
    ("nn.ReLU / Sigmoid / Tanh / Softmax(last axis)", "activation"),
    ("nn.Flatten / torch.flatten / .flatten / .view / .reshape", "flatten, reshape"),
    ("torch.cat", "concat"),
    ("+, *, torch.add, torch.mul", "add, multiply"),
    ("relu, sigmoid, tanh (torch., F., methods)", "activation"),
    (".squeeze / .unsqueeze where the shape is known", "reshape"),
]

_RECURRENT = (nn.RNN, nn.LSTM, nn.GRU, nn.RNNCell, nn.LSTMCell, nn.GRUCell)
_ACTIVATIONS = {
    nn.ReLU: "RELU", nn.Sigmoid: "SIGMOID", nn.Tanh: "TANH",
}
_ACT_FUNCTIONS = {
    torch.relu: "RELU", F.relu: "RELU", torch.sigmoid: "SIGMOID",
    torch.tanh: "TANH", F.sigmoid: "SIGMOID", F.tanh: "TANH",
}
_ACT_METHODS = {"relu": "RELU", "sigmoid": "SIGMOID", "tanh": "TANH"}


class _refusing_custom_functions:
    """While tracing, a custom autograd Function applied to a traced
    tensor is refused: fx would trace its forward and drop its backward."""

    def __enter__(self):
        import inspect
        F_ = torch.autograd.Function
        self.own = "apply" in F_.__dict__
        self.saved = inspect.getattr_static(F_, "apply")
        saved = self.saved

        def apply(cls, *args, **kwargs):
            if any(isinstance(a, torch.fx.Proxy) for a in args):
                raise Refusal(
                    "a custom autograd Function (%s): its backward is Python "
                    "code, which Tessera's C++ layers cannot run"
                    % cls.__name__)
            return saved.__get__(None, cls)(*args, **kwargs)

        F_.apply = classmethod(apply)

    def __exit__(self, *exc):
        if self.own:
            torch.autograd.Function.apply = self.saved
        else:
            del torch.autograd.Function.apply
        return False


def _q(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(x):
    return repr(float(x))


def _ints(xs):
    return "[" + ", ".join(str(int(x)) for x in xs) + "]"


class _Converter:
    def __init__(self, module, inputs):
        self.module = module
        self.modules = {}
        self.specs = inputs
        self.out = Converted()
        self.values = {}
        self.names = set()  # layers'
        self.tensors = set()  # inputs' and layers' outputs
        self.used_modules = set()

    def unique(self, name, taken):
        base, n = name, 1
        while name in taken:
            name = "%s_%d" % (base, n)
            n += 1
        taken.add(name)
        return name

    def layer(self, name, inputs, body, value_shape, module=False, **flags):
        """A layer; a module's is named exactly as the module (its
        state_dict keys follow), its output tensor apart from the inputs'
        names."""
        if not module and name not in self.modules:
            name = self.unique(name, self.names)
        tensor = self.unique(name, self.tensors)
        output = "" if tensor == name else " output: %s" % _q(tensor)
        self.out.layers.append(
            "layers { name: %s inputs: [%s]%s %s }"
            % (_q(name), ", ".join(_q(i.tensor) for i in inputs), output,
               body))
        return Value(tensor=tensor, shape=tuple(value_shape), **flags)

    # --- helpers -----------------------------------------------------------
    def plain(self, v, what):
        """`v` as an ordinary tensor (not a permuted flatten, not ids)."""
        if v.ids:
            raise Refusal("%s reads the ids input %r: only an Embedding or "
                          "EmbeddingBag reads ids" % (what, v.input.name))
        if v.permuted:
            raise Refusal(
                "%s reads the flatten of a [C, H, W] image: Tessera holds "
                "images channels last, so such a flatten may reach only a "
                "Linear (through activations and dropout)" % what)
        return v

    def features(self, v, what):
        self.plain(v, what)
        if len(v.shape) != 1 or v.image:
            raise Refusal("%s needs [N, features], it reads [N, %s]"
                          % (what, ", ".join(map(str, v.shape))))
        return v

    def activation(self, name, v, act, what):
        if v.ids:
            self.plain(v, what)
        if act == "SOFTMAX":
            self.plain(v, what)
            if len(v.shape) != 1:
                raise Refusal("%s: softmax over the last axis of [N, d] only"
                              % what)
        return self.layer(name, [v], "activation { activation: %s }" % act,
                          v.shape, image=v.image, permuted=v.permuted)

    # --- the graph ---------------------------------------------------------
    def run(self, example):
        try:
            with _refusing_custom_functions():
                gm = torch.fx.symbolic_trace(self.module)
        except Refusal:
            raise
        except Exception as e:  # fx raises TraceError, TypeError, ...
            raise Refusal(
                "%s cannot be traced by torch.fx (data-dependent control "
                "flow, or Python on tensor values): %s"
                % (type(self.module).__name__, str(e).splitlines()[0]))
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.specs):
            raise Refusal(
                "%s.forward takes %d inputs (%s), --inputs names %d"
                % (type(self.module).__name__, len(placeholders),
                   ", ".join(n.target for n in placeholders), len(self.specs)))
        ShapeProp(gm).propagate(*example)
        self.modules = dict(gm.named_modules())
        self.names.update(n for n in self.modules if n)
        for node in gm.graph.nodes:
            self.values[node.name] = self.node(node, placeholders)
        return gm

    def arg(self, a):
        if isinstance(a, torch.fx.Node):
            return self.values[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def shape_of(self, node):
        meta = node.meta.get("tensor_meta")
        if meta is None or not hasattr(meta, "shape"):
            raise Refusal("%s (%s) does not give one tensor"
                          % (node.name, node.target))
        return tuple(meta.shape)[1:]

    def node(self, node, placeholders):
        if node.op == "placeholder":
            spec = self.specs[placeholders.index(node)]
            self.tensors.add(spec.name)
            if spec.dtype == "int64":
                return Value(tensor=spec.name, shape=spec.dims, ids=True,
                             input=spec)
            if len(spec.dims) == 3:
                c, h, w = spec.dims
                self.out.inputs.append(
                    "inputs { name: %s dense { shape: %s } }"
                    % (_q(spec.name), _ints([h, w, c])))
                return Value(tensor=spec.name, shape=spec.dims, image=True)
            self.out.inputs.append("inputs { name: %s dense { shape: %s } }"
                                   % (_q(spec.name), _ints(spec.dims)))
            return Value(tensor=spec.name, shape=spec.dims)
        if node.op == "get_attr":
            raise Refusal("%s reads the tensor %s directly: Tessera's layers "
                          "hold their own variables" % (node.name, node.target))
        if node.op == "output":
            out = node.args[0]
            if not isinstance(out, torch.fx.Node):
                raise Refusal("forward returns %s: one tensor only"
                              % type(out).__name__)
            self.out.output = self.plain(self.values[out.name], "the output")
            return self.out.output
        if node.op == "call_module":
            return self.call_module(node)
        if node.op in ("call_function", "call_method"):
            return self.call_function(node)
        raise Refusal("%s: fx op %s" % (node.name, node.op))

    def call_module(self, node):
        m = self.modules[node.target]
        name = node.target
        what = "module %r (%s)" % (name, type(m).__name__)
        if name in self.used_modules:
            raise Refusal("%s is called twice: Tessera's layers do not share "
                          "weights" % what)
        self.used_modules.add(name)
        args = [self.arg(a) for a in node.args]
        if node.kwargs:
            raise Refusal("%s is called with keyword arguments %s"
                          % (what, ", ".join(node.kwargs)))
        if isinstance(m, _RECURRENT):
            raise Refusal("%s: Tessera has no recurrent layers" % what)
        shape = self.shape_of(node)
        x = args[0] if args else None
        for p_name, p in m.named_parameters(recurse=False):
            if p.dim() == 4 and not p.is_contiguous():
                raise Refusal("%s: parameter %s is a channels_last tensor; "
                              "make it contiguous first" % (what, p_name))
        if isinstance(m, nn.Linear):
            if len(args) != 1:
                raise Refusal("%s takes one input" % what)
            if x.ids or x.image or len(x.shape) != 1:
                self.plain(x, what)
                raise Refusal("%s reads [N, %s]: Tessera's dense layer reads "
                              "[N, features]" % (what, ", ".join(map(str, x.shape))))
            bias = "" if m.bias is not None else " use_bias: false"
            return self.layer(name, [x], "dense { units: %d%s }"
                              % (m.out_features, bias), shape)
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
            return self.embedding(node, m, what, args, shape)
        if isinstance(m, nn.Conv2d):
            self.plain(x, what)
            if not x.image:
                raise Refusal("%s reads [N, %s], not an image [N, C, H, W]"
                              % (what, ", ".join(map(str, x.shape))))
            if m.groups != 1 or tuple(m.dilation) != (1, 1):
                raise Refusal("%s: groups %d, dilation %s: Tessera's conv2d "
                              "has neither" % (what, m.groups, m.dilation))
            if m.padding_mode != "zeros":
                raise Refusal("%s: padding_mode %r" % (what, m.padding_mode))
            kh, kw = m.kernel_size
            stride = tuple(m.stride)
            if m.padding == "same":
                padding = "SAME"
            elif tuple(m.padding) == (0, 0) or m.padding == "valid":
                padding = "VALID"
            elif (stride == (1, 1) and kh % 2 == 1 and kw % 2 == 1 and
                  tuple(m.padding) == ((kh - 1) // 2, (kw - 1) // 2)):
                padding = "SAME"
            else:
                raise Refusal(
                    "%s: padding %s with stride %s: Tessera pads none or "
                    "'same' (odd kernels, stride 1)"
                    % (what, tuple(m.padding), stride))
            bias = "" if m.bias is not None else " use_bias: false"
            return self.layer(
                name, [x], "conv2d { filters: %d kernel_size: %s strides: %s "
                "padding: %s%s }" % (m.out_channels, _ints([kh, kw]),
                                     _ints(stride), padding, bias),
                shape, image=True)
        if isinstance(m, nn.MaxPool2d):
            self.plain(x, what)
            pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
            if not x.image:
                raise Refusal("%s reads no image" % what)
            if pair(m.padding) != (0, 0) or pair(m.dilation) != (1, 1) or \
                    m.ceil_mode or m.return_indices:
                raise Refusal("%s: padding, dilation, ceil_mode or "
                              "return_indices: Tessera's max_pool2d has none"
                              % what)
            k = pair(m.kernel_size)
            s = pair(m.stride if m.stride is not None else m.kernel_size)
            return self.layer(name, [x], "max_pool2d { pool_size: %s "
                              "strides: %s }" % (_ints(k), _ints(s)), shape,
                              image=True)
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            self.plain(x, what)
            if not m.affine or not m.track_running_stats or m.momentum is None:
                raise Refusal("%s: affine=False, track_running_stats=False or "
                              "momentum=None: Tessera's batch_norm has gamma, "
                              "beta and moving statistics" % what)
            if isinstance(m, nn.BatchNorm1d) and len(x.shape) != 1:
                raise Refusal("%s on [N, C, L]: Tessera normalizes the last "
                              "axis" % what)
            if isinstance(m, nn.BatchNorm2d) and not x.image:
                raise Refusal("%s reads no image" % what)
            return self.layer(name, [x], "batch_norm { momentum: %s "
                              "epsilon: %s }" % (_num(1 - m.momentum),
                                                 _num(m.eps)),
                              shape, image=x.image)
        if isinstance(m, nn.LayerNorm):
            self.features(x, what)
            if tuple(m.normalized_shape) != (x.shape[-1],) or \
                    not m.elementwise_affine or m.bias is None:
                raise Refusal("%s: Tessera's layer_norm normalizes the last "
                              "axis with a weight and a bias" % what)
            return self.layer(name, [x], "layer_norm { epsilon: %s }"
                              % _num(m.eps), shape)
        if isinstance(m, nn.Dropout):
            self.plain(x, what) if x.ids else None
            return self.layer(name, [x], "dropout { rate: %s }" % _num(m.p),
                              shape, image=x.image, permuted=x.permuted)
        if type(m) in _ACTIVATIONS:
            return self.activation(name, x, _ACTIVATIONS[type(m)], what)
        if isinstance(m, nn.Softmax):
            if m.dim not in (-1, 1):
                raise Refusal("%s: softmax over dim %s" % (what, m.dim))
            return self.activation(name, x, "SOFTMAX", what)
        if isinstance(m, nn.Flatten):
            if m.start_dim != 1 or m.end_dim != -1:
                raise Refusal("%s: flatten from dim %d to %d: Tessera "
                              "flattens each example whole"
                              % (what, m.start_dim, m.end_dim))
            return self.flatten(name, x, shape, what)
        if isinstance(m, nn.Identity):
            return x
        raise Refusal("%s: not a module Tessera has (docs/pytorch.md lists "
                      "those it maps)" % what)

    def embedding(self, node, m, what, args, shape):
        x = args[0]
        if len(args) != 1:
            raise Refusal("%s is called with offsets or per_sample_weights: "
                          "give each bag as a row of a 2-D ids input" % what)
        if not x.ids:
            raise Refusal("%s reads a float tensor, not an ids input "
                          "(int64 in --inputs)" % what)
        if m.padding_idx is not None:
            raise Refusal("%s: padding_idx %d: Tessera's bags have no "
                          "padding id (a short bag holds fewer ids)"
                          % (what, m.padding_idx))
        if m.max_norm is not None:
            raise Refusal("%s: max_norm: Tessera does not renormalize rows"
                          % what)
        if x.input.name in self.out.vocab:
            raise Refusal("%s: ids input %r is read twice" % (what, x.input.name))
        self.out.vocab[x.input.name] = m.num_embeddings
        name = node.target
        if isinstance(m, nn.EmbeddingBag):
            if m.mode not in ("sum", "mean"):
                raise Refusal("%s: mode %r: Tessera's bags are sum or mean"
                              % (what, m.mode))
            if m.include_last_offset:
                raise Refusal("%s: include_last_offset" % what)
            return self.layer(name, [x], "embedding_bag { dim: %d combiner: "
                              "%s }" % (m.embedding_dim, m.mode.upper()),
                              shape)
        if x.input.dims != (1,):
            raise Refusal("%s reads %s ids per example and gives [N, %s, dim]: "
                          "Tessera pools a bag; use nn.EmbeddingBag, or one id "
                          "per example" % (what, x.input.dims, x.input.dims))
        bag = self.layer(name + "/bag", [x], "embedding_bag { table: %s dim: "
                         "%d }" % (_q(name), m.embedding_dim),
                         (m.embedding_dim,))
        # The table is named as the module, so its key is <name>.weight.
        return self.layer(name, [bag], "reshape { shape: [1, %d] }"
                          % m.embedding_dim, shape)

    def flatten(self, name, x, shape, what):
        self.plain(x, what)
        if len(x.shape) == 1:
            return x
        permuted = x.image and x.shape[0] != 1 and x.shape[1] * x.shape[2] != 1
        return self.layer(name, [x], "flatten {}", shape, permuted=permuted)

    def call_function(self, node):
        t = node.target
        name = node.name
        what = "%s (%s)" % (name, getattr(t, "__name__", t))
        shape = self.shape_of(node)
        args = [self.arg(a) for a in node.args]
        kwargs = {k: self.arg(v) for k, v in node.kwargs.items()}
        if node.op == "call_method":
            x = args[0]
            if t in _ACT_METHODS:
                return self.activation(name, x, _ACT_METHODS[t], what)
            if t == "flatten":
                start = args[1] if len(args) > 1 else kwargs.get("start_dim", 0)
                if start != 1 or len(args) > 2:
                    raise Refusal("%s: flatten from dim %s: flatten(1) only"
                                  % (what, start))
                return self.flatten(name, x, shape, what)
            if t in ("view", "reshape", "squeeze", "unsqueeze"):
                return self.reshape(name, x, shape, what)
            if t in ("add", "mul"):
                return self.binary(name, t, args, shape, what)
            raise Refusal("%s: the method .%s is not one Tessera maps" %
                          (what, t))
        if t in _ACT_FUNCTIONS:
            return self.activation(name, args[0], _ACT_FUNCTIONS[t], what)
        if t in (F.softmax, torch.softmax):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, 1):
                raise Refusal("%s: softmax over dim %s" % (what, dim))
            return self.activation(name, args[0], "SOFTMAX", what)
        if t is torch.flatten:
            start = args[1] if len(args) > 1 else kwargs.get("start_dim", 0)
            if start != 1 or len(args) > 2:
                raise Refusal("%s: torch.flatten from dim %s: "
                              "torch.flatten(x, 1) only" % (what, start))
            return self.flatten(name, args[0], shape, what)
        if t in (torch.reshape, torch.squeeze, torch.unsqueeze):
            return self.reshape(name, args[0], shape, what)
        if t in (torch.cat, torch.concat):
            parts = args[0]
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            parts = [self.plain(p, what) for p in parts]
            images = all(p.image for p in parts)
            rank = len(parts[0].shape)
            if images and dim in (1, -3):
                axis = -1
            elif not any(p.image for p in parts) and dim in (rank, -1):
                axis = -1
            else:
                raise Refusal("%s: torch.cat along dim %s: Tessera concatenates "
                              "the last axis (or an image's channels)"
                              % (what, dim))
            return self.layer(name, parts, "concat { axis: %d }" % axis, shape,
                              image=images)
        if t in (operator.add, torch.add, operator.mul, torch.mul):
            op = "add" if t in (operator.add, torch.add) else "mul"
            return self.binary(name, op, args, shape, what)
        if getattr(t, "__name__", "") == "apply" and \
                isinstance(getattr(t, "__self__", None), type) and \
                issubclass(t.__self__, torch.autograd.Function):
            raise Refusal("%s: a custom autograd Function (%s): its backward "
                          "is Python code, which Tessera's C++ layers cannot "
                          "run" % (name, t.__self__.__name__))
        raise Refusal("%s: the function %s is not one Tessera maps"
                      % (name, getattr(t, "__qualname__", t)))

    def binary(self, name, op, args, shape, what):
        if len(args) != 2 or not all(isinstance(a, Value) for a in args):
            raise Refusal("%s: %s of a tensor and a constant: Tessera adds and "
                          "multiplies tensors of one shape" % (what, op))
        a, b = (self.plain(v, what) for v in args)
        if a.shape != b.shape or a.image != b.image:
            raise Refusal("%s: %s of shapes %s and %s: no broadcasting"
                          % (what, op, a.shape, b.shape))
        body = "add {}" if op == "add" else "multiply {}"
        return self.layer(name, [a, b], body, shape, image=a.image)

    def reshape(self, name, x, shape, what):
        self.plain(x, what)
        if x.image:
            raise Refusal("%s reshapes a [C, H, W] image, which Tessera holds "
                          "channels last" % what)
        if tuple(shape) == tuple(x.shape):
            return x
        if len(shape) == 1:
            return self.layer(name, [x], "flatten {}", shape)
        return self.layer(name, [x], "reshape { shape: %s }" % _ints(shape),
                          shape)


def example_inputs(specs, vocab=None):
    out = []
    for s in specs:
        if s.dtype == "int64":
            out.append(torch.zeros((2,) + tuple(s.dims), dtype=torch.int64))
        else:
            out.append(torch.zeros((2,) + tuple(s.dims), dtype=torch.float32))
    return out


def convert_module(module, specs):
    """Traces `module` on examples of `specs` and returns Converted (the
    model's inputs and layers as text). Raises Refusal."""
    module.eval()
    conv = _Converter(module, specs)
    conv.run(example_inputs(specs))
    for spec in specs:
        if spec.dtype != "int64":
            continue
        if spec.name not in conv.out.vocab:
            raise Refusal("ids input %r is read by no Embedding or "
                          "EmbeddingBag" % spec.name)
        vocab = conv.out.vocab[spec.name]
        if len(spec.dims) != 1:
            raise Refusal("ids input %r: one bag of ids per example, [N, k]"
                          % spec.name)
        conv.out.inputs.append(
            "inputs { name: %s sparse { max_hotness: %d vocab_size: %d "
            "ids_in_vocab: true } }" % (_q(spec.name), spec.dims[0], vocab))
    # Sparse inputs after dense ones, in --inputs order within each kind.
    return conv.out
