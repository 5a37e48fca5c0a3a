"""Report of bench/compare_modes.sh: CSV, PNG plots and a markdown table.

Reads <out>/runs/<mode>-w<N>/metrics.jsonl (one JSON line per epoch, written
by the coordinator) and writes <out>/compare_modes.csv,
<out>/accuracy_vs_examples.png, <out>/accuracy_vs_time.png and
<out>/compare_modes.md.
"""

import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_ORDER = ["async", "sync", "ssp2", "mirrored"]
MODE_LABEL = {"async": "async", "sync": "sync", "ssp2": "ssp:2",
              "mirrored": "mirrored"}


def load_runs(out):
    runs = []
    root = os.path.join(out, "runs")
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.isfile(path):
            continue
        mode, workers = name.rsplit("-w", 1)
        epochs = [json.loads(line) for line in open(path) if line.strip()]
        if epochs:
            runs.append({"mode": mode, "workers": int(workers),
                         "epochs": epochs})
    runs.sort(key=lambda r: (MODE_ORDER.index(r["mode"])
                             if r["mode"] in MODE_ORDER else 99,
                             r["workers"]))
    return runs


def curves(run):
    seen, secs, rows = 0, 0.0, []
    for e in run["epochs"]:
        seen += e["examples"]
        secs += e["seconds"]
        rows.append((e["epoch"], seen, secs, e["test_accuracy"],
                     e["train_loss"], e.get("staleness", {}).get("mean", 0.0),
                     e.get("late_shards", 0)))
    return rows


def main(out):
    runs = load_runs(out)
    if not runs:
        sys.exit(f"no runs with metrics.jsonl under {out}/runs")
    with open(os.path.join(out, "compare_modes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "workers", "epoch", "examples_seen",
                    "train_seconds", "test_accuracy", "train_loss",
                    "mean_staleness", "late_shards"])
        for run in runs:
            for row in curves(run):
                w.writerow([MODE_LABEL.get(run["mode"], run["mode"]),
                            run["workers"], *row])

    colors = {"async": "tab:blue", "sync": "tab:orange", "ssp2": "tab:green",
              "mirrored": "tab:red"}
    styles = {1: ":", 2: "--", 4: "-"}
    for x_index, xlabel, fname in [(1, "examples seen", "accuracy_vs_examples"),
                                   (2, "training time (s)",
                                    "accuracy_vs_time")]:
        fig, ax = plt.subplots(figsize=(8, 5))
        for run in runs:
            rows = curves(run)
            ax.plot([r[x_index] for r in rows], [r[3] for r in rows],
                    color=colors.get(run["mode"], "gray"),
                    linestyle=styles.get(run["workers"], "-"), marker=".",
                    label=f'{MODE_LABEL.get(run["mode"], run["mode"])}, '
                          f'{run["workers"]} worker(s)')
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy")
        ax.set_title("Fashion-MNIST MLP: test accuracy by mode and workers")
        ax.axhline(0.87, color="black", linewidth=0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname + ".png"), dpi=120)
        plt.close(fig)

    lines = ["| mode | workers | epochs | final test acc | best test acc | "
             "first epoch >= 0.87 | train s | examples/s | mean staleness | "
             "late shards |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        rows = curves(run)
        first = next((r[0] for r in rows if r[3] >= 0.87), None)
        total_examples = rows[-1][1]
        secs = rows[-1][2]
        stale = sum(r[5] for r in rows) / len(rows)
        late = sum(r[6] for r in rows)
        lines.append(
            f'| {MODE_LABEL.get(run["mode"], run["mode"])} | {run["workers"]} '
            f'| {len(rows)} | {rows[-1][3]:.4f} | {max(r[3] for r in rows):.4f} '
            f'| {first if first is not None else "-"} | {secs:.1f} '
            f'| {total_examples / max(secs, 1e-9):.0f} | {stale:.2f} | {late} |')
    with open(os.path.join(out, "compare_modes.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/compare_modes")
