"""`mlmprep remask`: more seeded splits for a finished build, masked from its stored windows (phase 2 without
the windows), wherever the build is (see destination.Destination.add_splits)."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from mlmprep.builder import mask
from mlmprep.builder.denoisers import Cursor, seed_rows
from mlmprep.builder.destination import destination
from mlmprep.builder.engine.base import Engine, run_tasks
from mlmprep.builder.engine.local import LocalEngine
from mlmprep.builder.masker import Masker
from mlmprep.builder.pipeline import RemaskTask, remask_file
from mlmprep.builder.staged import Layout
from mlmprep.config import MAX_SEEDS, BuildConfig, check_range
from mlmprep.config_files import make_config
from mlmprep.format.load import build_tokenizer, check_split_files, file_problem, read_manifest
from mlmprep.format.manifest import Manifest
from mlmprep.format.publish import publish, staging_dir
from mlmprep.format.write import (
    damaged,
    data_files,
    file_rows,
    finish_split,
    iter_rows_of_file,
    manifest_path,
    part_path,
    strict,
    write_json,
)
from mlmprep.tokenizer.encode import word_tables
from mlmprep.tokenizer.load import special_ids


def remask(out: str | Path, seeds: int, *, threads: int = 0, engine: Engine | None = None,
           storage_options: dict | None = None) -> list[str]:
    """Add splits seed-N .. seed-{seeds-1} to a build (a directory or a URL) from its stored windows, one task
    per windows data file (phase 2 without the windows); return their names."""
    check_range("--seeds", seeds, low=1, high=MAX_SEEDS)
    check_range("--threads", threads, low=0)  # before the build is read: refused even with nothing to add
    engine = engine or LocalEngine()
    return destination(out, storage_options or {}).add_splits(
        lambda local: add_seeds(local, seeds, threads=threads, engine=engine))


def add_seeds(out: Path, seeds: int, *, threads: int, engine: Engine) -> list[str]:
    """remask on the local directory `out`: mask its windows with the new seeds, publish each new split, then
    write the manifest that lists them (until then a failure takes them back)."""
    manifest = read_manifest(out)
    have = len(manifest.seeds)
    if seeds <= have:
        return []
    cfg = make_config(BuildConfig, BuildConfig.used(manifest.config), source=str(manifest_path(out)))
    tok = build_tokenizer(out, manifest)
    # new seeds in the build's own format: an older build keeps its int32 columns
    version = manifest.format_version
    modes = tuple(-1 if d["mode_id"] is None else d["mode_id"] for d in manifest.denoisers)
    masker = Masker(cfg, special_ids(tok), word_tables(tok), manifest.fixed, manifest.window_length, version, modes)
    files = windows_files(out, manifest)
    firsts = np.cumsum([0] + [file_rows(path) for path, _ in files])
    layout = Layout(cfg, str(out), engine.worker_threads(threads, len(files)), 0,
                    manifest.window_length, None, version, modes=modes)
    names = [f"seed-{k}" for k in range(have, seeds)]
    with contextlib.ExitStack() as stack:
        stages = {name: stack.enter_context(staging_dir(out / name)) for name in names}
        new = tuple((name, str(stages[name]), mask.row_seed(cfg.seed, k))
                    for k, name in zip(range(have, seeds), names))
        tasks = [RemaskTask(layout, str(path), record, i, int(firsts[i]), new)
                 for i, (path, record) in enumerate(files)]
        if layout.cut:
            tasks = with_cuts(tasks, masker.mixture, [file_tokens(path) for path, _ in files], new)
        masked = run_tasks(remask_file, tasks, engine=engine)
        for result in masked:
            masker.merge(result["masking"])
        publish_seeds(out, manifest, seeds, new, masked, masker)
    return names


def publish_seeds(out: Path, manifest: Manifest, seeds: int, new: tuple, masked: list[dict], masker: Masker) -> None:
    """Finish and publish each new split, then the manifest that lists them: the new splits count once it does,
    and until then a failure takes them back."""
    published = []
    grown = manifest.to_json()
    try:
        for (name, stage, seed) in new:
            grown["splits"][name] = finish_split(
                Path(stage), masker.widths, masker.dtypes,
                [(part_path(Path(stage), i), r["parts"][name]) for i, r in enumerate(masked)])
            publish(Path(stage), out / name)
            published.append(out / name)
            grown["seeds"].append({"split": name, "seed": seed})
        grown["statistics"] = {**grown.get("statistics", {}),
                               "masking": {**manifest.masking_stats, **masker.summary()}}
        grown["config"] = {**manifest.config, "seeds": seeds}
        write_json(manifest_path(out), Manifest.from_json(strict(grown), out).to_json())
    except BaseException:
        for path in published:
            shutil.rmtree(path, ignore_errors=True)
        raise


def windows_files(out: Path, manifest: Manifest) -> list[tuple[Path, dict | None]]:
    """The stored windows' data files in order, each with its manifest record, which its task checks the file's
    sha256 against: here every file of windows/ must be there at its recorded size, and state.json, which lists
    them, unchanged."""
    records = check_split_files(out, manifest, "windows")
    state = out / "windows" / "state.json"
    if problem := file_problem(state, records.get(state.name)):
        raise damaged(out, state, problem)
    return [(path, records.get(path.name)) for path in data_files(out / "windows")]


def file_tokens(path: Path) -> int:
    """Tokens in one windows data file."""
    return sum(int(rows.offsets[-1]) for rows in iter_rows_of_file(path, "tokens"))


def with_cuts(tasks: list[RemaskTask], mixture, tokens: list[int], new: tuple) -> list[RemaskTask]:
    """ul2 and prefix: each file's task with each new seed's rows that start in its windows, its first token and the
    files after it that those rows reach into."""
    starts = np.cumsum([0] + tokens)
    total = int(starts[-1])
    cursors = [Cursor(mixture, seed) for _, _, seed in new]
    out = []
    for i, task in enumerate(tasks):
        cuts = tuple(seed_rows(cursor, int(starts[i]), int(starts[i + 1]), total) for cursor in cursors)
        reach = max((cut.stop for cut in cuts), default=0)
        last = int(np.searchsorted(starts, reach, side="left"))  # files i+1 .. last-1 hold tokens before `reach`
        following = tuple((t.windows_file, t.record) for t in tasks[i + 1:last])
        out.append(replace(task, cuts=cuts, start=int(starts[i]), following=following))
    return out
