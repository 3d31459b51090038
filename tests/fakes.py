"""A small fake build directory in the on-disk format `mlmprep build` writes, for tests of load, batch,
collate and train that should not depend on the build stage.

Rows are real span corruptions (or MLM maskings) of random windows, laid out simply: a window of L
tokens loses `noise` tokens in `spans` spans with T5's length arithmetic, so input_ids and labels have
exactly the lengths a real build gives. Tokens are drawn Zipf-like, so a model has something to learn.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

PAD, EOS, UNK, MASK = 0, 1, 2, 3
N_SENTINELS = 100  # <extra_id_k> has id vocab_size - 1 - k, as in T5
IGNORE = -100


def span_lengths(window: np.ndarray, density: float = 0.15, mean_span: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """(noise tokens, spans) per window length, T5's arithmetic (docs/masking.md); int64 arrays."""
    window = np.asarray(window, dtype=np.int64)
    noise = np.clip(np.round(window * density), 1, window - 1).astype(np.int64)
    spans = np.maximum(1, np.round(np.minimum(noise, window - noise) / mean_span)).astype(np.int64)
    return noise, spans


def _parts(rng: np.random.Generator, total: int, k: int) -> np.ndarray:
    """A random split of `total` into `k` positive parts."""
    cuts = np.sort(rng.choice(total - 1, size=k - 1, replace=False)) + 1 if k > 1 else np.zeros(0, np.int64)
    return np.diff(np.concatenate([[0], cuts, [total]]))


def span_row(rng, tokens: np.ndarray, noise: int, spans: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, labels) int32: kept runs and noise spans alternate, each span replaced by its sentinel."""
    keep, drop = _parts(rng, len(tokens) - noise, spans), _parts(rng, noise, spans)
    enc, dec, at = [], [], 0
    for k in range(spans):
        sentinel = vocab_size - 1 - k
        enc += [*tokens[at : at + keep[k]], sentinel]
        at += keep[k]
        dec += [sentinel, *tokens[at : at + drop[k]]]
        at += drop[k]
    return np.asarray(enc + [EOS], np.int32), np.asarray(dec + [EOS], np.int32)


def mlm_row(rng, tokens: np.ndarray, probability: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, labels) int32: ~15% of positions become <mask>, labels -100 elsewhere."""
    at = rng.choice(len(tokens), size=max(1, round(len(tokens) * probability)), replace=False)
    input_ids, labels = tokens.astype(np.int32), np.full(len(tokens), IGNORE, np.int32)
    labels[at], input_ids[at] = tokens[at], MASK
    return input_ids, labels


def fake_tokenizer(vocab_size: int):
    """A WordLevel tokenizer laid out like mlmprep's: <pad> </s> <unk> <mask>, pieces, sentinels on top."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    n_pieces = vocab_size - 4 - N_SENTINELS
    names = ["<pad>", "</s>", "<unk>", "<mask>"] + [f"w{i}" for i in range(n_pieces)]
    names += [f"<extra_id_{k}>" for k in reversed(range(N_SENTINELS))]
    tok = Tokenizer(models.WordLevel({name: i for i, name in enumerate(names)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([n for n in names if n.startswith("<")])
    return tok


def _save_split(path: Path, rows: list[tuple[np.ndarray, np.ndarray]], num_shards: int, dtypes: dict) -> dict:
    """save_to_disk the rows (fixed-size lists of `dtypes` when every row of a column has one length); manifest
    entry."""
    import datasets

    data = {"input_ids": [r[0] for r in rows], "labels": [r[1] for r in rows]}
    features = {}
    for name, column in data.items():
        widths = {len(r) for r in column}
        length = widths.pop() if len(widths) == 1 else -1
        features[name] = datasets.Sequence(datasets.Value(dtypes[name].name), length=length)
    datasets.Dataset.from_dict(data, features=datasets.Features(features)).save_to_disk(str(path),
                                                                                      num_shards=num_shards)
    files = [{"name": f.name, "bytes": f.stat().st_size, "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
             for f in sorted(path.glob("data-*.arrow"))]
    return {"rows": len(rows), "files": files}


def write_fake_build(directory, *, objective: str = "span", n_rows: int = 64, lengths=None, n_seeds: int = 2,
                     vocab_size: int = 160, seed: int = 0, window_length: int = 32, num_shards: int = 1,
                     format_version: int = 1) -> Path:
    """Write a build directory: manifest.json, tokenizer.json, seed-0 .. seed-{n_seeds-1}, validation.

    lengths: per-row window lengths (text segmentation, variable-length list columns); None gives n_rows
    windows of `window_length` tokens (token splitting, fixed-size list columns). Seed splits mask the
    same windows differently; validation has its own n_rows // 4 (at least 2) windows. Columns are stored
    as `format_version` stores them (int32 before 3).
    """
    from mlmprep.format.write import column_dtypes

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    windows = np.full(n_rows, window_length, np.int64) if lengths is None else np.asarray(lengths, np.int64)
    n_pieces = vocab_size - 4 - N_SENTINELS
    weights = 1.0 / np.arange(1, n_pieces + 1)
    rng = np.random.default_rng([seed, 0])
    n_val = max(2, len(windows) // 4)
    val_windows = rng.choice(windows, size=n_val)

    def draw(lengths):
        return [4 + rng.choice(n_pieces, size=int(n), p=weights / weights.sum()) for n in lengths]

    train_tokens, val_tokens = draw(windows), draw(val_windows)

    def masked(tokens, mask_seed):
        r = np.random.default_rng([seed, 1, mask_seed])
        if objective == "mlm":
            return [mlm_row(r, t) for t in tokens]
        noise, spans = span_lengths([len(t) for t in tokens])
        return [span_row(r, t, int(a), int(b), vocab_size) for t, a, b in zip(tokens, noise, spans)]

    seeds = [{"split": f"seed-{k}", "seed": 1000 + k} for k in range(n_seeds)]
    dtypes = column_dtypes(format_version, objective, vocab_size)
    splits = {s["split"]: _save_split(directory / s["split"], masked(train_tokens, s["seed"]), num_shards, dtypes)
              for s in seeds}
    splits["validation"] = _save_split(directory / "validation", masked(val_tokens, 999), num_shards, dtypes)

    tok = fake_tokenizer(vocab_size)
    tok.save(str(directory / "tokenizer.json"))
    longest = int(windows.max(initial=2))
    noise, spans = span_lengths(longest)
    enc_len, dec_len = (longest, longest) if objective == "mlm" else (longest - noise + spans + 1, noise + spans + 1)
    manifest = {
        "format_version": format_version,
        "mlmprep_version": "fake",
        "objective": objective,
        "method": "tokens" if lengths is None else "text",
        "input_length": int(enc_len),  # encoder tokens per row (the longest, for variable-length rows)
        "window_length": longest,
        "target_length": int(dec_len),
        "fixed_length": lengths is None,
        "tokenizer": {
            "file": "tokenizer.json",
            "sha256": hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest(),
            "vocab_size": vocab_size, "pad_id": PAD, "eos_id": EOS, "unk_id": UNK, "mask_id": MASK,
            "decoder_start_id": PAD, "sentinels": N_SENTINELS,
        },
        "seeds": seeds,
        "splits": splits,
        "config": {"objective": objective, "seeds": n_seeds, "seed": seed},
        "statistics": {},
        "timings": {},
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return directory


def list_metadata_files(build: Path) -> Path:
    """Add each split's datasets metadata (state.json, dataset_info.json) to the manifest of a write_fake_build
    build, with sizes and hashes, as mlmprep build lists them: what a reader that checks every file it fetches
    needs."""
    manifest = json.loads((build / "manifest.json").read_text())
    for name, entry in manifest["splits"].items():
        listed = {f["name"] for f in entry["files"]}
        entry["files"] += [{"name": p.name, "bytes": p.stat().st_size,
                            "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                           for p in sorted((build / name).glob("*.json")) if p.name not in listed]
    (build / "manifest.json").write_text(json.dumps(manifest))
    return build


class FakeTerminal:
    """stderr as a terminal: the progress bar draws into it."""

    def __init__(self):
        self.parts = []

    def isatty(self):
        return True

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def getvalue(self):
        return "".join(self.parts)
