"""What an install holds: every package folder of mlmprep/ and cli/ is named in pyproject.toml, cli/ installs as
mlmprep.cli (never as a top-level `cli`), and a wheel installed into a fresh environment runs from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def setuptools_table() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def package_folders() -> dict[str, Path]:
    """Every folder with an __init__.py under mlmprep/ and cli/, by the package name it installs as."""
    found = {}
    for top, name in (("mlmprep", "mlmprep"), ("cli", "mlmprep.cli")):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / top).parts
            found[".".join([name, *parts])] = init.parent
    return found


def test_every_package_folder_is_named_in_pyproject():
    table = setuptools_table()
    assert sorted(table["packages"]) == sorted(package_folders()), \
        "pyproject.toml's [tool.setuptools] packages must name every folder with an __init__.py, and only those"
    assert table["package-dir"] == {"mlmprep.cli": "cli"}


def test_a_wheel_installs_the_commands_as_mlmprep_cli_and_runs_from_any_directory(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("mlmprep-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"{package.replace('.', '/')}/{source.name}" for package, folder in package_folders().items()
                for source in folder.glob("*.py")}
    assert expected <= names, sorted(expected - names)
    assert "mlmprep/format/report.html" in names
    assert not {n for n in names if n.startswith("cli/")}, "a top-level package named cli in the wheel"

    env_dir = tmp_path / "env"  # the system's packages visible for the dependencies; mlmprep from the wheel
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([python, "-c", "import mlmprep.cli; print(mlmprep.cli.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(env_dir) and Path(where).parent.name == "cli", where
    shown = subprocess.run([env_dir / "bin" / "mlmprep", "--help"], cwd=elsewhere, env=env, capture_output=True,
                           text=True)
    assert shown.returncode == 0 and "build" in shown.stdout, shown.stderr


def test_the_installed_command_runs_from_any_directory(tmp_path):
    """The editable install of the README's first command: `mlmprep` outside the repository finds mlmprep.cli."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = Path(sys.executable).with_name("mlmprep")
    shown = subprocess.run([script if script.exists() else "mlmprep", "--help"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert shown.returncode == 0 and "build" in shown.stdout, shown.stderr
