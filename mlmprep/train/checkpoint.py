"""Checkpoints of a training run, RUN/checkpoint-{step}/:

    model/              transformers `save_pretrained` (config.json, model.safetensors) and the build's tokenizer
                        (tokenizer.json, tokenizer_config.json, special_tokens_map.json): a complete Hugging Face
                        model directory, which `--model` accepts too
    optimizer.pt        optimizer state (the learning rate is a pure function of the step: lr_at)
    rng.pt              torch / numpy / random states of every rank
    state.json          {"step", "epoch", "cursor", "world_size", "adapt", ...}: the loader position is (epoch,
                        batch cursor) in the plan of that world size
    train_config.json   the run's TrainConfig

The directory is written under a temporary name and renamed, so a crash never leaves a half checkpoint
under the real name; only the last `keep` are kept. Beside them RUN holds train_config.json (the base of
a `--resume`), metrics.jsonl and final_metrics.json.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import fields
from pathlib import Path

import numpy as np

from mlmprep.config import TrainConfig, to_dict
from mlmprep.errors import CacheError, ConfigError, disk_error
from mlmprep.format.write import write_hf_tokenizer, write_json

PREFIX = "checkpoint-"
CONFIG = "train_config.json"
# Options that may differ between a run and its --resume: they change how long it runs or what it logs,
# not the steps already taken. (A new --max-steps also moves the end of the decay unless --decay-steps is set.)
# --out is where the run is, however spelled, or wherever it was moved to. A mixture's new --weights or --mix apply
# from the step it resumes at (the checkpoint's state.json keeps the weights' history).
RESUMABLE = frozenset(
    {"data", "out", "resume", "epochs", "max_steps", "max_tokens", "eval_every", "validation", "log_every",
     "save_every", "keep_checkpoints", "compile", "max_bad_steps", "report_to", "weights", "mix", "cache_dir",
     "cache_limit", "prefetch_epochs", "fetch_threads", "fetch_bandwidth", "storage_options", "rehash_data"}
)


def checkpoints(run: str | Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    found = [p for p in Path(run).glob(PREFIX + "*") if p.is_dir() and p.name[len(PREFIX):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


def latest(run: str | Path) -> Path | None:
    found = checkpoints(run)
    return found[-1] if found else None


def run_options(cfg: TrainConfig) -> dict:
    """train_config.json's options. A run of one build leaves out the mixture's options and keeps --validation as
    one path (or null), so its file reads as before mixtures existed; a resume reads either form."""
    options = {key: value for key, value in to_dict(cfg).items() if key != "storage_options"}  # may hold credentials
    if not cfg.mixture:
        options = {key: value for key, value in options.items() if key not in ("sources", "weights", "mix")}
        options["validation"] = cfg.validation[0] if cfg.validation else None
    return options


def rng_state() -> dict:
    """This process's RNG states, as tensors and lists (loadable with weights_only=True)."""
    import torch

    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [name, keys.tolist(), pos, has_gauss, gauss],
        "random": [version, list(internal), gauss_next],
    }


def set_rng_state(state: dict) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["random"]
    random.setstate((version, tuple(internal), gauss_next))


def save(run: Path, state: dict, *, model, optimizer, tokenizer, max_length: int, cfg: TrainConfig, rank: int,
         world_size: int) -> Path:
    """Write checkpoint-{step} of the loop's `state` (its state.json, with the step) and delete all but the last
    cfg.keep_checkpoints; `tokenizer` (the build's, checked when the run began) and its transformers files for
    `max_length` go beside the weights, so that the model directory is complete for from_pretrained (AutoTokenizer
    and AutoModel alike). Every rank calls it: rank 0 writes, with every rank's RNG state, while the others wait."""
    import torch
    import torch.distributed as dist

    rngs = [rng_state()]
    if world_size > 1:
        rngs = [None] * world_size
        dist.all_gather_object(rngs, rng_state())
    step = state["step"]
    final = run / f"{PREFIX}{step}"
    if rank == 0:
        tmp = run / f".{PREFIX}{step}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(parents=True)
            model.save_pretrained(str(tmp / "model"))
            write_hf_tokenizer(tokenizer, tmp / "model", model_max_length=max_length)
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(rngs, tmp / "rng.pt")
            write_json(tmp / "state.json", state)
            write_json(tmp / CONFIG, run_options(cfg))
            os.replace(tmp, final)
        except Exception as exc:
            problem = disk_error(final, exc, "free some space or give --out a writable place, then resume with "
                                 "--resume from the last checkpoint")
            shutil.rmtree(tmp, ignore_errors=True)
            if problem is None:
                raise
            raise problem from None
        for old in checkpoints(run)[: -cfg.keep_checkpoints]:
            shutil.rmtree(old)
    if world_size > 1:
        dist.barrier()
    return final


def load(path: Path, state: dict, optimizer, *, rank: int, world_size: int, device) -> None:
    """Restore the optimizer and this rank's RNG states from checkpoint `path`, whose state.json is `state`.
    (The model's weights are loaded by `build_model(str(path), ...)`.)"""
    import torch

    if state["world_size"] != world_size:  # the batch plan, and so the loader position, depends on it
        raise ConfigError(f"{path}: saved by {state['world_size']} processes; resume it with the same number, "
                          f"not {world_size}")
    try:
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=device, weights_only=True))
    except Exception as exc:  # missing, truncated, or another optimizer's state
        raise damaged_run_file(path / "optimizer.pt", exc) from None
    try:
        set_rng_state(torch.load(path / "rng.pt", weights_only=True)[rank])
    except Exception as exc:
        raise damaged_run_file(path / "rng.pt", exc) from None


def read_json(path: Path) -> dict:
    """A JSON object the run wrote; a missing or broken one is a one-line error naming it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise damaged_run_file(path, exc) from None
    if not isinstance(value, dict):
        raise damaged_run_file(path, ValueError("not a JSON object"))
    return value


def damaged_run_file(path: Path, exc: Exception) -> CacheError:
    """The error for a damaged file of RUN: resume from the checkpoint before, or start a new run."""
    problem = "missing" if isinstance(exc, FileNotFoundError) else (str(exc).splitlines() or [type(exc).__name__])[0]
    owner = next((p for p in path.parents if p.name.startswith(PREFIX)), None)
    if owner is None:
        return CacheError(f"{path}: damaged ({problem}); the run's options are lost: start it again with a new --out")
    return CacheError(f"{path}: damaged ({problem}); delete {owner} to resume from the checkpoint before it, "
                      "or start again with a new --out")


def saved_config(run: str | Path) -> dict:
    """The options RUN was started with ({} if it has none): the base layer of a --resume. Less those its
    optimizer or schedule ignores, which a run started before they were refused may hold."""
    from mlmprep.config import TrainConfig

    path = Path(run) / CONFIG
    return TrainConfig.used(read_json(path)) if path.is_file() else {}


def check_resumable(saved: dict, cfg: TrainConfig) -> None:
    """Refuse to resume with options that would change the steps already taken."""
    now = to_dict(cfg)
    changed = sorted(f.name for f in fields(cfg)
                     if f.name not in RESUMABLE and f.name in saved and saved[f.name] != now[f.name])
    if changed:
        options = ", ".join("--" + k.replace("_", "-") for k in changed)
        raise ConfigError(
            f"--resume: {options} would change the run saved in {Path(cfg.out) / CONFIG}; "
            "drop them or start a new --out"
        )


def trim_metrics(run: Path, step: int) -> None:
    """Drop RUN/metrics.jsonl lines logged after `step`, the checkpoint a resume starts from: they are redone.
    From step 0 (no checkpoint yet) every line is redone, the first evaluation included."""
    path = run / "metrics.jsonl"
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if step and json.loads(line).get("step", 0) <= step]
        path.write_text("".join(kept), encoding="utf-8")


def finished(path: Path, state: dict, total: int) -> dict | None:
    """The run's final_metrics.json if checkpoint `path` (whose state.json is `state`) is at or past step
    `total` (a resume would train nothing), else None."""
    final = path.parent / "final_metrics.json"
    if state["step"] < total or not final.is_file():  # (no final metrics: killed after its last checkpoint; finish it)
        return None
    return json.loads(final.read_text(encoding="utf-8"))


def open_run(cfg: TrainConfig) -> Path | None:
    """Check RUN before any work: a non-empty RUN needs --resume. Returns the checkpoint to resume from."""
    run = Path(cfg.out)
    if run.exists() and not run.is_dir():
        raise CacheError(f"--out {run}: exists and is not a directory")
    busy = run.is_dir() and any(run.iterdir())
    if busy and not cfg.resume:
        if not (run / CONFIG).is_file():
            raise CacheError(f"--out {run}: not empty and not an mlmprep run (no {CONFIG}); choose another --out")
        if latest(run) is None:
            raise CacheError(f"--out {run}: holds a run that stopped before its first checkpoint, so there is nothing "
                             "to continue; pass --resume to start it again from step 0 with its saved options, or "
                             "choose another --out")
        raise CacheError(f"--out {run}: not empty; pass --resume to continue that run, or choose another --out")
    if cfg.resume:
        if not (run / CONFIG).is_file():
            fix = "it is not an mlmprep run: choose a new --out" if busy else "drop --resume to start one"
            raise CacheError(f"--resume: --out {run} holds no run to resume (no {CONFIG}); {fix}")
        check_resumable(saved_config(run), cfg)
    return latest(run) if cfg.resume else None
