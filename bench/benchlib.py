"""benchlib: what bench/run and bench/mimalloc-bench share: the summary
arithmetic, the machine line of a report, a fresh copy of a library for
each run, and the small-multiples plots of ratios to the baseline
allocator."""
import contextlib
import math
import os
import platform
import shutil
import sys
import tempfile


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def machine():
    model = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, Linux {platform.release()}"


@contextlib.contextmanager
def fresh_copy(lib, under):
    """The path of a new copy of lib, in a new directory under `under` (not
    /tmp, which may be mounted noexec), for one run (None for None), removed
    after. The same library in another file can run 40% slower or faster
    for as long as that file's pages stay where they landed in the page
    cache (threadtest: 0.088 against 0.062 s, BENCHMARKS.md): with a copy
    per run, where the pages land is one more thing that varies between
    repetitions, which the medians absorb, not a bias one allocator carries
    through a whole run. (glibc's malloc is libc itself and is not copied.)"""
    if not lib:
        yield None
        return
    directory = tempfile.mkdtemp(prefix="lib-", dir=under)
    try:
        path = os.path.join(directory, os.path.basename(lib))
        shutil.copy(lib, path)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a warning) if missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("warning: matplotlib missing, no plots (apt-get install python3-matplotlib)", file=sys.stderr)
        return None
    return plt


def plot_ratios(plt, names, rows, baseline, time_png, rss_png):
    """rows: [{"bench", "threads", "time": {name: v}, "rss": {name: v}}].
    One small panel per benchmark, thread counts across, a line per
    allocator; cagemalloc drawn thick, and the best peer of each point marked
    with a ring, so "who wins where" reads at a glance."""
    import matplotlib.ticker

    os.makedirs(os.path.dirname(time_png), exist_ok=True)
    benches = list(dict.fromkeys(r["bench"] for r in rows))
    peers = [n for n in names if not n.startswith("cagemalloc")]
    colors = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}

    def ratio(row, key, name):  # nan where the allocator has no result (every run failed)
        base, value = row[key].get(baseline), row[key].get(name)
        return value / base if base and value is not None else float("nan")

    for key, title, fname in (("time", "Time", time_png), ("rss", "Peak RSS", rss_png)):
        cols = 4
        panel_rows = (len(benches) + cols - 1) // cols
        fig, axes = plt.subplots(panel_rows, cols, figsize=(4.2 * cols, 3.2 * panel_rows), squeeze=False)
        for k, bench in enumerate(benches):
            ax = axes[k // cols][k % cols]
            brows = [r for r in rows if r["bench"] == bench]
            threads = [r["threads"] for r in brows]
            for n in names:
                ys = [ratio(r, key, n) for r in brows]
                mine = n.startswith("cagemalloc")
                ax.plot(threads, ys, marker="o", color=colors[n], label=n,
                        linewidth=2.6 if n == "cagemalloc" else 1.0, alpha=1.0 if mine or n == baseline else 0.75,
                        linestyle="-" if n == "cagemalloc" or not mine else "--", markersize=4 if mine else 3)
            if peers:
                best = [min((n for n in peers if n in r[key]), key=lambda n: ratio(r, key, n)) for r in brows]
                ax.scatter(threads, [ratio(r, key, b) for r, b in zip(brows, best)], s=110, facecolors="none",
                           edgecolors=[colors[b] for b in best], linewidths=1.5, zorder=5)
            ax.axhline(1.0, color="black", linewidth=0.6)
            ax.set_yscale("log")
            plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.set_xscale("log", base=2)
            ax.set_xticks(threads)
            ax.set_xticklabels([f"{t}" + ("*" if t > 2 else "") for t in threads])
            ax.set_xlim(min(threads) / 1.4, max(threads) * 1.4)
            ax.set_title(bench, fontsize=10)
            ax.tick_params(labelsize=7)
            if k % cols == 0:
                ax.set_ylabel(f"{title} / {baseline}", fontsize=8)
        for k in range(len(benches), panel_rows * cols):
            axes[k // cols][k % cols].axis("off")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
        fig.suptitle(f"{title} relative to {baseline}, lower is better (log scale; x: threads, * oversubscribes "
                     "the 2 cores; ring: the best peer at that point)", fontsize=10)
        fig.tight_layout(rect=(0, 0.05, 1, 0.96))
        fig.savefig(fname, dpi=100)
        plt.close(fig)
