"""The `mlmprep` command line. Each command lives in its own module and imports the library lazily,
so `mlmprep --help` answers without loading numba, datasets or torch."""

from __future__ import annotations

import gc
import os
import sys
from typing import Annotated

import typer

import mlmprep
from mlmprep.cli._util import INTERRUPTED, TERMINATED, OneLineErrors, stop_on_sigterm

HELP = """Pretraining data for T5- and BERT-style models.

\b
  mlmprep build --seeds 4            # built-in sample corpus -> ./mlmprep-data
  mlmprep inspect mlmprep-data       # what was built, with decoded examples
  mlmprep train mlmprep-data --model tiny --out runs/a
"""

app = typer.Typer(
    help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
    cls=OneLineErrors,
)


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"mlmprep {mlmprep.__version__}")
        raise typer.Exit()


@app.callback()
def app_options(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=show_version)] = False,
) -> None:
    """Options of `mlmprep` itself, before the command."""


NO_MATRICES = ("build", "remask", "inspect", "verify", "tokenizer", "cache")  # commands that multiply no matrices


def main() -> None:
    as_package_main()
    gc.set_threshold(mlmprep.GC_YOUNG, *gc.get_threshold()[1:])
    if sys.argv[1:2] and sys.argv[1] in NO_MATRICES:
        # NumPy's OpenBLAS starts a thread per core as it is imported, which spins a while on a core of its own in
        # every process that imports NumPy (here, the build's driver and its workers' server, which starts with
        # this environment); these commands multiply no matrices. A value the user set is kept.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if sys.argv[1:2] == ["build"]:
        from mlmprep.cli.build import start_workers_before_parsing

        start_workers_before_parsing(sys.argv[2:])
    stop_on_sigterm()
    try:
        app()
    except SystemExit as exc:
        training = sys.modules.get("mlmprep.tokenizer.train")  # loaded only by commands that train a tokenizer
        if exc.code in (INTERRUPTED, TERMINATED) and training is not None and training.abandoned_calls():
            # Cleaned up by now, so end at once, without the interpreter's shutdown (see abandoned_calls).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.code)
        raise
    finally:
        # At exit the interpreter's last garbage collection walks every object Numba and its compiler made,
        # about half a second after a build; all of them live until the end anyway, so it is skipped.
        gc.freeze()


def as_package_main() -> None:
    """Run as `python -m mlmprep` does, even from the `mlmprep` script that pip writes. A worker process that
    multiprocessing starts re-runs its parent's main script first (importing this CLI at each worker's start,
    on a build's critical path), but never a package's __main__ module, which that script is
    in all but name. Someone else's script that calls main() keeps its own behaviour."""
    import importlib.util
    from pathlib import Path

    script = sys.modules["__main__"]
    if script.__spec__ is None and Path(getattr(script, "__file__", None) or "").stem == "mlmprep":
        script.__spec__ = importlib.util.find_spec("mlmprep.__main__")


def _register() -> None:
    """Import the command modules; each adds its commands to `app`."""
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"mlmprep.cli.{name}")


COMMAND_MODULES: tuple[str, ...] = ("build", "train", "verify", "compare", "cache")


_register()
