"""The README's Python example runs as written, on a real build of the tiny corpus."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tiny_build, tmp_path):
    (block,) = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict = {}
    code = block.replace('"mlmprep-data', '"' + str(tiny_build)).replace('"runs/hf"', repr(str(tmp_path / "hf")))
    exec(code, namespace)  # noqa: S102  (our own README)
    assert namespace["tensors"]["input_ids"].shape[1] == 32  # the tiny build's input length
    assert len(namespace["plan"]) > 0


def test_readme_opens_with_the_two_commands_ci_runs():
    (first_block,) = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)[:1]
    install, tests = first_block.strip().splitlines()
    assert install.startswith("pip install") and "mlmprep build" in install
    assert tests == "python -m pytest -q"
