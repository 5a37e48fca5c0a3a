"""Writes TFRecord files of tf.train.Example with code nobody here wrote,
then reads them with Tessera's stream reader and compares the values.

The framing comes from TensorBoard's RecordWriter (the TFRecord writer
that the tensorboard package bundles) and the Example bytes from the
protobuf runtime, with messages declared by TensorFlow's own field
numbers and names (tensorflow/core/example/{example,feature}.proto;
tensorboard 2.20 no longer bundles example_pb2). GZIP files are what
TensorFlow's compression_type="GZIP" writes: one gzip stream of the
framed records, here Python's gzip module around the same writer. ZLIB
files are what compression_type="ZLIB" writes: one zlib stream (window
15) of the framed records, here Python's zlib over the writer's bytes
(TensorBoard's writer compresses nothing itself).

Usage: tf_examples_check.py <dump_stream_examples binary> <scratch dir>
"""

import gzip
import io
import os
import subprocess
import sys
import zlib

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from tensorboard.summary.writer.record_writer import RecordWriter


def example_classes():
    """tf.train.Example and friends, declared as TensorFlow declares them."""
    f = descriptor_pb2.FileDescriptorProto()
    f.name = "tensorflow/core/example/example_for_test.proto"
    f.package = "tensorflow"
    f.syntax = "proto3"
    T = descriptor_pb2.FieldDescriptorProto

    def message(name, fields):
        m = f.message_type.add()
        m.name = name
        for fname, number, ftype, label, type_name, oneof in fields:
            fd = m.field.add()
            fd.name, fd.number, fd.type, fd.label = fname, number, ftype, label
            if type_name:
                fd.type_name = type_name
            if oneof is not None:
                fd.oneof_index = oneof
            if ftype in (T.TYPE_FLOAT, T.TYPE_INT64) and label == T.LABEL_REPEATED:
                fd.options.packed = True
        return m

    R, O = T.LABEL_REPEATED, T.LABEL_OPTIONAL
    message("BytesList", [("value", 1, T.TYPE_BYTES, R, None, None)])
    message("FloatList", [("value", 1, T.TYPE_FLOAT, R, None, None)])
    message("Int64List", [("value", 1, T.TYPE_INT64, R, None, None)])
    feature = message("Feature", [
        ("bytes_list", 1, T.TYPE_MESSAGE, O, ".tensorflow.BytesList", 0),
        ("float_list", 2, T.TYPE_MESSAGE, O, ".tensorflow.FloatList", 0),
        ("int64_list", 3, T.TYPE_MESSAGE, O, ".tensorflow.Int64List", 0),
    ])
    feature.oneof_decl.add().name = "kind"
    features = message("Features", [
        ("feature", 1, T.TYPE_MESSAGE, R, ".tensorflow.Features.FeatureEntry",
         None)])
    entry = features.nested_type.add()
    entry.name = "FeatureEntry"
    entry.options.map_entry = True
    k = entry.field.add()
    k.name, k.number, k.type, k.label = "key", 1, T.TYPE_STRING, O
    v = entry.field.add()
    v.name, v.number, v.type, v.label = "value", 2, T.TYPE_MESSAGE, O
    v.type_name = ".tensorflow.Feature"
    message("Example", [
        ("features", 1, T.TYPE_MESSAGE, O, ".tensorflow.Features", None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.Example"))


def feature_hash(data):
    """data/records/feature_hash.h, written again from its comment."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & 0xFFFFFFFFFFFFFFFF
    h ^= h >> 31
    return h - (1 << 64) if h >= (1 << 63) else h


def make_examples(Example, n):
    """Examples and the line dump_stream_examples prints for each."""
    examples, lines = [], []
    for i in range(n):
        e = Example()
        fm = e.features.feature
        x = [i * 0.25, -1.5 * i, 3.0e-7 * i]
        fm["x"].float_list.value.extend(x)
        counts = [i, -(i * i)]
        fm["n"].int64_list.value.extend(counts)
        tags = [b"tag%d" % (i % 5), "caf\u00e9".encode()][: 1 + i % 2]
        fm["tag"].bytes_list.value.extend(tags)
        ids = [(1 << 40) + i, -7][: i % 3]
        fm["id"].int64_list.value.extend(ids)
        fm["y"].int64_list.value.append(i % 2)
        fm["unused"].bytes_list.value.append(b"ignored")
        examples.append(e.SerializeToString())
        # Floats as float32 values, printed as the dump prints them.
        import struct
        xs = [struct.unpack("<f", struct.pack("<f", v))[0] for v in x]
        dense = ["%.9g" % v for v in xs + [float(c) for c in counts]]
        lines.append("y=%d dense=%s tag=%s id=%s" % (
            i % 2, ",".join(dense),
            ",".join(str(feature_hash(t)) for t in tags),
            ",".join(str(v) for v in ids)))
    return examples, lines


def write(path, records, compression):
    plain = io.BytesIO()
    writer = RecordWriter(plain)
    for r in records:
        writer.write(r)
    writer.flush()
    data = plain.getvalue()
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "zlib":
        data = zlib.compress(data)
    with open(path, "wb") as f:
        f.write(data)


# What each file starts with: the gzip magic, a zlib header at the
# default level, or the first record's length.
MAGIC = {"gzip": b"\x1f\x8b", "zlib": b"\x78\x9c"}


def main():
    dump, scratch = sys.argv[1], sys.argv[2]
    Example = example_classes()
    records, want = make_examples(Example, 57)
    for compression in ("none", "gzip", "zlib"):
        # Two files; the name says nothing about compression.
        paths = [os.path.join(scratch, "part-%d-%s" % (k, compression))
                 for k in range(2)]
        write(paths[0], records[:30], compression)
        write(paths[1], records[30:], compression)
        with open(paths[0], "rb") as f:
            head = f.read(2)
        assert head == MAGIC.get(compression, head), (compression, head)
        assert compression in MAGIC or head not in MAGIC.values()
        got = subprocess.run([dump] + paths, check=True, capture_output=True,
                             text=True).stdout.splitlines()
        if got != want:
            for g, w in zip(got, want):
                if g != w:
                    print("first difference:\n got  %s\n want %s" % (g, w))
                    break
            print("FAIL: %d lines read, %d written (compression %s)" %
                  (len(got), len(want), compression))
            return 1
        print("ok: %d examples, compression %s" % (len(got), compression))
    return 0


if __name__ == "__main__":
    sys.exit(main())
