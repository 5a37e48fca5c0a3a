"""Real Keras' side of keras_training_check.sh (issue #44): a Fashion-MNIST
MLP compiled with AdamW(learning_rate=CosineDecay(..., warmup_steps=...),
global_clipnorm=1.0), saved untrained; its first five steps' losses on one
fixed batch; and, after Tessera trained the same steps, the comparison.

  save DIR      writes DIR/adamw.keras, DIR/keras_losses.txt (the five
                losses), DIR/unclipped_losses.txt (the same without
                global_clipnorm) and DIR/keras_trained.npz (the weights
                after the five steps)
  compare DIR TESSERA_LOSSES EXPORTED.keras
                holds Tessera's losses to Keras' to 1e-5, checks that the
                clipping changed Keras' losses (so the comparison tests it),
                and loads Tessera's export: its compile config must be the
                original's optimizer and its weights Keras' after the steps
Exits 1 with FAIL lines when a comparison fails."""
import gzip
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
BATCH = 256  # one batch, the whole training set of the run: the same
STEPS = 5    # examples in every step whatever order a trainer takes them
failures = []


def fail(message):
    print("FAIL:", message)
    failures.append(message)


def train_batch():
    with gzip.open(os.path.join(FASHION, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    # As Tessera's IDX reader: pixels / 255 as float32.
    x = images.reshape(-1, 784)[:BATCH].astype(np.float32) / np.float32(255)
    return x, labels[:BATCH].astype(np.int64)


def optimizer(clip=True):
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.001, decay_steps=10, alpha=0.1,
        warmup_target=0.01, warmup_steps=2)
    return keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=0.004,
        global_clipnorm=1.0 if clip else None)


def model(clip=True):
    keras.utils.set_random_seed(44)
    m = keras.Sequential([
        keras.Input((784,), name="image"),
        keras.layers.Dense(64, activation="relu", name="hidden"),
        keras.layers.Dense(10, name="logits"),
    ])
    m.compile(optimizer=optimizer(clip),
              loss=keras.losses.SparseCategoricalCrossentropy(
                  from_logits=True))
    return m


def steps(m):
    x, y = train_batch()
    return [float(m.train_on_batch(x, y)) for _ in range(STEPS)]


def save(d):
    m = model()
    m.save(os.path.join(d, "adamw.keras"))
    losses = steps(m)
    np.savez(os.path.join(d, "keras_trained.npz"),
             *[w for layer in m.layers for w in layer.get_weights()])
    with open(os.path.join(d, "keras_losses.txt"), "w") as f:
        f.write("".join(f"{v!r}\n" for v in losses))
    unclipped = steps(model(clip=False))
    with open(os.path.join(d, "unclipped_losses.txt"), "w") as f:
        f.write("".join(f"{v!r}\n" for v in unclipped))


def read(path):
    with open(path) as f:
        return [float(line) for line in f if line.strip()]


def compare(d, tessera_path, exported):
    keras_losses = read(os.path.join(d, "keras_losses.txt"))
    unclipped = read(os.path.join(d, "unclipped_losses.txt"))
    tessera = read(tessera_path)
    if len(tessera) != STEPS:
        fail(f"Tessera trained {len(tessera)} steps, not {STEPS}")
    print("step  keras_loss   tessera_loss  |difference|  "
          "keras_without_clipping")
    for i, (k, t, u) in enumerate(zip(keras_losses, tessera, unclipped)):
        print(f"{i + 1:4d}  {k:.9f}  {t:.9f}  {abs(k - t):.2e}      {u:.9f}")
        if not abs(k - t) <= 1e-5:
            fail(f"step {i + 1}: Keras' loss {k} and Tessera's {t} differ by "
                 f"{abs(k - t)}")
    # The clipping must matter here, or the comparison would not test it.
    if not max(abs(k - u) for k, u in zip(keras_losses, unclipped)) > 1e-4:
        fail("global_clipnorm does not change Keras' losses on this batch")

    m = keras.saving.load_model(exported)
    o = m.optimizer
    want = optimizer()
    if type(o).__name__ != "AdamW":
        fail(f"the export's optimizer is {type(o).__name__}, not AdamW")
    for key in ("weight_decay", "global_clipnorm", "clipnorm", "clipvalue",
                "beta_1", "beta_2", "epsilon"):
        if o.get_config()[key] != want.get_config()[key]:
            fail(f"the export's optimizer {key} is {o.get_config()[key]}, "
                 f"not {want.get_config()[key]}")
    got_lr = keras.saving.serialize_keras_object(o.get_config()[
        "learning_rate"])
    want_lr = keras.saving.serialize_keras_object(want.get_config()[
        "learning_rate"])
    if got_lr != want_lr:
        fail(f"the export's schedule is {got_lr}, not {want_lr}")
    print(f"export: {type(o).__name__}, learning_rate "
          f"{got_lr['class_name']} {got_lr['config']}, weight_decay "
          f"{o.get_config()['weight_decay']}, global_clipnorm "
          f"{o.get_config()['global_clipnorm']}")
    trained = np.load(os.path.join(d, "keras_trained.npz"))
    ours = [w for layer in m.layers for w in layer.get_weights()]
    theirs = [trained[f"arr_{i}"] for i in range(len(trained.files))]
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
    print(f"weights after {STEPS} steps: max |Tessera - Keras| {diff:.3g}")
    if len(ours) != len(theirs) or not diff <= 1e-5:
        fail(f"the exported weights differ from Keras' by {diff}")


def main(argv):
    if argv[1] == "save":
        save(argv[2])
    elif argv[1] == "compare":
        compare(*argv[2:5])
    else:
        raise SystemExit(f"unknown command {argv[1]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
