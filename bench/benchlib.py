"""benchlib: what the bench scripts share: the summary arithmetic, the
machine line of a report, a fresh copy of a library for each run, the
small-multiples plots of ratios to the baseline allocator; and for the
scripts that run whole programs (bench/mimalloc-bench, bench/programs): the
allocators (Debian's peers, peers built from checkouts, cagemalloc and its
variants), the check that each preload takes effect, the interleaved rounds
and the ratio tables."""
import contextlib
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
CAGEMALLOC = os.path.join(ROOT, "build", "libcagemalloc.so")


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


# ------------------------------------------------- allocators for whole programs

def add_allocator_options(p):
    p.add_argument("--allocators", default="", help="comma-separated allocator names")
    p.add_argument("--build-peer", action="append", default=[],
                   help="NAME:CHECKOUT with NAME snmalloc, rpmalloc or lrmalloc: build it and run it")
    p.add_argument("--lib", action="append", default=[], help="NAME:PATH: also run this library as NAME")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:KEY=VAL[,KEY=VAL]: also run cagemalloc with this environment as NAME")


def build_peer(name, checkout, out):
    """The recipes of ../shared/bench/mimalloc-bench.md; returns the library."""
    checkout = os.path.abspath(os.path.expanduser(checkout))
    if name == "snmalloc":
        build = os.path.join(out, "build-snmalloc")
        subprocess.run(["cmake", "-S", checkout, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DSNMALLOC_BUILD_TESTING=OFF"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", build, "snmallocshim"], check=True, stdout=subprocess.DEVNULL)
        return os.path.join(build, "libsnmallocshim.so")
    if name == "rpmalloc":
        subprocess.run(["python3", "configure.py", "--toolchain", "gcc", "-c", "release", "-a", "x86-64"],
                       check=True, cwd=checkout, stdout=subprocess.DEVNULL)
        ninja = os.path.join(checkout, "build.ninja")
        with open(ninja) as f:
            text = f.read()
        with open(ninja, "w") as f:
            f.write(text.replace("-Werror", ""))
        subprocess.run(["ninja"], check=True, cwd=checkout, stdout=subprocess.DEVNULL)
        return os.path.join(checkout, "bin", "linux", "release", "x86-64", "librpmalloc.so")
    if name == "lrmalloc":
        subprocess.run(["make", "-j", str(os.cpu_count())], check=True, cwd=checkout, stdout=subprocess.DEVNULL)
        return os.path.join(checkout, "liblrmalloc.so")
    raise SystemExit(f"--build-peer: no recipe for {name} (snmalloc, rpmalloc or lrmalloc)")


def allocators(args, out):
    """[(name, library or None for glibc, extra environment)]: glibc, the
    Debian peers installed, --build-peer's, cagemalloc (rebuilt by make),
    --lib's and --variant's, filtered by --allocators."""
    found = [("glibc", None, {})]
    for name, lib in (("jemalloc", "libjemalloc.so.2"), ("tcmalloc", "libtcmalloc_minimal.so.4"),
                      ("mimalloc", "libmimalloc.so.2")):
        path = os.path.join(LIBDIR, lib)
        if os.path.exists(path):
            found.append((name, path, {}))
        else:
            print(f"warning: {name} not installed ({path}); skipped", file=sys.stderr)
    for spec in args.build_peer:
        name, _, checkout = spec.partition(":")
        found.append((name, build_peer(name, checkout, out), {}))
    # always (make rebuilds only what changed): an existing library may be stale: a comparison once ran the library before a change under both names
    subprocess.run(["make", "-C", ROOT, "all"], check=True)
    found.append(("cagemalloc", CAGEMALLOC, {}))
    for spec in args.lib:
        name, _, path = spec.partition(":")
        found.append((name, os.path.abspath(os.path.expanduser(path)), {}))
    for spec in args.variant:
        name, _, env = spec.partition(":")
        found.append((name, CAGEMALLOC, dict(kv.split("=", 1) for kv in env.split(",") if kv)))
    if args.allocators:
        wanted = args.allocators.split(",")
        found = [a for a in found if a[0] in wanted]
    check_preloads(found, out)
    return found


PRELOAD_CHECK = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    printf("%s\n", sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?");
    return 0;
}
"""


def check_preloads(allocs, out):
    """Every library must be the one whose malloc a program calls."""
    exe = os.path.join(out, "which-malloc")
    if not os.path.exists(exe):
        os.makedirs(out, exist_ok=True)
        src = exe + ".c"
        with open(src, "w") as f:
            f.write(PRELOAD_CHECK)
        subprocess.run(["gcc", "-O1", "-o", exe, src, "-ldl"], check=True)
    for name, lib, _ in allocs:
        env = preload_env(lib, {})
        got = subprocess.run([exe], env=env, capture_output=True, text=True).stdout.strip()
        want = os.path.realpath(lib) if lib else "libc.so"
        if (want not in os.path.realpath(got)) if lib else ("libc" not in got):
            raise SystemExit(f"{name}: malloc resolves to {got}, not {lib or 'glibc'}: the preload does not take effect")


def preload_env(lib, extra_env):
    """This process's environment with LD_PRELOAD set to lib (none for glibc) and extra_env added."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if lib:
        env["LD_PRELOAD"] = lib
    env.update(extra_env)
    return env


def timed_run(argv, stdin_path, env, out, timeout, exit_peak=None):
    """Run argv under GNU time in `out` (its output to out/last_run.out,
    stdin from stdin_path or /dev/null): (wall seconds, peak RSS KiB,
    output text, peak RSS KiB read at exit or None), or None if it failed or timed
    out. GNU time measures, as mimalloc-bench does: a child's peak RSS
    counts the process it was forked from, and time is small (Python would
    add its own 10+ MiB). With exit_peak (the path of bench/src/exit_peak.c
    built), the program runs under it as well, and that peak is the larger
    of its reading (VmHWM at the program's exit) and GNU time's."""
    out_path, time_path = os.path.join(out, "last_run.out"), os.path.join(out, "last_run.time")
    peak_path = os.path.join(out, "last_run.peak")
    if os.path.exists(peak_path):
        os.remove(peak_path)
    cmd = ["/usr/bin/time", "-q", "-o", time_path, "-f", "%e %M"] + ([exit_peak, peak_path] if exit_peak else []) + argv
    with open(out_path, "w") as output, open(stdin_path or os.devnull) as inp:
        child = subprocess.Popen(cmd, stdin=inp, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=out,
                                 start_new_session=True)
        try:
            status = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return None
    if status != 0:
        return None
    with open(out_path, errors="replace") as f:
        text = f.read()
    with open(time_path) as f:
        wall, rss = f.read().split()[-2:]
    at_exit = None
    if exit_peak and os.path.exists(peak_path):
        with open(peak_path) as f:
            at_exit = max(int(f.read()), int(rss))
    return float(wall), int(rss), text, at_exit


# ------------------------------------------------- rounds and ratio tables

def run_rounds(cases, allocs, rounds, run_one, out):
    """Every case under every allocator, the allocators back to back per
    case with their order rotated, `rounds` times; run_one(case, library
    copy, extra env) gives (metric, peak RSS KiB) or None for a failed run.
    Returns ({(case, allocator): [(metric, rss)]}, {(case, allocator): failures})."""
    samples, failures = {}, {}
    total, done, started = len(cases) * len(allocs) * rounds, 0, time.time()
    for rnd in range(rounds):
        for k, case in enumerate(cases):
            shift = (rnd + k) % len(allocs)
            for name, lib, extra_env in allocs[shift:] + allocs[:shift]:
                with fresh_copy(lib, out) as copy:
                    result = run_one(case, copy, extra_env)
                done += 1
                eta = (time.time() - started) / done * (total - done)
                if result is None:
                    failures[(case, name)] = failures.get((case, name), 0) + 1
                    print(f"[{done}/{total} eta {eta:4.0f}s] {case:15s} {name:12s} FAILED", file=sys.stderr)
                    continue
                samples.setdefault((case, name), []).append(result)
                print(f"[{done}/{total} eta {eta:4.0f}s] {case:15s} {name:12s} {result[0]:.3f} "
                      f"{result[1] / 1024:.1f} MiB", file=sys.stderr)
    return samples, failures


def medians(samples, fields=2):
    """The median of each of the first `fields` fields of every key's runs
    (None for a field some run lacks)."""
    def median(runs, i):
        values = [r[i] for r in runs if len(r) > i and r[i] is not None]
        return statistics.median(values) if len(values) == len(runs) else None
    return {key: tuple(median(runs, i) for i in range(fields)) for key, runs in samples.items()}


RATIO_TABLES = (("Time", 0), ("Peak RSS", 1))


def ratio_tables(cases, names, med, failures, baseline, tables=RATIO_TABLES):
    """Markdown: a table per (title, field of the medians), by default time
    and peak RSS: each case's ratio to the baseline per allocator,
    cagemalloc's ratio to the best peer, and the geometric means."""
    peers = [n for n in names if not n.startswith("cagemalloc")]

    def ratio(case, name, i):
        base, mine = med.get((case, baseline)), med.get((case, name))
        return mine[i] / base[i] if base and mine and base[i] and mine[i] is not None else float("nan")

    lines = []
    for title, i in tables:
        lines += [f"## {title}, ratio to {baseline} (lower is better)\n",
                  "| case | " + " | ".join(names) + " | cagemalloc / best peer |", "|---|" + "---|" * (len(names) + 1)]
        for case in cases:
            cells = [f"{ratio(case, n, i):.2f}" + (" (failed)" if failures.get((case, n)) else "") for n in names]
            # no peer in the run (--allocators of cagemalloc builds only): no best-peer ratio
            best = min(peers, key=lambda n: ratio(case, n, i) if (case, n) in med else float("inf")) if peers else "-"
            vs = ratio(case, "cagemalloc", i) / ratio(case, best, i)
            lines.append(f"| {case} | " + " | ".join(cells) + f" | **{vs:.2f}** ({best}) |")
        lines.append(f"| **geomean** | " + " | ".join(
            f"**{geomean([ratio(c, n, i) for c in cases]):.2f}**" for n in names) + " | |\n")
    if failures:
        lines.append("Failed runs (non-zero exit, crash or timeout; left out of the medians): " +
                     ", ".join(f"{n} on {c} ({k}x)" for (c, n), k in sorted(failures.items())) + ".\n")
    return lines
