"""Keras models the tessera_keras checks save: built, compiled and (for
weights worth comparing) fitted a step by real Keras 3."""
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

L = keras.layers


def _fit_once(model, x, y):
    # One step, so biases and BatchNorm's moving statistics leave their
    # initial values and a wrong mapping of any variable shows.
    model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)


def mlp(optimizer=None):
    model = keras.Sequential([
        keras.Input((784,), name="image"),
        L.Dense(64, activation="relu", name="hidden"),
        L.Dropout(0.2, name="drop"),
        L.BatchNormalization(name="bn"),
        L.Dense(10, activation="softmax", name="probs"),
    ], name="mlp")
    model.compile(optimizer=optimizer or keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def cnn():
    model = keras.Sequential([
        keras.Input((28, 28, 1), name="image"),
        L.Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
        L.MaxPooling2D(name="pool1"),
        L.Conv2D(8, 3, strides=2, name="conv2"),
        L.ReLU(name="relu2"),
        L.Flatten(name="flat"),
        L.Dense(10, name="logits"),
    ], name="cnn")
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])
    return model


def tutorial_mlp():
    """The course MLP as TensorFlow's tutorial writes it: the last Dense
    gives logits, the loss applies the softmax (from_logits=True)."""
    model = keras.Sequential([
        keras.Input((784,), name="image"),
        L.Dense(128, activation="relu", name="dense"),
        L.Dropout(0.2, name="dropout"),
        L.Dense(10, name="dense_1"),
    ])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3, beta_1=0.9, beta_2=0.999),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])
    return model


def bn_cnn():
    """A Sequential CNN with BatchNormalization that ends in logits."""
    model = keras.Sequential([
        keras.Input((28, 28, 1), name="image"),
        L.Conv2D(8, 3, padding="same", name="conv"),
        L.BatchNormalization(name="bn"),
        L.ReLU(name="relu"),
        L.MaxPooling2D(name="pool"),
        L.Flatten(name="flat"),
        L.Dense(10, name="logits"),
    ], name="bn_cnn")
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def multi():
    """Three inputs (dense features and two id fields), two outputs, one
    trained: the click."""
    dense = keras.Input((13,), name="dense")
    c1 = keras.Input((1,), dtype="int32", name="c1")
    c2 = keras.Input((4,), dtype="int32", name="c2")
    f1 = L.Flatten(name="c1_vec")(L.Embedding(100, 8, name="emb_c1")(c1))
    p2 = L.GlobalAveragePooling1D(name="c2_vec")(
        L.Embedding(50, 8, name="emb_c2")(c2))
    d = L.Dense(8, name="dense_proj")(dense)
    x = L.Concatenate(name="concat")([d, f1, p2])
    x = L.LayerNormalization(name="ln")(x)
    h = L.Dense(16, activation="relu", name="h")(x)
    g = L.Dense(16, activation="sigmoid", name="gate")(x)
    a = L.Add(name="res")([L.Multiply(name="gated")([h, g]), h])
    a = L.Reshape((16,), name="reshape")(L.Activation("tanh", name="act")(a))
    click = L.Dense(1, activation="sigmoid", name="click")(a)
    aux = L.Softmax(name="aux")(L.Dense(3, name="aux_logits")(a))
    model = keras.Model([dense, c1, c2], [click, aux], name="multi")
    model.compile(optimizer=keras.optimizers.Adagrad(0.05),
                  loss={"click": "binary_crossentropy", "aux": None},
                  metrics={"click": ["accuracy"]})
    return model


def multi_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, 13)).astype("float32"),
            rng.integers(0, 100, size=(n, 1)).astype("int32"),
            rng.integers(0, 50, size=(n, 4)).astype("int32")]


def save_all(out):
    """The models the checks import, and the refused ones."""
    rng = np.random.default_rng(1)
    m = mlp()
    _fit_once(m, rng.random((64, 784), dtype=np.float32),
              rng.integers(0, 10, 64))
    m.save(os.path.join(out, "mlp.keras"))
    c = cnn()
    _fit_once(c, rng.random((32, 28, 28, 1), dtype=np.float32),
              rng.integers(0, 10, 32))
    c.save(os.path.join(out, "cnn.keras"))
    # Untrained, as the issue (#42) found it: the export of the imported
    # weights must predict the logits the model predicts.
    tutorial_mlp().save(os.path.join(out, "tutorial_mlp.keras"))
    b = bn_cnn()
    _fit_once(b, rng.random((32, 28, 28, 1), dtype=np.float32),
              rng.integers(0, 10, 32))
    b.save(os.path.join(out, "bn_cnn.keras"))
    f = multi()
    _fit_once(f, multi_inputs(32),
              {"click": rng.integers(0, 2, (32, 1)).astype("float32"),
               "aux": np.zeros((32, 3), "float32")})
    f.save(os.path.join(out, "multi.keras"))
    with open(os.path.join(out, "multi3.json"), "w") as file:
        file.write(f.to_json())

    refused = os.path.join(out, "refused")
    os.makedirs(refused, exist_ok=True)
    keras.Sequential([keras.Input((5, 4)), L.LSTM(3, name="lstm"),
                      L.Dense(1, name="out")]).save(
        os.path.join(refused, "lstm.keras"))
    x = keras.Input((4,), name="x")
    keras.Model(x, L.Dense(1)(L.Lambda(lambda t: t * 2, name="double")(x))
                ).save(os.path.join(refused, "lambda.keras"))
    keras.Sequential([keras.Input((1, 28, 28)),
                      L.Conv2D(4, 3, data_format="channels_first",
                               name="conv_cf"),
                      L.Flatten(), L.Dense(10, activation="softmax")]).save(
        os.path.join(refused, "channels_first.keras"))

    @keras.saving.register_keras_serializable(package="check")
    class Scale(L.Layer):
        def call(self, t):
            return t * 3.0

    keras.Sequential([keras.Input((4,)), Scale(name="scale"),
                      L.Dense(1)]).save(os.path.join(refused, "custom.keras"))
    r = mlp(keras.optimizers.RMSprop(1e-3))
    r.save(os.path.join(refused, "rmsprop.keras"))
    keras.Sequential([keras.Input((10,)), L.Dense(1, activation="gelu",
                                                  name="gelu_out")]).save(
        os.path.join(refused, "gelu.keras"))
    w = keras.Sequential([keras.Input((10,)), L.Dense(1, name="y")])
    w.compile(optimizer="adam", loss="mse", loss_weights=[0.5])
    w.save(os.path.join(refused, "loss_weights.keras"))
    h = keras.Sequential([keras.Input((10,)),
                          L.Dense(4, dtype="float16", name="half"),
                          L.Dense(1, name="y")])
    h.compile(optimizer="adam", loss="mse")
    h.save(os.path.join(refused, "float16.keras"))


def course_mlp():
    """The course's Fashion-MNIST MLP (Keras' classic tutorial)."""
    model = keras.Sequential([
        keras.Input((784,), name="image"),
        L.Dense(128, activation="relu", name="dense"),
        L.Dropout(0.2, name="dropout"),
        L.Dense(10, activation="softmax", name="dense_1"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def small_cnn():
    model = keras.Sequential([
        keras.Input((28, 28, 1), name="image"),
        L.Conv2D(16, 3, activation="relu", name="conv"),
        L.MaxPooling2D(name="pool"),
        L.Flatten(name="flatten"),
        L.Dense(10, activation="softmax", name="probs"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


KERAS2_SEQUENTIAL = {
    "class_name": "Sequential",
    "config": {"name": "sequential", "layers": [
        {"class_name": "InputLayer", "config": {
            "batch_input_shape": [None, 784], "dtype": "float32",
            "sparse": False, "ragged": False, "name": "input_1"}},
        {"class_name": "Dense", "config": {
            "name": "dense", "trainable": True, "dtype": "float32",
            "units": 32, "activation": "relu", "use_bias": True,
            "kernel_initializer": {"class_name": "GlorotUniform",
                                   "config": {"seed": None}},
            "bias_initializer": {"class_name": "Zeros", "config": {}},
            "kernel_regularizer": None, "bias_regularizer": None,
            "activity_regularizer": None, "kernel_constraint": None,
            "bias_constraint": None}},
        {"class_name": "Dropout", "config": {
            "name": "dropout", "trainable": True, "dtype": "float32",
            "rate": 0.2, "noise_shape": None, "seed": None}},
        {"class_name": "Dense", "config": {
            "name": "dense_1", "trainable": True, "dtype": "float32",
            "units": 10, "activation": "softmax", "use_bias": True,
            "kernel_initializer": {"class_name": "GlorotUniform",
                                   "config": {"seed": None}},
            "bias_initializer": {"class_name": "Zeros", "config": {}},
            "kernel_regularizer": None, "bias_regularizer": None,
            "activity_regularizer": None, "kernel_constraint": None,
            "bias_constraint": None}}]},
    "keras_version": "2.15.0", "backend": "tensorflow"}

KERAS2_FUNCTIONAL = {
    "class_name": "Functional",
    "config": {"name": "model", "layers": [
        {"class_name": "InputLayer", "name": "image", "inbound_nodes": [],
         "config": {"batch_input_shape": [None, 28, 28, 1],
                    "dtype": "float32", "sparse": False, "ragged": False,
                    "name": "image"}},
        {"class_name": "Conv2D", "name": "conv",
         "inbound_nodes": [[["image", 0, 0, {}]]],
         "config": {"name": "conv", "trainable": True, "dtype": "float32",
                    "filters": 4, "kernel_size": [3, 3], "strides": [1, 1],
                    "padding": "valid", "data_format": "channels_last",
                    "dilation_rate": [1, 1], "groups": 1,
                    "activation": "relu", "use_bias": True,
                    "kernel_initializer": {"class_name": "GlorotUniform",
                                           "config": {"seed": None}},
                    "bias_initializer": {"class_name": "Zeros", "config": {}},
                    "kernel_regularizer": None, "bias_regularizer": None,
                    "activity_regularizer": None, "kernel_constraint": None,
                    "bias_constraint": None}},
        {"class_name": "MaxPooling2D", "name": "pool",
         "inbound_nodes": [[["conv", 0, 0, {}]]],
         "config": {"name": "pool", "trainable": True, "dtype": "float32",
                    "pool_size": [2, 2], "padding": "valid",
                    "strides": [2, 2], "data_format": "channels_last"}},
        {"class_name": "Flatten", "name": "flat",
         "inbound_nodes": [[["pool", 0, 0, {}]]],
         "config": {"name": "flat", "trainable": True, "dtype": "float32",
                    "data_format": "channels_last"}},
        {"class_name": "Dense", "name": "probs",
         "inbound_nodes": [[["flat", 0, 0, {}]]],
         "config": {"name": "probs", "trainable": True, "dtype": "float32",
                    "units": 10, "activation": "softmax", "use_bias": True,
                    "kernel_initializer": {"class_name": "GlorotUniform",
                                           "config": {"seed": None}},
                    "bias_initializer": {"class_name": "Zeros",
                                         "config": {}},
                    "kernel_regularizer": None, "bias_regularizer": None,
                    "activity_regularizer": None, "kernel_constraint": None,
                    "bias_constraint": None}}],
        "input_layers": [["image", 0, 0]],
        "output_layers": [["probs", 0, 0]]},
    "keras_version": "2.15.0", "backend": "tensorflow"}


def save_keras2(out):
    for name, model in (("keras2_sequential", KERAS2_SEQUENTIAL),
                        ("keras2_functional", KERAS2_FUNCTIONAL)):
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(model, f)
