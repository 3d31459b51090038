"""Paragraph dedup and the decontaminated validation set, held against brute-force references on Python sets of
word n-grams (tests.ngrams): the lines removed, the documents moved, the two contamination measures; the same
bytes on one worker and on two with other shards."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mlmprep.builder.dedup import exact_keys
from mlmprep.builder.selection import held_documents
from mlmprep.format.manifest import Manifest, ManifestError
from mlmprep.tokenizer.encode import encode
from mlmprep.tokenizer.load import load_tokenizer
from tests.builder.test_sharded import hashes, reference_rows
from tests.conftest import build_tiny
from tests.licences import licence_documents, write_licence_corpus
from tests.ngrams import (
    decontaminated,
    hashed_decontamination,
    line_fates,
    measures,
    side_streams,
    without_repeated_lines,
    word_ngrams,
)

LICENCE = {"doc_sep": "blank", "rows_per_file": 40, "decontaminate": True}


@pytest.fixture(scope="module")
def decontaminated_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path) -> Path:
    return build_tiny(tmp_path_factory.mktemp("decontaminated"), tiny_corpus, tiny_tokenizer_path, decontaminate=True)


@pytest.fixture(scope="module")
def licences(tmp_path_factory) -> tuple[Path, list[str]]:
    path = write_licence_corpus(tmp_path_factory.mktemp("licences") / "licences.txt", 400)
    return path, licence_documents(400)


def split_rows(build: Path, split: str):
    from mlmprep.format.rows import concat_rows
    from mlmprep.format.write import iter_rows

    return concat_rows(list(iter_rows(build / split, "tokens")))


def held_sides(docs: list[str], fraction: float) -> list[str]:
    """Every document's side by the hold-out hash of its content key (no dedup)."""
    return ["validation" if h else "train" for h in held_documents(exact_keys(docs), fraction, 0)]


def test_paragraph_dedup_builds_what_the_corpus_less_its_repeated_lines_builds(tmp_path, licences,
                                                                                tiny_tokenizer_path):
    """--dedup-paragraphs on two workers and small shards writes the bytes that a build of the brute-force trimmed
    corpus writes without it (which is one worker, one shard), and counts what it removed."""
    path, docs = licences
    trimmed, removed, removed_chars = without_repeated_lines(docs, 0.8)
    assert removed > len(docs) // 2 and len(trimmed) < len(docs)  # the corpus is boilerplate-heavy: this acts
    reference = tmp_path / "trimmed.txt"
    reference.write_text("\n\n".join(trimmed) + "\n", encoding="utf-8")
    options = {**LICENCE, "dedup": "off", "decontaminate": False}
    built = build_tiny(tmp_path / "para", path, tiny_tokenizer_path, workers=2, shard_bytes=4000,
                       dedup_paragraphs=True, **options)
    plain = build_tiny(tmp_path / "plain", reference, tiny_tokenizer_path, workers=1, **options)
    assert hashes(built) == hashes(plain)
    stats = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]
    lines = [line for doc in docs for line in doc.split("\n") if line.split()]
    first = next(line for fates in line_fates(docs, 0.8) for line, gone in fates if gone)
    assert stats["paragraphs"] == {"threshold": 0.8, "lines": len(lines), "lines_removed": removed,
                                   "characters_removed": removed_chars, "documents_emptied": len(docs) - len(trimmed),
                                   "example": " ".join(first.split())[:200]}
    assert stats["dedup"]["documents"] == len(trimmed)


def test_paragraph_dedup_takes_the_shards_in_corpus_order_when_they_come_in_last_first(tmp_path, licences,
                                                                                       tiny_tokenizer_path,
                                                                                       monkeypatch):
    """The shards' scans handed to the driver from the last to the first (one worker, so the engine runs in this
    process and the order is the test's, not a race's): a line is still removed where it repeats an earlier one in
    corpus order, and the build writes the bytes of the brute-force trimmed corpus."""
    from mlmprep.builder import run as build_run
    from mlmprep.builder.engine.local import LocalEngine

    results, scans = LocalEngine.results, []

    def last_first(self, run, in_driver):
        if run.calls and run.calls[0][0] is build_run.scan_shard:
            scans.append(list(results(self, run, in_driver))[::-1])
            return iter(scans[-1])
        return results(self, run, in_driver)

    monkeypatch.setattr(LocalEngine, "results", last_first)
    path, docs = licences
    reference = tmp_path / "trimmed.txt"
    reference.write_text("\n\n".join(without_repeated_lines(docs, 0.8)[0]) + "\n", encoding="utf-8")
    options = {**LICENCE, "dedup": "off", "decontaminate": False}
    built = build_tiny(tmp_path / "para", path, tiny_tokenizer_path, workers=1, shard_bytes=4000,
                       dedup_paragraphs=True, **options)
    assert len(scans) == 1 and len(scans[0]) > 3  # several shards' scans, handed on last first
    assert hashes(built) == hashes(build_tiny(tmp_path / "plain", reference, tiny_tokenizer_path, workers=1,
                                              **options))


def test_paragraph_threshold_acts(tmp_path, licences, tiny_tokenizer_path):
    """A line is removed at --paragraph-threshold of its n-grams seen, not below: the licence paragraphs unwrapped,
    one a line, so that a shared paragraph with a holder's name of its own is seen in part."""
    _, docs = licences
    lines = [doc.replace("\n", " ") for doc in docs]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    removed = {}
    for threshold in (0.8, 1.0):
        built = build_tiny(tmp_path / f"b{threshold}", path, tiny_tokenizer_path, dedup_paragraphs=True,
                           paragraph_threshold=threshold, dedup="off", decontaminate=False, rows_per_file=40)
        removed[threshold] = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["paragraphs"][
            "lines_removed"]
        assert removed[threshold] == without_repeated_lines(lines, threshold)[1]
    assert removed[1.0] < removed[0.8]


@pytest.mark.parametrize("threshold", [0.2, 0.0])
def test_decontamination_moves_what_a_brute_force_reference_moves(tmp_path, licences, tiny_tokenizer_path,
                                                                   threshold):
    """The validation documents with more than the threshold of their 13-grams in training move to training, after
    every training document (in corpus order among themselves); the manifest's measures before and after are those
    of the brute-force sets."""
    path, docs = licences
    seen, kept = set(), []
    for doc in docs:  # --dedup exact
        if " ".join(doc.split()) not in seen:
            seen.add(" ".join(doc.split()))
            kept.append(doc)
    before = held_sides(kept, 0.2)
    after = decontaminated(before, kept, threshold)
    moved = sum(b != a for b, a in zip(before, after))
    assert 0 < moved < before.count("validation")  # some move, some stay
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, workers=2, shard_bytes=5000,
                       validation_fraction=0.2, decontaminate_threshold=threshold, **LICENCE)
    stats = None
    stream = {"train": [d for d, s in zip(kept, before) if s == "train"] +
                        [d for d, b, a in zip(kept, before, after) if b != a],
              "validation": [d for d, s in zip(kept, after) if s == "validation"]}
    for side, split in (("train", "windows"), ("validation", "validation-windows")):
        rows, stats = reference_rows(stream[side], tiny_tokenizer_path, {}, stats)
        got = split_rows(built, split)
        assert np.array_equal(got.offsets, rows.offsets) and np.array_equal(got.values, rows.values), split
    tok = load_tokenizer(tiny_tokenizer_path)

    def tokens_of(doc: str) -> list[int]:
        return encode(tok, [doc])[0].tolist()

    def side(sides, name):
        return [d for d, s in zip(kept, sides) if s == name]

    contamination = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["contamination"]
    assert contamination == {
        "ngram": 13, "match_tokens": 50, "threshold": threshold, "documents_moved": moved,
        "characters_moved": sum(len(d) for d, b, a in zip(kept, before, after) if b != a),
        "before": measures(side(before, "validation"), side(before, "train"), tokens_of),
        "after": measures(side(after, "validation"), side(after, "train"), tokens_of)}
    assert contamination["after"]["documents_with_ngram"] < contamination["before"]["documents_with_ngram"]
    assert contamination["before"]["tokens_in_match"] > contamination["after"]["tokens_in_match"]
    if threshold == 0.0:  # GPT-3's rule: nothing shared is left
        assert contamination["after"]["documents_with_ngram"] == 0


def test_first_copies_marks_the_first_occurrence_of_each_key_over_every_batch():
    """FirstCopies, batch by batch, marks exactly the documents whose key no earlier one (in its batch or an
    earlier batch) had, as a set of the keys seen so far says."""
    from mlmprep.builder.selection import FirstCopies

    rng = np.random.default_rng(4)
    pool = rng.integers(2, 1 << 63, 300, dtype=np.uint64)  # content keys (BLAKE2b's first 8 bytes: never 0 or 1)
    keys = pool[rng.integers(0, 300, 2000)]  # many repeats, within and across batches
    cuts = np.sort(rng.choice(np.arange(1, 2000), 30, replace=False))
    copies, seen, got, want = FirstCopies(), set(), [], []
    for batch in np.split(keys, cuts):
        got += copies(batch).tolist()
        for key in batch.tolist():
            want.append(key not in seen)
            seen.add(key)
    assert got == want and 0 < sum(got) < len(got)
    assert copies(np.zeros(0, np.uint64)).tolist() == []


@pytest.mark.parametrize("dedup", ["off", "exact", "near"])
def test_a_texts_later_copies_in_a_shard_are_not_hashed_and_change_nothing(tmp_path, tiny_tokenizer_path, dedup):
    """Decontamination hashes the first copy of a training text in a shard and skips its later ones, read in other
    batches: the moves, the measures and the rows are the brute-force reference's, with each copy a document of its
    own (--dedup off: on its first copy's side, a validation copy moved or measured with it) or dropped (exact,
    near). Texts of random words, each copied later, and documents quoting half of one of them."""
    import random

    rng = random.Random(7)
    words = [f"w{k}" for k in range(3000)]
    texts = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(40)]
    quotes = [" ".join(t.split()[10:40] + [rng.choice(words) for _ in range(30)]) for t in texts]
    # a copy of each of the first 20 texts a batch or more after it (--chunk-chars 2000), of each other one next to
    # it, in the same batch; one shard
    docs = texts[:20] + texts[:20] + [t for t in texts[20:] for _ in range(2)] + quotes
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    assert corpus.stat().st_size < 1 << 19
    built = build_tiny(tmp_path / "b", corpus, tiny_tokenizer_path, dedup=dedup, chunk_chars=2000, shard_bytes=1 << 19,
                       validation_fraction=0.3, decontaminate=True)
    kept = docs if dedup == "off" else texts + quotes
    before = held_sides(kept, 0.3)
    after = decontaminated(before, kept, 0.2)
    moved = [d for d, b, a in zip(kept, before, after) if b != a]
    assert any(d in texts for d in moved) and any(d in quotes for d in moved)  # both ways: copies count
    tok = load_tokenizer(tiny_tokenizer_path)

    def side(sides, name):
        return [d for d, s in zip(kept, sides) if s == name]

    def tokens_of(doc: str) -> list[int]:
        return encode(tok, [doc])[0].tolist()

    contamination = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["contamination"]
    assert contamination["documents_moved"] == len(moved)
    assert contamination["before"] == measures(side(before, "validation"), side(before, "train"), tokens_of)
    assert contamination["after"] == measures(side(after, "validation"), side(after, "train"), tokens_of)
    stream, stats = side_streams(kept, before), None
    for name, split in (("train", "windows"), ("validation", "validation-windows")):
        rows, stats = reference_rows(stream[name], tiny_tokenizer_path, {}, stats)
        got = split_rows(built, split)
        assert np.array_equal(got.offsets, rows.offsets) and np.array_equal(got.values, rows.values), split


def test_with_near_dedup_only_the_documents_left_in_training_contaminate(tmp_path, licences, tiny_tokenizer_path):
    """--dedup near drops many licence paragraphs as near copies of others: the validation documents move by the
    brute-force reference over the documents the build kept (those its dropped split does not list), the dropped
    copies counting for neither side, on two workers and small shards (each shard's training hashes spilled to disk
    and read back at the end)."""
    import datasets

    path, docs = licences
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, workers=2, shard_bytes=5000, dedup="near",
                       validation_fraction=0.2, keep_dropped=True, **LICENCE)
    dropped = set(datasets.load_from_disk(str(built / "dropped"))["document"])
    kept = [doc for k, doc in enumerate(docs) if k not in dropped]
    assert len(dropped) > len(docs) // 4  # near copies of kept ones: they would contaminate if they counted
    before = held_sides(kept, 0.2)
    stream = side_streams(kept, before)
    assert stream["train"] != [d for d, s in zip(kept, before) if s == "train"]  # some move
    stats = None
    for side, split in (("train", "windows"), ("validation", "validation-windows")):
        rows, stats = reference_rows(stream[side], tiny_tokenizer_path, {}, stats)
        got = split_rows(built, split)
        assert np.array_equal(got.offsets, rows.offsets) and np.array_equal(got.values, rows.values), split


def test_a_validation_documents_dropped_near_copy_does_not_contaminate_it(tmp_path, tiny_tokenizer_path):
    """Documents of random words (no 13-gram shared), then a near copy of each (one word changed): --dedup near drops
    the copies, so no validation document has any of its n-grams in training and none moves, though each one's
    dropped copy (on whichever side its own key would put it) shares nearly all of them."""
    import random

    rng = random.Random(5)
    words = [f"w{k}" for k in range(5000)]
    originals = [" ".join(rng.choice(words) for _ in range(150)) for _ in range(60)]
    copies = [doc.replace(doc.split()[40], "changed", 1) for doc in originals]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(originals + copies) + "\n", encoding="utf-8")
    built = build_tiny(tmp_path / "b", corpus, tiny_tokenizer_path, workers=2, shard_bytes=20000, dedup="near",
                       validation_fraction=0.3, decontaminate=True)
    contamination = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["contamination"]
    assert json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["dedup"]["documents_dropped"] == 60
    before = held_sides(originals, 0.3)
    assert 5 < before.count("validation") < 55
    assert contamination["documents_moved"] == 0 and contamination["before"]["documents_with_ngram"] == 0
    stats = None
    for side, split in (("train", "windows"), ("validation", "validation-windows")):
        rows, stats = reference_rows([d for d, s in zip(originals, before) if s == side], tiny_tokenizer_path, {},
                                     stats)
        got = split_rows(built, split)
        assert np.array_equal(got.offsets, rows.offsets) and np.array_equal(got.values, rows.values), split


def test_the_partition_tasks_files_are_removed_once_they_are_done(tmp_path, licences, tiny_tokenizer_path,
                                                                    monkeypatch):
    """The reading tasks' staged hashes and the driver's staged fates are there while the partition tasks run and
    gone once they are done, before the build goes on to write; the build is the brute-force reference's."""
    from mlmprep.builder import run as build_run
    from mlmprep.builder.staged import STAGING

    path, docs = licences
    seen, real = [], build_run.BuildTasks.contamination_matches

    def watched(self, fates):
        def staged():
            return sorted({p.suffix for p in (self.staging.stage / STAGING).iterdir()} & {".hashes", ".fates"})

        for answer in real(self, fates):
            seen.append(staged())
            yield answer
        seen.append(staged())

    monkeypatch.setattr(build_run.BuildTasks, "contamination_matches", watched)
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, workers=2, shard_bytes=5000, dedup="off",
                       validation_fraction=0.2, dedup_partitions=3, **LICENCE)
    assert seen[0] == [".fates", ".hashes"] and len(seen) == 3 + 1 and seen[-1] == []
    stream = side_streams(docs, held_sides(docs, 0.2))
    rows, _ = reference_rows(stream["validation"], tiny_tokenizer_path, {}, None)
    assert np.array_equal(split_rows(built, "validation-windows").values, rows.values)


def test_no_decontaminate_keeps_the_held_out_documents(tmp_path, licences, tiny_tokenizer_path):
    path, docs = licences
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, dedup="off", validation_fraction=0.2,
                       **{**LICENCE, "decontaminate": False})
    stats = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]
    assert "contamination" not in stats
    sides = held_sides(docs, 0.2)
    assert stats["dedup"]["validation_documents"] == sides.count("validation")
    rows, _ = reference_rows(side_docs := [d for d, s in zip(docs, sides) if s == "validation"], tiny_tokenizer_path,
                             {}, None)
    assert side_docs and np.array_equal(split_rows(built, "validation-windows").values, rows.values)


def test_text_method_measures_documents_only(tmp_path, licences, tiny_tokenizer_path):
    """--method text has no token windows in the reading pass: the manifest gives GPT-3's measure alone."""
    path, docs = licences
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, method="text", input_length=64,
                       validation_fraction=0.2, **LICENCE)
    contamination = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["contamination"]
    assert contamination["match_tokens"] is None and "tokens" not in contamination["before"]
    assert contamination["documents_moved"] > 0


def near_pairs(n: int, seed: int = 3) -> list[str]:
    """n pairs of 240-word lines, the second with every 60th word changed: near duplicates (word 5-gram Jaccard
    about 0.84) whose 13-grams are 77% seen, so --dedup-paragraphs keeps both and --dedup near joins them."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [f"x{rng.randrange(10**9)}" for _ in range(240)]
        out += [" ".join(words), " ".join(f"y{k}" if k % 60 == 30 else w for k, w in enumerate(words))]
    return out


def test_the_same_bytes_on_one_worker_and_on_two(tmp_path, licences, tiny_tokenizer_path):
    docs = licences[1][:200] + near_pairs(3) + licences[1][200:]
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    options = {**LICENCE, "dedup_paragraphs": True, "validation_fraction": 0.3, "dedup": "near"}
    one = build_tiny(tmp_path / "one", path, tiny_tokenizer_path, workers=1, **options)
    two = build_tiny(tmp_path / "two", path, tiny_tokenizer_path, workers=2, shard_bytes=3000, **options)
    assert hashes(one) == hashes(two)
    stats = [json.loads((b / "manifest.json").read_text())["corpus"]["stats"] for b in (one, two)]
    assert stats[0]["paragraphs"] == stats[1]["paragraphs"] and stats[0]["contamination"] == stats[1]["contamination"]
    # the largest near-duplicate clusters are shown by their first document as trimmed, not as read
    trimmed = without_repeated_lines(docs, 0.8)[0]
    excerpts = {" ".join(doc.split())[:200] for doc in trimmed}
    clusters = stats[0]["dedup"]["largest_clusters"]
    assert len(clusters) >= 3 and all(c["excerpt"] in excerpts for c in clusters)
    assert stats[0]["dedup"]["documents"] == len(trimmed)
    # the summary and the HTML report give both, in figures from the manifest
    from mlmprep.format.html import summary
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary

    manifest, p, c = read_manifest(one), stats[0]["paragraphs"], stats[0]["contamination"]
    text = build_summary(one, manifest)
    assert f"paragraph dedup: {p['lines_removed']:,} of {p['lines']:,} lines removed" in text
    before, after = c["before"], c["after"]
    assert (f"contamination of the validation set by training text: "
            f"{before['documents_with_ngram'] / before['documents']:.1%} of "
            f"{before['documents']:,} documents share a 13-word n-gram with training, "
            f"{before['tokens_in_match'] / before['tokens']:.1%} of their tokens") in text
    assert f"decontaminated: {c['documents_moved']:,} documents with more than 20% of their n-grams" in text
    page = summary(one, manifest)
    assert "<th>paragraphs</th>" in page and "<th>contamination</th>" in page
    assert f"now {after['documents_with_ngram'] / after['documents']:.1%} of {after['documents']:,}" in page


def test_short_lines_are_hashed_whole():
    """A line of fewer than 13 words is one n-gram, so it is removed only when the same words were a line (or a
    whole short text) before."""
    assert word_ngrams("a b c") == [("a", "b", "c")]
    docs = ["a b c\nx y z", "a b c d\nx y z"]
    assert without_repeated_lines(docs, 0.8) == (["a b c\nx y z", "a b c d"], 1, 6)


@pytest.mark.parametrize("change, problem", [
    (lambda c: c["after"].update(documents_with_ngram=c["after"]["documents"] + 1), "contamination"),
    (lambda c: c["before"].pop("tokens"), "contamination"),
    (lambda c: c.update(threshold="high"), "contamination"),
])
def test_a_manifest_with_impossible_contamination_figures_is_refused(decontaminated_build, change, problem):
    data = json.loads((decontaminated_build / "manifest.json").read_text())
    change(data["corpus"]["stats"]["contamination"])
    with pytest.raises(ManifestError, match=problem):
        Manifest.from_json(data, decontaminated_build)


def test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes():
    """The driver's hash set against Python's, shard by shard: lines that repeat a short phrase (n-grams repeated
    inside a line, and shared in part with other lines), lines of random words, short and blank lines; enough
    n-grams that the table grows."""
    import random

    from mlmprep.builder.overlap import FIRST_TABLE, SeenLines, line_hashes

    rng = random.Random(5)
    vocabulary = [f"w{k}" for k in range(8)]
    phrases = [[rng.choice(vocabulary) for _ in range(rng.randint(2, 5))] for _ in range(12)]

    def line() -> str:
        n = rng.choice((0, 3, 14, 20, 40))
        if rng.random() < 0.5:
            return " ".join((rng.choice(phrases) * 40)[rng.randint(0, 3):][:n])
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    docs = ["\n".join(line() for _ in range(rng.randint(1, 6))) for _ in range(4000)]
    seen, removed = SeenLines(0.8), []
    for start in range(0, len(docs), 700):  # shards
        lines = line_hashes(docs[start : start + 700])
        removed.append(seen.decide(lines["hashes"], lines["counts"]))
    grams_seen, expected = set(), []
    for text in (text for doc in docs for text in doc.split("\n")):
        grams = word_ngrams(text)
        expected.append(bool(grams) and sum(g in grams_seen for g in grams) >= 0.8 * len(grams))
        grams_seen.update(grams)
    assert np.concatenate(removed).tolist() == expected
    assert 0.1 < np.mean(expected) < 0.9 and seen.grams.table.size > FIRST_TABLE


def keyed(sides: list[str], fraction: float) -> np.ndarray:
    """Content keys whose hold-out hash puts each document on the side given (validation: held out)."""
    keys, key = [], 0
    for side in sides:
        while bool(held_documents(np.array([key], np.uint64), fraction, 0)[0]) != (side == "validation"):
            key += 1
        keys.append(key)
        key += 1
    return np.array(keys, np.uint64)


def selection_of(tmp_path: Path, cfg, results: list[dict]):
    """The driver's Selection given shard results as the reading tasks make them (contamination.stage_hashes into a
    stage in tmp_path), the partition tasks run in this process as the build runs them on its workers."""
    from mlmprep.builder.contamination import FATES, MatchTask, partitions, range_matches, scratch_names, stage_hashes
    from mlmprep.builder.selection import Selection
    from mlmprep.builder.staged import STAGING, Layout

    layout = Layout(cfg, str(tmp_path), 1, content_length=32, window_length=32, doc_eos=1, format_version=3,
                    partitions=partitions(cfg, 0))
    (tmp_path / STAGING).mkdir(exist_ok=True)

    def matches(fates):
        (tmp_path / STAGING / FATES).write_bytes(b"".join(shard.tobytes() for shard in fates))
        bases = tuple(np.concatenate([[0], np.cumsum([len(f) for f in fates])]).tolist())
        for p in range(layout.partitions):
            yield range_matches(MatchTask(layout, p, bases))
        for name in scratch_names(len(fates)):
            (tmp_path / STAGING / name).unlink()

    selection = Selection(cfg, len(results), matches=matches)
    for s, result in enumerate(results):
        selection.add(s, stage_hashes(layout, s, dict(result)))
    return selection


def moved_of(selection) -> np.ndarray:
    """bool, per document of every shard: whether it was moved to training."""
    from mlmprep.builder.selection import MOVED

    return np.concatenate([fates == MOVED for fates in selection.fates])


def shard_results(keys: np.ndarray, grams: list[list[int]], runs: list[list[int]] | None, lengths: list[int],
                  shards: int) -> list[dict]:
    """Reading tasks' results of the documents (in `shards` shards of about equal size) with these keys, n-gram hashes
    and token-window hashes."""
    out = []
    for part in np.array_split(np.arange(len(keys)), shards):
        result = {"keys": keys[part], "doc_chars": np.array([len(grams[d]) for d in part], np.int64),
                  "doc_tokens": np.array([lengths[d] for d in part], np.int64),
                  "ngrams": np.array([h for d in part for h in grams[d]], np.uint64),
                  "ngram_counts": np.array([len(grams[d]) for d in part], np.int64)}
        if runs is not None:
            result |= {"windows": np.array([h for d in part for h in runs[d]], np.uint64),
                       "window_counts": np.array([len(runs[d]) for d in part], np.int64)}
        out.append(result)
    return out


def test_a_document_moved_to_training_can_take_another_with_it(tmp_path):
    """Validation document b shares its text with validation document a only; a, half of it training text, moves
    first, and then b does: rounds until none is left over the threshold, as the references', with each document in
    a shard of its own; b's windows are training text after, in the one left."""
    from mlmprep.builder.overlap import ngram_hashes
    from mlmprep.config import BuildConfig

    words = [f"w{k}" for k in range(400)]
    train, a_own, b_own = " ".join(words[:60]), " ".join(words[100:160]), " ".join(words[200:260])
    docs = [train, f"{train} {a_own}", f"{a_own} {b_own}", b_own.upper()]
    sides = ["train", "validation", "validation", "validation"]
    hashes, counts = ngram_hashes(docs)
    grams = [part.tolist() for part in np.split(hashes, np.cumsum(counts)[:-1])]
    runs = [[1, 2, 3], [4, 5], [6, 7], [7, 8]]  # windows: the one left shares one with b alone, training after b moves
    lengths = [len(r) + 49 for r in runs]
    cfg = BuildConfig(corpus=("x",), dedup="off", validation_fraction=0.5)
    selection = selection_of(tmp_path, cfg, shard_results(keyed(sides, 0.5), grams, runs, lengths, 4))
    assert moved_of(selection).tolist() == [False, True, True, False]
    moved, before, after = hashed_decontamination(sides, grams, 0.2, (runs, lengths))
    assert moved == [False, True, True, False] and after["tokens_in_match"] == 50
    assert selection.contamination["before"] == before and selection.contamination["after"] == after
    assert [s == "train" for s in decontaminated(sides, docs, 0.2)] == [True, True, True, False]


def test_the_measures_count_one_shared_n_gram_and_each_covered_token_once(tmp_path):
    """A validation document sharing exactly one 13-gram with training counts (GPT-3's "any"); tokens inside two
    overlapping matching 50-token runs count once; both against the reference's sets."""
    from mlmprep.builder.overlap import ngram_hashes, window_hashes
    from mlmprep.config import BuildConfig

    words = [f"w{k}" for k in range(500)]
    docs = [" ".join(words[:120]),  # training
            " ".join(words[:13] + words[300:340]),  # one shared 13-gram, no 50-token run
            " ".join(words[10:75] + words[400:420]),  # 53 shared 13-grams; runs of 50 from w10..w25 in training
            " ".join(words[200:260])]  # nothing shared
    vocabulary = {w: k for k, w in enumerate(words)}

    def tokens_of(doc: str) -> list[int]:
        return [vocabulary[w] for w in doc.split()]

    ids = [tokens_of(d) for d in docs]
    hashes, counts = ngram_hashes(docs)
    windows, window_counts = window_hashes(np.concatenate(ids), np.array([len(t) for t in ids]))
    grams = [part.tolist() for part in np.split(hashes, np.cumsum(counts)[:-1])]
    runs = [part.tolist() for part in np.split(windows, np.cumsum(window_counts)[:-1])]
    sides = ["train", "validation", "validation", "validation"]
    cfg = BuildConfig(corpus=("x",), dedup="off", validation_fraction=0.5, decontaminate_threshold=0.99)
    selection = selection_of(tmp_path, cfg, shard_results(keyed(sides, 0.5), grams, runs, list(map(len, ids)), 2))
    got = selection.contamination
    assert not moved_of(selection).any() and got["after"] == got["before"] == measures(docs[1:], docs[:1], tokens_of)
    assert got["before"] == {"documents": 3, "documents_with_ngram": 2, "tokens": 53 + 85 + 60, "tokens_in_match": 65}


@pytest.mark.parametrize("method", ["tokens", "text"])
def test_a_shard_the_driver_tokenized_is_hashed_as_its_reading_task_hashes_it(tmp_path, licences, tiny_tokenizer_path,
                                                                              method):
    """A shard the driver tokenizes (without Numba) stages its documents' normalised texts, as it read them (cleaned,
    less the lines paragraph dedup removes), and hash_shard hashes those: the same candidates, counts and staged
    bytes as the reading task's own hashing; the n-grams, those of a brute-force reference."""
    import shutil

    from mlmprep.builder.contamination import HASHES
    from mlmprep.builder.pipeline import (
        NORMALISED,
        HashTask,
        ScanTask,
        TokenizeTask,
        hash_shard,
        scan_shard,
        tokenize_shard,
        tokenize_shard_in_driver,
    )
    from mlmprep.builder.staged import STAGING, Layout
    from mlmprep.config import BuildConfig
    from mlmprep.corpus.shards import file_shards

    path, _ = licences
    cfg = BuildConfig(corpus=(str(path),), doc_sep="blank", validation_fraction=0.2, method=method)
    (tmp_path / STAGING).mkdir()
    shutil.copy(tiny_tokenizer_path, tmp_path / "tokenizer.json")
    layout = Layout(cfg, str(tmp_path), 1, content_length=32, window_length=32, doc_eos=1, format_version=3)
    shard = file_shards([(path, path.stat().st_size)], 1 << 20)[0]
    lines = scan_shard(ScanTask(layout, shard))["counts"]
    removed = np.random.default_rng(3).random(len(lines)) < 0.3
    read = tokenize_shard(TokenizeTask(layout, shard, removed))
    hashes, texts = tmp_path / STAGING / f"shard-000000.{HASHES}", tmp_path / STAGING / f"shard-000000.{NORMALISED}"
    staged = hashes.read_bytes()
    assert not texts.exists()
    hashes.unlink()
    driver = tokenize_shard_in_driver(TokenizeTask(layout, shard, removed))
    assert not hashes.exists() and "candidates" not in driver and np.array_equal(driver["keys"], read["keys"])
    data = texts.read_bytes()
    sizes = np.frombuffer(data[: 8 * len(driver["keys"])], "<i8")
    assert np.array_equal(sizes, read["doc_chars"])  # the documents as read (ASCII: a byte a character)
    documents = np.split(np.frombuffer(data[8 * len(sizes) :], np.uint8), np.cumsum(sizes)[:-1])
    again = hash_shard(HashTask(layout, 0, driver["keys"]))
    expected = {"candidates", "ngram_counts"} | ({"window_counts"} if method == "tokens" else set())
    assert set(again) == expected
    assert len(again["candidates"]) > 10 and len(staged) > 8000
    words = [len(documents[d].tobytes().split()) for d in again["candidates"]]  # a brute-force count of n-grams
    assert again["ngram_counts"].tolist() == [max(n - 12, min(n, 1)) for n in words]
    assert all(np.array_equal(read[key], again[key]) for key in again)
    assert hashes.read_bytes() == staged


@pytest.mark.parametrize("damage", ["truncated", "index", "reference", "fates"])
def test_a_changed_staged_file_of_decontamination_is_a_one_line_error(tmp_path, damage):
    """A partition task that finds a shard's staged hashes (or the staged fates) other than they were written says
    so in one line naming the file (CacheError: exit 2), rather than match what it holds."""
    from mlmprep.builder.contamination import FATES, HASHES, MatchTask, range_matches, stage_hashes
    from mlmprep.builder.staged import STAGING, Layout
    from mlmprep.config import BuildConfig
    from mlmprep.errors import CacheError

    cfg = BuildConfig(corpus=("x",), dedup="off", validation_fraction=0.3)
    layout = Layout(cfg, str(tmp_path), 1, content_length=32, window_length=32, doc_eos=1, format_version=3,
                    partitions=2)
    (tmp_path / STAGING).mkdir()
    rng = np.random.default_rng(5)
    documents = 40
    result = {"keys": rng.integers(0, 1 << 62, documents, dtype=np.uint64),
              "ngrams": rng.integers(1, 1 << 64, 400, dtype=np.uint64), "ngram_counts": np.full(documents, 10),
              "windows": rng.integers(1, 1 << 64, 200, dtype=np.uint64), "window_counts": np.full(documents, 5)}
    staged = stage_hashes(layout, 0, result)
    assert 0 < len(staged["candidates"]) < documents
    (tmp_path / STAGING / FATES).write_bytes(bytes(documents))
    task = MatchTask(layout, 1, (0, documents))
    assert set(range_matches(task)) == {"grams", "runs"}  # sound files: an answer
    path = tmp_path / STAGING / f"shard-000000.{HASHES}"
    data = bytearray(path.read_bytes())
    index = np.frombuffer(bytes(data[-8 * 12 :]), "<i8").reshape(2, 2, 3)  # (kind, candidates or not, offsets)
    if damage == "truncated":  # the last record lost, the index whole
        del data[-8 * 13 : -8 * 12]
    elif damage == "index":  # the n-grams' candidates one more than their records
        data[-8 * 12 + 8 * 2 : -8 * 12 + 8 * 3] = int(index[0, 0, 2] + 1).to_bytes(8, "little")
    elif damage == "reference":  # the first candidate record of the task's partition names document 1000
        assert index[0, 0, 1] < index[0, 0, 2]
        at = 8 * int(index[0, 0, 2] + index[0, 0, 1])  # the candidates' references follow their hashes
        data[at : at + 8] = (1000 << 32).to_bytes(8, "little")
    else:
        (tmp_path / STAGING / FATES).write_bytes(bytes(documents - 1))
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match=r"staging directory was changed") as error:
        range_matches(task)
    assert "\n" not in str(error.value) and (FATES if damage == "fates" else HASHES) in str(error.value)


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_staged_records_are_sorted_by_partition_stably(parts):
    """A kind's staged records (hashes and references) are in the order of a stable sort by partition (the top 32
    bits of the hash scaled to the partitions), each partition where the offsets say, one partition too."""
    from mlmprep.builder.dedup_partitions import bucketed

    rng = np.random.default_rng(parts)
    keys = rng.integers(0, 1 << 63, 5000, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 5000, dtype=np.uint64)
    refs = np.arange(5000, dtype=np.uint64)
    offsets, out_keys, out_refs = bucketed(keys, refs, parts)
    part = [int(k) >> 32 for k in keys.tolist()]
    order = sorted(range(len(keys)), key=lambda i: part[i] * parts >> 32)  # Python's sort is stable
    assert out_keys.tolist() == keys[order].tolist() and out_refs.tolist() == refs[order].tolist()
    counts = np.bincount([part[i] * parts >> 32 for i in range(len(keys))], minlength=parts)
    assert offsets.tolist() == [0, *np.cumsum(counts).tolist()]
    assert bucketed(keys, np.zeros(0, np.uint64), parts)[2].size == 0


@pytest.mark.parametrize(("parts", "near", "share"), [(1, False, 0.002), (1, False, 0.5), (1, True, 0.002),
                                                     (3, False, 0.002), (3, True, 0.5)])
def test_a_shards_staged_section_holds_the_candidates_records_then_the_others(parts, near, share):
    """A kind's section of a shard's staged file, as bytes in order: the candidates' hashes and references (document
    << 32 | place), then the others' hashes (and references under near), each side sorted stably by partition, the
    index saying where each partition starts; with few candidates (the others written as runs between them) or many,
    documents without hashes among them."""
    from mlmprep.builder.contamination import staged_records

    rng = np.random.default_rng(parts + int(near) + int(1000 * share))
    per_doc = rng.integers(0, 40, 3000) * (rng.random(3000) < 0.9)
    candidates = rng.random(3000) < share
    candidates[[0, -1]] = True, bool(share > 0.1)  # a candidate first, and last or not
    hashes = rng.integers(0, 1 << 63, int(per_doc.sum()), dtype=np.uint64) * np.uint64(2)
    sides: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    at = 0
    for d, n in enumerate(per_doc.tolist()):
        for j in range(n):
            sides[bool(candidates[d])].append((int(hashes[at]), d << 32 | (j if candidates[d] else 0)))
            at += 1
    expected, offsets = b"", []
    for mine in (True, False):
        records = sorted(sides[mine], key=lambda r: (r[0] >> 32) * parts >> 32)  # stable
        counts = np.bincount([(h >> 32) * parts >> 32 for h, _ in records], minlength=parts)
        offsets.append([0, *np.cumsum(counts).tolist()])
        expected += np.array([h for h, _ in records], "<u8").tobytes()
        if mine or near:
            expected += np.array([r for _, r in records], "<u8").tobytes()
    index, arrays = staged_records(hashes, per_doc, candidates, parts, near)
    assert np.asarray(index).tolist() == offsets[0] + offsets[1]
    assert b"".join(bytes(a) for a in arrays) == expected


@pytest.mark.parametrize(("dedup", "partitions"), [("exact", 0), ("off", 1), ("off", 5)])
def test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves(tmp_path, dedup,
                                                                                              partitions):
    """Shard results of random n-grams and token windows, a few shared with validation documents and with each other
    (from a pool every shard draws on, or one of each shard's; the hash 0 too): the driver's Selection never holds
    the hashes (the reading tasks stage them, the partition tasks match them a range at a time), and it moves, and
    measures, exactly what the reference moves given every hash at once; the staged files are gone at the end."""
    from mlmprep.config import BuildConfig

    cfg = BuildConfig(corpus=("x",), dedup=dedup, validation_fraction=0.05, dedup_partitions=partitions)
    rng = np.random.default_rng(3)
    documents, grams = 2400, 150
    keys = rng.integers(0, 1 << 62, documents, dtype=np.uint64)
    picked = held_documents(keys, cfg.validation_fraction, cfg.seed)
    sources = np.concatenate([np.flatnonzero(picked)[:8], np.flatnonzero(~picked)[:8]])
    copies = np.arange(documents - 16, documents)
    keys[copies] = keys[sources]  # exact copies: dropped, neither side (with their sources' hashes, as copies have)

    def hashes(count: int) -> list[list[int]]:
        drawn = rng.integers(0, 1 << 62, (documents, count), dtype=np.uint64)
        shared = rng.random(drawn.shape) < rng.uniform(0, 0.4, documents)[:, None]  # 0-40% of each document's
        local = np.repeat(np.arange(documents, dtype=np.uint64) // 300 + 1, count).reshape(drawn.shape) * 10**6
        drawn[shared] = rng.integers(0, 3000, shared.sum(), dtype=np.uint64) + local[shared] * (rng.random(
            shared.sum()) < 0.5)  # from a pool of the corpus's, or of the document's shard's: found there alone
        drawn[copies] = drawn[sources]
        return [row[: rng.integers(0, count + 1)].tolist() for row in drawn]

    ngrams, runs = hashes(grams), hashes(grams)
    alone = [d for d in range(documents) if d not in set(sources) | set(copies)]
    v, t = next(d for d in alone if picked[d]), next(d for d in alone if not picked[d])
    for drawn in (ngrams, runs):  # the hash 0 held by one validation document and training alone
        drawn[v] = rng.integers(1 << 61, 1 << 62, 40, dtype=np.uint64).tolist() + [0]
        drawn[t] = drawn[t] + [0]
    lengths = [len(r) + 49 if r else int(rng.integers(0, 50)) for r in runs]
    held = held_documents(keys, cfg.validation_fraction, cfg.seed)
    first = {}
    sides = ["dropped" if first.setdefault(int(k), d) != d and dedup == "exact" else "validation" if h else "train"
             for d, (k, h) in enumerate(zip(keys, held))]
    assert sides.count("dropped") == (16 if dedup == "exact" else 0)
    moved, before, after = hashed_decontamination(sides, ngrams, cfg.decontaminate_threshold, (runs, lengths))
    assert 0 < sum(moved) < sides.count("validation")  # some move, some stay: the comparison means something
    assert sides[v] == "validation" and sides[t] == "train"
    selection = selection_of(tmp_path, cfg, shard_results(keys, ngrams, runs, lengths, 8))
    assert moved_of(selection).tolist() == moved
    assert selection.contamination["before"] == before and selection.contamination["after"] == after
    assert list((tmp_path / "shards").iterdir()) == []  # every staged file removed
    for result, fates in zip(selection.results, selection.fates):  # what the driver keeps of a shard: its
        # documents' fates, characters and tokens (int32: they fit), 9 bytes a document; the keys let go
        arrays = [value for value in result.values() if isinstance(value, np.ndarray)]
        assert "keys" not in result and all(len(value) == len(fates) for value in arrays)
        assert fates.itemsize + sum(value.itemsize for value in arrays) == 9


def test_the_summary_inspect_and_the_report_show_an_example_of_what_each_rule_removed(tmp_path, tiny_tokenizer_path):
    """--dedup-paragraphs: the first line it removed in corpus order; --exclude: the words of its first match (after
    the lines paragraph dedup removed), both by the brute-force references, the same on one worker and on two; in
    the summary `build` and `inspect` print and in the HTML report, escaped there."""
    import html
    import random

    from mlmprep.format.html import summary
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary
    from tests.builder.test_exclude import words
    from tests.cli.test_build import run_cli

    rng = random.Random(5)
    boilerplate = [f'<b>Notice {k}</b> & "terms": ' + words(rng, 16, "b") for k in range(6)]  # one first per shard
    passage = "<i>eval</i> " + words(rng, 30, "e")
    docs = []
    for k in range(120):
        lines = [words(rng, rng.randrange(14, 40), "t") for _ in range(rng.randrange(1, 4))]
        if k % 3 == 0:
            lines.insert(rng.randrange(len(lines) + 1), boilerplate[k // 3 % 6])
        if k % 11 == 7:
            cut = passage.split()
            at = rng.randrange(len(cut) - 13)
            lines.append(" ".join(words(rng, 3, "t").split() + cut[at : at + rng.randrange(13, 20)]))
        docs.append("\n".join(lines))
    corpus, evaluation = tmp_path / "corpus.txt", tmp_path / "eval.txt"
    corpus.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    evaluation.write_text(passage + "\n", encoding="utf-8")
    first_removed = next(line for fates in line_fates(docs, 0.8) for line, gone in fates if gone)
    assert first_removed == boilerplate[0]
    grams = set(word_ngrams(passage))
    first_match = next(" ".join(gram) for doc in without_repeated_lines(docs, 0.8)[0] for gram in word_ngrams(doc)
                       if gram in grams)
    expected = (" ".join(first_removed.split())[:200], first_match[:200])
    options = {"doc_sep": "blank", "dedup_paragraphs": True, "exclude": (str(evaluation),), "rows_per_file": 40}
    builds = [build_tiny(tmp_path / "one", corpus, tiny_tokenizer_path, workers=1, **options),
              build_tiny(tmp_path / "two", corpus, tiny_tokenizer_path, workers=2, shard_bytes=3000, **options)]
    for built in builds:
        stats = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]
        assert (stats["paragraphs"]["example"], stats["exclusion"]["example"]) == expected
    lines = (f"  first removed: {expected[0][:100]!r}", f"  first match: {expected[1][:100]!r}")
    manifest = read_manifest(builds[1])
    shown = build_summary(builds[1], manifest)
    assert all(line in shown.split("\n") for line in lines), shown
    inspected = run_cli("inspect", builds[1])
    assert inspected.returncode == 0 and all(line in inspected.stdout.split("\n") for line in lines)
    page = summary(builds[1], manifest)
    assert all(f"<td>{html.escape(line.strip())}</td>" in page for line in lines)
    assert "<b>Notice" not in page and "<i>eval" not in page
