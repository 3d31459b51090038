"""Tokenizer training: mlmprep's trainers beside `tokenizers`' (Unigram, WordPiece) and SentencePiece's, side by side.

    python -m benchmarks.tokenizer              # 2 MB of each corpus, vocabulary 8,000; a 3 MB build; the scale
                                                # table at 1 and 10 MB (about a quarter of an hour)
    python -m benchmarks.tokenizer --quick      # 0.4 MB of each, vocabulary 4,000; a 1 MB build; one cell (CI)
    python -m benchmarks.tokenizer --full       # the scale table's 100 MB row too (hours on 2 cores)

Per corpus (the shared kjv.txt and pydocs.txt, and a CJK text made from kjv.txt: each English word a word of one
or two Han characters, none spaced, from glibc's pinyin collation list, so Zipf's law and the verse structure are
real and the script is CJK), each trainer learns from the same first nine tenths of the lines (up to the sample
size), in a process of its own on 2 cores with every trainer's libraries loaded (as in a build): its wall and CPU
time (the process and its children), the vocabulary it reached, and tokens per character on the held-out last
tenth. The Unigram trainers: mlmprep's, `tokenizers`' UnigramTrainer (2 threads) and SentencePiece called directly
with mlmprep's options, its fixed 8 threads included, so that their ratio is mlmprep's own cost (the child
process, the feeding, the conversion). The WordPiece trainers: mlmprep's (SentencePiece's BPE on BERT's words) and
`tokenizers`' WordPieceTrainer (2 threads), which mlmprep used before. Then a default `mlmprep build` of a 3 MB
corpus (pydocs) as a fresh installation's first build (an empty Numba cache: its kernels are compiled then) and
again, and the share of each one's time spent training the tokenizer.

Then the scale table: `mlmprep tokenizer train` on a sample of 1, 10 or 100 MB (the whole file as its sample) at
vocabularies 4k to 32k, against SentencePiece's own trainer with its defaults and 2 threads on the same file (CPU
time, the process and its children) and against the `tokenizers` UnigramTrainer on its lines (tokens per character
on held-out text). The samples are pydocs' first nine tenths of lines, then the same lines with their words
swapped within blocks of equally common words (a new variant for each repetition: the same words and word
frequencies, new lines), distinct lines only; held out: pydocs' last tenth. The CPU target (1.3x) is set for
samples of 5 MB and more; each side's start, timed on a sample of 2,000 characters, is shown beside the 1 MB row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, compile_bytecode, print_figures, ratio

THREADS = 2
SCALE_VOCABS = (4000, 8000, 16000, 32000)
SCALE_MB = (1, 10, 100)  # 100: --full only
TARGET_FROM_MB = 5  # the 1.3x CPU target is for samples this large and larger; on a smaller one each side's
# start (startup_cpu) is much of its second, and the row is shown beside that start
STARTUP_CHARS = 2000  # the sample that times each side's start
SWAP_BLOCK = 16  # a varied repetition swaps each word with another among 16 of about its frequency
WORD = re.compile(r"[A-Za-z]+")
SPM_DEFAULTS = """import sys, sentencepiece as spm
spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2], vocab_size=int(sys.argv[3]),
                               num_threads=2, hard_vocab_limit=False, minloglevel=2)
"""  # SentencePiece's defaults and 2 threads; hard_vocab_limit off only so that a small sample ends, as mlmprep's
TOKENIZERS_UNIGRAM = """import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
tok = Tokenizer(models.Unigram())
tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
trainer = trainers.UnigramTrainer(vocab_size=int(sys.argv[3]), special_tokens=["<pad>", "</s>", "<unk>", "<mask>"],
                                  unk_token="<unk>", show_progress=False)
with open(sys.argv[1], encoding="utf-8") as f:
    tok.train_from_iterator((line.rstrip("\\n") for line in f), trainer)
tok.save(sys.argv[2])
"""
TRAINERS = ("mlmprep", "tokenizers", "sentencepiece", "mlmprep-wordpiece", "tokenizers-wordpiece")
LIBRARIES = ("sentencepiece", "tokenizers", "mlmprep.tokenizer.train")  # it imports the unigram and wordpiece trainers
HANZI_LIST = Path("/usr/share/i18n/locales/iso14651_t1_pinyin")  # glibc: 20,448 Han characters in pinyin order
HANZI_WORDS = 2500  # the commonest words get a character each; the rest two of those characters


def hanzi() -> list[str]:
    text = HANZI_LIST.read_text(encoding="utf-8")
    chars = dict.fromkeys(chr(int(h, 16)) for h in re.findall(r"<U([0-9A-F]{4,5})>", text))
    return [c for c in chars if "\u4e00" <= c <= "\u9fff"]


def cjk_corpus(kjv: Path, out: Path) -> Path:
    """kjv.txt with each word replaced by a Han word (by frequency rank), spaces dropped, punctuation in CJK."""
    chars = hanzi()
    pool = [chars[(k * 7919) % len(chars)] for k in range(HANZI_WORDS)]
    lines = kjv.read_text(encoding="utf-8").split("\n")
    counts = Counter(w for line in lines for w in re.findall(r"[A-Za-z']+", line.lower()))
    word = {}
    for rank, (w, _) in enumerate(counts.most_common()):
        word[w] = pool[rank] if rank < HANZI_WORDS else pool[rank % HANZI_WORDS] + pool[(rank // 7) % HANZI_WORDS]
    punct = str.maketrans({",": "，", ".": "。", ":": "：", ";": "；", "?": "？", "!": "！"})
    cipher = [re.sub(r"[A-Za-z']+", lambda m: word[m.group(0).lower()], line).replace(" ", "").translate(punct)
              for line in lines]
    out.write_text("\n".join(cipher), encoding="utf-8")
    return out


def split(corpus: Path, sample_chars: int) -> tuple[list[str], list[str]]:
    """(training lines: the first nine tenths, at most sample_chars characters; held-out lines: the last tenth)."""
    lines = [line for line in corpus.read_text(encoding="utf-8").split("\n") if line.strip()]
    cut = len(lines) * 9 // 10
    train, size = [], 0
    for line in lines[:cut]:
        if size >= sample_chars:
            break
        train.append(line)
        size += len(line)
    return train, lines[cut:]


def train_one(trainer: str, train: list[str], vocab: int):
    """Train with `trainer`; returns an encode(list of text) -> token count function and the vocabulary reached."""
    if trainer in ("mlmprep", "mlmprep-wordpiece"):
        from mlmprep.tokenizer.load import N_SENTINELS
        from mlmprep.tokenizer.train import train_tokenizer

        kind = "wordpiece" if trainer == "mlmprep-wordpiece" else "unigram"
        tok = train_tokenizer(train, vocab + N_SENTINELS, kind=kind)
        reached = tok.get_vocab_size() - N_SENTINELS
        return lambda texts: sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)), reached
    if trainer == "tokenizers-wordpiece":  # mlmprep's WordPiece trainer until SentencePiece's BPE replaced it
        from tokenizers import trainers

        from mlmprep.tokenizer import wordpiece as wp

        tok = wp.wordpiece_tokenizer({name: i for i, name in enumerate(wp.BERT_SPECIALS)})
        tok.train_from_iterator(train, trainers.WordPieceTrainer(
            vocab_size=vocab, special_tokens=list(wp.BERT_SPECIALS), show_progress=False))
        return lambda texts: sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)), \
            tok.get_vocab_size()
    if trainer == "tokenizers":  # mlmprep's trainer until SentencePiece replaced it
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        tok.train_from_iterator(train, trainers.UnigramTrainer(
            vocab_size=vocab, special_tokens=["<pad>", "</s>", "<unk>", "<mask>"], unk_token="<unk>"))
        return lambda texts: sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)), \
            tok.get_vocab_size()
    import io

    import sentencepiece as spm

    from mlmprep.tokenizer.unigram import SPM_OPTIONS, seed_pieces

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(train), model_writer=model, vocab_size=vocab,
                                   **{**SPM_OPTIONS, "minloglevel": 2,
                                      "seed_sentencepiece_size": seed_pieces(vocab, sum(map(len, train)))})
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return lambda texts: sum(map(len, sp.encode(texts))), sp.get_piece_size()


def measure_one(trainer: str, corpus: Path, sample_chars: int, vocab: int) -> dict:
    """In this process: train, time it (wall; CPU of this process and its children), count held-out tokens. Every
    trainer's libraries are loaded before the clock starts, as a build has them: the figures are training alone."""
    import importlib

    for module in LIBRARIES:
        importlib.import_module(module)
    train, held = split(corpus, sample_chars)

    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    wall, started = time.perf_counter(), cpu()
    count, reached = train_one(trainer, train, vocab)
    wall, used = time.perf_counter() - wall, cpu() - started
    return {"wall_s": wall, "cpu_s": used, "vocab": reached, "train_chars": sum(map(len, train)),
            "tokens_per_char": count(held) / sum(map(len, held))}


def measure(trainer: str, corpus: Path, sample_chars: int, vocab: int) -> dict:
    """measure_one in a fresh process on THREADS cores, so that no trainer inherits another's threads or memory."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(THREADS), "OMP_NUM_THREADS": str(THREADS)}
    cmd = [sys.executable, "-m", "benchmarks.tokenizer", "--one", trainer, str(corpus), str(sample_chars), str(vocab)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{trainer} on {corpus.name} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def build_share(corpus: Path, chars: int, work: Path) -> dict:
    """A default `mlmprep build` (one seed) of the first `chars` characters of `corpus`, twice with a Numba cache of
    its own: the first as a fresh installation's first build (its kernels compiled then), the second a rebuild
    (`--force`, the tokenizer trained again); each one's tokenizer training and total seconds, and the load
    average around them (the shares move with the machine's load)."""
    text = corpus.read_text(encoding="utf-8")[:chars]
    source = work / f"{corpus.stem}-{chars // 1_000_000}mb.txt"
    source.write_text(text, encoding="utf-8")
    out, env = work / "build", {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-cache")}
    runs, load = [], os.getloadavg()[0]
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "mlmprep", "build", str(source), "--out", str(out), "--seeds", "1",
                        "--force"], check=True, capture_output=True, env=env)
        timings = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings"]
        runs.append({"train_tokenizer_s": timings["train_tokenizer_s"], "total_s": timings["total_s"]})
    return {"corpus_mb": len(text.encode()) / 1e6, "first": runs[0], "rebuild": runs[1],
            "load": (load + os.getloadavg()[0]) / 2}


def repetitions(lines: list[str]) -> Iterator[str]:
    """`lines`, then SWAP_BLOCK - 1 varied repetitions of them: in the k-th each word (ASCII letters) is swapped
    for the one k places further in its block of SWAP_BLOCK words of neighbouring frequency rank, so new lines of
    the same words at about the same frequencies."""
    counts = Counter(w for line in lines for w in WORD.findall(line))
    ranked = [w for w, _ in counts.most_common()]
    ranked = ranked[: len(ranked) - len(ranked) % SWAP_BLOCK]
    yield from lines
    for k in range(1, SWAP_BLOCK):
        swap = {w: ranked[r - r % SWAP_BLOCK + (r + k) % SWAP_BLOCK] for r, w in enumerate(ranked)}
        for line in lines:
            yield WORD.sub(lambda m, swap=swap: swap.get(m.group(0), m.group(0)), line)


def scale_samples(work: Path, sizes: list[int]) -> tuple[dict[int, Path], list[str]]:
    """({MB: a file of that many MB of distinct lines}, the held-out lines): pydocs' first nine tenths, then its
    varied repetitions, the first lines of them that make each size; held out: pydocs' last tenth."""
    train, held = split(CORPORA / "pydocs.txt", 1 << 62)
    lines, seen, size, files = repetitions(train), set(), 0, {}
    with open(work / "pydocs-scale.txt", "w", encoding="utf-8") as out:
        for mb in sorted(sizes):
            while size < mb * 1_000_000:
                line = next(lines, None)
                if line is None:
                    raise RuntimeError(f"{mb} MB is more than {SWAP_BLOCK} varied repetitions of pydocs hold")
                if line not in seen:
                    seen.add(line)
                    out.write(line + "\n")
                    size += len(line.encode()) + 1
            out.flush()
            files[mb] = work / f"pydocs-{mb}mb.txt"
            shutil.copyfile(out.name, files[mb])
    return files, held


def child_cpu(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds of the child process and its descendants, wall seconds) of a command run on THREADS threads."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(THREADS), "OMP_NUM_THREADS": str(THREADS)}
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - wall
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {done.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def scale_cell(sample: Path, held: list[str], vocab: int, work: Path) -> dict:
    """One cell of the scale table: CPU and wall seconds of `mlmprep tokenizer train` and of SentencePiece's
    defaults on `sample`, and tokens per character on `held` of mlmprep's and of the tokenizers trainer's."""
    from tokenizers import Tokenizer

    from mlmprep.tokenizer.load import N_SENTINELS

    ours, theirs = work / "mlmprep.json", work / "tokenizers.json"
    cpu, wall = child_cpu([sys.executable, "-m", "mlmprep", "tokenizer", "train", str(sample), "--out", str(ours),
                           "--force", "--vocab-size", str(vocab + N_SENTINELS), "--tokenizer-train-chars",
                           str(1 << 40)])
    spm_cpu, spm_wall = child_cpu([sys.executable, "-c", SPM_DEFAULTS, str(sample), str(work / "spm"), str(vocab)])
    hf_cpu, _ = child_cpu([sys.executable, "-c", TOKENIZERS_UNIGRAM, str(sample), str(theirs), str(vocab)])
    chars = sum(map(len, held))

    def per_char(path: Path) -> float:
        tok = Tokenizer.from_file(str(path))
        return sum(len(e.ids) for e in tok.encode_batch(held, add_special_tokens=False)) / chars

    return {"cpu_s": cpu, "wall_s": wall, "spm_cpu_s": spm_cpu, "spm_wall_s": spm_wall, "tokenizers_cpu_s": hf_cpu,
            "tokens_per_char": per_char(ours), "tokenizers_tokens_per_char": per_char(theirs)}


def startup_cpu(work: Path, held: list[str]) -> dict:
    """CPU seconds of `mlmprep tokenizer train` and of SentencePiece's defaults on a sample of STARTUP_CHARS
    characters: each side's start (the interpreter, its imports, mlmprep's child process), which a run on a small
    sample pays as a large share."""
    from mlmprep.tokenizer.load import N_SENTINELS

    sample, chars = work / "startup.txt", 0
    with open(sample, "w", encoding="utf-8") as out:
        for line in held:
            if chars >= STARTUP_CHARS:
                break
            out.write(line + "\n")
            chars += len(line) + 1
    vocab = SCALE_VOCABS[0]
    return {"mlmprep": min(child_cpu([sys.executable, "-m", "mlmprep", "tokenizer", "train", str(sample), "--out",
                                      str(work / "startup.json"), "--force", "--vocab-size",
                                      str(vocab + N_SENTINELS)])[0] for _ in range(3)),
            "sentencepiece": min(child_cpu([sys.executable, "-c", SPM_DEFAULTS, str(sample), str(work / "spm"),
                                            str(vocab)])[0] for _ in range(3))}


def scale_table(work: Path, quick: bool, full: bool) -> dict:
    """The scale table's cells ({"MB/vocab": scale_cell}), each side's start, and the load average around them."""
    sizes = [1] if quick else [mb for mb in SCALE_MB if full or mb < 100]
    vocabs = SCALE_VOCABS[:1] if quick else SCALE_VOCABS
    files, held = scale_samples(work, sizes)
    cells, load = {}, os.getloadavg()[0]
    startup = startup_cpu(work, held)
    for mb in sizes:
        for vocab in vocabs:
            cells[f"{mb}/{vocab}"] = scale_cell(files[mb], held, vocab, work)
            print(f"scale {mb} MB vocab {vocab}", json.dumps(cells[f"{mb}/{vocab}"]), file=sys.stderr)
    return {"cells": cells, "startup": startup, "load": (load + os.getloadavg()[0]) / 2}


def run(quick: bool = False, full: bool = False) -> dict:
    if not (CORPORA / "kjv.txt").is_file():
        return {}
    compile_bytecode()
    sample, vocab = (400_000, 4000) if quick else (2_000_000, 8000)
    results: dict = {"sample_chars": sample, "vocab": vocab, "threads": THREADS, "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-tokenizer-") as tmp:
        corpora = {"kjv": CORPORA / "kjv.txt", "pydocs": CORPORA / "pydocs.txt"}
        if HANZI_LIST.is_file():
            corpora["cjk"] = cjk_corpus(CORPORA / "kjv.txt", Path(tmp) / "cjk.txt")
        for name, path in corpora.items():
            results["corpora"][name] = {t: measure(t, path, sample, vocab) for t in TRAINERS}
            print(name, json.dumps(results["corpora"][name]), file=sys.stderr)
        results["build"] = build_share(CORPORA / "pydocs.txt", 1_000_000 if quick else 3_000_000, Path(tmp))
        results["scale"] = scale_table(Path(tmp), quick, full)
    return results


def figures(r: dict) -> list[Figure]:
    rows = []
    for name, by in r["corpora"].items():
        ours, hf, spm = by["mlmprep"], by["tokenizers"], by["sentencepiece"]
        rows += [
            Figure(f"{name}: CPU s mlmprep / tokenizers / sentencepiece",
                   f"{ours['cpu_s']:.1f} / {hf['cpu_s']:.1f} / {spm['cpu_s']:.1f}"),
            Figure(f"{name}: wall s mlmprep / tokenizers / sentencepiece",
                   f"{ours['wall_s']:.1f} / {hf['wall_s']:.1f} / {spm['wall_s']:.1f}"),
            Figure(f"{name}: mlmprep CPU / sentencepiece's", ratio(ours["cpu_s"], spm["cpu_s"]), "<= 1.3x",
                   ours["cpu_s"] <= 1.3 * spm["cpu_s"]),
            Figure(f"{name}: mlmprep wall / sentencepiece's", ratio(ours["wall_s"], spm["wall_s"]), "<= 1.3x",
                   ours["wall_s"] <= 1.3 * spm["wall_s"]),
            Figure(f"{name}: speed-up over tokenizers (CPU)", ratio(hf["cpu_s"], ours["cpu_s"])),
            Figure(f"{name}: tokens/char mlmprep / tokenizers / sentencepiece",
                   f"{ours['tokens_per_char']:.4f} / {hf['tokens_per_char']:.4f} / {spm['tokens_per_char']:.4f}",
                   "mlmprep <= tokenizers + 1%", ours["tokens_per_char"] <= 1.01 * hf["tokens_per_char"]),
            Figure(f"{name}: vocabulary reached mlmprep / tokenizers (of {r['vocab']:,})",
                   f"{ours['vocab']:,} / {hf['vocab']:,}"),
        ]
        ours, hf = by["mlmprep-wordpiece"], by["tokenizers-wordpiece"]
        rows += [
            Figure(f"{name}: WordPiece CPU s mlmprep / tokenizers", f"{ours['cpu_s']:.1f} / {hf['cpu_s']:.1f}"),
            Figure(f"{name}: WordPiece tokens/char mlmprep / tokenizers",
                   f"{ours['tokens_per_char']:.4f} / {hf['tokens_per_char']:.4f}", "mlmprep <= tokenizers + 1%",
                   ours["tokens_per_char"] <= 1.01 * hf["tokens_per_char"]),
        ]
    b = r["build"]
    first, again = b["first"], b["rebuild"]
    share = first["train_tokenizer_s"] / first["total_s"]
    smoke = b["corpus_mb"] < 2.5
    rows += [
        Figure(f"first default build of {b['corpus_mb']:.1f} MB (kernels compiled): tokenizer training / total",
               f"{first['train_tokenizer_s']:.1f} / {first['total_s']:.1f} s ({share:.0%})",
               "<= 30% (3 MB; default mode)", None if smoke else share <= 0.30),
        Figure("the same build run again: tokenizer training / total",
               f"{again['train_tokenizer_s']:.1f} / {again['total_s']:.1f} s "
               f"({again['train_tokenizer_s'] / again['total_s']:.0%})"),
        Figure("load average during the builds", f"{b['load']:.1f} on {os.cpu_count()} cores"),
    ]
    start = r["scale"]["startup"]
    rows.append(Figure(f"each side's start (a {STARTUP_CHARS:,}-character sample): CPU s mlmprep tokenizer train / "
                       "sentencepiece defaults", f"{start['mlmprep']:.2f} / {start['sentencepiece']:.2f}"))
    for cell, c in r["scale"]["cells"].items():
        mb, vocab = cell.split("/")
        name = f"{mb} MB, vocab {int(vocab) // 1000}k:"
        targeted = int(mb) >= TARGET_FROM_MB
        rows += [
            Figure(f"{name} CPU mlmprep tokenizer train / sentencepiece defaults",
                   f"{ratio(c['cpu_s'], c['spm_cpu_s'])} ({c['cpu_s']:.1f} / {c['spm_cpu_s']:.1f} s)",
                   "<= 1.3x" if targeted else "", c["cpu_s"] <= 1.3 * c["spm_cpu_s"] if targeted else None),
            Figure(f"{name} tokens/char mlmprep / tokenizers",
                   f"{c['tokens_per_char'] / c['tokenizers_tokens_per_char']:.3f}x "
                   f"({c['tokens_per_char']:.4f} / {c['tokenizers_tokens_per_char']:.4f})", "<= 1.01x",
                   c["tokens_per_char"] <= 1.01 * c["tokenizers_tokens_per_char"]),
        ]
    rows.append(Figure("load average during the scale table", f"{r['scale']['load']:.1f} on {os.cpu_count()} cores"))
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":  # a measuring child (see measure)
        trainer, corpus, sample, vocab = sys.argv[2:6]
        print(json.dumps(measure_one(trainer, Path(corpus), int(sample), int(vocab))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.4 MB of each corpus, vocabulary 4,000 (CI)")
    parser.add_argument("--full", action="store_true", help="the scale table's 100 MB row too (hours)")
    docs.add_arguments(parser, "tokenizer")
    args = parser.parse_args()
    result = run(args.quick, args.full)
    if not result:
        parser.exit(0, "skipped: no shared corpora\n")
    print_figures(figures(result))
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.tokenizer")


if __name__ == "__main__":
    main()
