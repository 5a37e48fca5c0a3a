"""Real Keras' side of the tessera_keras checks (keras_check.sh,
keras_fashion_mnist_check.sh): saves the models, loads what tessera_keras
exported and compares weights and predictions. Each command exits 1 with
FAIL lines when a comparison fails."""
import gzip
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_models  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
failures = []


def fail(message):
    print("FAIL:", message)
    failures.append(message)


def test_images(n):
    with gzip.open(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    # As Tessera's IDX reader: pixels / 255 as float32.
    x = (images.reshape(-1, 784)[:n].astype(np.float32) / np.float32(255))
    return x, labels[:n].astype(np.int64)


def inputs_for(model, n, seed=0):
    if len(model.inputs) == 3:
        return keras_models.multi_inputs(n, seed)
    rng = np.random.default_rng(seed)
    shape = (n,) + tuple(model.inputs[0].shape[1:])
    return rng.random(shape, dtype=np.float32)


def as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def from_logits(model):
    loss = model.loss
    if isinstance(loss, dict):
        loss = next(v for v in loss.values() if v is not None)
    return bool(getattr(loss, "from_logits", False))


def exported_floats(exported_path):
    """The exported compile config's optimizer numbers must be the
    decimals a user writes (0.9), not a float32's exact value
    (0.8999999761581421)."""
    import zipfile
    with zipfile.ZipFile(exported_path) as z:
        config = json.loads(z.read("config.json"))
    optimizer = config["compile_config"]["optimizer"]["config"]
    for key, value in optimizer.items():
        if isinstance(value, float) and value != float(
                str(np.float32(value))):
            fail(f"{os.path.basename(exported_path)}: optimizer {key} is "
                 f"written {value!r}, not the shortest decimal of its float")


def roundtrip(original_path, exported_path):
    """The exported model holds the original's weights bit for bit and
    predicts what it predicts (logits too: a from_logits model comes back
    from_logits, issue #42)."""
    a = keras.saving.load_model(original_path)
    b = keras.saving.load_model(exported_path)
    name = os.path.basename(original_path)
    compared = 0
    for layer in a.layers:
        wa = layer.get_weights()
        wb = b.get_layer(layer.name).get_weights()
        if len(wa) != len(wb):
            fail(f"{name}: layer {layer.name}: {len(wa)} weights, exported "
                 f"{len(wb)}")
            continue
        for i, (x, y) in enumerate(zip(wa, wb)):
            compared += 1
            if x.shape != y.shape or not np.array_equal(
                    x.view(np.uint32), y.view(np.uint32)):
                fail(f"{name}: layer {layer.name} weight {i} differs")
    x = inputs_for(a, 64)
    ya = as_list(a.predict(x, verbose=0))
    yb = as_list(b.predict(x, verbose=0))
    if from_logits(a) != from_logits(b):
        fail(f"{name}: from_logits {from_logits(a)}, exported "
             f"{from_logits(b)}")
    exported_floats(exported_path)
    diffs = [float(np.max(np.abs(p - q))) for p, q in zip(ya, yb)]
    print(f"{name}: {compared} weights bit for bit; {len(a.layers)} layers "
          f"-> {len(b.layers)} in the export; max |predict difference| per "
          f"output {diffs}")
    for d in diffs:
        if not d <= 1e-6:
            fail(f"{name}: predictions differ by {d}")


def against_tessera(keras_path, predictions_path):
    """Keras' predict of the exported model against tessera_predict's
    probabilities for the same test images, to 1e-5."""
    model = keras.saving.load_model(keras_path)
    with open(predictions_path) as f:
        rows = [json.loads(line) for line in f]
    want = np.array([r["probabilities"] for r in rows], np.float32)
    x, _ = test_images(len(rows))
    x = x.reshape((len(rows),) + tuple(model.inputs[0].shape[1:]))
    got = model.predict(x, verbose=0, batch_size=256)
    if from_logits(model):  # tessera_predict gives the probabilities
        got = np.asarray(keras.activations.softmax(got))
    diff = float(np.max(np.abs(got - want)))
    print(f"{os.path.basename(keras_path)}: Keras predict vs tessera_predict "
          f"on {len(rows)} test images: max |difference| {diff:.3g}")
    if not diff <= 1e-5:
        fail(f"{keras_path}: Keras and tessera_predict differ by {diff}")


def evaluate(keras_path, n, tessera_accuracy):
    model = keras.saving.load_model(keras_path)
    x, y = test_images(n)
    x = x.reshape((n,) + tuple(model.inputs[0].shape[1:]))
    accuracy = float(np.mean(
        np.argmax(model.predict(x, verbose=0, batch_size=500), 1) == y))
    print(f"{os.path.basename(keras_path)}: test accuracy on {n} examples: "
          f"Keras {accuracy:.4f}, Tessera {tessera_accuracy:.4f}")
    if not abs(accuracy - tessera_accuracy) <= 0.001:
        fail(f"{keras_path}: Keras' accuracy {accuracy} is not Tessera's "
             f"{tessera_accuracy}")


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "save":
        keras_models.save_all(args[0])
        keras_models.save_keras2(args[0])
    elif command == "save_course":
        keras_models.course_mlp().save(os.path.join(args[0], "mlp.keras"))
        keras_models.small_cnn().save(os.path.join(args[0], "cnn.keras"))
    elif command == "compare":
        # compare ROUNDTRIP orig exported ... -- PREDICT keras jsonl ...
        mode = None
        for a in args:
            if a in ("roundtrip", "predict"):
                mode, pending = a, []
                continue
            pending.append(a)
            if len(pending) == 2:
                (roundtrip if mode == "roundtrip" else against_tessera)(
                    *pending)
                pending = []
    elif command == "evaluate":
        for i in range(0, len(args), 3):
            evaluate(args[i], int(args[i + 1]), float(args[i + 2]))
    else:
        raise SystemExit(f"unknown command {command}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
