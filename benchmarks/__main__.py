"""Run every benchmark and print one summary table of figures and ratios, each with its target where the
issue gives one.

    python -m benchmarks --quick                 # every benchmark in its quick mode (CI; a few minutes)
    python -m benchmarks                         # their default modes
    python -m benchmarks --only build,loader     # some of them

Each benchmark runs in this process through its `run(quick)`; one that fails is reported in the table
and makes the exit status 1, after the others have run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable
from typing import NamedTuple

BENCHMARKS = ("span_corruption", "mlm_masking", "build", "loader", "train_step", "segmentation", "hostile")


class Figure(NamedTuple):
    name: str
    value: str
    target: str = ""
    met: bool | None = None  # None: no target to meet


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def span_corruption(r: dict) -> list[Figure]:
    return [
        Figure("Numba 1 thread vs per-example NumPy", f"{r['numba_1t_vs_numpy']:.0f}x", ">= 100x", r["numba_1t_vs_numpy"] >= 100),
        Figure(f"Numba {r['threads']} threads vs 1 thread", f"{r['numba_all_vs_1t']:.2f}x", ">= 1.7x on 2 cores",
               r["numba_all_vs_1t"] >= 1.7),
        Figure("Numba, all threads", f"{r['numba_all_tokens_per_s'] / 1e6:.1f} M tokens/s"),
    ]


def mlm_masking(r: dict) -> list[Figure]:
    return [
        Figure("MLM --whole-word time / plain, 1 thread", f"{r['whole_word_cost_1t']:.2f}x", "<= 2x",
               r["whole_word_cost_1t"] <= 2),
        Figure(f"MLM --whole-word time / plain, {r['threads']} threads", f"{r['whole_word_cost']:.2f}x", "<= 2x",
               r["whole_word_cost"] <= 2),
    ]


def build(r: dict) -> list[Figure]:
    # a quick slice measures start-up more than throughput: its ratio is shown, the target judged on the whole corpus
    target = "<= 1.5x (whole corpus)" if r["quick"] else "<= 1.5x"
    rows = [Figure(f"build --seeds 4 vs tokenize-only, {x['mb']:.0f} MB", f"{x['ratio']:.2f}x", target,
                   None if r["quick"] else x["ratio"] <= 1.5) for x in r["runs"]]
    rss = [x["build_rss_mb"] for x in r["runs"]]
    if len(rss) > 1:
        rows.append(Figure("build peak RSS, largest / smallest corpus", ratio(rss[-1], rss[0]), "flat (<= 1.2x)",
                           rss[-1] <= 1.2 * rss[0]))
    return rows + [
        Figure("Numba compile paid by the first build", f"{r['cold_build_s'] - r['warm_build_s']:.1f} s"),
        Figure("--threads 1 and 2 byte-identical", str(r["threads_1_vs_2_identical"]), "True", r["threads_1_vs_2_identical"]),
        Figure("mlmprep --help", f"{r['help_s']:.2f} s", "< 0.5 s", r["help_s"] < 0.5),
    ]


def loader(r: dict) -> list[Figure]:
    rows = []
    for name in ("truncated", "untruncated"):
        m = r[name]
        pad, tps = m["padding_efficiency"], m["tokens_per_s"]
        rows += [
            Figure(f"padding efficiency, {name} rows: budget / fixed", f"{pad['budget']:.3f} / {pad['fixed']:.3f}"),
            Figure(f"loader tokens/s, {name} rows: budget vs fixed", ratio(tps["budget"], tps["fixed"])),
        ]
    return rows


def train_step(r: dict) -> list[Figure]:
    a, b = r["token_budget"], r["fixed_batch_size"]
    return [
        Figure("tiny T5 step tokens/s: budget vs fixed batch", ratio(a["tokens_per_s"], b["tokens_per_s"])),
        Figure("padding efficiency: budget / fixed batch", f"{a['padding_efficiency']:.3f} / {b['padding_efficiency']:.3f}"),
        Figure("tiny T5 on CPU tokens/s: mlmprep train vs HF Trainer",
               ratio(r["side_by_side"]["mlmprep_eager"]["tokens_per_s"], r["side_by_side"]["hf_trainer"]["tokens_per_s"])),
    ]


def segmentation(r: dict) -> list[Figure]:
    text, tokens = (r["methods"][m] for m in ("text", "tokens"))

    def pair(section: str, key: str, fmt: str) -> str:  # a run that diverged has no final evaluation: None
        return " / ".join("none (diverged)" if m[section][key] is None else fmt.format(m[section][key]) for m in (text, tokens))

    loss, accuracy = ([m["train"][key] for m in (text, tokens)] for key in ("final_loss", "final_accuracy"))
    evaluated = None not in loss + accuracy
    # a quick run (20 steps on 1 MB) keeps the code path alive; it is too short to test seed 002's claim
    smoke = r["settings"]["mode"] == "quick"
    where = " (default mode)" if smoke else " (seed 002)"

    def judged(met: bool) -> bool | None:
        return None if smoke else met

    return [
        Figure("token utilisation: text / tokens", pair("build", "token_utilisation", "{:.3f}")),
        Figure("windows cut inside a word: text / tokens", pair("build", "fragment_rate", "{:.1%}")),
        Figure("masked spans that are fragments: text / tokens", pair("build", "fragment_span_share", "{:.1%}")),
        Figure(f"validation loss after {tokens['train']['steps']} steps: text / tokens", pair("train", "final_loss", "{:.3f}"),
               "tokens lower" + where, judged(evaluated and loss[1] < loss[0])),
        Figure("validation token accuracy: text / tokens", pair("train", "final_accuracy", "{:.4f}"),
               "tokens higher" + where, judged(evaluated and accuracy[1] > accuracy[0])),
    ]


def hostile(r: dict) -> list[Figure]:
    from benchmarks.hostile import MAX_BUILD_S, MAX_READ_S, MAX_RSS_MB

    return [
        Figure(f"read one {r['mb']:.0f} MB line", f"{r['read_s']:.2f} s", f"< {MAX_READ_S} s", r["read_s"] < MAX_READ_S),
        Figure(f"build one {r['mb']:.0f} MB line", f"{r['build_s']:.0f} s", f"< {MAX_BUILD_S} s", r["build_s"] < MAX_BUILD_S),
        Figure("its peak RSS", f"{r['build_rss_mb']:.0f} MB", f"< {MAX_RSS_MB} MB", r["build_rss_mb"] < MAX_RSS_MB),
    ]


FIGURES: dict[str, Callable[[dict], list[Figure]]] = {
    "span_corruption": span_corruption, "mlm_masking": mlm_masking, "build": build, "loader": loader, "train_step": train_step,
    "segmentation": segmentation, "hostile": hostile,
}


def run_one(name: str, quick: bool) -> tuple[list[Figure], float, bool]:
    """(figures, seconds, ok) of one benchmark; a failure becomes a figure, with its traceback on stderr."""
    started = time.perf_counter()
    try:
        result = importlib.import_module(f"benchmarks.{name}").run(quick)
        figures = FIGURES[name](result) if result else [Figure("skipped", "no shared corpus")]
        ok = True
    except Exception as exc:  # report it and go on with the other benchmarks; the exit status says it failed
        traceback.print_exc()
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        figures, ok = [Figure("FAILED", f"{type(exc).__name__}: {first_line}"[:90])], False
    return figures, time.perf_counter() - started, ok


def print_summary(rows: list[tuple[str, list[Figure], float]], quick: bool) -> None:
    labels = {name: f"{name} ({seconds:.0f} s)" for name, _, seconds in rows}
    figures = [f for _, fs, _ in rows for f in fs]
    first = max(len("benchmark"), *(len(label) for label in labels.values())) + 2
    width = max(len("figure"), *(len(f.name) for f in figures)) + 2
    target = max(len("target"), *(len(f.target) for f in figures)) + 2
    print(f"\nbenchmark summary ({'quick' if quick else 'default'} modes)")
    print(f"{'benchmark':<{first}}{'figure':<{width}}{'value':>16}  {'target':<{target}}met")
    for name, figures, _ in rows:
        for k, f in enumerate(figures):
            met = "" if f.met is None else "yes" if f.met else "NO"
            print(f"{labels[name] if k == 0 else '':<{first}}{f.name:<{width}}{f.value:>16}  {f.target:<{target}}{met}".rstrip())
    print(f"total {sum(s for _, _, s in rows):.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark in its quick mode (CI)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    args = parser.parse_args()
    names = args.only.split(",")
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    rows, failed = [], False
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        figures, seconds, ok = run_one(name, args.quick)
        rows.append((name, figures, seconds))
        failed |= not ok
    print_summary(rows, args.quick)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
