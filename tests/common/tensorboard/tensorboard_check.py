"""Loads an event folder written by write_tensorboard_events with
TensorBoard's own reader (EventAccumulator) and checks that it sees the
scalars and histograms Tessera wrote.

Usage: tensorboard_check.py <folder>
"""

import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def f32(x):
    """x rounded to float32, as simple_value stores it."""
    return struct.unpack("f", struct.pack("f", x))[0]


def main(folder):
    acc = event_accumulator.EventAccumulator(
        folder,
        size_guidance={
            event_accumulator.SCALARS: 0,
            event_accumulator.HISTOGRAMS: 0,
        },
    )
    acc.Reload()
    tags = acc.Tags()
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    # EventAccumulator keeps the number after "brain.Event:".
    check(acc.file_version == 2.0, "file_version is %r" % acc.file_version)
    check(sorted(tags["scalars"]) == ["accuracy", "loss"],
          "scalar tags: %r" % tags["scalars"])
    check(sorted(tags["histograms"]) == ["staleness", "weights"],
          "histogram tags: %r" % tags["histograms"])
    if not failures:
        loss = [(e.step, e.value) for e in acc.Scalars("loss")]
        check(loss == [(s, f32(1.0 / (s + 1))) for s in range(10)],
              "loss: %r" % loss)
        accuracy = [(e.step, e.value) for e in acc.Scalars("accuracy")]
        check(accuracy == [(s, f32(f32(0.1) * s)) for s in range(10)],
              "accuracy: %r" % accuracy)

        staleness = acc.Histograms("staleness")
        check([h.step for h in staleness] == list(range(10)),
              "staleness steps: %r" % [h.step for h in staleness])
        h = staleness[3].histogram_value
        check(list(h.bucket_limit) == [0, 1, 2, 3] and
              list(h.bucket) == [3, 1, 0, 2],
              "staleness at step 3: %r" % (h,))
        check((h.min, h.max, h.num, h.sum, h.sum_squares) ==
              (0, 3, 6, 7, 19), "staleness stats at step 3: %r" % (h,))

        weights = acc.Histograms("weights")
        check(len(weights) == 1 and weights[0].step == 9,
              "weights events: %r" % weights)
        w = weights[0].histogram_value
        check((w.min, w.max, w.num, w.sum) == (0, 49.5, 100, 2475),
              "weights stats: %r" % (w,))
        check(sum(w.bucket) == 100 and w.bucket_limit[-1] == 49.5,
              "weights buckets: %r" % (w,))
        # TensorBoard's own compression (the distributions tab) accepts it.
        compressed = acc.CompressedHistograms("weights")
        check(len(compressed) == 1, "compressed: %r" % compressed)

    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    print("tensorboard_check: TensorBoard reads %d scalar and %d histogram "
          "tags from %s" % (len(tags["scalars"]), len(tags["histograms"]),
                            folder))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
