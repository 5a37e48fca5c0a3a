"""Report of bench/compare_modes_job.sh: a markdown table and SVG plots.

Reads <out>/runs/<mode>/metrics.jsonl (one JSON line per epoch, written by
the coordinator) and <out>/runs/<mode>/run.json (wall time and the
parameter servers' peak memory, written by the script), and writes
<out>/compare_modes.md, <out>/<metric>_vs_examples.svg and
<out>/<metric>_vs_time.svg.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["async", "ssp2", "sync", "hybrid", "hybridsync"]
LABEL = {"ssp2": "ssp:2", "hybridsync": "hybrid:sync"}


def load(out):
    runs = []
    root = os.path.join(out, "runs")
    for mode in sorted(os.listdir(root),
                       key=lambda m: ORDER.index(m) if m in ORDER else 99):
        path = os.path.join(root, mode, "metrics.jsonl")
        if not os.path.isfile(path):
            continue
        epochs = [json.loads(l) for l in open(path) if l.strip()]
        extra = {}
        info = os.path.join(root, mode, "run.json")
        if os.path.isfile(info):
            extra = json.load(open(info))
        if epochs:
            runs.append({"mode": mode, "epochs": epochs, **extra})
    return runs


def main(out, name):
    runs = load(out)
    if not runs:
        sys.exit(f"no runs with metrics.jsonl under {out}/runs")
    metric = "auc" if "auc" in runs[0]["epochs"][0] else "test_accuracy"
    title = "test AUC" if metric == "auc" else "test accuracy"
    for x, xlabel, fname in [("examples", "examples seen", "vs_examples"),
                             ("seconds", "training time (s)", "vs_time")]:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for run in runs:
            xs, total = [], 0.0
            for e in run["epochs"]:
                total += e[x]
                xs.append(total)
            ax.plot(xs, [e[metric] for e in run["epochs"]], marker=".",
                    label=LABEL.get(run["mode"], run["mode"]))
        best = runs[0]["epochs"][-1].get("best_auc")
        if metric == "auc" and best is not None:
            ax.axhline(best, color="black", linewidth=0.6,
                       label=f"generator's best {best:.4f}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(title)
        ax.set_title(f"{name}: {title} by mode (2 ps x 2 workers)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{metric}_{fname}.svg"))
        plt.close(fig)
    lines = [f"| mode | epochs | final {title} | best {title} | "
             "examples/s | wall s | ps peak MiB |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        ep = run["epochs"]
        examples = sum(e["examples"] for e in ep)
        secs = sum(e["seconds"] for e in ep)
        lines.append(
            f'| {LABEL.get(run["mode"], run["mode"])} | {len(ep)} '
            f'| {ep[-1][metric]:.4f} | {max(e[metric] for e in ep):.4f} '
            f'| {examples / max(secs, 1e-9):.0f} '
            f'| {run.get("wall_seconds", float("nan")):.1f} '
            f'| {run.get("ps_peak_kib", 0) / 1024:.0f} |')
    best = runs[0]["epochs"][-1].get("best_auc")
    if best is not None:
        lines.append("")
        lines.append(f"The generator's best AUC on the test set: {best:.4f}.")
    with open(os.path.join(out, "compare_modes.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "job")
