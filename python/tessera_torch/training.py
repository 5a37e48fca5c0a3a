"""The loss and optimizer of an imported module, from flags or from
PyTorch's own objects, as the job's LossDef, LabelDef and OptimizerConfig
(text). Anything else is a Refusal naming it."""
import torch
import torch.nn as nn

from .convert import Refusal, _num

LOSSES = {
    # flag: (LossDef kind, LabelDef kind)
    "cross_entropy": ("SOFTMAX_CROSS_ENTROPY", "CLASS_INDEX"),
    "bce_with_logits": ("SIGMOID_CROSS_ENTROPY", "BINARY"),
    "mse": ("MEAN_SQUARED_ERROR", "REAL"),
}


def loss_flag_of(loss):
    """A loss module (nn.CrossEntropyLoss, nn.BCEWithLogitsLoss,
    nn.MSELoss with their defaults) as its flag name."""
    name = type(loss).__name__
    if isinstance(loss, nn.CrossEntropyLoss):
        if loss.weight is not None or loss.label_smoothing != 0 or \
                loss.ignore_index != -100 or loss.reduction != "mean":
            raise Refusal("loss CrossEntropyLoss: weight, label_smoothing, "
                          "ignore_index or reduction other than the defaults")
        return "cross_entropy"
    if isinstance(loss, nn.BCEWithLogitsLoss):
        if loss.weight is not None or loss.pos_weight is not None or \
                loss.reduction != "mean":
            raise Refusal("loss BCEWithLogitsLoss: weight, pos_weight or "
                          "reduction other than the defaults")
        return "bce_with_logits"
    if isinstance(loss, nn.MSELoss):
        if loss.reduction != "mean":
            raise Refusal("loss MSELoss: reduction %r" % loss.reduction)
        return "mse"
    raise Refusal("loss %s: Tessera's losses are CrossEntropyLoss, "
                  "BCEWithLogitsLoss and MSELoss" % name)


def loss_text(flag, output):
    """LabelDef and LossDef text for loss `flag` on the output Value."""
    if flag not in LOSSES:
        raise Refusal("--loss=%s: Tessera's losses are %s"
                      % (flag, ", ".join(LOSSES)))
    kind, label = LOSSES[flag]
    if len(output.shape) != 1:
        raise Refusal("the output is [N, %s]: a loss reads [N, k]"
                      % ", ".join(map(str, output.shape)))
    k = output.shape[0]
    if flag != "cross_entropy" and k != 1:
        raise Refusal("--loss=%s reads [N, 1], the output is [N, %d]"
                      % (flag, k))
    label_text = "label { kind: %s%s }" % (
        label, " num_classes: %d" % k if label == "CLASS_INDEX" else "")
    loss = "loss { kind: %s input: \"%s\" from_logits: true }" % (
        kind, output.tensor)
    return label_text, loss


def _optimizer(kind, lr, **options):
    return kind, lr, options


def optimizer_of_flag(text):
    """adam:LR, adamw:LR[:WEIGHT_DECAY], sgd:LR[:MOMENTUM[:nesterov]],
    adagrad:LR, with PyTorch's defaults for the rest."""
    parts = text.split(":")
    name = parts[0].lower()
    try:
        lr = float(parts[1]) if len(parts) > 1 else None
        if name == "sgd":
            momentum = float(parts[2]) if len(parts) > 2 else 0.0
            nesterov = len(parts) > 3 and parts[3] == "nesterov"
            if len(parts) > 3 and parts[3] != "nesterov":
                raise ValueError(parts[3])
            return _optimizer("sgd", lr if lr is not None else 0.001,
                              momentum=momentum, nesterov=nesterov)
        if name in ("adam", "adamw"):
            wd = float(parts[2]) if len(parts) > 2 else (
                0.01 if name == "adamw" else 0.0)
            if name == "adam" and wd:
                raise Refusal("--optimizer=%s: Adam's weight_decay is an L2 "
                              "term of the gradient; Tessera's is decoupled: "
                              "use adamw" % text)
            return _optimizer("adam", lr if lr is not None else 0.001,
                              betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
        if name == "adagrad":
            return _optimizer("adagrad", lr if lr is not None else 0.01,
                              initial_accumulator_value=0.0, eps=1e-10)
    except ValueError as e:
        raise Refusal("--optimizer=%s: %s is not a number" % (text, e))
    raise Refusal("optimizer %s: Tessera's are sgd (with momentum or "
                  "Nesterov), adam, adamw and adagrad" % parts[0])


def optimizer_of_object(opt):
    """A torch.optim object of one parameter group as the same triple."""
    name = type(opt).__name__
    if len(opt.param_groups) != 1:
        raise Refusal("optimizer %s has %d parameter groups: Tessera's has one"
                      % (name, len(opt.param_groups)))
    g = opt.param_groups[0]
    lr = float(g["lr"])
    if isinstance(opt, torch.optim.SGD):
        if g.get("dampening", 0) != 0 or g.get("maximize"):
            raise Refusal("optimizer SGD: dampening or maximize")
        if g.get("weight_decay", 0) and g.get("momentum", 0):
            raise Refusal("optimizer SGD: weight_decay with momentum is an L2 "
                          "term of the gradient, which Tessera's decoupled "
                          "decay is not")
        return _optimizer("sgd", lr, momentum=float(g.get("momentum", 0)),
                          nesterov=bool(g.get("nesterov")),
                          weight_decay=float(g.get("weight_decay", 0)))
    if isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
        if g.get("amsgrad") or g.get("maximize"):
            raise Refusal("optimizer %s: amsgrad or maximize" % name)
        wd = float(g.get("weight_decay", 0))
        if wd and not isinstance(opt, torch.optim.AdamW):
            raise Refusal("optimizer Adam: weight_decay is an L2 term of the "
                          "gradient; Tessera's is decoupled: use AdamW")
        return _optimizer("adam", lr, betas=tuple(g["betas"]),
                          eps=float(g["eps"]), weight_decay=wd)
    if isinstance(opt, torch.optim.Adagrad):
        if g.get("lr_decay", 0) or g.get("weight_decay", 0):
            raise Refusal("optimizer Adagrad: lr_decay or weight_decay")
        return _optimizer("adagrad", lr, initial_accumulator_value=float(
            g.get("initial_accumulator_value", 0)), eps=float(g["eps"]))
    raise Refusal("optimizer %s: Tessera's are SGD (with momentum or "
                  "Nesterov), Adam, AdamW and Adagrad" % name)


def optimizer_text(opt):
    kind, lr, o = opt
    if kind == "sgd":
        if o["momentum"]:
            body = "momentum { momentum: %s%s }" % (
                _num(o["momentum"]), " nesterov: true" if o["nesterov"] else "")
        else:
            body = "sgd {}"
    elif kind == "adam":
        body = "adam { beta1: %s beta2: %s epsilon: %s }" % (
            _num(o["betas"][0]), _num(o["betas"][1]), _num(o["eps"]))
    else:
        body = "adagrad { initial_accumulator_value: %s epsilon: %s }" % (
            _num(o["initial_accumulator_value"]), _num(o["eps"]))
    wd = o.get("weight_decay", 0)
    return "optimizer { learning_rate: %s %s%s }" % (
        _num(lr), body, " weight_decay: %s" % _num(wd) if wd else "")
