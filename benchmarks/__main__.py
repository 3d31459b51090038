"""Run every benchmark and print one summary table of figures and ratios, each with its target where there is one.

    python -m benchmarks --quick                 # every benchmark in its quick mode (CI; a few minutes)
    python -m benchmarks                         # their default modes
    python -m benchmarks --only build,loader     # some of them
    python -m benchmarks --write-docs            # and write each one's section of docs/benchmarks.md

Each benchmark runs in this process through its `run(quick)` and reports its rows through its `figures(result)`;
one that fails is reported in the table and makes the exit status 1, after the others have run (its section of
the page is left as it was).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from benchmarks import docs
from benchmarks.common import Figure

BENCHMARKS = ("span_corruption", "mlm_masking", "objectives", "build", "dedup", "loader", "train_step", "remote",
              "segmentation", "hostile", "minhash", "tokenizer", "cleaning")


def run_one(name: str, quick: bool) -> tuple[list[Figure], float, bool | None]:
    """(figures, seconds, ok) of one benchmark, ok None when it was skipped; a failure becomes a figure, with its
    traceback on stderr."""
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        result = module.run(quick)
        figures, ok = (module.figures(result), True) if result else ([Figure("skipped", "no shared corpus")], None)
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
            label = labels[name] if k == 0 else ""
            print(f"{label:<{first}}{f.name:<{width}}{f.value:>16}  {f.target:<{target}}{met}".rstrip())
    print(f"total {sum(s for _, _, s in rows):.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark in its quick mode (CI)")
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    docs.add_arguments(parser)
    args = parser.parse_args()
    names = args.only.split(",")
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    rows, failed, sections = [], False, {}
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        figures, seconds, ok = run_one(name, args.quick)
        rows.append((name, figures, seconds))
        failed |= ok is False
        if ok:
            sections[name] = figures
    print_summary(rows, args.quick)
    if args.write_docs and sections:
        docs.write(args.write_docs, sections, "benchmarks")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
