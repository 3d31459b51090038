"""Setting a run up: check RUN and the data, find what a resume goes on from and how many steps to train, then
wire the model, optimizer, collator, validation sets and compiled forward into a `Run`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch.distributed as dist

from mlmprep.config import TrainConfig
from mlmprep.errors import CacheError
from mlmprep.format import cache as remote
from mlmprep.format.load import build_tokenizer, check_split_files, listed_data_files, read_manifest
from mlmprep.format.manifest import Manifest, TokenizerRecord
from mlmprep.format.publish import check_utf8_path
from mlmprep.format.write import write_json
from mlmprep.train import checkpoint, reporters
from mlmprep.train.adapt import Adapter
from mlmprep.train.batch import plan_stats
from mlmprep.train.collate import Collator
from mlmprep.train.epochs import epoch_plan, make_budget, make_epoch, planned_steps, user_limits
from mlmprep.train.evaluation import validation
from mlmprep.train.mixture import MixturePlan
from mlmprep.train.mixture_run import describe_mixture, mixture_digest, mixture_plan, mixture_validation
from mlmprep.train.model import build_model, parameter_count
from mlmprep.train.numerics import Guard
from mlmprep.train.optim import make_optimizer
from mlmprep.train.speed import plan_shapes, setup_device
from mlmprep.train.state import Epoch, Hook, Run, TrainState
from mlmprep.train.step import make_forward
from mlmprep.train.world import World, say, seed_everything, wrap_ddp


def check_run(cfg: TrainConfig, world: World) -> Path | None:
    """The checkpoint to resume from, if any. A non-empty RUN needs --resume: checked on every rank before
    anything is written, as are the paths train_config.json records."""
    resume_from = checkpoint.open_run(cfg)
    reporters.check(cfg)
    if world.size > 1:
        dist.barrier()
    for option, path in (("DATA", cfg.data), *(("DATA", p) for p in cfg.sources),
                         *(("--validation", p) for p in cfg.validation)):
        check_utf8_path(path, option)
    return resume_from


def resumed_seeds(cfg: TrainConfig, have: int, state: dict) -> int:
    """The number of seed splits a resumed run reads: those it started with (runs saved before this was
    recorded: the build's)."""
    started = state.get("seeds", have)
    if type(started) is not int or not 1 <= started <= have:
        raise CacheError(f"{cfg.data}: has {have} seed splits, but the run in {cfg.out} started with {started!r}; "
                         "resume it on the build it started with")
    return started


def say_seeds_added(cfg: TrainConfig, world: World, have: int, seeds: int) -> None:
    """Tell a resume that goes on training when a remask has added seed splits it will not read."""
    if seeds < have:
        say(world, f"{cfg.data}: has {have} seed splits now; this run goes on reading the {seeds} it started with "
                   f"(epoch e reads seed-{{e % {seeds}}}); a new run reads all {have}")


def check_same_data(cfg: TrainConfig, saved: dict, digest: str) -> None:
    """Refuse to resume on data other than the run's (runs saved before this was recorded are not checked)."""
    if saved.get("data", digest) != digest:
        raise CacheError(f"{cfg.data}: not the data the run in {cfg.out} trained on (its seed and validation files "
                         "differ); resume it with the build it started with, or start a new run with another --out")


def seeds_and_digest(cfg: TrainConfig, world: World, manifest: Manifest, saved: dict | None,
                     mix: MixturePlan | None = None) -> tuple[int, str]:
    """The number of seed splits the run reads and the digest of its files. A resume reads the seeds it started
    with (a remask since then does not change its epochs), and only on the data it started with."""
    n_seeds = len(manifest.seeds) if saved is None else resumed_seeds(cfg, len(manifest.seeds), saved)
    digest = manifest.identity(n_seeds) if mix is None else mixture_digest(mix)
    if saved is not None:
        check_same_data(cfg, saved, digest)
    return n_seeds, digest


def load_model(cfg: TrainConfig, resume_from: Path | None, objective: str, tok: TokenizerRecord, max_length: int):
    """cfg.model's initial weights, or the checkpoint's on a resume (a damaged one is a one-line error)."""
    if resume_from is None:
        return build_model(cfg.model, objective, tok, max_length=max_length)
    try:
        return build_model(str(resume_from), objective, tok, max_length=max_length)
    except Exception as exc:  # a truncated model.safetensors, a broken config.json
        raise checkpoint.damaged_run_file(resume_from / "model", exc) from None


def make_model_and_optimizer(cfg: TrainConfig, world: World, manifest: Manifest, resume_from: Path | None):
    """The model on the device, in training mode, with the same initial weights on every rank (a resume's are
    the checkpoint's), and its optimizer; then each rank's own seed, so dropout masks differ across ranks."""
    seed_everything(cfg.seed)
    model = load_model(cfg, resume_from, manifest.objective, manifest.tokenizer, manifest.input_length)
    model = model.to(world.device)
    model.train()  # from_pretrained (a resume, a checkpoint as --model) returns eval mode: dropout would be off
    optimizer = make_optimizer(model, cfg)
    seed_everything(cfg.seed + world.rank)
    return model, optimizer


def write_run(cfg: TrainConfig, world: World, step: int) -> None:
    """RUN with the run's options; metrics.jsonl keeps the lines up to `step`, those after it are redone."""
    if world.main:
        run = Path(cfg.out)
        run.mkdir(parents=True, exist_ok=True)
        write_json(run / checkpoint.CONFIG, checkpoint.run_options(cfg))
        checkpoint.trim_metrics(run, step)


def warn_schedule(cfg: TrainConfig, world: World, total: int) -> None:
    """Warn of a warmup or decay that the run's length makes meaningless."""
    if cfg.warmup_steps > total:
        say(world, f"warning: --warmup-steps {cfg.warmup_steps} is longer than the run ({total} steps): the learning "
                   f"rate never reaches --lr {cfg.lr:g}")
    if cfg.schedule in ("cosine", "linear") and 0 < cfg.decay_steps <= cfg.warmup_steps + 1:
        say(world, f"warning: --decay-steps {cfg.decay_steps} leaves no step to decay over after --warmup-steps "
                   f"{cfg.warmup_steps}: the learning rate falls from --lr to --min-lr {cfg.min_lr:g} at once")


def make_collator(cfg: TrainConfig, manifest: Manifest) -> Collator:
    """Batches of the build's rows, with its tokenizer's ids, the --max-*-len caps and --pad-to-multiple-of."""
    tok = manifest.tokenizer
    return Collator(manifest.objective, tok.pad_id, tok.decoder_start_id, max_encoder_len=cfg.max_encoder_len,
                    max_decoder_len=cfg.max_decoder_len, pad_to_multiple_of=cfg.pad_to_multiple_of,
                    vocab_size=tok.vocab_size)


def describe(cfg: TrainConfig, world: World, model, epoch: Epoch, total: int, state: TrainState,
             mix: MixturePlan | None = None) -> None:
    """The model, the data and the plan in two console lines (and a line per source of a mixture)."""
    stats = plan_stats(epoch.plan, epoch.split.enc_lengths, epoch.split.dec_lengths, make_budget(cfg))
    say(world, f"{type(model).__name__}: {parameter_count(model) / 1e6:.2f}M parameters on {world.size} x "
               f"{world.device.type}; {epoch.split.objective} data {cfg.data}")
    if mix is not None:
        describe_mixture(cfg, world, mix, stats, total, state)
        return
    say(world, f"tokens/step: {stats['tokens_per_batch']:.0f} real (budget {cfg.max_tokens_per_batch} padded, "
               f"padding efficiency {stats['padding_efficiency']:.3f}); steps/epoch: {len(epoch.plan)}; {total} steps "
               f"from step {state.step}; epoch e reads seed-{{e % {state.seeds}}}")


def check_needed_files(cfg: TrainConfig, manifest: Manifest, seeds: int, mix: MixturePlan | None):
    """Every file of the build the run will read, checked before its first step, so that none is found missing
    steps later: the tokenizer (loaded and returned: each checkpoint saves it) and, for a build on this machine,
    each seed split the run reads and validation, there at their sizes (a URL's are fetched and hashed as their
    epochs come)."""
    build = remote.local_build(cfg.data)
    tokenizer = build_tokenizer(build, manifest)
    if mix is None and build == Path(cfg.data):
        for name in manifest.seed_splits[:seeds] + ["validation"]:
            if name in manifest.splits:
                listed_data_files(build, name, check_split_files(build, manifest, name))
    return tokenizer


@dataclass(frozen=True)
class Opening:
    """What a run starts from: its build (a mixture's: the first source's manifest, with the longest rows of any),
    the checkpoint a resume goes on from and its state.json, the seed splits read, the data's digest and the steps
    to train; `done`: a run already trained that far, its final metrics."""

    manifest: Manifest
    resume_from: Path | None
    saved: dict | None
    mix: MixturePlan | None
    seeds: int
    digest: str
    total: int
    done: dict | None = None


def open_data(cfg: TrainConfig, world: World) -> Opening:
    """Check RUN, open the data (a URL through the cache), read what a resume goes on from and count the steps to
    train (the whole plan unless --max-steps)."""
    resume_from = check_run(cfg, world)
    manifest = read_manifest(remote.open_data(cfg, log=lambda line: say(world, line)))  # a URL: through the cache
    cfg.check_objective(manifest.objective)
    saved = checkpoint.read_json(resume_from / "state.json") if resume_from else None
    mix = mixture_plan(cfg, world, saved, saved["step"] if saved else 0)
    if mix is not None:  # the model takes the longest rows of any source
        manifest = replace(manifest, input_length=max(s.manifest.input_length for s in mix.mixture.sources))
    n_seeds, digest = seeds_and_digest(cfg, world, manifest, saved, mix)
    total = planned_steps(cfg, world, n_seeds, mix)
    opening = Opening(manifest, resume_from, saved, mix, n_seeds, digest, total)
    if saved is not None and (done := checkpoint.finished(resume_from, saved, total)) is not None:  # change nothing
        say(world, f"{Path(cfg.out)}: already trained to step {done['step']} of {total}; nothing to do (raise "
                   "--max-steps or --epochs to train further)")
        return replace(opening, done=done)
    if mix is None:  # after the check above: a finished run says only that
        say_seeds_added(cfg, world, len(manifest.seeds), n_seeds)
    return opening


def start(cfg: TrainConfig, world: World, opening: Opening, hook: Hook | None) -> tuple[Run, TrainState, Epoch]:
    """Set up for the loop: the loop's state, the model and optimizer (a resume restores the checkpoint's optimizer
    and RNG states), the data, then RUN, the device, the collator and the compiled forward; returns the run, its
    state and the epoch it goes on with."""
    manifest, resume_from, mix = opening.manifest, opening.resume_from, opening.mix
    state = TrainState.begin(world, opening.saved, opening.seeds, opening.digest)
    if mix is not None and state.cursor and state.cursor == len(mix.chunk(state.epoch).plan):  # cut by new weights
        state.epoch, state.cursor = state.epoch + 1, 0
    model, optimizer = make_model_and_optimizer(cfg, world, manifest, resume_from)
    adapter = Adapter(user_limits(cfg), grow_after=cfg.grow_after)
    if resume_from:
        checkpoint.load(resume_from, opening.saved, optimizer, rank=world.rank, world_size=world.size,
                        device=world.device)
        adapter.load_state_dict(state.adapt)
    # the data is opened before RUN is written: a damaged build leaves no RUN
    tokenizer = check_needed_files(cfg, manifest, state.seeds, mix)
    val = validation(cfg, manifest) if mix is None else mixture_validation(cfg, mix)
    split, plan = epoch_plan(cfg, world, state.epoch, state.seeds, mix, identity=state.data, rehash=True)
    write_run(cfg, world, state.step)
    total = opening.total
    warn_schedule(cfg, world, total)  # after every check that can fail, so that an error stays one line
    writer = reporters.open_writer(cfg, Path(cfg.out), state.step) if world.main else None
    setup_device(world.device)
    ddp = wrap_ddp(model, world) if world.size > 1 else model
    collator = make_collator(cfg, manifest)
    if not val:
        say(world, f"{(cfg.validation or [cfg.data])[0]}: no validation rows (built with --validation-fraction 0?); "
                   "evaluation is skipped")
    epoch = make_epoch(state.epoch, split, plan, collator, manifest, state.seeds, mix)
    describe(cfg, world, model, epoch, total, state, mix)
    shapes = plan_shapes(plan, split.enc_lengths, split.dec_lengths, world.rank, collator)
    forward = make_forward(model, cfg, world, manifest.objective, shapes)
    run = Run(cfg=cfg, world=world, out=Path(cfg.out), manifest=manifest, total=total, horizon=cfg.decay_steps or total,
              model=model, ddp=ddp, params=[p for p in model.parameters() if p.requires_grad], optimizer=optimizer,
              adapter=adapter, guard=Guard(cfg.max_bad_steps, cfg.out), collator=collator, forward=forward, val=val,
              writer=writer, hook=hook, tokenizer=tokenizer, mix=mix)
    return run, state, epoch
