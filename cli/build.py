"""`mlmprep build`, `mlmprep remask` and `mlmprep tokenizer train`: thin wrappers over mlmprep.builder.run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import mlmprep
from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, StorageOptions, cli_errors, note
from mlmprep.cli.options import config_options, flag_names, is_flag, option_fields
from mlmprep.config import BuildConfig

BUILD_EXAMPLES = """Examples:

  mlmprep build --seeds 4                               # the built-in sample corpus
  mlmprep build data/*.jsonl --text-column text --tokenizer tok.json --out cache/ \\
      --seeds 4 --input-length 512 --noise-density 0.15 --mean-span-length 3
  mlmprep build books/ --method text --out cache-text/  # the naive text-segmentation baseline
  mlmprep build corpus.txt --objective mlm --whole-word # BERT-style masking
  mlmprep build s3://corpora/c4/ --out s3://builds/c4  # from and to object storage (pip install 'mlmprep[s3]')
"""

# options a given --tokenizer makes meaningless
TRAINED_TOKENIZER_ONLY = ("vocab_size", "tokenizer_type", "tokenizer_train_chars")
# build's options that `tokenizer train` shares, declared once in BuildConfig
TOKENIZER_OPTIONS = ("text_column", "doc_sep", "storage_options", "vocab_size", "tokenizer_type",
                     "tokenizer_train_chars")

REMASK_EXAMPLES = """Examples:

  mlmprep remask mlmprep-data --seeds 8    # a 4-seed build gains seed-4 .. seed-7, masked from its stored windows
"""

INSPECT_EXAMPLES = """Examples:

  mlmprep inspect mlmprep-data                                 # the summary and 3 decoded rows of seed-0
  mlmprep inspect mlmprep-data --split validation --examples 10
  mlmprep inspect mlmprep-data --split windows                 # the windows before masking
  mlmprep inspect mlmprep-data --html report.html              # a page: spans under every seed, charts
  mlmprep inspect runs/a --html run.html                       # a training run's curves (and its build)
  mlmprep inspect s3://bucket/data                             # a build on object storage
"""

TOKENIZER_EXAMPLES = """Examples:

  mlmprep tokenizer train corpus.txt --vocab-size 32000 --out tok/        # writes tok/tokenizer.json
  mlmprep build corpus.txt --tokenizer tok/tokenizer.json --out data/     # build with it
"""

tokenizer_app = typer.Typer(help="Train a tokenizer (T5's Unigram; BERT's WordPiece; byte-level BPE).",
                            no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer")


@app.command(epilog=BUILD_EXAMPLES, cls=HelpCommand)
@cli_errors
@config_options(BuildConfig)
def build(
    corpus: Annotated[list[str] | None, typer.Argument(
        help="Files, directories or globs (.txt .jsonl .json .parquet .csv .arrow), local or URLs "
             "(s3://BUCKET/PREFIX/). None: the built-in sample.",
        show_default=False)] = None,
    *,
    config: Annotated[Path | None, typer.Option(help="JSON/YAML file of options; the command line overrides it.",
                                                rich_help_panel="Input", metavar="FILE")] = None,
    options: dict,
) -> None:
    """Build N differently seeded, masked Arrow datasets plus a validation split from a corpus."""
    from mlmprep.config_files import make_config, read_config_file
    from mlmprep.errors import ConfigError

    if corpus:
        options = {"corpus": tuple(corpus), **options}
    file_values = input_given(read_config_file(config), options) if config else {}
    cfg = make_config(BuildConfig, file_values, options, source="options")
    if cfg.tokenizer:  # refused rather than ignored: the user expects them to act
        for key in TRAINED_TOKENIZER_ONLY:
            if key in file_values or key in options:
                raise ConfigError(f"--{key.replace('_', '-')} applies only to a tokenizer mlmprep trains; "
                                  f"--tokenizer {cfg.tokenizer} brings its own vocabulary: give one of the two")
    if not STARTED_EARLY:  # else start_workers_before_parsing has done it, from the same options
        start_workers_early(cfg)
    from mlmprep.builder.mask import span_warning
    from mlmprep.builder.run import build as run_build
    from mlmprep.format.report import build_summary

    if cfg.objective == "span" and (warning := span_warning(cfg.input_length, cfg.noise_density,
                                                             cfg.mean_span_length)):
        typer.echo(warning)  # on stdout, before any work: a log file keeps it, an error stays stderr's one line
    result = run_build(cfg, log=note)
    if result.up_to_date:
        made_by, this = result.manifest.mlmprep_version, mlmprep.__version__
        version = "" if made_by == this else f", written by mlmprep {made_by}, this is {this}"
        typer.echo(f"{result.out}: up to date (same corpus and options{version}); --force rebuilds it")
        return
    typer.echo(build_summary(result.out, result.manifest))


def input_given(file_values, options: dict):
    """The --config file's options less the other input where the command line names one: corpus paths and
    --dataset are alternatives, so either on the command line replaces the file's other one (a dataset so
    replaced takes its --dataset-split along), as the command line overrides the file."""
    from mlmprep.config_files import Options

    given = options.keys() & {"corpus", "dataset"}
    other = {"corpus", "dataset"} - given if given else set()
    dropped = other | ({"dataset_split"} if "dataset" in other and "dataset" in file_values else set())
    return Options({k: v for k, v in file_values.items() if k not in dropped}, file_values.source)


STARTED_EARLY = False  # start_workers_before_parsing has called start_workers_early (the build command need not)
# build's options that take no value, both spellings of each; every other option takes one
FLAGS = frozenset(name for f in option_fields(BuildConfig) if is_flag(BuildConfig, f)
                  for name in flag_names(BuildConfig, f))


def scan_build_args(args: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """(positional arguments, {option: value, "" for a flag}) of `mlmprep build ARGS`, read without typer;
    None where this plain reading is not sure (a short option, an option missing its value)."""
    positional, options = [], {}
    it = iter(args)
    for arg in it:
        if arg == "--":
            positional += it
        elif arg == "-" or not arg.startswith("-"):
            positional.append(arg)
        elif arg in FLAGS:
            options[arg] = ""
        elif arg.startswith("--"):
            name, eq, value = arg.partition("=")
            value = value if eq else next(it, None)
            if value is None:
                return None
            options[name] = value
        else:
            return None
    return positional, options


def start_workers_before_parsing(args: list[str]) -> None:
    """For `mlmprep build ARGS`, run start_workers_early before typer parses ARGS (most of the parse is pydantic
    checking values), so that every worker starts that much sooner. Only a command line this plain reading is
    sure of: a config file, a dataset or a help request wait for the parse, and whatever it decides stands (the
    early start only ever makes a server the build would have started, or one that goes unused and ends with
    this process)."""
    scanned = scan_build_args(args)
    if scanned is None:
        return
    positional, options = scanned
    if options.keys() & {"--help", "--config", "--dataset"}:
        return
    from mlmprep.errors import MlmprepError

    try:
        cfg = BuildConfig(corpus=tuple(positional), tokenizer=options.get("--tokenizer"), force="--force" in options,
                          out=options.get("--out", BuildConfig.out), workers=int(options.get("--workers", 0)),
                          engine=options.get("--engine", "local"), shard_bytes=int(options.get("--shard-bytes", 0)))
    except (ValueError, MlmprepError):  # not a number, out of range: the parse reports it
        return
    global STARTED_EARLY
    start_workers_early(cfg)
    STARTED_EARLY = True


def start_workers_early(cfg) -> None:
    """Start the local workers' server (a forkserver that imports the pipeline, warms Numba and loads a given
    tokenizer: about a second of one core) before this process imports the pipeline itself, so that the two
    overlap and the first task starts sooner. Corpus files only (on object storage, taken to need the workers,
    since only the store can say their size): a build starts it itself in any case."""
    from mlmprep.builder.engine import make_engine
    from mlmprep.corpus.sources import resolve_sources
    from mlmprep.errors import MlmprepError

    if not cfg.corpus or cfg.dataset:
        return
    if not cfg.force and Path(cfg.out, "manifest.json").exists():  # mlmprep.format.write.MANIFEST
        return  # a build there may be up to date: mlmprep.builder.run.build checks that before it starts workers
    try:
        engine = make_engine(cfg.engine, cfg.workers, cfg.ray_address)
        if any("://" in pattern for pattern in cfg.corpus):  # sized only by listing the store: assume it is large
            input_bytes = 1 << 40
        else:
            input_bytes = sum(path.stat().st_size for path in resolve_sources(cfg.corpus))
    except (MlmprepError, OSError):
        return  # the build reports it, in its own order
    engine.prestart(input_bytes, cfg.shard_bytes, "mlmprep.builder.pipeline", cfg.tokenizer)  # no-op for 1 worker, Ray


@app.command(epilog=REMASK_EXAMPLES, cls=HelpCommand)
@cli_errors
def remask(
    directory: Annotated[str, typer.Argument(help="A directory (or URL) written by mlmprep build.")],
    *,
    seeds: Annotated[int, typer.Option(
        help="Total number of seeded splits wanted; new ones are masked from the stored windows.")],
    threads: Annotated[int, typer.Option(help="Cores for masking (0: all).")] = 0,
    storage_options: Annotated[str | None, StorageOptions] = None,
) -> None:
    """Add seeded splits to a build from its stored windows, without re-tokenizing."""
    import json

    from mlmprep import storage
    from mlmprep.builder.remask import remask as run_remask
    from mlmprep.format.load import parse_manifest, read_manifest

    options = storage.parse_options(storage_options)
    added = run_remask(directory, seeds, threads=threads, storage_options=options)
    if added:
        typer.echo(f"{directory}: added {', '.join(added)}")
    else:
        manifest = (parse_manifest(json.loads(storage.read_bytes(storage.join(directory, "manifest.json"), options)),
                                   directory) if storage.is_url(directory) else read_manifest(directory))
        typer.echo(f"{directory}: already has {len(manifest.seeds)} seeds (>= {seeds}); nothing to add")


@app.command("inspect", epilog=INSPECT_EXAMPLES, cls=HelpCommand)
@cli_errors
def inspect_build(
    directory: Annotated[str, typer.Argument(help="A directory or URL written by mlmprep build (or, with --html, a "
                                                  "training run's directory: mlmprep train --out).")],
    *,
    split: Annotated[str | None, typer.Option(
        help="Which split to show examples from (with --html: the seed split shown first). [default: seed-0]",
        metavar="SPLIT", show_default=False)] = None,
    examples: Annotated[int, typer.Option(help="How many decoded examples to show.")] = 3,
    html: Annotated[Path | None, typer.Option(
        help="Write a self-contained HTML report to this file instead: the summary, examples under every seed with "
             "their spans, charts; a training run's curves.", metavar="FILE", show_default=False)] = None,
    run: Annotated[Path | None, typer.Option(
        help="With --html: a training run's directory (mlmprep train --out) whose curves the report shows too.",
        metavar="RUN", show_default=False)] = None,
    storage_options: Annotated[str | None, StorageOptions] = None,
) -> None:
    """Summarise a build and show decoded examples with their masked spans (or write them as an HTML report)."""
    import contextlib

    from mlmprep.errors import ConfigError
    from mlmprep.format.load import check_splits, read_manifest, tokenizer_path
    from mlmprep.format.publish import fetched_build
    from mlmprep.format.report import build_summary, show_examples
    from mlmprep.storage import is_url, parse_options

    if html is None and run is not None:
        raise ConfigError("--run shows a training run in the HTML report: add --html FILE")
    if html is not None and examples < 0:
        raise ConfigError(f"--examples must be 0 or more, got {examples}")
    remote = is_url(directory)  # then a copy of the manifest, the tokenizer and the splits shown
    shown = None if html is not None else [split or "seed-0"]  # the report shows every seed
    with (fetched_build(directory, parse_options(storage_options), splits=shown) if remote
          else contextlib.nullcontext(Path(directory))) as local:
        if html is not None:
            from mlmprep.format.html import report_sources, write_report

            build, run = report_sources(local, run)
            written = write_report(html, build=build, run=run, examples_shown=examples, first_seed=split)
            typer.echo(f"wrote {written} ({written.stat().st_size / 1e6:.2f} MB): open it in a browser")
            return
        if (local / "train_config.json").is_file() and not (local / "manifest.json").is_file():
            raise ConfigError(f"{directory} is a training run, not a build: add --html FILE to see its curves")
        split = split or "seed-0"
        manifest = read_manifest(local)
        tokenizer_path(local, manifest)  # a damaged build is refused in one line, before anything is shown
        # what the summary shows of each split is checked against its files (from a store: the split fetched)
        check_splits(local, manifest, [name for name in (split,) if name in manifest.splits] if remote else None)
        summary = build_summary(local, manifest)
        text = f"{summary}\n{show_examples(local, manifest, split=split, n=examples)}"  # names the splits if not one
    typer.echo(text.replace(str(local), directory.rstrip("/")) if remote else text)


@tokenizer_app.command("train", epilog=TOKENIZER_EXAMPLES, cls=HelpCommand)
@cli_errors
@config_options(BuildConfig, only=TOKENIZER_OPTIONS)
def tokenizer_train(
    corpus: Annotated[list[str] | None, typer.Argument(help="Files, directories or globs, local or URLs. None: the "
                                                       "built-in sample.",
                                                       show_default=False)] = None,
    *,
    out: Annotated[str, typer.Option(help="The tokenizer.json file to write, local or a URL; a directory (or a name "
                                          "ending in /) gets DIR/tokenizer.json.", metavar="PATH",
                                     rich_help_panel="Output")] = "tokenizer.json",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.",
                                        rich_help_panel="Output")] = False,
    train_chars: Annotated[int | None, typer.Option("--train-chars", hidden=True,
                                                                rich_help_panel="Tokenizer")] = None,  # the old name
    options: dict,
) -> None:
    """Train a tokenizer: T5's Unigram (<pad>=0, </s>=1, <unk>=2, <mask>=3, <extra_id_0> highest), or BERT's
    WordPiece or a byte-level BPE (--tokenizer-type)."""
    from mlmprep.builder.tokenizer_file import train_tokenizer_file
    from mlmprep.config_files import make_config
    from mlmprep.errors import ConfigError
    from mlmprep.format.report import vocabulary_reached
    from mlmprep.storage import parse_options

    if train_chars is not None:
        if "tokenizer_train_chars" in options:
            raise ConfigError("--train-chars is the old name of --tokenizer-train-chars: give one of the two")
        typer.echo("note: --train-chars is now called --tokenizer-train-chars, as in `mlmprep build`", err=True)
        options = {**options, "tokenizer_train_chars": train_chars}
    cfg = make_config(BuildConfig, options, source="options")
    path, reached, used = train_tokenizer_file(
        corpus or (), out, vocab_size=cfg.vocab_size, text_column=cfg.text_column, doc_sep=cfg.doc_sep, force=force,
        train_chars=cfg.tokenizer_train_chars, tokenizer_type=cfg.tokenizer_type,
        storage_options=parse_options(cfg.storage_options))
    typer.echo(f"wrote {path}: {vocabulary_reached(reached, cfg.vocab_size)}, trained on {used['characters']:,} "
               f"characters of {used['documents']:,} documents")
