"""A mixture in the training run: its plan from the options and a resume's saved schedule, the identity of its
sources, the per-source losses and figures of the metrics lines, and the evaluation of each source's set."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from mlmprep.config import TrainConfig, source_spec
from mlmprep.errors import ConfigError
from mlmprep.format.load import check_split_files, open_split
from mlmprep.train import plots, reporters
from mlmprep.train.batch import Batch
from mlmprep.train.epochs import make_budget
from mlmprep.train.evaluation import eval_batches, evaluate, other_validation
from mlmprep.train.mixture import MixturePlan, open_mixture
from mlmprep.train.state import Run, TrainState, Window
from mlmprep.train.world import World, all_sum, record, say


def mixture_plan(cfg: TrainConfig, world: World, saved: dict | None, step: int) -> MixturePlan | None:
    """A mixture's plan (None for one build). A resume keeps the seeds and the weights' history it saved; new
    --weights or --mix apply from `step` on, every source going on from its place."""
    if not cfg.mixture:
        return None
    old = (saved or {}).get("mixture")
    if saved is not None and old is None:
        raise ConfigError(f"--resume: the run in {cfg.out} trained on one build; resume it on that build")
    mix = open_mixture(cfg.sources, weights=cfg.weights, mix=cfg.mix, seeds=old and old["seeds"])
    schedule = [(0, mix.weights.tolist())] if old is None else [(s, w) for s, w in old["schedule"]]
    if old is not None and old["names"] != mix.names:
        raise ConfigError(f"--resume: the run in {cfg.out} mixed {', '.join(old['names'])}, not "
                          f"{', '.join(mix.names)}; give the same builds in the same order")
    if schedule[-1][1] != mix.weights.tolist():
        say(world, f"mixture weights change at step {step}: " + ", ".join(
            f"{n} {a:.3f} -> {b:.3f}" for n, a, b in zip(mix.names, schedule[-1][1], mix.weights)) +
            "; every source goes on from where it is")
        schedule = [*(entry for entry in schedule if entry[0] < step), (step, mix.weights.tolist())]
    return mix.plan(make_budget(cfg), seed=cfg.seed, world_size=world.size, schedule=schedule)


def mixture_digest(mix: MixturePlan) -> str:
    """Manifest.identity of each source's files, with its name."""
    parts = [(s.name, s.manifest.identity(s.seeds)) for s in mix.mixture.sources]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def mixture_validation(cfg: TrainConfig, mix: MixturePlan) -> list[tuple[str, int | None, tuple]]:
    """A mixture's evaluation sets: (name, its source's index or None, (split, microbatches)), each source's own
    validation split that has rows, then each --validation [NAME=]DIR."""
    sets = []
    for i, source in enumerate(mix.mixture.sources):
        if getattr(source.manifest.split("validation"), "rows", 0):
            check_split_files(source.path, source.manifest, "validation")
            found = eval_batches(cfg, open_split(source.path / "validation", objective=mix.mixture.objective))
            if found is not None:
                sets.append((source.name, i, found))
    for spec in cfg.validation:
        name, path = source_spec(spec)
        if name == path.resolve().name:  # no NAME= given: the build's name, not its split's (validation)
            name = path.resolve().parent.name
        if name in {n for n, _, _ in sets}:
            raise ConfigError(f"--validation {spec}: the name {name} is taken; give it as OTHER_NAME=DIR")
        found = eval_batches(cfg, open_split(other_validation(path, cfg, mix.mixture.sources[0].manifest),
                                             objective=mix.mixture.objective))
        if found is not None:
            sets.append((name, None, found))
    return sets


def evaluate_mixture(run: Run, step: int) -> dict:
    """Evaluate each of a mixture's sets (eval/NAME/loss, eval/NAME/accuracy, and a ul2 set's per denoiser,
    eval/NAME/denoiser/D/loss, an mdlm set's per rate bucket) and their mean under the weights (eval_loss,
    eval_accuracy: over the sources' own sets), log it and show it as a table."""
    weights = run.mix.weights_at(max(step - 1, 0))
    metrics, rows, mean = {}, [], np.zeros(3)
    for name, source, (split, microbatches) in run.val:
        m = evaluate(run.model, split, microbatches, run.collator, run.world, run.cfg)
        metrics |= {f"eval/{name}/loss": m["eval_loss"], f"eval/{name}/accuracy": m["eval_accuracy"],
                    **{f"eval/{name}/{key[5:]}": value for key, value in m.items() if key.startswith("eval/")}}
        weight = None if source is None else float(weights[source])
        if weight is not None:
            mean += [weight * m["eval_loss"], weight * m["eval_accuracy"], weight]
        rows.append(f"  {name:<16}{'-' if weight is None else f'{weight:.3f}':>8}{m['eval_loss']:>10.4f}"
                    f"{m['eval_accuracy']:>10.4f}")
    if mean[2]:
        metrics |= {"eval_loss": mean[0] / mean[2], "eval_accuracy": mean[1] / mean[2]}
        rows.append(f"  {'weighted mean':<16}{'':>8}{mean[0] / mean[2]:>10.4f}{mean[1] / mean[2]:>10.4f}")
    record(run.out, run.world, step=step, **metrics)
    reporters.report(run.writer, {"step": step, **metrics})
    if run.world.main:
        plots.update(run.out)  # RUN/plots.png (validation: the weighted mean, when the sources have sets)
    say(run.world, "\n".join([f"step {step}: evaluation", f"  {'set':<16}{'weight':>8}{'loss':>10}{'accuracy':>10}",
                              *rows]))
    return metrics


def source_fields(run: Run, state: TrainState, window: Window | None = None) -> dict:
    """A mixture's per-source figures at the loop's position: window tokens trained, their achieved fraction and
    the target weight, the pass and the seed split the source reads; with `window`, its training loss over the
    window (summed over ranks; None when its rows had no label token)."""
    if run.mix is None:
        return {}
    sources = run.mix.mixture.sources
    chunk = run.mix.chunk(state.epoch)
    done, reading = chunk.progress(state.cursor, len(sources))
    target = run.mix.weights_at(max(state.step - 1, 0))
    losses = [None] * len(sources)
    if window is not None:
        none = window.source_loss is None  # no step applied since the last line
        groups = len(sources) * max(len(mixture_denoisers(run)), 1)
        loss = torch.zeros(groups, device=run.world.device) if none else window.source_loss
        targets = torch.tensor(np.zeros(groups) if none else window.source_targets, dtype=torch.float64,
                               device=run.world.device)
        sums = all_sum(run.world, torch.cat([loss.double().view(len(sources), -1).sum(1),
                                             targets.view(len(sources), -1).sum(1)])).tolist()
        losses = [a / b if b else None for a, b in zip(sums[: len(sources)], sums[len(sources):])]
    out = {}
    for i, source in enumerate(sources):
        out |= {f"{source.name}/tokens": int(done[i]), f"{source.name}/fraction": float(done[i] / max(done.sum(), 1)),
                f"{source.name}/target": float(target[i]), f"{source.name}/pass": int(max(reading[i], 0)),
                f"{source.name}/seed": source.seed_name(int(max(reading[i], 0)))}
        if window is not None:
            out[f"{source.name}/loss"] = losses[i]
    return out


def mixture_denoisers(run: Run) -> list[str]:
    """The denoisers every build of a ul2 or prefix mixture names alike, in order (its losses are then logged per
    denoiser too); [] for builds without denoisers or with different ones."""
    names = {tuple(source.manifest.denoiser_names()) for source in run.mix.mixture.sources}
    return list(names.pop()) if len(names) == 1 else []


def source_sums(run: Run) -> torch.Tensor:
    """A step's summed token losses per source of a mixture (per source and denoiser where they share denoisers: see
    mixture_denoisers), zero on the device; accumulate() adds each row's."""
    groups = len(run.mix.mixture.sources) * max(len(mixture_denoisers(run)), 1)
    return torch.zeros(groups, dtype=torch.float64, device=run.world.device)


def add_source_losses(run: Run, batch: Batch, groups: np.ndarray, targets: np.ndarray, sums: torch.Tensor,
                      window: Window) -> None:
    """Add an applied step's per-group losses (`sums`: a mixture's sources, a ul2 build's denoisers) and this rank's
    label tokens per group to `window`."""
    mine = [mb.rows for mb in batch.ranks[run.world.rank] if not mb.padding]
    mine = np.concatenate(mine) if mine else np.zeros(0, np.int64)
    window.add_sources(sums, np.bincount(groups[mine], weights=targets[mine], minlength=len(sums)))


def denoiser_fields(run: Run, window: Window) -> dict:
    """A ul2 or prefix run's training loss per denoiser over the window (train/denoiser/NAME/loss, summed over
    ranks and over a mixture's sources; None for a denoiser none of whose rows trained in it); {} for the others."""
    names = run.manifest.denoiser_names() if run.mix is None else mixture_denoisers(run)
    if not names or window.source_loss is None:
        return {}
    loss = window.source_loss.double().view(-1, len(names)).sum(0)
    targets = torch.tensor(window.source_targets, dtype=torch.float64, device=run.world.device)
    sums = all_sum(run.world, torch.cat([loss, targets.view(-1, len(names)).sum(0)])).tolist()
    return {f"train/denoiser/{name}/loss": a / b if b else None
            for name, a, b in zip(names, sums[: len(names)], sums[len(names):])}


def describe_mixture(cfg: TrainConfig, world: World, mix: MixturePlan, stats: dict, total: int,
                     state: TrainState) -> None:
    """The plan of a mixture in a console line, and a line per source: its weight, size, seeds and path."""
    say(world, f"tokens/step: {stats['tokens_per_batch']:.0f} real (budget {cfg.max_tokens_per_batch} padded, "
               f"padding efficiency {stats['padding_efficiency']:.3f}); {total} steps from step {state.step}; "
               f"a mixture of {len(mix.mixture.sources)} builds, weights = fractions of training tokens:")
    weights = mix.weights_at(state.step)
    for source, weight in zip(mix.mixture.sources, weights):
        say(world, f"  {source.name:<16} {weight:6.3f}  {source.tokens:>14,} window tokens a pass, pass p reads "
                   f"seed-{{p % {source.seeds}}}  {source.path}")
