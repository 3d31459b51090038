"""What a finished build records: its corpus statistics (every shard's counts summed, hard-wrapped prose, what
dedup removed) and the manifest, written last so a directory with one is a complete build."""

from __future__ import annotations

import itertools

import mlmprep
from mlmprep.builder import mask
from mlmprep.builder.filters import add_totals, excerpt
from mlmprep.builder.lengths import Lengths
from mlmprep.builder.pipeline import EXCLUDED, VALIDATION_SLOT, TokenizeTask, driver_task, shard_documents
from mlmprep.builder.selection import Selection
from mlmprep.config import to_dict
from mlmprep.corpus.documents import Corpus
from mlmprep.corpus.files import CorpusStats, file_format
from mlmprep.corpus.text import looks_wrapped
from mlmprep.errors import most_common_fields
from mlmprep.format.manifest import Manifest
from mlmprep.format.write import strict, write_json
from mlmprep.tokenizer.load import tokenizer_sha256


def corpus_counts(corpus: Corpus, read: list[dict]) -> dict:
    """The corpus statistics of the manifest: every shard's counts summed, and what cleaning removed; of the
    fields of records without the text field, the most common few."""
    total = CorpusStats(files=corpus.stats.files, files_skipped=corpus.stats.files_skipped,
                        files_as_text=corpus.stats.files_as_text).as_dict()
    keys = total["missing_field_keys"]
    for result in read:
        for key, value in itertools.chain(result["stats"].items(), result["clean"].items()):
            if key == "missing_field_keys":
                for name, count in value.items():
                    keys[name] = keys.get(name, 0) + count
            elif key == "filters":  # --filters: per rule, in corpus order
                add_totals(total.setdefault("filters", {}), value)
            elif key not in ("files", "files_skipped", "files_as_text"):
                total[key] = total.get(key, 0) + value
    total["missing_field_keys"] = most_common_fields(keys)
    return total


def wrapped_prose(shards: list, read: list[dict]) -> dict:
    """The .txt files read one document per line that look like hard-wrapped prose (readers.looks_wrapped), with
    their lines, documents and characters: each file's shards' counts summed first."""
    per_file: dict[str, list[int]] = {}
    for shard, result in zip(shards, read):
        if shard.kind == "file" and file_format(shard.source)[0] == ".txt":
            counts = per_file.setdefault(shard.source, [0, 0, 0, 0])
            for k, key in enumerate(("documents", "blank_skipped", "wrapped_lines", "characters")):
                counts[k] += result["stats"][key]
    flagged = [counts for counts in per_file.values() if looks_wrapped(*counts[:3])]
    return {"files": len(flagged), "lines": sum(c[0] + c[1] for c in flagged),
            "documents": sum(c[0] for c in flagged), "characters": sum(c[3] for c in flagged)}


def dedup_stats(selection: Selection, reads: list[TokenizeTask]) -> dict:
    """corpus.stats.dedup: what dedup removed and the largest clusters, each with the start of its first document
    (read again from its shard as its reading task read it, in the driver's batches: only these few documents'
    texts are ever needed)."""
    summary = selection.summary()
    counts = {key: 0 for key in ("documents_emptied", "lines_removed", *EXCLUDED)}
    for size, first in selection.largest():
        s, d = selection.locate(first)
        docs = itertools.chain.from_iterable(shard_documents(driver_task(reads[s]), CorpusStats(), counts, counts,
                                                                counts))
        text = next(itertools.islice(docs, d, None), "")
        summary["largest_clusters"].append({"size": size, "excerpt": excerpt(text)})
    return summary


def finish_manifest(cfg, corpus, tok, ids, stage, splits, seeds, stats, masker, corpus_stats, timings, *,
                    lengths: Lengths, version: int, trained_on) -> Manifest:
    """Write manifest.json, last, so a directory with a manifest is a complete build (in format `version`)."""
    manifest = {
        "format_version": version,
        "mlmprep_version": mlmprep.__version__,
        "config": cfg.identity(),
        # storage options may hold credentials: never written down
        "build_options": {k: v for k, v in to_dict(cfg).items() if k not in {*cfg.identity(), "storage_options"}},
        "objective": cfg.objective,
        "method": cfg.method,
        "input_length": cfg.input_length,
        "window_length": lengths.window,
        "target_length": lengths.target,
        "fixed_length": masker.widths["input_ids"] is not None,
        "rows_per_file": lengths.rows_per_file,
        "tokenizer": {
            "file": "tokenizer.json",
            "sha256": tokenizer_sha256(tok),
            "vocab_size": ids.vocab_size,
            "pad_id": ids.pad,
            "eos_id": ids.eos,
            "unk_id": ids.unk,
            "mask_id": ids.mask,
            "decoder_start_id": ids.pad,
            "sentinels": len(ids.sentinels),
            "trained_on": trained_on,  # {"documents", "characters"} of the training sample; None: --tokenizer given
            "type": cfg.trained_tokenizer_type() if trained_on else None,  # --tokenizer-type of one trained here
        },
        "corpus": {
            "description": corpus.description,
            "fingerprint": corpus.fingerprint,
            "files": corpus.files,
            "stats": corpus_stats,
        },
        "seeds": [{"split": f"seed-{k}", "seed": s} for k, s in enumerate(seeds)],
        "validation_seed": mask.row_seed(cfg.seed, VALIDATION_SLOT),
        "splits": splits,
        "statistics": {"windows": stats.as_dict(), "masking": masker.summary()},
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    if masker.mixture is not None:  # the `denoiser` column indexes this list
        manifest["denoisers"] = [{**d.as_dict(), "mode_id": mode if mode >= 0 else None}
                                 for d, mode in zip(masker.mixture.denoisers, lengths.modes)]
    typed = Manifest.from_json(strict(manifest), stage)  # as written: what the summary shows is what inspect will
    write_json(stage / "manifest.json", typed.to_json())
    return typed
