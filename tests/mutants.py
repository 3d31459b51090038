"""Mutation check: plant plausible bugs one at a time in a temporary copy of the repository, run the tests
against each, and print which survive (a surviving mutant is a bug the suite would not notice).

    python -m tests.mutants                     # every mutant (slow: tens of minutes on 2 cores)
    python -m tests.mutants --list              # their names
    python -m tests.mutants floyd-range rng-not-restored    # some of them
    python -m tests.mutants --quick             # only the likely test files, never the whole suite

Each mutant is a small text patch: a snippet of code and its replacement, at a site named by module and
function (`mlmprep.format.load:pick_rows`, `Class.method` for a method, the module alone for module-level
code; a file that is not Python, such as the page template, by its path), never by line. The snippet is
looked for inside that function's source with indentation free (a re-indented block still matches, and
the replacement takes its indentation); a function moved to another module is found there by its name, so
reshaping the code does not stale the list. The working tree is never touched: its files (tracked and
untracked, not ignored) are copied once to a temporary directory, where `mlmprep` and `mlmprep.cli` are
imported from (PYTHONPATH), and each mutant is applied there, tested, and undone. A snippet that no longer
occurs exactly once in its function is reported STALE, so the list does not rot silently when the code
changes (tests/repo/test_mutants.py checks every site on each test run). Tests run as `pytest -x -q -m ""` (slow
ones too) on the mutant's likely test files first; only if those pass does the whole suite run. Exit status 1
if any mutant survives or is stale. Not part of the default test run (this file is not collected by pytest).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]


class Mutant(NamedTuple):
    name: str
    site: str  # "package.module:qualname" (a function or method), "package.module" (module level), or a non-Python file
    old: str  # occurs exactly once in the site, indentation free
    new: str
    tests: tuple[str, ...]  # pytest arguments that should catch it


STOP_WORDS = "tests/builder/test_filters.py::test_gopher_stop_words_are_the_words_exactly"
GOPHER_NGRAMS = "tests/builder/test_filters.py::test_gopher_ngram_rules_match_the_reference_at_any_lengths"
EXCLUDE_CUT = "tests/builder/test_exclude.py::test_cut_matches_leaves_the_reference_pieces"
EXAMPLES = ("tests/builder/test_overlap.py::"
            "test_the_summary_inspect_and_the_report_show_an_example_of_what_each_rule_removed")
PARTITIONS = "tests/builder/test_dedup.py::test_dedup_in_partitions_builds_the_bytes_of_dedup_in_the_driver"
DRIVER_BATCHES = ("tests/builder/test_sharded.py::"
                  "test_the_driver_reads_its_shards_in_small_batches_and_stages_what_a_worker_stages")
DETACHED_DROPPED = "tests/builder/test_detached.py::test_detached_tasks_keep_the_attached_build_s_dropped_split"
DETACHED_FETCHES = ("tests/builder/test_detached.py::"
                    "test_a_detached_partition_task_fetches_its_own_partition_s_records_alone")
RAY_S3 = ("tests/builder/test_ray.py::"
          "test_a_build_from_and_to_s3_on_nodes_that_share_no_disk_with_the_driver_equals_the_local_build")

MUTANTS = [
    # ------------------------------------------------------------ object-store faults, locks, disks, secrets
    Mutant("store-unreachable-traceback", "mlmprep.storage:errors",  # a refused connection is a botocore traceback
           "        if unreachable(exc):\n            raise error(", "        if False:\n            raise error(",
           ("tests/test_storage_faults.py::test_an_unreachable_store_is_one_line_naming_the_url",)),
    Mutant("store-attempts-fixed", "mlmprep.storage:attempts_per_request",  # AWS_MAX_ATTEMPTS does not act
           "    return int(given) if given.isdigit() and int(given) > 0 else RETRIES", "    return RETRIES",
           ("tests/test_storage_faults.py::test_a_long_outage_is_one_line_and_the_next_build_takes_the_lock_over",)),
    Mutant("store-no-retries", "mlmprep.storage", "RETRIES = 5", "RETRIES = 1",  # a short outage fails a build
           ("tests/test_storage_faults.py::test_a_short_outage_mid_upload_is_retried_quietly",)),
    Mutant("store-expect-kept", "mlmprep.storage:send_without_expect",  # uploads wait for "100 Continue" for ever
           '    request.headers.pop("Expect", None)', "    pass",
           ("tests/test_storage_faults.py::test_a_store_gone_silent_is_one_line_after_the_read_timeout",
            "tests/test_storage_faults.py::"
            "test_a_build_whose_store_goes_silent_mid_upload_fails_in_bounded_time_and_leaves_nothing")),
    Mutant("store-read-timeout-dropped", "mlmprep.storage:client_options",  # s3fs's own 15 s, whatever mlmprep says
           '"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT,', '"connect_timeout": CONNECT_TIMEOUT,',
           ("tests/test_storage_faults.py::test_a_store_gone_silent_is_one_line_after_the_read_timeout",)),
    Mutant("store-given-config-dropped", "mlmprep.storage:client_options",  # --storage-options' timeouts ignored
           '"read_timeout": READ_TIMEOUT, **config}', '"read_timeout": READ_TIMEOUT}',
           ("tests/test_storage_faults.py::test_a_store_gone_silent_is_one_line_after_the_read_timeout",)),
    Mutant("stale-lock-needs-force", "mlmprep.format.publish:take_over",  # a dead process's lock is kept till --force
           "    if not here and not force:", "    if not force:",
           ("tests/test_storage_faults.py::"
            "test_a_lock_left_on_this_host_by_a_process_that_is_gone_is_taken_over_without_force",)),
    Mutant("live-lock-taken", "mlmprep.format.publish:take_over",  # a running build's lock is taken over
           "    if here and pid_alive(pid):", "    if False:",
           ("tests/test_storage.py::test_two_builds_into_one_prefix_cannot_both_win",)),
    Mutant("foreign-lock-taken-without-force", "mlmprep.format.publish:take_over",  # another host's lock just taken
           "    if not here and not force:", "    if False:",
           ("tests/test_storage_faults.py::test_a_lock_from_another_host_is_named_and_taken_over_only_with_force",)),
    Mutant("dead-scratch-kept", "mlmprep.format.scratch:scratch_directory",  # a killed build's MBs stay in $TMPDIR
           "    remove_dead_scratch(Path(tempfile.gettempdir()))\n", "",
           ("tests/test_storage_faults.py::test_a_killed_builds_lock_and_scratch_are_taken_over_and_removed",)),
    Mutant("live-scratch-removed", "mlmprep.format.scratch:remove_dead_scratch",  # a running build's scratch deleted under it
           "named[2] == host and not pid_alive(int(named[1]))", "named[2] == host",
           ("tests/test_storage_faults.py::test_a_killed_builds_lock_and_scratch_are_taken_over_and_removed",)),
    Mutant("multiprocessing-in-pymp", "mlmprep.format.scratch:multiprocessing_in_scratch",  # a killed build's pymp-*
           '    config["tempdir"] = path', "    pass",  # stays in $TMPDIR
           ("tests/builder/test_crash.py::test_a_killed_builds_temporary_files_go_with_the_next_build",)),
    Mutant("multiprocessing-dir-not-set-up", "mlmprep.builder.engine.local:start_forkserver",  # the CLI's prestart
           "    multiprocessing_in_scratch()", "    pass",  # makes pymp-* before any scratch_directory
           ("tests/builder/test_crash.py::test_a_killed_builds_temporary_files_go_with_the_next_build",)),
    Mutant("checkpoint-tmp-left", "mlmprep.train.checkpoint:save",  # a failed checkpoint leaves .checkpoint-N.tmp
           "            shutil.rmtree(tmp, ignore_errors=True)\n            if problem is None:",
           "            if problem is None:", ("tests/test_disks.py",)),
    Mutant("disk-probe-blind", "mlmprep.errors:write_probe",  # torch's RuntimeError on a full disk stays a traceback
           "    except OSError as exc:\n        return exc if exc.errno in DISK_REASONS else None",
           "    except OSError:\n        return None", ("tests/test_disks.py",)),
    Mutant("html-partial-left", "mlmprep.format.html:write_report",  # a page cut off by a full disk stays as .NAME.partial
           "        if tmp.exists():\n            tmp.unlink()\n", "", ("tests/test_disks.py",)),
    Mutant("task-disk-full-is-a-bug", "mlmprep.builder.engine.base:attempt",  # a full disk is exit 1, "a bug"
           "        if isinstance(exc, OSError) and exc.errno in DISK_REASONS:", "        if False:",
           ("tests/test_disks.py",)),
    Mutant("read-only-lock-traceback", "mlmprep.format.publish:build_lock",  # remask in a read-only place: a traceback
           "        except OSError as exc:\n            raise (disk_error(path, exc, f\"give a build",
           "        except ZeroDivisionError as exc:\n            raise (disk_error(path, exc, f\"give a build",
           ("tests/test_disks.py",)),
    Mutant("secret-option-echoed", "mlmprep.config:shown",  # --config's storage_options printed in its error
           "    if key in SECRET and value is not None:", "    if False:", ("tests/test_config_files.py",)),
    # ------------------------------------------------------------ Ray on loopback
    Mutant("ray-local-cluster-listens-wide", "mlmprep.builder.engine.ray:RayEngine.session",  # GCS, raylet, agents on every interface
           "    with loopback_only(ray) if local else nullcontext():", "    with nullcontext():",
           ("tests/builder/test_ray_loopback.py",)),
    Mutant("ray-loopback-sticks", "mlmprep.builder.engine.ray:loopback_only",  # a later join of a real cluster says 127.0.0.1
           "        constants.ENABLE_RAY_CLUSTER = before[1]\n", "        pass\n", ("tests/builder/test_ray_loopback.py",)),
    # ------------------------------------------------------------ object storage: the commit protocol
    Mutant("remote-manifest-with-files", "mlmprep.format.publish:commit_remote",  # the commit point uploaded among the files
           "        storage.put(pairs, options)\n        mark_committing(url, options, (stage / MANIFEST).read_bytes())\n"
           "        storage.put([(stage / MANIFEST, manifest)], options)",
           "        storage.put([(stage / MANIFEST, manifest), *pairs], options)",
           ("tests/test_storage.py::test_faults_are_retried_and_the_build_equals_a_clean_one",)),
    Mutant("remote-force-keeps-old-files", "mlmprep.format.publish:commit_remote",  # --force leaves the old build's files
           "    storage.remove([storage.join(url, name) for name in present if name != MANIFEST], options)\n", "",
           ("tests/test_storage.py::test_force_never_leaves_old_files_beside_the_new_manifest",)),
    Mutant("remote-failure-keeps-uploads", "mlmprep.format.publish:take_back",  # a failed upload leaves its files
           "        storage.remove(uploaded, options)\n        for wait in SETTLE:", "        for wait in ():",
           ("tests/test_storage.py::test_a_failed_upload_leaves_nothing_that_reads_as_a_build",)),
    Mutant("take-back-trusts-its-removal", "mlmprep.format.publish:take_back",  # a cancelled upload landing after it stays
           "        storage.remove(uploaded, options)\n", "        storage.remove(uploaded, options)\n        return True\n",
           ("tests/test_storage_faults.py::test_an_upload_the_store_finishes_after_its_build_gave_up_is_taken_back_or_"
            "left_under_the_lock",)),
    Mutant("remote-lock-unconditional", "mlmprep.storage:create",  # the lock object simply overwritten
           'fs.pipe_file(path, data, mode="create")', "fs.pipe_file(path, data)",
           ("tests/test_storage.py::test_two_builds_into_one_prefix_cannot_both_win",)),
    Mutant("remote-corpus-options-ignored", "mlmprep.storage:open_corpus_url",  # corpus URLs read without --storage-options
           "fs, path = filesystem(url, CORPUS_OPTIONS, block)", "fs, path = filesystem(url, {}, block)",
           (RAY_S3,)),
    Mutant("remote-task-options-unset", "mlmprep.builder.pipeline:read_urls_with_options",  # a worker reads URLs without the build's options
           "storage.use_corpus_options(storage.parse_options(cfg.storage_options))", "pass",
           (RAY_S3,)),
    Mutant("compressed-parts-unraised", "mlmprep.corpus.shards:file_shards",  # one .gz holds its output files back to the end
           "wanted = max(streams, MIN_STREAMS) if streams > 1 and codec in QUICK_CODECS else streams",
           "wanted = streams",
           ("tests/corpus/test_compressed.py::test_gzip_and_zstd_files_are_read_in_many_parts_bzip2_and_xz_in_what_the_"
            "workers_ask",)),
    Mutant("stream-resumed-past-the-start", "mlmprep.corpus.streams:_resumed",  # a part goes on from one after it
           "if kept == key and stream.end <= start]", "if kept == key]",
           ("tests/corpus/test_compressed.py::test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file",)),
    Mutant("stream-resumed-from-other-content", "mlmprep.corpus.streams:_resumed",  # a rewritten file's old stream
           "if kept == key and stream.end", "if kept[0] == key[0] and stream.end",
           ("tests/corpus/test_compressed.py::test_parts_go_on_only_from_a_stream_of_the_same_content",)),
    Mutant("stream-block-lost", "mlmprep.corpus.streams:_Stream.blocks",  # the block the last part stopped in is skipped
           "        if self.block is not None:\n            yield self.block\n", "",
           ("tests/corpus/test_compressed.py::test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file",)),
    Mutant("stream-never-kept", "mlmprep.corpus.streams:stream_blocks",  # every part decompresses from the file's start
           "                    _keep((str(path), resume), stream, end)\n                    stream = None\n", "",
           ("tests/corpus/test_compressed.py::test_a_process_reading_a_files_parts_in_order_decompresses_it_once",)),
    Mutant("heap-threshold-left-dynamic", "mlmprep.builder.engine.base:steady_heap",  # a worker's heap creeps up with the text
           "    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)", "    pass",
           ("tests/corpus/test_compressed.py::test_peak_memory_does_not_creep_up_over_real_text",)),
    Mutant("stream-kept-after-the-build", "mlmprep.builder.run:build",  # a build's driver holds corpus files open
           "        stack.callback(let_go_streams)", "        pass",
           ("tests/corpus/test_compressed.py::test_a_build_closes_the_streams_its_process_kept",)),
    Mutant("stream-digest-not-passed", "mlmprep.corpus.documents:_file_corpus",  # builds never resume a stream
           "shard_bytes, streams, [d for _, d in digests])", "shard_bytes, streams)",
           ("tests/corpus/test_compressed.py::test_a_process_reading_a_files_parts_in_order_decompresses_it_once",)),
    Mutant("detached-in-the-driver-stage", "mlmprep.builder.pipeline:run_detached",  # tasks write where no Ray node sees
           "    moved = replace(layout, stage=own)", "    moved = layout",
           ("tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes",)),
    Mutant("detached-payloads-kept", "mlmprep.builder.outputs:Staging.drop",  # every shard's tokens held in Ray's store to the end
           '                self.held.pop(f"{STAGING}/{name}", None)', "                pass",
           ("tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes",)),
    Mutant("ray-payload-dropped", "mlmprep.builder.engine.ray:run_ray",  # a Ray task's staged files never reach the driver
           "yield i, replace(result, payload=payload) if isinstance(result, Shipped) else result",
           "yield i, result", (RAY_S3,)),
    Mutant("ray-driver-files-dropped", "mlmprep.builder.engine.ray:attempt_apart",  # --keep-dropped's files lost on Ray
           "return replace(result, payload=()), *result.payload",
           "return replace(result, payload=(), files={}), *result.payload", (RAY_S3,)),
    Mutant("dropped-files-in-the-payload", "mlmprep.builder.pipeline:run_detached",  # the driver never gets them
           "names = [name for name in made if not name.endswith(DRIVER_FILES)]", "names = list(made)",
           (DETACHED_DROPPED,)),
    Mutant("driver-files-not-staged", "mlmprep.builder.outputs:Staging.take",  # sent back, then not written
           "            (self.stage / name).write_bytes(content)", "            pass", (DETACHED_DROPPED,)),
    Mutant("remote-shard-as-path", "mlmprep.corpus.shards:read_shard",  # a URL shard mangled into a local path
           "path = shard.source if storage.is_url(shard.source) else Path(shard.source)",
           "path = Path(shard.source)",
           ("tests/test_storage.py::test_corpus_urls_are_read_in_place_shard_by_shard",)),
    Mutant("remote-corpus-failure-unnamed", "mlmprep.corpus.documents:file_digest",  # a failing store read as a local error
           "        with storage.errors(path, CorpusError), storage.open_corpus_url(path, block=HASH_BLOCK) as f:",
           "        with storage.open_corpus_url(path, block=HASH_BLOCK) as f:",
           ("tests/test_storage.py::test_a_store_that_keeps_failing_while_an_object_is_read_in_place_is_one_line_"
            "naming_it",)),
    Mutant("remote-corpus-default-blocks", "mlmprep.storage:_filesystem",  # every probe of an object fetches 50 MiB
           "    fs.default_block_size = block", "    pass",
           ("tests/test_storage.py::test_a_shard_of_a_large_object_fetches_about_its_own_bytes",)),
    Mutant("remote-intact-always", "mlmprep.format.publish:listed_present",  # files missing from the store go unnoticed
           "return all(present.get(name) == size for name, size in listed.items()) and",
           "return all(name in present or True for name in listed) and",
           ("tests/test_storage.py::test_a_remote_build_missing_a_file_is_not_up_to_date",)),
    Mutant("remote-no-preflight", "mlmprep.builder.destination:build_destination",  # --out on the store checked only when the build ends
           '        storage.preflight(out, options, "--out")\n', "        pass\n",
           ("tests/test_storage.py::test_store_problems_are_one_line_naming_the_url_before_any_work",)),
    Mutant("local-build-never-there", "mlmprep.builder.destination:LocalDirectory.has_build",  # workers prestarted for an up-to-date build
           "return manifest_path(self.out).exists()", "return False", ("tests/builder/test_destination.py",)),
    Mutant("stored-build-always-there", "mlmprep.builder.destination:ObjectPrefix.has_build",  # workers never prestarted
           "return storage.exists(storage.join(self.out, MANIFEST), self.options)", "return True",
           ("tests/builder/test_destination.py",)),
    # ------------------------------------------------------------ span corruption kernel
    Mutant("floyd-range", "mlmprep.builder._kernels:_floyd_step",  # Floyd draws from [0, j): the collision branch alone can take j
           "state, t = _bounded(state, j + 1)", "state, t = _bounded(state, j)",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("floyd-collision-takes-neighbour", "mlmprep.builder._kernels:_floyd_step",  # a collision takes t's free neighbour instead of j
           "t = j if taken else t  #",
           "t = (t + 1 if t + 1 <= j and not (bits[(t + 1) >> 6] >> np.uint64((t + 1) & 63)) & ONE else j) if taken else t  #",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("noise-first", "mlmprep.builder._kernels:_interleave",  # interleave noise first, as if the spans were swapped
           "spans[2 * k] = end_keep - prev_keep\n        spans[2 * k + 1] = end_noise - prev_noise",
           "spans[2 * k] = end_noise - prev_noise\n        spans[2 * k + 1] = end_keep - prev_keep",
           ("tests/builder/test_mask.py",)),
    Mutant("roll-half-row", "mlmprep.builder._kernels:span_corrupt_rows",  # the roll offset drawn from half the row
           "state, offset = _bounded(state, length)", "state, offset = _bounded(state, (length + 1) // 2)",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("roll-drawn-from-the-stream-start", "mlmprep.builder._kernels:span_corrupt_rows",  # the roll reuses the cuts' draws
           "state, offset = _bounded(state, length)", "state, offset = _bounded(stream_key(seed, first_row + i), length)",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("roll-from-span-start", "mlmprep.builder._kernels:_roll",  # a roll inside a kept span starts at its beginning too
           "head = offset - start if j % 2 == 0 else 0", "head = 0",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("row-stream-ignores-first-row", "mlmprep.builder._kernels:span_corrupt_rows",  # chunks restart the row streams
           "_segment(stream_key(seed, first_row + i), length, num_noise[i]",
           "_segment(stream_key(seed, i), length, num_noise[i]",
           ("tests/builder/test_mask.py",)),
    # ------------------------------------------------------------ ul2, prefix and mdlm
    Mutant("ul2-mixture-denoiser-loss-of-one-source", "mlmprep.train.mixture_run:denoiser_fields",  # b's rows unseen
           "loss = window.source_loss.double().view(-1, len(names)).sum(0)",
           "loss = window.source_loss.double().view(-1, len(names))[0]",
           ("tests/train/test_mixture.py::"
            "test_a_mixture_of_ul2_builds_takes_the_right_rows_in_the_weights_shares_and_logs_each_denoiser",)),
    Mutant("ul2-mixture-groups-denoiser-major", "mlmprep.train.step:step_groups",  # sources' losses mixed up
           "groups = epoch.chunk.source * shared + epoch.chunk.split.denoiser if shared",
           "groups = epoch.chunk.split.denoiser * 2 + epoch.chunk.source if shared",
           ("tests/train/test_mixture.py::"
            "test_a_mixture_of_ul2_builds_takes_the_right_rows_in_the_weights_shares_and_logs_each_denoiser",)),
    Mutant("ul2-mixture-eval-per-denoiser-dropped", "mlmprep.train.mixture_run:evaluate_mixture",
           '**{f"eval/{name}/{key[5:]}": value for key, value in m.items() if key.startswith("eval/")}}',
           '}', ("tests/train/test_mixture.py::"
                 "test_a_mixture_of_ul2_builds_takes_the_right_rows_in_the_weights_shares_and_logs_each_denoiser",)),
    Mutant("ul2-mixture-weights-reversed", "mlmprep.train.mixture:MixturePlan.next_chunk",  # a gets b's share
           "parts = [(i, p, rows) for i, w in enumerate(weights)", "parts = [(i, p, rows) for i, w in enumerate(weights[::-1])",
           ("tests/train/test_mixture.py::"
            "test_a_mixture_of_ul2_builds_takes_the_right_rows_in_the_weights_shares_and_logs_each_denoiser",)),
    Mutant("ul2-row-stream-ignores-first-row", "mlmprep.builder._kernels:ul2_rows",  # chunks restart the row streams
           "_segment(stream_key(seed, first_row + i), length, n_noise", "_segment(stream_key(seed, i), length, n_noise",
           ("tests/builder/test_objectives.py",)),
    Mutant("ul2-no-mode-token", "mlmprep.builder._kernels:ul2_rows",  # the mode token is not written first
           "            if modes[i] >= 0:\n                enc_values[e0] = modes[i]", "            if modes[i] >= 1 << 30:\n                enc_values[e0] = modes[i]",
           ("tests/builder/test_objectives.py",)),
    Mutant("ul2-weights-ignored", "mlmprep.builder.denoisers:Mixture.plan",  # --denoiser-weights does not act
           "        bounds = np.cumsum(self.weights)", "        bounds = np.cumsum(np.full(len(self.weights), 1 / len(self.weights)))",
           ("tests/builder/test_objectives.py" + "::test_each_seed_draws_its_own_mixture_and_the_shares_follow_the_weights",)),
    Mutant("ul2-same-mixture-every-seed", "mlmprep.builder.denoisers:Mixture.plan",  # N seeds, one mixture
           "uniform(seed, PLAN_TAG, rows)", "uniform(0, PLAN_TAG, rows)",
           ("tests/builder/test_objectives.py" + "::test_each_seed_draws_its_own_mixture_and_the_shares_follow_the_weights",)),
    Mutant("prefix-share-whole-row", "mlmprep.builder.denoisers:Mixture.plan",  # T5's density 0.5, not the S-denoiser's
           "share = 2 * ratio * uniform(", "share = 0.9 * uniform(",
           ("tests/builder/test_objectives.py" + "::test_the_s_denoiser_s_share_is_uniform_over_many_rows",)),
    Mutant("ul2-spans-not-t5", "mlmprep.builder.mask:span_counts",  # spans from the kept tokens too, as the span objective
           "np.clip(np.rint(noise / mean_span_length)", "np.clip(np.rint(np.minimum(noise, lengths - noise) / mean_span_length)",
           ("tests/builder/test_objectives.py",)),
    Mutant("ul2-tail-dropped", "mlmprep.builder.outputs:OutputFiles.plan",  # the stream's tail window is left out
           "(-(-offsets[-1] // length) if self.layout.cut", "(offsets[-1] // length if self.layout.cut",
           ("tests/builder/test_objectives.py",)),
    Mutant("ul2-remask-short-rows", "mlmprep.builder.remask:with_cuts",  # rows cut off at the end of their file
           "        following = tuple((t.windows_file, t.record) for t in tasks[i + 1:last])", "        following = ()",
           ("tests/builder/test_objectives.py" + "::test_ul2_bytes_do_not_depend_on_workers_shards_or_remask",)),
    Mutant("ul2-verify-first-columns-only", "mlmprep.builder.verify:check_rederived",  # the denoiser column unchecked
           "    for column, stored in masked.items():", "    for column, stored in list(masked.items())[:2]:",
           ("tests/builder/test_objectives.py" + "::test_verify_finds_a_ul2_row_that_is_not_its_seed_s",)),
    Mutant("mdlm-masks-specials", "mlmprep.builder._kernels:mdlm_rows",  # [CLS] and [SEP] become targets
           "            if not is_special[token]:", "            if True:",
           ("tests/builder/test_objectives.py" + "::test_mdlm_rates_are_uniform_and_each_row_masks_within_the_binomial_bound",)),
    Mutant("mdlm-rate-not-used", "mlmprep.builder._kernels:mdlm_rows",  # every row masked at about 0.5
           "                if u < t64:", "                if u < 0.5:",
           ("tests/builder/test_objectives.py" + "::test_mdlm_rates_are_uniform_and_each_row_masks_within_the_binomial_bound",)),
    Mutant("mdlm-rate-squared", "mlmprep.builder._kernels:mdlm_rows",  # rates not uniform
           "        t = np.float32(floor + (1.0 - floor) * (1.0 - u))", "        t = np.float32(floor + (1.0 - floor) * (1.0 - u * u))",
           ("tests/builder/test_objectives.py" + "::test_mdlm_rates_are_uniform_and_each_row_masks_within_the_binomial_bound",)),
    Mutant("mdlm-loss-unweighted", "mlmprep.train.loss:batch_loss",  # the 1/t weights left out
           "return (row_losses(logits, mb[\"labels\"]) / mb[\"rate\"].to(logits.dtype)).sum()",
           "return row_losses(logits, mb[\"labels\"]).sum()",
           ("tests/train/test_objectives_training.py" + "::test_mdlm_loss_is_the_1_over_t_weighted_sum_over_the_batch_s_tokens",)),
    Mutant("mdlm-loss-over-masked-tokens", "mlmprep.format.load:Split.n_targets",  # a mean over masked tokens only
           "        if self.objective == \"mdlm\":\n            return self.enc_lengths.copy()\n", "",
           ("tests/train/test_objectives_training.py" + "::test_mdlm_loss_is_the_1_over_t_weighted_sum_over_the_batch_s_tokens",)),
    Mutant("eval-denoiser-groups-shifted", "mlmprep.train.evaluation:eval_groups",  # losses under the wrong names
           "        return split.denoiser.astype(np.int64), [", "        return (split.denoiser.astype(np.int64) + 1) % len(split.denoisers), [",
           ("tests/train/test_objectives_training.py" + "::test_evaluation_reports_each_denoiser_s_and_each_rate_bucket_s_mean_token_loss",)),
    Mutant("hf-mdlm-unweighted", "mlmprep.train.hf:BudgetTrainer.compute_loss",  # the Trainer's mdlm loss unweighted
           "/ rate.to(logits.device).float()).sum()", ").sum()",
           ("tests/train/test_objectives_training.py" + "::test_the_hf_trainer_trains_ul2_and_mdlm_builds",)),
    Mutant("train-denoiser-groups-shifted", "mlmprep.train.step:step_groups",  # training losses under the wrong names
           "    return split.denoiser.astype(np.int64), torch.zeros(", "    return (split.denoiser.astype(np.int64) + 1) % len(split.denoisers), torch.zeros(",
           ("tests/train/test_objectives_training.py" + "::test_training_logs_each_denoiser_s_loss_and_they_average_to_the_step_s",)),
    # ------------------------------------------------------------ span and MLM arithmetic
    Mutant("noise-count-floor", "mlmprep.builder.mask:span_counts",  # floor instead of T5's round
           "noise = np.clip(np.rint(lengths * noise_density)", "noise = np.clip(np.floor(lengths * noise_density)",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("spans-from-noise-only", "mlmprep.builder.mask:span_counts",  # spans = round(noise / mean), T5's original, not seed 000's
           "np.rint(np.minimum(noise, lengths - noise) / mean_span_length)", "np.rint(noise / mean_span_length)",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("mlm-70-mask", "mlmprep.builder._kernels:_mask_position",  # 70/20/10 instead of 80/10/10
           "    if r < 8:\n        inputs_out[p] = mask_id", "    if r < 7:\n        inputs_out[p] = mask_id",
           ("tests/builder/test_mask_reference.py",)),
    Mutant("mlm-random-may-be-special", "mlmprep.builder.mask:mlm_mask",  # random replacements drawn from the whole vocabulary
           "normal_ids = np.flatnonzero(~is_special).astype(np.int32)",
           "normal_ids = np.arange(vocab_size).astype(np.int32)",
           ("tests/builder/test_mask.py",)),
    Mutant("mlm-first-positions", "mlmprep.builder._kernels:mlm_rows",  # the first m maskable tokens instead of a random m
           "state = _sorted_sample(state, n_groups, counts[i], bits, chosen)",
           "chosen[: counts[i]] = np.arange(counts[i])",
           ("tests/builder/test_mask_reference.py",)),
    # ------------------------------------------------------------ dedup: keys, MinHash, LSH clusters
    Mutant("dedup-exact-python-hash", "mlmprep.builder.dedup:exact_keys",  # Python's salted hash(): keys differ per process
           "hashlib.blake2b(data, digest_size=8).digest()", 'hash(data).to_bytes(8, "little", signed=True)',
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-no-nfc", "mlmprep.builder.dedup:normalise",  # composed and decomposed accents are different texts
           '" ".join(unicodedata.normalize("NFC", text).split())', '" ".join(text.split())',
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-signature-no-nfc", "mlmprep.builder.overlap:utf8_texts",  # the kernels hash the words as they came
           'joined_bytes([unicodedata.normalize("NFC", t).encode("utf-8", "surrogatepass") for t in texts])',
           'joined_bytes([t.encode("utf-8", "surrogatepass") for t in texts])', ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-seed-ignored", "mlmprep.builder.dedup:permutations",  # every seed the same permutations
           "key = np.uint64((seed ^ _SIGNATURE_TAG) & randomness.MASK64)", "key = np.uint64(_SIGNATURE_TAG)",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-one-permutation", "mlmprep.builder._dedup_kernels:_take_min",  # every entry the same multiplier: correlated
           "np.uint32((a[k] * h + b[k]) >> U32)", "np.uint32((a[0] * h + b[k]) >> U32)",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-biased-permutation", "mlmprep.builder._dedup_kernels:_take_min",  # the low 32 bits: not a good permutation
           "np.uint32((a[k] * h + b[k]) >> U32)", "np.uint32((a[k] * h + b[k]) & np.uint64(0xFFFFFFFF))",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-ascii-spaces-only", "mlmprep.builder._dedup_kernels:_space_at",  # no-break and ideographic spaces join words
           "    if c == 0xC2 and i + 1 < end:", "    if True:\n        return 0\n    if c == 0xC2 and i + 1 < end:",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-short-text-no-shingle", "mlmprep.builder._dedup_kernels:_signature",  # fewer words than ngram: empty signature
           "    if 0 < count < ngram:\n", "    if False:\n", ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-band-skips-row", "mlmprep.builder._dedup_kernels:lsh_keys",  # a band's key leaves out its last row
           "_row_key(sig, i, j * rows, (j + 1) * rows,", "_row_key(sig, i, j * rows, (j + 1) * rows - 1,",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-band-neighbours-only", "mlmprep.builder._dedup_kernels:link_band",  # a bucket links only sorted neighbours
           "                y = docs[order[v]]\n", "                y = docs[order[v]]\n                if v > u + 1:\n                    break\n",
           ("tests/builder/test_dedup_kernels.py",)),
    # ------------------------------------------------------------ dedup in partitions (--dedup-partitions)
    Mutant("dedup-partition-boundary", "mlmprep.builder.dedup_partitions:partition_records",  # a range's last record lost
           "lo, hi = parts + 1 + int(offsets[p]), parts + 1 + int(offsets[p + 1])",
           "lo, hi = parts + 1 + int(offsets[p]), parts + int(offsets[p + 1])", (PARTITIONS,)),
    Mutant("dedup-last-partition-never-run", "mlmprep.builder.run:BuildTasks.dedup_partitions",  # one range off by one
           "for p in range(self.cfg.dedup_partitions)]", "for p in range(self.cfg.dedup_partitions - 1)]",
           (PARTITIONS,)),
    Mutant("dedup-partition-pairs-of-two-skipped", "mlmprep.builder.dedup_partitions:candidate_groups",  # 2 alone
           "return docs[np.repeat(sizes > 1, sizes)], sizes[sizes > 1]",
           "return docs[np.repeat(sizes > 2, sizes)], sizes[sizes > 2]", (PARTITIONS,)),
    Mutant("dedup-partition-links-not-joined", "mlmprep.builder.dedup_partitions:joined_links",  # earlier partitions' lost
           "documents, first, _ = join(np.concatenate(held, axis=1))", "documents, first, _ = join(links)",
           ("tests/builder/test_dedup.py::"
            "test_the_partitions_links_joined_as_they_come_give_the_clusters_of_all_links_at_once", PARTITIONS)),
    Mutant("dedup-partition-keeps-later-copy", "mlmprep.builder.selection:Selection.join",  # the first dropped, a copy kept
           "dropped, at = documents[~kept], 0", "dropped, at = first[~kept], 0", (PARTITIONS,)),
    Mutant("dedup-partition-exact-keeps-last", "mlmprep.builder.dedup_partitions:first_copies",  # a key's last copy kept
           "order = np.lexsort((docs, keys))", "order = np.lexsort((-docs, keys))", (PARTITIONS,)),
    Mutant("dedup-partition-shard-edge", "mlmprep.builder.selection:Selection.join",  # a shard's last duplicate kept
           "np.searchsorted(dropped, [at, at + len(fates)])", "np.searchsorted(dropped, [at, at + len(fates) - 1])",
           (PARTITIONS,)),
    Mutant("dedup-partition-refs-unsorted", "mlmprep.builder.dedup_partitions:stage_keys",  # band keys point elsewhere
           "offsets, keys, refs = bucketed(bands.reshape(-1), refs, parts)",
           "offsets, keys, _ = bucketed(bands.reshape(-1), refs, parts)", (PARTITIONS,)),
    # ------------------------------------------- what a detached partition task is sent (Ray nodes sharing no disk)
    Mutant("detached-slice-off-by-one-partition", "mlmprep.builder.dedup_partitions:partition_ranges",  # p gets p + 1's
           "for lo, hi in zip(offsets[:-1], offsets[1:])]", "for lo, hi in zip(offsets[1:] + offsets[:1], offsets[1:])]",
           (DETACHED_FETCHES, "tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes")),
    Mutant("detached-partition-fed-the-whole-file", "mlmprep.builder.dedup_partitions:partition_ranges",  # O(corpus)
           "return [[(0, 8 * head), (8 * (head + lo), 8 * (head + hi)), (8 * (head + records + lo), 8 * (head + records + hi))]",
           "return [[(0, 8 * (head + 2 * records))]", (DETACHED_FETCHES,)),
    Mutant("detached-hashes-slice-misses-references", "mlmprep.builder.contamination:partition_ranges",  # refs a hole
           "for at in ((first, refs_at) if candidates or near else (first,))]", "for at in (first,)]",
           (DETACHED_FETCHES,)),
    Mutant("detached-hashes-whole", "mlmprep.builder.pipeline:shipped_parts",  # every partition gets every hash
           "if suffix not in PARTITION_RANGES:", "if True:", (DETACHED_FETCHES,)),
    Mutant("detached-whole-signatures", "mlmprep.builder.run:BuildTasks.dedup_partitions",  # a partition gets every .sig
           'if self.staging.detached and self.cfg.dedup == "near":', "if False:", (DETACHED_FETCHES,)),
    Mutant("detached-signature-run-short", "mlmprep.builder.dedup_partitions:signature_slices",  # a run's last row lost
           "data[int(a) * width : (int(b) + 1) * width]", "data[int(a) * width : int(b) * width]",
           (DETACHED_FETCHES, "tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes")),
    Mutant("detached-signatures-of-another-partition", "mlmprep.builder.run:BuildTasks.cut_signatures",  # p's rows to p + 1
           "rows[s][p] = (members[cuts[s]:cuts[s + 1]] - bases[s])",
           "rows[s][(p + 1) % len(tasks)] = (members[cuts[s]:cuts[s + 1]] - bases[s])",
           (DETACHED_FETCHES, "tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes")),
    Mutant("detached-partition-given-slice-zero", "mlmprep.builder.outputs:Staging.inputs",  # every task partition 0's
           "held[partition] if isinstance(held, tuple)", "held[0] if isinstance(held, tuple)",
           (DETACHED_FETCHES, "tests/builder/test_detached.py::test_detached_tasks_build_the_attached_build_s_bytes")),
    Mutant("ray-small-parts-inline", "mlmprep.builder.engine.ray:RayEngine.session",  # slices held by the driver
           'runtime_env={"env_vars": WORKER_ENV},', "",
           ("tests/builder/test_ray.py::test_a_small_payload_part_is_in_the_object_store_not_the_driver_s_memory",)),
    Mutant("driver-keeps-keys", "mlmprep.builder.selection:Selection.add",  # 8 bytes a document for nothing, to the end
           'self.fates[index] = self.sides(result.pop("keys"))', 'self.fates[index] = self.sides(result["keys"])',
           ("tests/builder/test_dedup.py::"
            "test_the_driver_keeps_a_side_per_document_not_its_key_and_decides_what_a_plain_reference_does",)),
    Mutant("driver-counts-int64", "mlmprep.builder.selection:Selection.add",  # 8 bytes a count where 4 hold it
           "result[key] = narrowed(result[key])", "result[key] = result[key]",
           ("tests/builder/test_dedup.py::"
            "test_the_driver_keeps_a_side_per_document_not_its_key_and_decides_what_a_plain_reference_does",)),
    Mutant("driver-counts-wrapped", "mlmprep.builder.selection:narrowed",  # a count past int32 wraps negative
           "    if len(counts) and (int(counts.min()) <= -NARROW_BELOW or int(counts.max()) >= NARROW_BELOW):",
           "    if False:",
           ("tests/builder/test_dedup.py::test_counts_that_do_not_fit_int32_are_kept_whole_and_every_sum_is_exact",)),
    Mutant("driver-counts-summed-narrow", "mlmprep.builder.outputs:side_size",  # a side's stream past 2**31 wraps
           "int(lengths.sum(dtype=np.int64)) + len(lengths), 0", "int(lengths.sum(dtype=lengths.dtype)) + len(lengths), 0",
           ("tests/builder/test_dedup.py::test_counts_that_do_not_fit_int32_are_kept_whole_and_every_sum_is_exact",)),
    Mutant("dedup-dropped-summed-narrow", "mlmprep.builder.selection:Selection.summary",  # characters dropped wrap
           'int(result["doc_chars"][dropped].sum(dtype=np.int64))', 'int(result["doc_chars"][dropped].sum(dtype=np.int32))',
           ("tests/builder/test_dedup.py::test_counts_that_do_not_fit_int32_are_kept_whole_and_every_sum_is_exact",)),
    Mutant("driver-batches-of-chunk-chars", "mlmprep.builder.pipeline:driver_task",  # the driver's arenas keep 1 MiB batches
           "cfg = replace(cfg, chunk_chars=DRIVER_CHUNK_CHARS) if cfg.chunk_chars > DRIVER_CHUNK_CHARS else cfg",
           "cfg = cfg", (DRIVER_BATCHES,)),
    Mutant("driver-excerpts-in-chunk-chars", "mlmprep.builder.record:dedup_stats",  # the excerpts' shard in 1 MiB batches
           "shard_documents(driver_task(reads[s]), CorpusStats()", "shard_documents(reads[s], CorpusStats()",
           (DRIVER_BATCHES,)),
    Mutant("engine-holds-finished-results", "mlmprep.builder.engine.local:run_local",  # every answer held to the end
           "yield futures.pop(future), future.result()", "yield futures[future], future.result()",
           ("tests/builder/test_engine.py::test_a_result_the_caller_lets_go_is_freed_before_the_next_comes_in",)),
    Mutant("dedup-first-band-skipped", "mlmprep.builder.dedup:near_duplicate_clusters",  # band 0's candidates never linked
           "    for band in range(1, bands + 1):", "    for band in range(2, bands + 1):",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-stale-bucket-counts", "mlmprep.builder.dedup:near_duplicate_clusters",  # a band's counts start from the last's
           "        starts[:] = 0\n", "", ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-shard-keys-misaligned", "mlmprep.builder.selection:Selection.cluster",  # shards' keys joined out of order
           'keys=[r.pop("lsh_keys") for r in self.results])',
           'keys=[r.pop("lsh_keys") for r in self.results[::-1]])',
           ("tests/builder/test_dedup.py::test_near_dedup_keeps_the_first_of_each_cluster_brute_force_jaccard_confirms",)),
    # ------------------------------------------------------------ paragraph dedup and decontamination
    Mutant("paragraph-threshold-strict", "mlmprep.builder.overlap:SeenLines.decide",  # a line seen just at the threshold stays
           "(seen >= self.threshold * counts)", "(seen > self.threshold * counts)",
           ("tests/builder/test_overlap.py::test_paragraph_threshold_acts",)),
    Mutant("paragraph-blank-lines-removed", "mlmprep.builder.overlap:SeenLines.decide",  # a line without words is "all seen"
           "return (counts > 0) & (seen", "return (counts >= 0) & (seen",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-own-repeats-seen", "mlmprep.builder._dedup_kernels:first_seen",  # a line's own repeats count as seen
           "                seen[p] += 1\n", "                seen[p] += 1\n            else:\n"
           "                table[_slot(table, max(hashes[i], np.uint64(1)), mask)] = max(hashes[i], np.uint64(1))\n",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-first-probe-only", "mlmprep.builder._dedup_kernels:_slot",  # a hash moved on by a collision is lost
           "        if table[j] == h:\n            return -1\n", "        if table[j] == h and j == h & mask:\n"
           "            return -1\n",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-table-grown-empty", "mlmprep.builder.overlap:HashSet.add",  # growing forgets what was seen
           "            kernels.rehash(self.table, bigger)\n", "",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-lines-misaligned", "mlmprep.builder.overlap:trimmed",  # a document's flags taken from the next line
           "removed[start : start + count]", "removed[start + 1 : start + 1 + count]",
           ("tests/builder/test_overlap.py::test_paragraph_dedup_builds_what_the_corpus_less_its_repeated_lines_builds",)),
    Mutant("paragraph-shards-in-arrival-order", "mlmprep.builder.run:BuildTasks.repeated_lines",  # not corpus order
           "                while len(removed) in scanned:\n                    lines = scanned.pop(len(removed))",
           "                while scanned:\n                    lines = scanned.pop(max(scanned))",
           ("tests/builder/test_overlap.py::test_paragraph_dedup_takes_the_shards_in_corpus_order_when_they_come_in_last_"
            "first", "tests/builder/test_overlap.py::test_paragraph_dedup_builds_what_the_corpus_less_its_repeated_lines_"
            "builds")),
    Mutant("paragraph-short-line-unhashed", "mlmprep.builder._dedup_kernels:shingle_hashes",  # a short line has no n-gram
           "        if whole and 0 < counts[d] < ngram:\n", "        if False:\n",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-line-starts-unsorted", "mlmprep.builder.overlap:line_hashes",  # lines of a shard out of order
           "starts = np.sort(np.concatenate([offsets[:-1], breaks + 1]))", "starts = np.concatenate([offsets[:-1], "
           "breaks + 1])", ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",)),
    Mutant("paragraph-excerpt-untrimmed", "mlmprep.builder.record:dedup_stats",  # a cluster shown by another document
           "shard_documents(driver_task(reads[s]), CorpusStats()",
           "shard_documents(driver_task(TokenizeTask(reads[s].layout, reads[s].shard)), CorpusStats()", ("tests/builder/test_overlap.py::test_the_same_bytes_on_one_worker_and_on_two",)),
    Mutant("decontaminate-threshold-inclusive", "mlmprep.builder.overlap:decontaminate",  # at 0, every document moves
           "(found / np.maximum(counts, 1) > threshold)", "(found / np.maximum(counts, 1) >= threshold)",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-one-round", "mlmprep.builder.overlap:decontaminate",  # moved documents are not training text
           "        moved |= more\n", "        moved |= more\n        break\n",
           ("tests/builder/test_overlap.py::test_a_document_moved_to_training_can_take_another_with_it",)),
    Mutant("decontaminate-dropped-are-training", "mlmprep.builder.contamination:kind_matches",  # dropped copies count
           "trained.append(hashes[fate == TRAIN])", "trained.append(hashes[fate != VALIDATION])",
           ("tests/builder/test_overlap.py::test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",
            "tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves")),
    Mutant("decontaminate-validation-not-waiting", "mlmprep.builder.run:BuildTasks.shard_read",  # validation files early
           "sides = SIDES[:1] if waits else SIDES", "sides = SIDES",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-moved-in-place", "mlmprep.builder.side_rows:piece",  # moved documents before training's
           "return (p, side) if p < shards else (p - shards, MOVED_PICKS)",
           "return (p - shards, side) if p >= shards else (p, MOVED_PICKS) if side == \"train\" else (p, side)",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-moved-by-candidate-index", "mlmprep.builder.selection:Selection.decontaminate",  # wrong documents
           "            at = candidates[s][own]\n", "            at = np.flatnonzero(own)\n",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-held-picks-by-shard-index", "mlmprep.builder.selection:Selection.staged_picks",  # apart files
           "return np.searchsorted(self.candidates[s], picked) if", "return picked if",  # read at the shard's numbers
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-last-shard-unread", "mlmprep.builder.contamination:kind_matches",  # a shard's training unread
           "for s in range(len(bases) - 1):  # training's", "for s in range(len(bases) - 2):  # training's",
           ("tests/builder/test_overlap.py::"
            "test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-near-copies-are-training", "mlmprep.builder.contamination:kind_matches",  # dropped count
           "(refs >> np.uint64(LOCAL_BITS)).astype(np.int64)] == TRAIN]", "(refs >> np.uint64(LOCAL_BITS)).astype(np.int64)] != VALIDATION]",
           ("tests/builder/test_overlap.py::test_a_validation_documents_dropped_near_copy_does_not_contaminate_it",)),
    Mutant("decontaminate-windows-read-as-n-grams", "mlmprep.builder.contamination:records_at",  # one section
           "at = int(sections[:k].sum()) + (", "at = 0 + (",
           ("tests/builder/test_overlap.py::"
            "test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-first-shards-fates-for-all", "mlmprep.builder.contamination:kind_matches",  # one fates file
           "fates = all_fates[bases[s] : bases[s + 1]]", "fates = all_fates[: bases[s + 1] - bases[s]]",
           ("tests/builder/test_overlap.py::"
            "test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-two-partitions-taken-as-one", "mlmprep.builder.dedup_partitions:bucketed",  # left unsorted
           "    if parts == 1:\n", "    if parts <= 2:\n",
           ("tests/builder/test_overlap.py::test_staged_records_are_sorted_by_partition_stably",)),
    Mutant("decontaminate-kernels-loaded-in-each-worker", "mlmprep.builder.pipeline",  # each worker loads them
           "        contamination.warm_up()  # what a default", "        pass  # what a default",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("decontaminate-staged-size-unchecked", "mlmprep.builder.contamination:mapped_hashes",  # a short file
           "or size != int(sections.sum())):", "or False):",
           ("tests/builder/test_overlap.py::test_a_changed_staged_file_of_decontamination_is_a_one_line_error",)),
    Mutant("decontaminate-staged-references-unchecked", "mlmprep.builder.contamination:range_records",  # any document
           "    if np.any((refs >> np.uint64(LOCAL_BITS)) >= np.uint64(documents)):", "    if False:",
           ("tests/builder/test_overlap.py::test_a_changed_staged_file_of_decontamination_is_a_one_line_error",)),
    Mutant("decontaminate-a-range-unmatched", "mlmprep.builder.run:BuildTasks.contamination_matches",  # one task left out
           "for p in range(self.layout.partitions)]", "for p in range(1, self.layout.partitions)]",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-rounds-see-no-moved-text", "mlmprep.builder.overlap:decontaminate",  # rounds repeat the first
           "        found += np.bincount(owners[new], minlength=len(counts))\n", "",
           ("tests/builder/test_overlap.py::test_a_document_moved_to_training_can_take_another_with_it",)),
    Mutant("decontaminate-shared-by-one-document", "mlmprep.builder.contamination:held_by_two",  # sharing lost
           "np.repeat(docs[starts] != docs[ends - 1], ends - starts)", "np.repeat(docs[starts] == docs[ends - 1], ends - starts)",
           ("tests/builder/test_overlap.py::test_a_document_moved_to_training_can_take_another_with_it",)),
    Mutant("staging-held-size-unchecked", "mlmprep.builder.staged:held_index",  # ids past a short file's end
           "            or path.stat().st_size != 16 + 8 * count + 4 * tokens):", "            or False):",
           ("tests/builder/test_sharded.py::test_a_changed_held_file_or_picks_file_is_a_one_line_error",)),
    Mutant("staging-picks-unchecked", "mlmprep.builder.staged:side_picks",  # a number beyond the documents
           "    if len(picks) and (int(picks.min()) < 0 or int(picks.max()) >= documents):", "    if False:",
           ("tests/builder/test_sharded.py::test_a_changed_held_file_or_picks_file_is_a_one_line_error",)),
    Mutant("decontaminate-held-ids-misplaced", "mlmprep.builder.staged:held_index",  # ids read from the lengths
           "return lengths, 4 + 2 * count", "return lengths, 2 + 2 * count",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-moved-picks-are-validation", "mlmprep.builder.staged:side_picks",  # one file, two sides
           'picks = picks[1 : 1 + count] if side == "validation" else picks[1 + count :]',
           'picks = picks[1 : 1 + count]',
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("decontaminate-scratch-kept", "mlmprep.builder.run:BuildTasks.contamination_matches",  # staged till the end
           "        self.staging.drop(contamination.scratch_names(len(self.shards)))\n", "",
           ("tests/builder/test_overlap.py::test_the_partition_tasks_files_are_removed_once_they_are_done",)),
    Mutant("decontaminate-task-in-driver", "mlmprep.builder.engine.local:LocalEngine.results",  # the driver loads Numba
           "if self.processes(len(run.calls)) == 1 and POOLS.get(self) is None:",
           "if self.processes(len(run.calls)) == 1:",
           ("tests/builder/test_engine.py::test_the_driver_of_a_build_on_workers_never_loads_numba_or_pyarrow",)),
    Mutant("decontaminate-zero-hash-empty", "mlmprep.builder._dedup_kernels:key_slots",  # the hash 0 taken for empty
           "        if h == 0:\n            slots[i] = table.size\n            continue\n", "",
           ("tests/builder/test_overlap.py::test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-filter-unset", "mlmprep.builder._dedup_kernels:key_slots",  # every training hash let pass
           "        bits[b >> np.uint64(6)] |= np.uint64(1) << (b & np.uint64(63))\n", "",
           ("tests/builder/test_overlap.py::test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-filter-other-bit", "mlmprep.builder._dedup_kernels:mark_found",  # a neighbour's bit tested
           "if (bits[b >> np.uint64(6)] >> (b & np.uint64(63))) & np.uint64(1) == 0:",
           "if (bits[b >> np.uint64(6)] >> ((b + np.uint64(1)) & np.uint64(63))) & np.uint64(1) == 0:",
           ("tests/builder/test_overlap.py::test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-bucket-unstable", "mlmprep.builder._dedup_kernels:bucket_records",  # references mixed up
           "            out_refs[at[p]] = refs[i]", "            out_refs[at[p]] = refs[keys.size - 1 - i]",
           ("tests/builder/test_overlap.py::test_the_driver_holds_counts_not_hashes_and_moves_what_matching_every_hash_at_once_moves",)),
    Mutant("decontaminate-driver-texts-with-their-sizes", "mlmprep.builder.pipeline:hash_shard",  # header hashed
           "text_ngrams(data[8 * documents :], starts_of(sizes),", "text_ngrams(data, starts_of(sizes),",
           ("tests/builder/test_overlap.py::"
            "test_a_shard_the_driver_tokenized_is_hashed_as_its_reading_task_hashes_it",)),
    Mutant("decontaminate-copies-of-candidates-unhashed", "mlmprep.builder.selection:to_hash",  # --dedup off: a
           # validation text's second copy has no n-grams, so it neither moves nor counts
           "    return copies(keys) | held_documents(keys, cfg.validation_fraction, cfg.seed)",
           "    return copies(keys)",
           ("tests/builder/test_overlap.py::test_a_texts_later_copies_in_a_shard_are_not_hashed_and_change_nothing",)),
    Mutant("decontaminate-copies-last-hashed", "mlmprep.builder.selection:FirstCopies.__call__",  # --dedup near: the
           # copy hashed is one the build drops, so the text is not training's
           "        return self.seen.add(keys, np.arange(len(keys) + 1)) == 0",
           "        return (self.seen.add(keys[::-1], np.arange(len(keys) + 1)) == 0)[::-1]",
           ("tests/builder/test_overlap.py::test_a_texts_later_copies_in_a_shard_are_not_hashed_and_change_nothing",)),
    Mutant("decontaminate-others-runs-hold-the-candidates", "mlmprep.builder.contamination:staged_records",
           "zip(np.append(0, starts[chosen + 1]),", "zip(np.append(0, starts[chosen]),",
           ("tests/builder/test_overlap.py::test_a_shards_staged_section_holds_the_candidates_records_then_the_others",)),
    Mutant("decontaminate-others-runs-under-near", "mlmprep.builder.contamination:staged_records",
           "if parts == 1 and not with_documents and", "if parts == 1 and",  # near's references not written
           ("tests/builder/test_overlap.py::test_a_shards_staged_section_holds_the_candidates_records_then_the_others",)),
    Mutant("held-apart-spans-of-the-wrong-documents", "mlmprep.builder.pipeline:stage_ids",
           "starts_of(lengths_written[-1])[:-1][picked]", "starts_of(lengths_written[-1])[1:][picked]",
           ("tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps",)),
    Mutant("decontaminate-copies-of-the-batch-alone", "mlmprep.builder.selection:FirstCopies.__call__",  # a copy
           # in a later batch hashed again: no error, the time lost
           "        return self.seen.add(keys, np.arange(len(keys) + 1)) == 0",
           "        return HashSet().add(keys, np.arange(len(keys) + 1)) == 0",
           ("tests/builder/test_overlap.py::test_first_copies_marks_the_first_occurrence_of_each_key_over_every_batch",)),
    Mutant("decontaminate-driver-texts-unstaged", "mlmprep.builder.pipeline:tokenize_shard",  # none to hash
           "    later = not task.hashed and decontaminating(cfg)", "    later = False",
           ("tests/builder/test_overlap.py::"
            "test_a_shard_the_driver_tokenized_is_hashed_as_its_reading_task_hashes_it",)),
    Mutant("decontaminate-held-apart-let-go", "mlmprep.builder.outputs:Staging.__init__",  # apart picks deleted early
           'self.suffixes = ("ids", "lens", SIDES[0]) if apart else', 'self.suffixes = ("ids", "lens", *SIDES) if apart else',
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("ngram-window-one-word-wider", "mlmprep.builder._dedup_kernels:shingle_hashes",  # 14 words in a 13-gram
           "            if j >= ngram:\n", "            if j > ngram:\n",
           ("tests/builder/test_overlap.py::test_seen_lines_remove_what_a_set_of_earlier_n_grams_removes",
            "tests/builder/test_exclude.py::test_cut_matches_leaves_the_reference_pieces")),
    Mutant("exclude-margin-short-by-one", "mlmprep.builder.overlap:cut_matches",  # 199 characters cut before a match
           "lo, hi = max(start - EXCLUDE_MARGIN, at)", "lo, hi = max(start - EXCLUDE_MARGIN + 1, at)",
           ("tests/builder/test_exclude.py::test_the_cut_is_200_characters_each_side_and_its_limits_exact",)),
    Mutant("exclude-cut-ends-a-word-early", "mlmprep.builder.overlap:match_spans",  # the n-gram's last word not counted
           "words[i + n - 1][1])", "words[i + n - 2][1])",
           ("tests/builder/test_exclude.py::test_cut_matches_leaves_the_reference_pieces",)),
    Mutant("exclude-first-match-only", "mlmprep.builder.overlap:match_spans",  # later matches of a document left in
           "    return sorted(spans)\n", "    return sorted(spans)[:1]\n",
           ("tests/builder/test_exclude.py::test_cut_matches_leaves_the_reference_pieces",)),
    Mutant("exclude-short-piece-kept", "mlmprep.builder.overlap:cut_matches",  # a piece of 199 characters stays
           "len(p) >= EXCLUDE_MIN_PIECE and", "len(p) >= EXCLUDE_MIN_PIECE - 1 and",
           ("tests/builder/test_exclude.py::test_the_cut_is_200_characters_each_side_and_its_limits_exact",)),
    Mutant("exclude-ten-pieces-dropped", "mlmprep.builder.overlap:cut_matches",  # 10 pieces taken as too many
           "if len(kept) > EXCLUDE_MAX_PIECES:", "if len(kept) >= EXCLUDE_MAX_PIECES:",
           ("tests/builder/test_exclude.py::test_the_cut_is_200_characters_each_side_and_its_limits_exact",)),
    Mutant("option-files-not-compared", "mlmprep.format.publish:judge_existing",  # an edited evaluation set "up to date"
           '        differences += changed_files(manifest.corpus.stats.get("option_files", {}), option_files)\n', "",
           ("tests/format/test_write.py::test_read_existing_refuses_foreign_or_different_outputs",
            "tests/builder/test_exclude.py::test_an_edited_evaluation_set_is_another_build",
            "tests/builder/test_filters.py::test_an_edited_badwords_list_is_another_build")),
    Mutant("option-files-content-ignored", "mlmprep.format.publish:changed_files",  # only the names compared
           "        if before != now:", "        if [f['path'] for f in before] != [f['path'] for f in now]:",
           ("tests/format/test_write.py::test_read_existing_refuses_foreign_or_different_outputs",
            "tests/builder/test_exclude.py::test_an_edited_evaluation_set_is_another_build",
            "tests/builder/test_filters.py::test_an_edited_badwords_list_is_another_build")),
    Mutant("option-files-not-recorded", "mlmprep.builder.run:write_build",  # the manifest holds no digest to compare
           '({"option_files": option_files} if option_files else {})', "{}",
           ("tests/builder/test_exclude.py::test_an_edited_evaluation_set_is_another_build",)),
    Mutant("badwords-list-cached", "mlmprep.builder.filters:badwords_file",  # a list edited since is read as it was
           "    badwords_pattern.cache_clear()\n", "",
           ("tests/builder/test_filters.py::test_an_edited_badwords_list_is_another_build",)),
    Mutant("paragraph-example-last-shard", "mlmprep.builder.run:BuildTasks.corpus_stats",  # depends on the shards
           'next((r["lines"]["example"] for r in read if', 'next((r["lines"]["example"] for r in reversed(read) if',
           (EXAMPLES,)),
    Mutant("paragraph-example-a-kept-line", "mlmprep.builder.overlap:trimmed",  # the example is a line that stays
           "excerpt(lines[int(np.argmax(gone))])", "excerpt(lines[int(np.argmin(gone))])",
           (EXAMPLES,)),
    Mutant("exclude-example-last-match", "mlmprep.builder.overlap:excluded",  # the shard's last match, not its first
           '            if not counts.get("example"):', '            if True:',
           (EXAMPLES,)),
    Mutant("exclude-short-texts-unmatched", "mlmprep.builder.overlap:exclusion_table",  # Megatron's short texts never found
           "lengths.update(short.tolist(), [NGRAM]", "lengths.update([], [NGRAM]",
           (EXCLUDE_CUT, "tests/builder/test_exclude.py::test_a_build_with_exclude_is_the_build_of_the_pieces")),
    Mutant("exclude-min-words-exclusive", "mlmprep.builder.overlap:exclusion_table",  # a text of exactly the minimum missed
           "short = per_text[(per_text >= shortest) & (per_text < NGRAM)]",
           "short = per_text[(per_text > shortest) & (per_text < NGRAM)]", (EXCLUDE_CUT,)),
    Mutant("exclude-short-texts-as-13-grams-only", "mlmprep.builder.overlap:matched",  # a document's runs of 13 alone
           "    for n in evaluation.lengths:\n", "    for n in (NGRAM,):\n", (EXCLUDE_CUT,)),
    Mutant("exclude-nested-match-rewinds", "mlmprep.builder.overlap:cut_matches",  # a match inside a cut moves it back
           "        if hi <= at:  # a shorter match inside the cut before\n            continue\n", "",
           ("tests/builder/test_exclude.py::test_a_shorter_match_inside_a_longer_ones_cut_changes_nothing", EXCLUDE_CUT)),
    Mutant("exclude-counts-pieces-before-dropping", "mlmprep.builder.overlap:excluded",  # pieces not counted
           '            counts["pieces"] += len(pieces)\n', "",
           ("tests/builder/test_exclude.py::test_a_build_with_exclude_is_the_build_of_the_pieces",)),
    Mutant("exclude-not-applied", "mlmprep.builder.pipeline:shard_documents",  # exclusion left out of phase 1
           "return batches if task.excluded is None else excluded(batches, task.excluded, cut, drops)",
           "return batches",
           ("tests/builder/test_exclude.py::test_a_build_with_exclude_is_the_build_of_the_pieces",)),
    Mutant("contamination-gpt3-any", "mlmprep.builder.overlap:measures",  # two shared n-grams needed, not one
           "np.count_nonzero((found > 0) & documents)", "np.count_nonzero((found > 1) & documents)",
           ("tests/builder/test_overlap.py::test_the_measures_count_one_shared_n_gram_and_each_covered_token_once",)),
    Mutant("contamination-after-without-moved", "mlmprep.builder.overlap:decontaminate",  # moved text not training after
           "        set_bits(after_bits, positions[member(hashes, distinct(hashes[moved[owners]]))])\n", "",
           ("tests/builder/test_overlap.py::test_a_document_moved_to_training_can_take_another_with_it",)),
    Mutant("member-right-side", "mlmprep.builder.overlap:member",  # an equal value is looked for one place too far
           "np.searchsorted(table, values)", "np.searchsorted(table, values, side=\"right\")",
           ("tests/builder/test_overlap.py",)),
    Mutant("contamination-window-too-wide", "mlmprep.builder.overlap:covered_tokens",  # a token one past a match counts
           "lo, hi = first + np.maximum(t - k + 1, 0)", "lo, hi = first + np.maximum(t - k, 0)",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("contamination-window-not-rolled", "mlmprep.builder._dedup_kernels:window_hashes",  # a window keeps old tokens
           "                h -= np.uint64(ids[at + j - k] + 1) * top\n", "                pass\n",
           ("tests/builder/test_overlap.py::test_decontamination_moves_what_a_brute_force_reference_moves",)),
    Mutant("dedup-threshold-ignored", "mlmprep.builder._dedup_kernels:_close",  # every candidate pair an edge
           "    return same / sig.shape[1] >= threshold", "    return True", ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-threshold-strict", "mlmprep.builder._dedup_kernels:_close",  # an estimate equal to the threshold is dropped
           "    return same / sig.shape[1] >= threshold", "    return same / sig.shape[1] > threshold",
           ("tests/builder/test_dedup_kernels.py",)),
    Mutant("dedup-union-not-at-root", "mlmprep.builder._dedup_kernels:_union",  # links the element, not its root
           "        parent[ry] = rx\n    elif ry < rx:\n        parent[rx] = ry",
           "        parent[y] = rx\n    elif ry < rx:\n        parent[x] = ry", ("tests/builder/test_dedup_kernels.py",)),
    Mutant("largest-clusters-ties-later-first", "mlmprep.builder.selection:Selection.largest",  # ties by last cluster
           "np.lexsort((firsts, -sizes))", "np.lexsort((-firsts, -sizes))",
           ("tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps",)),
    Mutant("dedup-representative-largest", "mlmprep.builder._dedup_kernels:_union",  # the larger root wins
           "    if rx < ry:\n        parent[ry] = rx\n    elif ry < rx:",
           "    if rx > ry:\n        parent[ry] = rx\n    elif ry > rx:", ("tests/builder/test_dedup_kernels.py",)),
    # ------------------------------------------------------------ build engine
    Mutant("pool-per-call", "mlmprep.builder.engine.local:LocalEngine.results",  # a session's calls each start a pool (phase 2 re-forks, reloads)
           "if self in POOLS:  # inside a session", "if False:  # inside a session",
           ("tests/builder/test_engine.py",)),
    Mutant("dropped-exclude-keeps-only-the-first-cut", "mlmprep.builder.overlap:excluded",  # --keep-dropped
           '"exclude", "\\n".join(removed)', '"exclude", "\\n".join(removed[:1])',
           ("tests/builder/test_exclude.py",)),
    Mutant("gone-builds-unfinished-files-refused", "mlmprep.builder.destination:ObjectPrefix.existing",  # needs --force
           "if self.after_dead and self.present", "if False and self.present",
           ("tests/test_storage_faults.py::test_an_unfinished_build_under_a_gone_builds_lock_is_replaced_without_force",)),
    Mutant("pool-made-with-ctrl-c-live", "mlmprep.builder.engine.local:LocalPool.__init__",  # a semaphore leaks
           "with ctrl_c_held():", "if True:",
           ("tests/builder/test_engine.py",)),
    Mutant("sigterm-kills-outright", "mlmprep.cli:main",  # `kill PID` leaves .DIR.partial, a lock and running workers
           "    stop_on_sigterm()\n", "",
           ("tests/builder/test_interrupt.py::test_sigterm_to_the_build_alone_stops_it_and_its_workers_as_ctrl_c_does",)),
    Mutant("sigterm-said-as-ctrl-c", "mlmprep.cli._util:stopped",  # a stopped job's exit code hides what stopped it
           'return ("terminated", TERMINATED) if isinstance(exc, Terminated) else', 'return ("interrupted", 130) if True else',
           ("tests/builder/test_interrupt.py::test_sigterm_to_the_build_alone_stops_it_and_its_workers_as_ctrl_c_does",)),
    Mutant("sigterm-not-held-while-forking", "mlmprep.builder.engine.local:ctrl_c_held",  # a worker forked for a pool shut down
           "HELD}", "HELD[:1]}",
           ("tests/builder/test_engine.py",)),
    Mutant("no-watch-on-workers", "mlmprep.builder.engine.local:run_local",  # the driver trusts the executor to see every death
           "            if not done and pool.lost_a_worker():", "            if False:",
           ("tests/builder/test_engine.py",)),
    Mutant("forkserver-last-words", "mlmprep.builder.engine.local:quiet_when_hung_up",  # a driver hanging up mid-request adds a traceback
           "    if not issubclass(kind, EOFError):", "    if True:",
           ("tests/builder/test_engine.py",)),
    Mutant("forkserver-skips-numba", "mlmprep.builder.pipeline",  # every worker loads Numba itself in phase 2
           "if in_forkserver():  # load", "if False:  # load",
           ("tests/builder/test_engine.py",)),
    Mutant("worker-collector-off", "mlmprep.builder.engine.local:init_pool_worker",  # the server's collector stays off: cycles never freed
           "    gc.enable()\n", "",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("worker-walks-the-server-objects", "mlmprep.builder.engine.local:init_pool_worker",  # every collection walks Numba's objects
           "    gc.freeze()\n", "",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("driver-loads-numba", "mlmprep.builder.mask:row_seed",  # slot seeds through a kernel: Numba in the driver at the barrier
           '    with np.errstate(over="ignore"):\n        return int(stream_key(',
           '    from mlmprep import _kernels\n\n    _kernels.warm_up()\n    with np.errstate(over="ignore"):\n        return int(stream_key(',
           ("tests/builder/test_engine.py",)),
    Mutant("cli-starts-workers-late", "mlmprep.cli.build:build",  # the forkserver starts after the pipeline's imports
           "    if not STARTED_EARLY:  # else start_workers_before_parsing has done it, from the same options\n"
           "        start_workers_early(cfg)\n    from mlmprep.builder.mask import span_warning\n"
           "    from mlmprep.builder.run import build as run_build\n",
           "    from mlmprep.builder.mask import span_warning\n    from mlmprep.builder.run import build as run_build\n"
           "    if not STARTED_EARLY:\n        start_workers_early(cfg)\n",
           ("tests/builder/test_engine.py",)),
    Mutant("cli-starts-workers-after-parsing", "mlmprep.cli:main",  # no early start: the server waits for typer
           '    if sys.argv[1:2] == ["build"]:', '    if False:',
           ("tests/builder/test_engine.py",)),
    Mutant("early-reading-takes-a-value-for-corpus", "mlmprep.cli.build:scan_build_args",  # an option's value read as a corpus path
           '            value = value if eq else next(it, None)', '            value = value if eq else ""',
           ("tests/cli/test_build.py",)),
    Mutant("early-start-ignores-config-file", "mlmprep.cli.build:start_workers_before_parsing",  # a config file's workers/engine not waited for
           '    if options.keys() & {"--help", "--config", "--dataset"}:', '    if options.keys() & {"--help", "--dataset"}:',
           ("tests/cli/test_build.py",)),
    Mutant("generated-flag-without-its-off-form", "mlmprep.cli.options:flag_names",  # a file's `force: true` cannot be undone
           '(f"{name}/--no-{name[2:]}" if is_flag(cls, field) else name)', "name",
           ("tests/cli/test_help.py",)),
    Mutant("generated-option-defaults-to-the-field", "mlmprep.cli.options:option_parameter",  # the command line overrides a config file
           "    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None,",
           "    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default,",
           ("tests/test_config_files.py", "tests/cli/test_help.py")),
    Mutant("engine-option-ignored", "mlmprep.builder.engine:make_engine",  # --engine ray builds on local processes
           "        return RayEngine(workers, ray_address)", "        return LocalEngine(workers)",
           ("tests/builder/test_engine.py::test_the_engine_option_picks_the_engine_class", "tests/builder/test_ray_loopback.py")),
    Mutant("ray-nodes-read-driver-copies", "mlmprep.builder.engine.ray:RayEngine",  # nodes sent paths only the driver has
           "    shares_disk: ClassVar[bool] = False", "    shares_disk: ClassVar[bool] = True",
           (RAY_S3,)),
    Mutant("added-behind-the-queued-tasks", "mlmprep.builder.engine.local:run_local",  # tasks added wait behind the first phase
           "                queue.extendleft(reversed(run.added()))", "                queue.extend(run.added())",
           ("tests/builder/test_engine.py",)),
    Mutant("added-last-in-process", "mlmprep.builder.engine.local:LocalEngine.results",  # in-process too
           "            waiting.extendleft(reversed(run.added()))", "            waiting.extend(run.added())",
           ("tests/builder/test_engine.py",)),
    Mutant("run-left-early-keeps-its-tasks", "mlmprep.builder.engine.base:TaskRun.__exit__",  # a driver that fails keeps the workers busy
           "        self.finished.close()", "        pass",
           ("tests/builder/test_engine.py",)),
    Mutant("shard-let-go-with-the-token-a-file-needs", "mlmprep.builder.outputs:OutputFiles.written",  # the token before a file's first window
           "start = max(0, rows * self.layout.content_length - 1) if", "start = rows * self.layout.content_length if",
           ("tests/builder/test_sharded.py",)),
    Mutant("shards-kept-to-the-end", "mlmprep.builder.outputs:Staging.drop",  # staging holds every shard until the build ends
           "                (self.stage / STAGING / name).unlink(missing_ok=True)",
           "                pass",
           ("tests/builder/test_sharded.py",)),
    Mutant("driver-takes-what-the-workers-leave", "mlmprep.builder.engine.local:submit_first",  # the driver keeps reading once they are up
           "            while in_driver is not None and not pressed and submitter.is_alive():",
           "            while in_driver is not None and not pressed:",
           ("tests/builder/test_engine.py",)),
    Mutant("ray-gets-every-task-at-once", "mlmprep.builder.engine.ray:run_ray",  # --workers 0 on Ray: no cap, writes behind reads
           "limit = RAY_AHEAD_PER_CPU * max(1, int(ray.cluster_resources().get(\"CPU\", 1)))",
           "limit = len(calls) + 1",
           ("tests/builder/test_ray.py",)),
    Mutant("driver-helps-from-the-front", "mlmprep.builder.engine.local:submit_first",  # the driver takes the tasks the workers take first
           "                    bounds[1] -= 1\n                    index = bounds[1]\n",
           "                    index = bounds[0]\n                    bounds[0] += 1\n",
           ("tests/builder/test_engine.py",)),
    Mutant("driver-threads-per-worker", "mlmprep.builder.engine.local:LocalEngine.driver_threads",  # the driver tokenizes on one worker's --threads
           "min(threads * self.processes(1 << 30), len(", "min(threads, len(",
           ("tests/builder/test_engine.py",)),
    Mutant("driver-ignores-ctrl-c", "mlmprep.builder.engine.local:submit_first",  # the driver goes on reading shards after a Ctrl-C
           "            while in_driver is not None and not pressed and submitter.is_alive():\n",
           "            while in_driver is not None and submitter.is_alive():\n",
           ("tests/builder/test_engine.py",)),
    Mutant("workers-rerun-the-script", "mlmprep.cli:main",  # each worker imports the whole CLI again at its start
           "    as_package_main()\n    gc.set_threshold", "    gc.set_threshold", ("tests/builder/test_engine.py",)),
    Mutant("files-wait-for-every-shard", "mlmprep.builder.outputs:OutputFiles.shard_done",  # phase 2 starts only once phase 1 is over
           "        while self.needs(len(self.tasks) + 1) <= self.offsets[-1]:\n",
           "        while False:\n", ("tests/builder/test_sharded.py",)),
    Mutant("file-without-the-token-after-it", "mlmprep.builder.outputs:OutputFiles.needs",  # a file made before its last cut is known
           "return rows * self.layout.content_length + 1 if", "return rows * self.layout.content_length if",
           ("tests/builder/test_sharded.py",)),
    Mutant("shards-counted-past-a-gap", "mlmprep.builder.outputs:OutputFiles.shard_done",  # a shard still running counts as empty
           "self.sizes[len(self.offsets) - 1] is not None:", "True:\n            self.sizes = [x or 0 for x in self.sizes]\n            if False:",
           ("tests/builder/test_sharded.py",)),
    Mutant("added-after-the-whole-phase", "mlmprep.builder.engine.local:run_local",  # tasks added wait for every first-phase result
           "        top_up()\n        while pending:\n"
           "            done, pending = wait(pending, timeout=WATCH_S, return_when=FIRST_COMPLETED)\n"
           "            drain(pool.started, running)\n"
           "            for future in sorted(done, key=futures.get):\n"
           "                yield futures.pop(future), future.result()  # the result is the caller's alone to keep\n"
           "                queue.extendleft(reversed(run.added()))\n",
           "        top_up()\n        held = []\n        while pending or held:\n"
           "            if not pending:\n                queue.extend(held)\n                held = []\n"
           "                top_up()\n                continue\n"
           "            done, pending = wait(pending, timeout=WATCH_S, return_when=FIRST_COMPLETED)\n"
           "            drain(pool.started, running)\n"
           "            for future in sorted(done, key=futures.get):\n"
           "                yield futures.pop(future), future.result()\n"
           "                held += run.added()\n",
           ("tests/builder/test_engine.py",)),
    Mutant("driver-tokenizer-reloaded", "mlmprep.builder.run:stage_tokenizer",  # the driver loads the staged tokenizer again
           '        adopt_tokenizer(stage / "tokenizer.json", tok)', "        pass",
           ("tests/builder/test_sharded.py",)),
    Mutant("workers-load-the-given-tokenizer", "mlmprep.builder.pipeline",  # the forkserver does not preload it
           "        preload_tokenizer(os.environ[PRELOAD_TOKENIZER])", "        pass",
           ("tests/builder/test_engine.py",)),
    Mutant("preloaded-tokenizer-for-any-build", "mlmprep.builder.staged:worker_tokenizer",  # a worker takes it whatever was staged
           "PRELOADED.get(hashlib.sha256(path.read_bytes()).hexdigest())", "next(iter(PRELOADED.values()))",
           ("tests/builder/test_engine.py",)),
    Mutant("tokenizer-file-truncates", "mlmprep.tokenizer.encode:plain_encoder",  # the tokenizer file's truncation reaches the data
           "    tok.no_truncation()\n    tok.encode_special_tokens", "    tok.encode_special_tokens",
           ("tests/builder/test_special_tokens.py",)),
    # ------------------------------------------------------------ reading text files
    Mutant("block-keeps-crlf-cr", "mlmprep.corpus.text:_decode_lines",  # a CRLF line keeps its "\r" when its block decodes whole
           '            lines = [line.removesuffix("\\r") for line in lines]', "            pass",
           ("tests/corpus/test_sources.py",)),
    Mutant("range-reads-past-its-end", "mlmprep.corpus.text:line_blocks",  # a byte range reads on to the end of the file
           "        while end is None or offset < end:", "        while True:",
           ("tests/corpus/test_sources.py",)),
    Mutant("block-cuts-its-last-line", "mlmprep.corpus.text:line_blocks",  # a line crossing a block's end is cut in two
           "                block += f.readline()", "                pass",
           ("tests/corpus/test_sources.py",)),
    Mutant("block-drops-unended-last-line", "mlmprep.corpus.text:_decode_lines",  # a file's last line without a line end is lost
           "        if last:\n            lines.append(last)", "        pass",
           ("tests/corpus/test_sources.py",)),
    Mutant("bad-block-offsets-off-by-one", "mlmprep.corpus.text:_decode_lines",  # line offsets in a bad block skip the line ends
           "ends.append(ends[-1] + len(raw) + 1)", "ends.append(ends[-1] + len(raw))",
           ("tests/corpus/test_sources.py",)),
    # ------------------------------------------------------------ compressed files
    Mutant("stream-part-skips-its-first-line", "mlmprep.corpus.streams:stream_blocks",  # a part starting on a line start loses it
           "blank_from = _line_start(data, offset, start)", "blank_from = _line_start(data, offset, start + 1)",
           ("tests/corpus/test_compressed.py::test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file",)),
    Mutant("stream-paragraph-part-ends-on-a-line", "mlmprep.corpus.streams:stream_blocks",  # --doc-sep blank parts end at a line
           "if tail_from is not None and not paragraphs:", "if tail_from is not None:",  # and cut a paragraph
           ("tests/corpus/test_compressed.py::test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file",)),
    Mutant("stream-part-ends-on-next-line", "mlmprep.corpus.streams:stream_blocks",  # a part reads the line starting at its end
           "tail_from = _line_start(data, offset, end)", "tail_from = _line_start(data, offset, end + 1)",
           ("tests/corpus/test_compressed.py::test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file",)),
    Mutant("damage-counted-by-every-part", "mlmprep.corpus.streams:stream_blocks",  # a part after the damage counts it again
           "        if first is not None:  # the damage is in this part", "        if True:",
           ("tests/corpus/test_compressed.py",)),
    Mutant("damage-drops-the-lines-before-it", "mlmprep.corpus.streams:_whole_lines",  # skip loses the last block's whole lines
           "            damage, block = exc, None", "            raise _Damage(offset, lines, exc) from None",
           ("tests/corpus/test_compressed.py",)),
    Mutant("zstd-truncation-silent", "mlmprep.corpus.streams:_zstd_frames",  # a cut .zst reads as a shorter corpus
           "    if started:\n        raise EOFError", "    if False:\n        raise EOFError",
           ("tests/corpus/test_compressed.py",)),
    Mutant("magic-of-compressed-name-unchecked", "mlmprep.corpus.files:check_magic",  # a .gz of plain text: a codec's error
           "    if compression and not head.startswith(MAGIC[compression]):", "    if False:",
           ("tests/corpus/test_compressed.py",)),
    Mutant("compressed-data-in-plain-name-read", "mlmprep.corpus.files:check_magic",  # a gzipped .jsonl: "binary data"
           "    if not compression and found and fmt in TEXT_FORMATS:", "    if False:",
           ("tests/corpus/test_compressed.py",)),
    Mutant("compressed-file-decompressed-whole", "mlmprep.corpus.streams:_whole_lines",  # a worker holds the whole text
           "            block = f.read(STREAM_BYTES)", "            block = f.read()",
           ("tests/corpus/test_compressed.py::test_peak_memory_does_not_grow_with_the_compressed_file",)),
    Mutant("one-process-shards-as-a-workers", "mlmprep.builder.engine.base:Engine.shard_bytes",  # 24 tasks' costs
           "(TASKS_PER_WORKER * parallelism if parallelism > 1 else 1)", "(TASKS_PER_WORKER * parallelism)",
           ("tests/builder/test_engine.py::test_one_process_reads_a_corpus_in_as_few_shards_as_their_memory_allows",)),
    Mutant("shards-grow-with-the-corpus", "mlmprep.builder.engine.base:Engine.shard_bytes",  # readers' memory unbounded
           "min(MAX_SHARD_BYTES, max(256 << 10, even))", "min(64 << 20, max(256 << 10, even))",
           ("tests/builder/test_engine.py::"
            "test_a_large_corpus_is_read_in_shards_of_at_most_4_mib_so_a_readers_memory_is_not_set_by_the_corpus",)),
    Mutant("compressed-parts-unbounded", "mlmprep.corpus.shards:_stream_parts",  # a C4 json.gz: one task's memory
           "-(-text // MAX_PART_TEXT) if quick else 1)", "1)",
           ("tests/corpus/test_compressed.py::"
            "test_a_large_gzip_or_zstd_file_is_cut_into_parts_of_at_most_32_mib_of_text_whatever_the_workers",)),
    Mutant("compressed-file-one-shard", "mlmprep.corpus.shards:_stream_parts",  # one large .gz keeps one worker busy
           "max(1, min(streams, -(-text // max(shard_bytes, 1))),", "max(1,",
           ("tests/corpus/test_compressed.py",)),
    Mutant("astral-scan-skipped", "mlmprep.builder.clean:_has_astral",  # texts with astral characters scanned as if they had none
           'return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)',
           "return False", ("tests/builder/test_clean.py",)),
    Mutant("one-astral-character-missed", "mlmprep.builder.clean:_has_astral",  # a text with a single astral character looks BMP-only
           'return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)',
           'return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text) + 2',
           ("tests/builder/test_clean.py",)),
    # ------------------------------------------------------------ windows, segments, read-ahead
    Mutant("windows-stop-at-shard-end", "mlmprep.builder.side_rows:stream_slice",  # a window crossing shards loses the next one's head
           "parts.append(run[a - base : b - base])", "parts.append(run[a - base : b - base])\n        break",
           ("tests/builder/test_sharded.py",)),
    Mutant("segments-quadratic", "mlmprep.builder.windows:text_segments",  # re-slice the rest of the text after every segment
           "segment, pos = buffer[pos : pos + chars], pos + chars",
           "segment, buffer = buffer[:chars], buffer[chars:]",
           ("tests/builder/test_windows.py",)),
    Mutant("han-cut-counts-as-word-cut", "mlmprep.tokenizer.encode:word_tables",  # any letter counts, so Han text is 98% cut
           "first[idx] = bool(text) and spaced_alnum(text[0])\nlast[idx] = bool(text) and spaced_alnum(text[-1])",
           "first[idx] = bool(text) and text[0].isalnum()\nlast[idx] = bool(text) and text[-1].isalnum()",
           ("tests/builder/test_windows.py",)),
    Mutant("unspaced-scripts-miss-thai", "mlmprep.tokenizer.encode:spaced_alnum",  # only Han is told apart
           "not unicodedata.name(char, \"\").startswith(UNSPACED_SCRIPTS)",
           "not unicodedata.name(char, \"\").startswith(\"CJK \")",
           ("tests/builder/test_windows.py",)),
    Mutant("prefetch-unbounded", "mlmprep.progress:prefetch",  # read-ahead without a bound
           "q: queue.Queue = queue.Queue(maxsize=depth)", "q: queue.Queue = queue.Queue()",
           ("tests/test_progress.py",)),
    # ------------------------------------------------------------ batching and collation
    Mutant("cost-ignores-alpha", "mlmprep.train.batch:padded_cost",  # decoder tokens cost as much as encoder ones
           "return float(len(rows) * enc + budget.alpha * len(rows) * dec)", "return float(len(rows) * (enc + dec))",
           ("tests/train/test_batch.py", "tests/train/test_options.py")),
    Mutant("starts-of-each-runs-end", "mlmprep.format.rows:starts_of",  # offsets one run late: row i reads row i + 1
           "np.cumsum(sizes, out=starts[1:])", "np.cumsum(sizes, out=starts[:-1])", ("tests/format/test_rows.py",)),
    Mutant("span-indices-from-the-next-span", "mlmprep.format.rows:span_indices",  # every gather one span off
           "np.repeat(starts - starts_of(sizes)[:-1], sizes)", "np.repeat(starts - starts_of(sizes)[1:], sizes)",
           ("tests/format/test_rows.py",)),
    Mutant("plan-pools-sorted-by-their-top-byte", "mlmprep.train.batch:_sort_pools",  # costs in order of magnitude
           "if ((every ^ some) >> shift) & np.uint64(255) == 0:", "if p < 6:",
           ("tests/train/test_batch.py",)),
    Mutant("plan-sorted-across-pools", "mlmprep.train.batch:_sort_pools",  # an epoch sorted whole, batches alike
           "b = min(a + pool, n)", "b = n",
           ("tests/train/test_batch.py",)),
    Mutant("plan-pool-ties-reversed", "mlmprep.train.batch:_sort_pools",  # the scatter is not stable
           "for i in range(a, b):  # a stable scatter", "for i in range(b - 1, a - 1, -1):  # a stable scatter",
           ("tests/train/test_batch.py",)),
    Mutant("collate-no-pad-multiple", "mlmprep.train.collate:_pad",  # widths not rounded up to the multiple
           "width = -(-width // multiple) * multiple", "width = width",
           ("tests/train/test_collate.py", "tests/train/test_options.py")),
    Mutant("collate-cut-drops-the-last-token", "mlmprep.train.collate:_pad",  # a capped row ends without its </s>
           "            target[width - 1] = source[len(source) - 1]\n", "            pass\n",
           ("tests/train/test_collate.py",)),
    Mutant("collate-mask-covers-padding", "mlmprep.train.collate:_pad",  # the attention mask is all ones
           "                beside[j, t] = t < keep", "                beside[j, t] = 1",
           ("tests/train/test_collate.py",)),
    Mutant("collate-shift-keeps-ignore", "mlmprep.train.collate:_pad",  # -100 reaches the decoder's embedding
           "beside[j, t] = pad_id if target[t - 1] == IGNORE else target[t - 1]", "beside[j, t] = target[t - 1]",
           ("tests/train/test_collate.py",)),
    Mutant("collate-vocab-checks-only-the-first-row", "mlmprep.train.collate:_pad",  # a bad id past row 0 passes
           "        if vocab > 0 and bad_row < 0:", "        if vocab > 0 and bad_row < 0 and j == 0:",
           ("tests/train/test_collate.py",)),
    Mutant("collate-labels-vocab-unchecked", "mlmprep.train.collate:_collate_rows",  # a damaged label id passes
           "    if row < 0:\n        row, value = dec_row, dec_value", "    pass",
           ("tests/train/test_collate.py",)),
    Mutant("collate-many-files-cut-to-a-few", "mlmprep.format.load:Column.buffers",  # rows past FEW_FILES unreadable
           "return files if len(files) <= FEW_FILES else List(files)",
           "return files if len(files) <= FEW_FILES else List(files[:FEW_FILES])",
           ("tests/train/test_collate.py",)),
    Mutant("locate-in-the-next-batch", "mlmprep.format.load:locate",  # rows read from the record batch after theirs
           'c = np.searchsorted(chunks[:, 0], row, side="right") - 1',
           'c = min(np.searchsorted(chunks[:, 0], row, side="right"), len(chunks) - 1)',
           ("tests/train/test_collate.py", "tests/format/test_load.py")),
    Mutant("locate-unbounded", "mlmprep.format.load:locate",  # a row past the end is read from beyond the file
           "        if row < 0 or row >= len(offsets) - 1:", "        if row < 0:",
           ("tests/format/test_load.py",)),
    # ------------------------------------------------------------ trainer options
    Mutant("adafactor-is-adamw", "mlmprep.train.optim:make_optimizer",  # --optimizer adafactor silently trains with AdamW
           'if cfg.optimizer == "adafactor":', 'if cfg.optimizer == "adafactor-never":',
           ("tests/train/test_options.py::test_adafactor_is_adafactor",)),
    Mutant("max-encoder-len-ignored", "mlmprep.train.prepare:make_collator",
           "max_encoder_len=cfg.max_encoder_len,", "max_encoder_len=None,",
           ("tests/train/test_options.py",)),
    Mutant("lr-schedule-not-applied", "mlmprep.train.step:train_step",  # the optimizer keeps the peak lr
           'group["lr"] = lr\n', 'group["lr"] = cfg.lr\n',
           ("tests/train/test_options.py",)),
    Mutant("weight-decay-ignored", "mlmprep.train.optim:make_optimizer",
           '"weight_decay": cfg.weight_decay}', '"weight_decay": 0.0}',
           ("tests/train/test_options.py",)),
    Mutant("betas-ignored", "mlmprep.train.optim:make_optimizer",
           "betas=(cfg.beta1, cfg.beta2)", "betas=(0.9, 0.999)",
           ("tests/train/test_options.py",)),
    Mutant("grad-clip-ignored", "mlmprep.train.step:train_step",
           "grad_norm(run.params, run.cfg.grad_clip)", "grad_norm(run.params, 0.0)",
           ("tests/train/test_options.py",)),
    Mutant("budget-ignores-alpha", "mlmprep.train.epochs:make_budget",  # the plan's budget keeps the default alpha
           "Budget(cfg.max_tokens_per_batch, limits.tokens, limits.examples, alpha=cfg.alpha,",
           "Budget(cfg.max_tokens_per_batch, limits.tokens, limits.examples, alpha=2.0,",
           ("tests/train/test_options.py",)),
    Mutant("resume-in-eval-mode", "mlmprep.train.prepare:make_model_and_optimizer",  # dropout off after a resume
           "    model.train()  # from_pretrained", "    pass  # from_pretrained",
           ("tests/train/test_options.py::test_resume_with_dropout_is_exact",)),
    # ------------------------------------------------------------ checkpoints and resume
    Mutant("rng-not-restored", "mlmprep.train.checkpoint:load",  # resume reseeds instead of restoring the RNG
           "set_rng_state(torch.load(path / \"rng.pt\", weights_only=True)[rank])",
           "torch.manual_seed(0)",
           ("tests/train/test_options.py::test_resume_with_dropout_is_exact",)),
    Mutant("rng-of-rank-0", "mlmprep.train.checkpoint:load",  # every rank restores rank 0's RNG
           "set_rng_state(torch.load(path / \"rng.pt\", weights_only=True)[rank])",
           "set_rng_state(torch.load(path / \"rng.pt\", weights_only=True)[0])",
           ("tests/train/test_ddp.py::test_ddp_resume_with_dropout_is_exact",)),
    Mutant("checkpoint-in-place", "mlmprep.train.checkpoint:save",  # written under its real name, no rename
           'tmp = run / f".{PREFIX}{step}.tmp"', "tmp = final",
           ("tests/train/test_options.py::test_sigkill_while_writing_a_checkpoint_resumes_from_the_last_whole_one",)),
    Mutant("keep-one-more-checkpoint", "mlmprep.train.checkpoint:save",
           "for old in checkpoints(run)[: -cfg.keep_checkpoints]:", "for old in checkpoints(run)[: -cfg.keep_checkpoints - 1]:",
           ("tests/train/test_training.py",)),
    # ------------------------------------------------------------ build output directory
    Mutant("out-link-replaced", "mlmprep.format.publish:build_directory",  # a link --out is not resolved: the build replaces the link
           "return Path(os.path.realpath(given or \".\"))", "return Path(os.path.abspath(given or \".\"))",
           ("tests/cli/test_build.py::test_an_out_that_is_a_symbolic_link_is_written_through",)),
    Mutant("foreign-manifest-replaced", "mlmprep.format.publish:judge_existing",  # any manifest.json counts as a build, so --force deletes it
           'if not isinstance(data, dict) or not {"format_version", "mlmprep_version"} <= data.keys():',
           "if data is None:",
           ("tests/cli/test_build.py::test_a_directory_whose_manifest_is_not_mlmprep_s_is_never_replaced",)),
    Mutant("verify-trusts-manifest-types", "mlmprep.builder.verify:verify",  # an edited manifest field gives a traceback
           "    except (ManifestError, MemberError) as exc:", "    except ZeroDivisionError as exc:",
           ("tests/builder/test_verify.py::test_a_manifest_that_contradicts_its_tokenizer_options_or_json_is_reported",)),
    Mutant("format-version-ignored", "mlmprep.format.publish:judge_existing",  # a newer format with the same options is "up to date"
           "        if manifest.format_version != version:", "        if False:",
           ("tests/cli/test_build.py::test_a_build_in_another_format_version_is_never_taken_as_up_to_date",)),
    Mutant("out-parents-left", "mlmprep.format.publish:build_lock",  # a failed build leaves the directories it made for --out
           "made = [p for p in Path(out).parents if not os.path.lexists(p)]", "made = []",
           ("tests/cli/test_build.py::test_a_failed_build_leaves_no_directory_it_made_for_out",)),
    Mutant("out-inside-corpus", "mlmprep.builder.run:build",  # an --out inside a corpus directory is accepted
           "    destination.check_outside(cfg.corpus)\n", "    pass\n",
           ("tests/cli/test_build.py::test_an_out_inside_a_corpus_directory_is_refused",)),
    Mutant("cli-collects-at-700", "mlmprep.cli:main",  # the CLI's collector walks every import's objects again and again
           "    gc.set_threshold(mlmprep.GC_YOUNG, *gc.get_threshold()[1:])\n", "",
           ("tests/cli/test_help.py::test_commands_that_multiply_no_matrices_start_numpy_without_blas_threads",)),
    Mutant("worker-collects-at-700", "mlmprep.builder.engine.local:init_pool_worker",  # a worker collects every 700 objects
           "    gc.set_threshold(mlmprep.GC_YOUNG, *gc.get_threshold()[1:])\n", "",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("blas-threads-spin", "mlmprep.cli:main",  # NumPy's BLAS threads spin in the driver and the workers' server
           '        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")\n', "        pass\n",
           ("tests/cli/test_help.py::test_commands_that_multiply_no_matrices_start_numpy_without_blas_threads",)),
    Mutant("blas-off-for-training", "mlmprep.cli",  # CPU training's matrix products on one BLAS thread
           'NO_MATRICES = ("build",', 'NO_MATRICES = ("train", "compare-methods", "build",',
           ("tests/cli/test_help.py::test_commands_that_multiply_no_matrices_start_numpy_without_blas_threads",)),
    Mutant("blas-user-value-overridden", "mlmprep.cli:main",  # the user's OPENBLAS_NUM_THREADS replaced
           '        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")\n', '        os.environ["OPENBLAS_NUM_THREADS"] = "1"\n',
           ("tests/cli/test_help.py::test_commands_that_multiply_no_matrices_start_numpy_without_blas_threads",)),
    Mutant("worker-named-semaphores", "mlmprep.builder.engine.local:init_pool_worker",  # Numba's lock in a killed worker: the tracker warns
           '    multiprocessing.set_start_method("fork", force=True)\n', "",
           ("tests/builder/test_engine.py::test_a_worker_killed_after_masking_leaves_the_resource_tracker_nothing_to_warn_about",)),
    # ------------------------------------------------------------ corpus and options
    Mutant("string-column-undecoded", "mlmprep.corpus.columnar:_python_values",  # invalid UTF-8 in a string column fails the build
           "return array.cast(pa.large_binary()).to_pylist()", "raise",
           ("tests/corpus/test_sources.py::test_invalid_utf8_in_a_string_column_follows_the_decode_policy",)),
    Mutant("ignored-option-accepted", "mlmprep.config:BuildConfig.__post_init__",  # --whole-word with span: a build different in name only
           "        self.check_applies()\n", "",
           ("tests/cli/test_errors.py::test_an_option_the_objective_or_engine_ignores_is_refused",)),
    Mutant("fifo-read", "mlmprep.corpus.sources:resolve",  # a named pipe as corpus blocks the build
           "        elif not path.is_file():", "        elif False:",
           ("tests/corpus/test_sources.py::test_bad_sources_name_the_path_and_the_fix",)),
    # ------------------------------------------------------------ remask and inspect of damaged builds
    Mutant("remask-unchecked-windows", "mlmprep.builder.pipeline:remask_file",  # masks of changed windows would look sound
           "if problem := file_problem(Path(name), record):", "if problem := None:",
           ("tests/format/test_damaged_builds.py",)),
    Mutant("inspect-unchecked-split", "mlmprep.cli.build:inspect_build",  # a split with a missing file: a traceback
           "check_splits(local, manifest, [name for name in (split,) if name in manifest.splits] if remote else None)",
           "pass",
           ("tests/format/test_damaged_builds.py",)),
    Mutant("remask-keeps-ignored-options", "mlmprep.builder.remask:add_seeds",  # an older build's stored whole_word under span
           'BuildConfig.used(manifest.config)', 'manifest.config',
           ("tests/builder/test_sharded.py::test_a_build_that_stored_an_option_its_objective_ignores_still_remasks",)),
    Mutant("arrow-damage-traceback", "mlmprep.format.write:read_batches",  # a damaged data file header: a traceback, not one line
           "    except (pa.ArrowInvalid, OSError) as exc:\n        raise damaged(", "    except ZeroDivisionError as exc:\n        raise damaged(",
           ("tests/format/test_damaged_builds.py",)),
    Mutant("run-written-before-the-data-opens", "mlmprep.train.prepare:start",  # a damaged build leaves a RUN behind
           "    split, plan = epoch_plan(cfg, world, state.epoch, state.seeds, mix, identity=state.data, rehash=True)\n"
           "    write_run(cfg, world, state.step)\n",
           "    write_run(cfg, world, state.step)\n"
           "    split, plan = epoch_plan(cfg, world, state.epoch, state.seeds, mix, identity=state.data, rehash=True)\n",
           ("tests/format/test_damaged_builds.py::test_training_refuses_a_data_file_with_a_damaged_header_in_one_line",)),
    Mutant("resume-reads-the-new-seed-count", "mlmprep.train.prepare:seeds_and_digest",  # a remask changes a stopped run's later epochs
           'else resumed_seeds(cfg, len(manifest.seeds), saved)', 'else len(manifest.seeds)',
           ("tests/train/test_training.py::test_a_remask_between_stop_and_resume_leaves_the_run_on_the_seeds_it_started_with",)),
    Mutant("resume-on-other-data", "mlmprep.train.prepare:seeds_and_digest",  # a resume trains on whatever build DATA names
           "        check_same_data(cfg, saved, digest)\n", "        pass\n",
           ("tests/train/test_resume.py::test_resume_on_other_data_is_refused_and_a_moved_copy_of_the_same_data_resumes",)),
    Mutant("train-collates-any-token-id", "mlmprep.train.prepare:make_collator",  # a damaged id reaches the embedding
           "                    vocab_size=tok.vocab_size)", "                    )",
           ("tests/format/test_damaged_builds.py",)),
    Mutant("remask-leaves-published-splits", "mlmprep.builder.remask:publish_seeds",  # an interrupted remask leaves unlisted seed-k
           "                    shutil.rmtree(path, ignore_errors=True)", "                    pass",
           ("tests/format/test_damaged_builds.py::test_a_remask_stopped_while_publishing_takes_back_the_splits_it_published",)),
    Mutant("optimizer-state-not-restored", "mlmprep.train.checkpoint:load",
           "optimizer.load_state_dict(torch.load(path / \"optimizer.pt\"", "(torch.load(path / \"optimizer.pt\"",
           ("tests/train/test_training.py", "tests/train/test_options.py")),
    Mutant("unreachable-input-length-accepted", "mlmprep.builder.mask:check_input_length_reached",  # exact windows silently one token short
           "    if enc[0] != input_length:\n", "    if enc[0] > input_length:\n",
           ("tests/builder/test_mask.py", "tests/cli/test_errors.py")),
    Mutant("long-document-cut-before-any-whitespace", "mlmprep.tokenizer.encode:whitespace_pieces",  # a T5 tokenizer's extra '▁' at a cut
           "        cut = clean_cut(text, start + 1, start + size)\n", "        cut = -1\n", ("tests/builder/test_determinism.py",)),
    Mutant("repeated-piece-takes-the-last-ids", "mlmprep.tokenizer.encode:encode_pieces",  # a repeat's ids misplaced
           "copy_of = [first.setdefault(piece, len(first)) for piece in pieces[start:stop]]",
           "copy_of = [first.setdefault(piece, len(first)) for piece in pieces[start:stop]][::-1]",
           ("tests/builder/test_determinism.py",)),
    Mutant("verify-trusts-the-manifest-tokenizer-ids", "mlmprep.builder.verify:check_tokenizer",  # pad_id 7 in the manifest: train crashes
           "        if getattr(record, key) != value:\n", "        if False:\n", ("tests/builder/test_verify.py",)),
    Mutant("verify-trusts-window-lengths", "mlmprep.builder.verify:verify",
           "        check_window_lengths(windows_name, manifest, windows[\"tokens\"], report)\n", "", ("tests/builder/test_verify.py",)),
    Mutant("text-spelling-eos-gets-its-id", "mlmprep.tokenizer.encode:encode",  # "</s>" in a corpus: an EOS masked as noise
           "    if spelled_specials(tok)[flat].any():", "    if False:", ("tests/builder/test_determinism.py",)),
    Mutant("tokenizer-trained-on-special-text", "mlmprep.tokenizer.train:train_tokenizer",  # a second "</s>" piece; the build refuses
           "    texts = (SPELLED_SPECIAL.sub(\" \", t) for t in texts)\n", "",
           ("tests/builder/test_tokenizer_training.py", "tests/builder/test_determinism.py")),
    Mutant("unigram-scores-not-converted", "mlmprep.tokenizer.unigram:unigram_tokenizer",  # every piece as likely: other segmentations
           "else round(sp.get_score(i), SCORE_DECIMALS))", "else -1.0)", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-scores-unrounded", "mlmprep.tokenizer.unigram:unigram_tokenizer",  # the build's tokenizer.json (reparsed) differs
           "round(sp.get_score(i), SCORE_DECIMALS)", "float(sp.get_score(i))",
           ("tests/builder/test_sharded.py::test_tokenizer_train_learns_from_the_sample_build_takes",
            "tests/train/test_training.py::test_cli_smoke_run_on_the_builtin_sample_learns")),
    Mutant("unigram-no-dummy-prefix", "mlmprep.tokenizer.unigram",  # trained without the "▁" the Metaspace adds
           "add_dummy_prefix=True", "add_dummy_prefix=False", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-threads-from-the-machine", "mlmprep.tokenizer.unigram",  # other pieces on another machine
           "num_threads=SPM_THREADS,", "num_threads=len(__import__('os').sched_getaffinity(0)),",
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-long-documents-uncut", "mlmprep.tokenizer.unigram:feed",  # the trainer skips sentences over its limit
           "for s in whitespace_pieces(text, SENTENCE_CHARS) if s.strip()", "for s in [text] if s.strip()",
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-pieces-of-12-characters", "mlmprep.tokenizer.unigram",  # more tokens per character
           "num_sub_iterations=1,", "num_sub_iterations=1, max_sentencepiece_length=12,",
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-pruning-as-sentencepiece-prunes", "mlmprep.tokenizer.unigram",  # 0.75 a round: more EM rounds
           "shrinking_factor=SHRINK, ", "", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-shrink-reverted", "mlmprep.tokenizer.unigram",  # the progress counts 0.75's rounds, trained so
           "SHRINK = 0.6 ", "SHRINK = 0.75 ", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-seeds-as-sentencepiece-seeds", "mlmprep.tokenizer.unigram:main",  # 1,000,000: slower
           'options.setdefault("seed_sentencepiece_size"', 'options.get("seed_sentencepiece_size"',
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-seeds-whatever-the-vocabulary", "mlmprep.tokenizer.unigram:seed_pieces",  # too few for 64k
           "max(SEEDS_PER_PIECE * n_pieces, min(SEED_PIECES, chars // CHARS_PER_SEED))",
           "min(SEED_PIECES, chars // CHARS_PER_SEED)", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-seeds-whatever-the-sample", "mlmprep.tokenizer.unigram:seed_pieces",  # small samples: slower, worse
           "min(SEED_PIECES, chars // CHARS_PER_SEED)", "SEED_PIECES", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-seeds-by-the-sentences", "mlmprep.tokenizer.unigram:main",  # their count, not their characters
           "seed_pieces(int(n_pieces), sum(map(len, sentences)))", "seed_pieces(int(n_pieces), len(sentences))",
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-sentences-of-the-last-lines", "mlmprep.tokenizer.unigram:read_sentences",  # the sample's start lost
           'sentences += json.loads("[" + ",".join(lines) + "]")', 'sentences = json.loads("[" + ",".join(lines) + "]")',
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-two-em-rounds-a-pruning", "mlmprep.tokenizer.unigram",  # SentencePiece's 2: a third more CPU
           "num_sub_iterations=1,", "num_sub_iterations=2,", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-blank-sample-sent-to-the-trainer", "mlmprep.tokenizer.unigram:train_model",  # SentencePiece's error
           "            if lines == 0:\n                raise EmptySample(", "            if False:\n                raise EmptySample(",
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("unigram-progress-stuck-at-the-start", "mlmprep.tokenizer.unigram:follow_log",  # the EM rounds never move the bar
           "on_round(pruned(seeds, int(found.group(2))), int(found.group(2)))",
           "on_round(0, int(found.group(2)))", ("tests/builder/test_tokenizer_training.py",)),
    Mutant("vocab-too-small-names-the-pieces", "mlmprep.tokenizer.train:train_unigram",  # "at least 106": still too small
           'r"required_chars\\. \\d+ vs (\\d+)"', 'r"required_chars\\. (\\d+) vs \\d+"',
           ("tests/builder/test_tokenizer_training.py", "tests/cli/test_errors.py")),
    Mutant("wordpiece-not-the-mlm-default", "mlmprep.config:BuildConfig.trained_tokenizer_type",  # BERT builds get T5's Unigram
           'return self.tokenizer_type or ("wordpiece" if self.objective in ("mlm", "mdlm") else "unigram")',
           'return self.tokenizer_type or "unigram"', ("tests/builder/test_tokenizer_training.py",)),
    Mutant("tokenizer-type-ignored", "mlmprep.builder.tokenizer_file:train_on_sample",  # --tokenizer-type bpe trains a Unigram tokenizer
           "kind=cfg.trained_tokenizer_type()", 'kind="unigram"',
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("wordpiece-loads-as-a-generic-tokenizer", "mlmprep.format.write:hf_tokenizer_files",  # AutoTokenizer: no BERT class
           '"tokenizer_class": "BertTokenizerFast"', '"tokenizer_class": "PreTrainedTokenizerFast"',
           ("tests/builder/test_tokenizer_training.py",)),
    Mutant("wordpiece-rows-unframed", "mlmprep.tokenizer.wordpiece:wordpiece_tokenizer",  # BERT rows without [CLS] ... [SEP]
           "    tok.post_processor = processors.TemplateProcessing(", "    tok.processor = processors.TemplateProcessing(",
           ("tests/builder/test_tokenizer_training.py::test_an_mlm_build_trains_berts_wordpiece_that_transformers_loads_and_masks_whole_words",)),
    Mutant("wordpiece-ties-in-hash-order", "mlmprep.tokenizer.train:train_tokenizer",  # the tokenizers trainer: other bytes each run
           "        tok = train_wordpiece(texts, vocab_size, n_sentinels, bar)\n",
           "        from tokenizers import trainers\n        from mlmprep.tokenizer import wordpiece as wp\n"
           "        tok = wp.wordpiece_tokenizer({name: i for i, name in enumerate(wp.BERT_SPECIALS)})\n"
           "        tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size - n_sentinels, "
           "special_tokens=list(wp.BERT_SPECIALS), show_progress=False))\n",
           ("tests/builder/test_tokenizer_training.py::test_each_tokenizer_type_gives_the_same_bytes_in_separate_processes_thread_counts_and_cores",)),
    Mutant("wordpiece-continuations-not-in-both-forms", "mlmprep.tokenizer.wordpiece:wordpiece_vocab",  # [UNK] for a rare ##x
           "    for form in chars + [PREFIX + char for char in joining]:", "    for form in chars:",
           ("tests/builder/test_tokenizer_training.py::test_the_wordpiece_vocabulary_is_as_good_as_the_tokenizers_trainers_and_laid_out_like_berts",)),
    Mutant("wordpiece-continuations-of-split-characters", "mlmprep.tokenizer.wordpiece:continuations",  # CJK: twice the ids
           "    return [char for char in chars if len(", "    return chars or [char for char in chars if len(",
           ("tests/builder/test_tokenizer_training.py::test_cjk_characters_which_bert_always_splits_off_take_one_wordpiece_id_each",)),
    Mutant("wordpiece-word-starts-kept", "mlmprep.tokenizer.wordpiece:wordpiece_vocab",  # "▁the": a piece WordPiece never uses
           'piece[1:] if piece.startswith("▁") else PREFIX + piece', 'piece if piece.startswith("▁") else PREFIX + piece',
           ("tests/builder/test_tokenizer_training.py::test_the_wordpiece_vocabulary_is_as_good_as_the_tokenizers_trainers_and_laid_out_like_berts",)),
    Mutant("wordpiece-vocab-past-vocab-size", "mlmprep.tokenizer.wordpiece:wordpiece_vocab",  # every merge SentencePiece made
           "        if len(vocab) >= n_pieces:\n            break\n", "",
           ("tests/builder/test_tokenizer_training.py::test_the_wordpiece_vocabulary_is_as_good_as_the_tokenizers_trainers_and_laid_out_like_berts",)),
    Mutant("wordpiece-small-vocab-unrefused", "mlmprep.tokenizer.train:train_wordpiece",  # a vocabulary larger than asked
           "    if n_pieces < needed:", "    if False:",
           ("tests/builder/test_tokenizer_training.py::test_a_wordpiece_vocab_size_below_both_forms_of_the_characters_is_refused_in_words",)),
    Mutant("wordpiece-progress-stuck", "mlmprep.tokenizer.unigram:follow_log",  # the merges never move the bar
           "            on_round(merges, merges + alphabet + 1)", "            on_round(0, merges + alphabet + 1)",
           ("tests/builder/test_tokenizer_training.py::test_the_wordpiece_training_shows_its_counting_and_merges",)),
    Mutant("wordpiece-long-words-learnt", "mlmprep.tokenizer.wordpiece:trainer_lines",  # a 5,000-character word: the trainer fails
           "for word, n in sorted(counts.items()) if len(word) <= MAX_WORD]",
           "for word, n in sorted(counts.items())]",
           ("tests/builder/test_tokenizer_training.py::test_a_word_longer_than_wordpiece_encodes_is_not_learnt_from",)),
    Mutant("unigram-trainer-outlives-ctrl-c", "mlmprep.tokenizer.unigram:train_model",  # the child trains on after the build ends
           "                proc.kill()\n", "", ("tests/builder/test_interrupt.py",)),
    Mutant("compare-arms-deduplicated", "mlmprep.compare:arm_config",  # the text arm's replay reads documents dedup dropped
           'dedup="off", ', "",
           ("tests/test_compare.py::test_a_corpus_with_copies_of_documents_compares_both_arms_on_every_training_document",)),
    Mutant("compare-holds-out-by-position", "mlmprep.compare:split_documents",  # copies of a text fall on both sides
           "held = held_out_text(doc, cfg.heldout_fraction, cfg.seed)",
           "held = held_out_text(str(counts['train'] + counts['heldout']), cfg.heldout_fraction, cfg.seed)",
           ("tests/test_compare.py",)),
    Mutant("compare-force-without-set-aside", "mlmprep.compare:compare",  # a failed --force run loses the old result
           "        set_aside(out, previous)\n", "", ("tests/test_compare.py",)),
    Mutant("segment-chars-off-by-four", "mlmprep.builder.windows:segment_chars",  # segments of (input_length - 1) * 4 characters
           "    return (input_length - 2) * 4", "    return (input_length - 1) * 4",
           ("tests/builder/test_windows.py", "tests/builder/test_sharded.py")),
    Mutant("compare-methods-replaces-a-foreign-out", "mlmprep.compare:check_compare",  # a user's notes.txt deleted
           "    if names - OUTPUTS or not (out / \"results.json\").is_file():", "    if False:", ("tests/test_compare.py",)),
    Mutant("train-takes-non-finite-numbers", "mlmprep.config:TrainConfig.check_finite",  # --grad-clip nan wrote NaN weights
           "            if isinstance(value, float) and not math.isfinite(value):", "            if False:",
           ("tests/train/test_refused_options.py",)),
    Mutant("hf-tokenizer-without-eos-frame", "mlmprep.format.write:hf_tokenizer_json",  # AutoTokenizer gave no final </s>
           "    if own is None:\n        tok.post_processor = eos_frame(tok)",
           "    pass", ("tests/format/test_hf_frame.py",)),
    Mutant("workers-import-fsspec-each", "mlmprep.builder.pipeline",  # 0.06 s of a core per worker, again
           "    import fsspec.implementations.local  # noqa: F401", "    pass",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("workers-import-pyarrow-each", "mlmprep.builder.pipeline",  # every worker's first write imports it again
           "    import pyarrow  # noqa: F401", "    pass",
           ("tests/builder/test_engine.py::test_build_workers_start_with_numba_loaded_once_in_the_forkserver",)),
    Mutant("driver-imports-pyarrow", "mlmprep.format.write",  # 0.14 s of the driver's start, for nothing
           "if TYPE_CHECKING:", "if True:",
           ("tests/builder/test_engine.py::test_the_driver_of_a_build_on_workers_never_loads_numba_or_pyarrow",)),
    Mutant("hf-tokenizer-leaves-the-frame-on", "mlmprep.format.write:hf_tokenizer_json",  # the build's tokenizer changed
           "    finally:\n        tok.post_processor = own", "    finally:\n        pass",
           ("tests/format/test_hf_frame.py",)),
    Mutant("eos-frame-kept-on-load", "mlmprep.tokenizer.load:load_tokenizer",  # the framed file changed the build's identity
           "    if is_eos_frame(tok.post_processor, tok):", "    if False:",
           ("tests/format/test_hf_frame.py", "tests/builder/test_verify.py")),
    Mutant("budget-trainer-ignores-the-epoch", "mlmprep.train.hf:EpochMicrobatches.set_epoch",  # every epoch on seed-0
           "        split = open_epoch(self.data, epoch)", "        split = open_epoch(self.data, 0)",
           ("tests/train/test_hf.py",)),
    Mutant("budget-trainer-flattens-microbatches", "mlmprep.train.hf:EpochMicrobatches.set_epoch",  # batches over the microbatch caps
           "        self.microbatches = [mb.rows for batch in plan for mb in batch.ranks[0]]",
           "        self.microbatches = [np.concatenate([mb.rows for mb in batch.ranks[0]]) for batch in plan]",
           ("tests/train/test_hf.py",)),
    Mutant("wrapped-lines-not-counted", "mlmprep.corpus.text:_counted",  # wrapped prose built with no hint
           "        stats.wrapped_lines += wrapped_count(lines)\n", "", ("tests/corpus/test_hints.py",)),
    Mutant("wrapped-prose-judged-per-shard", "mlmprep.builder.record:wrapped_prose",  # a file's figures depend on its shards
           "            counts = per_file.setdefault(shard.source, [0, 0, 0, 0])",
           "            counts = per_file.setdefault(str(shard.index), [0, 0, 0, 0])", ("tests/corpus/test_hints.py",)),
    Mutant("missing-text-column-built-anyway", "mlmprep.builder.outputs:plan_rest",  # --text-column most records lack: 211 rows
           "    if error := missing_field_error(corpus_name(corpus), corpus_stats, layout.cfg.text_column):\n"
           "        raise error\n", "", ("tests/corpus/test_hints.py",)),
    Mutant("missing-field-count-names-text", "mlmprep.format.report",  # --text-column body counted as "text"
           "    (\"missing_field_skipped\", \"records without the {column!r} field skipped\"),",
           "    (\"missing_field_skipped\", \"records without the 'text' field skipped\"),",
           ("tests/corpus/test_hints.py", "tests/builder/test_special_tokens.py")),
    Mutant("write-stage-forgets-files-written", "mlmprep.builder.outputs:plan_rest",  # the bar's last stage never ends full
           'bar.stage("window, mask, write", tasks, "output file", done=sum(len(f.done) for f in files.values()))',
           'bar.stage("window, mask, write", tasks, "output file")', ("tests/builder/test_sharded.py",)),
    Mutant("progress-logs-every-update", "mlmprep.progress:Stages.update",  # a log line per task, not every 10 s
           "                if self.clock() - self.logged >= self.every:", "                if True:",
           ("tests/test_progress.py",)),
    Mutant("progress-no-heartbeat", "mlmprep.progress:Stages.__init__",  # a log silent while a long task runs
           '            threading.Thread(target=self.heartbeat, daemon=True, name="mlmprep-progress").start()\n',
           "            pass\n", ("tests/test_progress.py",)),
    Mutant("missing-build-dir-says-no-manifest", "mlmprep.format.load:read_manifest",  # `inspect out/nothere`: "no manifest.json"
           "    if not Path(build_dir).is_dir():", "    if False:",
           ("tests/cli/test_errors.py::test_a_missing_build_directory_is_named_as_such",)),
    Mutant("finished-resume-notes-new-seeds", "mlmprep.train.prepare:open_data",  # a note before "already trained"
           "    if saved is not None and (done := checkpoint.finished(",
           "    say_seeds_added(cfg, world, len(manifest[\"seeds\"]), n_seeds)\n"
           "    if saved is not None and (done := checkpoint.finished(",
           ("tests/train/test_resume.py::test_resuming_a_finished_run_after_a_remask_says_only_that_it_is_finished",)),
    Mutant("compare-help-drops-fixed-settings", "mlmprep.cli.compare:preset_settings",  # --full's lr and seeds not in its help
           '            fixed.append(f"{field} {value}")', "            pass",
           ("tests/test_compare.py::test_compare_methods_help_lists_every_setting_of_each_preset",)),
    Mutant("import-circle-hidden-in-a-function", "mlmprep.corpus.shards:_dataset",  # documents imports shards
           "    return load_dataset(spec, split)",
           "    from mlmprep.corpus.documents import open_corpus  # noqa: F401\n\n    return load_dataset(spec, split)",
           ("tests/repo/test_rooms.py::test_no_module_imports_itself_through_others",)),
    Mutant("verify-seed-rows-unpaired", "mlmprep.builder.verify:verify",  # windows cut and re-hashed: verify says ok
           "        if len(masked[\"input_ids\"]) != len(windows[\"tokens\"]):", "        if False:",
           ("tests/format/test_damaged_builds.py::test_a_windows_split_cut_with_its_rows_recorded_is_found_by_verify",)),
    Mutant("import-circle-only-in-functions", "mlmprep.tokenizer.encode:whitespace_pieces",  # unigram imports encode too
           "    if len(text) <= size:\n        return [text]\n",
           "    from mlmprep.tokenizer.unigram import SENTENCE_CHARS  # noqa: F401\n    if len(text) <= size:\n        return [text]\n",
           ("tests/repo/test_rooms.py::test_no_module_imports_itself_through_others",)),
    Mutant("import-circle-at-module-level", "mlmprep.builder.randomness",  # mask imports randomness
           "import numpy as np\n", "import numpy as np\n\nfrom mlmprep.builder import mask  # noqa: F401\n", ("tests/repo/test_rooms.py::test_no_module_imports_itself_through_others",)),
    Mutant("compare-config-file-ignored", "mlmprep.cli.compare:compare_methods",  # --config reads, then acts not
           "    cfg = compare_config(mode, file_values, options)", "    cfg = compare_config(mode, options)",
           ("tests/test_compare.py::test_a_config_file_gives_compare_methods_options_over_its_preset_and_under_the_command_line",)),
    Mutant("compare-config-over-command-line", "mlmprep.cli.compare:compare_methods",  # the file beats --steps 2
           "    cfg = compare_config(mode, file_values, options)", "    cfg = compare_config(mode, options, file_values)",
           ("tests/test_compare.py::test_a_config_file_gives_compare_methods_options_over_its_preset_and_under_the_command_line",)),
    Mutant("compare-config-mode-ignored", "mlmprep.cli.compare:compare_methods",  # a file's `mode: quick` sets no preset
           'else file_values.get("mode", "default")', 'else "default"',
           ("tests/test_compare.py::test_a_config_file_gives_compare_methods_options_over_its_preset_and_under_the_command_line",)),
    Mutant("compare-max-mb-in-megabytes-of-2-20", "mlmprep.config:CompareConfig.max_chars",  # --max-mb 1 reads 1,048,576
           "round(self.max_mb * 1e6)", "round(self.max_mb * 2**20)",
           ("tests/test_compare.py::test_max_mb_counts_million_characters_and_a_tiny_positive_limit_is_not_the_whole_corpus",)),
    Mutant("missing-statistics-shown-as-0", "mlmprep.format.report:window_figures",  # "tokens kept: 0" when unknown
           "    w = {key: recorded.get(key) for key in", "    w = {key: recorded.get(key, 0) for key in",
           ("tests/format/test_inspect.py",)),
    Mutant("missing-tokens-ignore-frame", "mlmprep.format.report:text_length",  # MLM's [CLS] [SEP] counted as text
           "    return manifest.window_length - len(prefix) - len(suffix)", "    return manifest.window_length",
           ("tests/format/test_inspect.py",)),
    Mutant("missing-tokens-of-ragged-rows", "mlmprep.format.report:window_figures",  # short rows counted as full
           "    if manifest.fixed and rows is not None:", "    if rows is not None:",
           ("tests/format/test_inspect.py",)),
    Mutant("missing-masking-said-no-rows", "mlmprep.format.report:masking_line",  # a split of rows "masked, no rows"
           "    if manifest.splits[name].rows:", "    if False:",
           ("tests/format/test_inspect.py",)),
    Mutant("html-missing-statistics-unsaid", "mlmprep.format.html:summary",  # the page shows no word of them
           "             *missing_figures_note(w, derived), *unknown_warning(w)]", "             *unknown_warning(w)]",
           ("tests/format/test_inspect.py",)),
    Mutant("mlm-line-without-why", "mlmprep.format.report:masking_line",  # "masked 0.142" with no word on special tokens
           'of all tokens, special ones never" + (', '" + (',
           ("tests/format/test_report.py",)),
    Mutant("max-tokens-one-step-late", "mlmprep.train.epochs:planned_steps",  # --max-tokens N trains a step past N
           "            if tokens >= cfg.max_tokens:", "            if tokens > cfg.max_tokens:",
           ("tests/train/test_options.py",)),
    Mutant("mlm-labels-uint16", "mlmprep.format.write:column_dtypes",  # -100 stored as 65436: datasets users see it
           "    labels = np.int16 if vocab_size <= INT16_LABELS else np.int32",
           "    labels = np.uint16 if vocab_size <= INT16_LABELS else np.int32", ("tests/format/test_narrow_ids.py",)),
    Mutant("uint16-for-any-vocabulary", "mlmprep.format.write:format_version",  # ids above 65,535 wrap around
           "    return FORMAT_VERSION if vocab_size <= UINT16_IDS else 2", "    return FORMAT_VERSION",
           ("tests/format/test_narrow_ids.py",)),
    Mutant("loader-views-every-column-as-int32", "mlmprep.format.load:_column",  # two uint16 ids read as one int32
           "    files = tuple(np.frombuffer(m, dtype=dtype, count=m.size // dtype.itemsize) for m in maps)",
           "    files = tuple(np.frombuffer(m, dtype=np.int32, count=m.size // 4) for m in maps)",
           ("tests/format/test_narrow_ids.py", "tests/format/test_load.py")),
    Mutant("verify-ignores-column-types", "mlmprep.builder.verify:read_split",
           "        report.problems += type_problems(out, name, columns, manifest)\n", "",
           ("tests/format/test_narrow_ids.py", "tests/builder/test_verify.py")),
    Mutant("remask-in-the-newest-format", "mlmprep.builder.remask:add_seeds",  # an int32 build gets uint16 seeds
           "        version = manifest.format_version\n", "        version = 3\n",
           ("tests/format/test_narrow_ids.py",)),
    Mutant("reference-help-line-as-html", "mlmprep.cli.reference:reference",  # `<pad>=0, </s>=1` in a command's help eaten as tags
           '        about = markdown(" ".join((command.help or "").strip().split("\\n\\n")[0].split()))',
           '        about = " ".join((command.help or "").strip().split("\\n\\n")[0].split())',
           ("tests/repo/test_docs.py",)),
    Mutant("reference-options-as-html", "mlmprep.cli.reference:markdown",  # an option's `</s>` in its help eaten as a tag
           'p.replace("<", "&lt;").replace("*", "\\\\*") if i % 2 == 0', 'p.replace("*", "\\\\*") if i % 2 == 0',
           ("tests/repo/test_docs.py",)),
    Mutant("reference-drops-the-off-flag", "mlmprep.cli.reference:option_lines",  # --no-force missing from the reference
           "append(entry(*record))", "append(entry(param.opts[0], record[1]))",
           ("tests/repo/test_docs.py",)),
    Mutant("reference-page-stale", "docs/options.md",  # the committed CLI reference misses an option --help shows
           "- `--version`: Print the version and exit.\n", "",
           ("tests/repo/test_docs.py::test_the_reference_in_the_tree_is_the_one_the_code_generates",)),
    Mutant("docs-broken-anchors-pass", "mkdocs.yml",  # a link to a heading that is not there builds
           "  anchors: warn\n", "  anchors: info\n",
           ("tests/repo/test_docs.py",)),
    Mutant("docs-web-fonts", "mkdocs.yml",  # the site fetches Google's fonts: no offline page, a request per reader
           "  font: false\n", "  font: {text: Roboto}\n",
           ("tests/repo/test_docs.py",)),
    # ------------------------------------------------------------ the HTML report and RUN plots
    Mutant("report-sources-drop-extra-sets", "mlmprep.format.html:source_table",  # --validation NAME=DIR has no row
           'names += [k[5:-5] for k in final', 'names += [] and [k[5:-5] for k in final',
           ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    Mutant("report-sources-wrong-column", "mlmprep.format.html:source_table",  # the share reached shown as the weight
           "<td>{cell(final.get(f'{n}/target'), '.3f')}</td>", "<td>{cell(final.get(f'{n}/fraction'), '.3f')}</td>",
           ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    Mutant("t5-reference-off-by-one", "mlmprep.format.charts:t5_span_length_distribution",  # C(noise - j, ...): the composition count is wrong
           "p[j] = math.comb(noise - j - 1, spans - 2) / total", "p[j] = math.comb(noise - j, spans - 2) / total",
           ("tests/format/test_html_report.py",)),
    Mutant("span-lengths-count-the-sentinel", "mlmprep.format.charts:span_statistics",  # each span one token longer
           "spans = np.diff(np.append(starts, len(labels) - 1)) - 1", "spans = np.diff(np.append(starts, len(labels) - 1))",
           ("tests/format/test_html_report.py",)),
    Mutant("report-span-numbers-shifted", "mlmprep.format.report:unmask_spans",  # the text's spans lit by the next sentinel
           "span.extend([number[t]] * len(spans[t]))", "span.extend([number[t] + 1] * len(spans[t]))",
           ("tests/format/test_html_report.py", "tests/builder/test_verify.py")),
    Mutant("documents-keep-their-eos-apart", "mlmprep.format.charts:documents",  # a document ends before its </s>
           "ends = np.flatnonzero(values == manifest.tokenizer.eos_id) + 1",
           "ends = np.flatnonzero(values == manifest.tokenizer.eos_id)",
           ("tests/format/test_html_report.py",)),
    Mutant("seed-switch-stuck", "mlmprep/format/report.html",  # every seed button shows seed-0's masks
           "const v = ex.seeds[seed];", "const v = ex.seeds[0];", ("tests/format/test_html_report.py",)),
    Mutant("mlm-kept-and-random-swapped", "mlmprep/format/report.html",
           "return v.input[i] === target ? \"m-kept\" : \"m-rand\";", "return v.input[i] === target ? \"m-rand\" : \"m-kept\";",
           ("tests/format/test_html_report.py",)),
    Mutant("hover-lights-every-span", "mlmprep/format/report.html",  # hovering lights every marked token
           "card.querySelectorAll(\"[data-\" + key + '=\"' + target.dataset[key] + '\"]')",
           "card.querySelectorAll(\"[data-\" + key + \"]\")", ("tests/format/test_html_report.py",)),
    Mutant("report-overwrites-any-file", "mlmprep.format.html:check_report_path",
           "            if f.read(len(MARK)) != MARK.encode():", "            if False:", ("tests/format/test_html_report.py",)),
    Mutant("report-data-filled-last", "mlmprep.format.html:fill",  # a {{DATA}} in an escaped value gets the JSON
           'return SLOT.sub(lambda m: policy if m[1] == "CSP" else values[m[1]], template)',
           'return template.replace("{{CSP}}", policy).replace("{{TITLE}}", values["TITLE"]).replace('
           '"{{BODY}}", values["BODY"]).replace("{{DATA}}", values["DATA"])',
           ("tests/format/test_html_payloads.py",)),
    Mutant("report-data-ends-its-script", "mlmprep.format.html:json_in_html",  # only </ escaped: <!--<script> eats the end
           '.replace("<", "\\\\u003c").replace(">", "\\\\u003e")', '.replace("</", "<\\\\/")',
           ("tests/format/test_html_payloads.py",)),
    Mutant("report-value-unescaped", "mlmprep.format.html:table",  # a table's values as markup
           'body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"',
           'body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>"', ("tests/format/test_html_payloads.py",)),
    Mutant("report-policy-inline", "mlmprep.format.html:fill",  # any inline script runs
           'policy = (f"default-src \'none\'; script-src {\' \'.join(allowed[\'script\'])}; "',
           'policy = (f"default-src \'none\'; script-src \'unsafe-inline\'; "', ("tests/format/test_html_payloads.py",)),
    Mutant("report-no-policy", "mlmprep/format/report.html",  # no Content-Security-Policy at all
           '<meta http-equiv="Content-Security-Policy" content="{{CSP}}">\n', "", ("tests/format/test_html_payloads.py",)),
    Mutant("report-policy-misses-the-charts", "mlmprep.format.html:fill",  # the legends' colours blocked
           '        allowed["style"] += ["\'unsafe-hashes\'", *map(digest, attributes)]', "        pass",
           ("tests/format/test_html_payloads.py", "tests/format/test_html_report.py")),
    Mutant("plots-warn-every-time", "mlmprep.train.plots:update",
           "            _warned = True\n", "            pass\n", ("tests/train/test_plots.py",)),
    Mutant("plots-never-drawn", "mlmprep.train.evaluation:evaluate_build",
           "        plots.update(run.out)  # RUN/plots.png\n", "        pass\n", ("tests/train/test_plots.py",)),
    # ------------------------------------------------------------ mixtures
    Mutant("temperature-as-power", "mlmprep.train.mixture:mix_weights",  # n ** T rather than n ** (1 / T)
           '"temperature": lambda: n ** (1.0 / value)', '"temperature": lambda: n ** value',
           ("tests/train/test_mixture.py::test_strategies_follow_the_t5_papers_formulas",)),
    Mutant("cap-ignored", "mlmprep.train.mixture:mix_weights",  # examples-proportional without its limit K
           '"cap": lambda: np.minimum(n, value)', '"cap": lambda: n',
           ("tests/train/test_mixture.py::test_strategies_follow_the_t5_papers_formulas",)),
    Mutant("mixture-drops-carry", "mlmprep.train.mixture:MixturePlan.next_chunk",  # what a source is owed is forgotten at each chunk
           "for p, rows in self.take(i, w * tokens + self.queues[i].carry)]", "for p, rows in self.take(i, w * tokens)]",
           ("tests/train/test_mixture.py::test_achieved_token_fractions_match_the_weights",)),
    Mutant("every-pass-reads-seed-0", "mlmprep.train.mixture:Source.split",  # a repeated source, the same puzzle each pass
           "        return open_epoch(self.path, pass_, self.seeds,", "        return open_epoch(self.path, 0, self.seeds,",
           ("tests/train/test_mixture.py::test_a_repeated_source_reads_a_new_seed_on_each_pass",)),
    Mutant("cut-chunk-rows-dropped", "mlmprep.train.mixture:MixturePlan.next_chunk",  # new weights skip the rows a cut chunk had taken
           "            plan = plan[:cut]\n            self.hand_back(parts, plan)", "            plan = plan[:cut]",
           ("tests/train/test_mixture.py::test_resume_with_new_weights_repeats_and_skips_nothing",)),
    Mutant("new-weights-from-step-0", "mlmprep.train.mixture_run:mixture_plan",  # the new weights rewrite the steps already taken
           "schedule = [*(entry for entry in schedule if entry[0] < step), (step, mix.weights.tolist())]",
           "schedule = [(0, mix.weights.tolist())]",
           ("tests/train/test_mixture.py::test_resume_with_new_weights_repeats_and_skips_nothing",)),
    Mutant("picked-rows-shifted", "mlmprep.format.load:_gather",  # each picked row starts one token late
           "source = buf[starts[i] : starts[i] + lengths[i]]", "source = buf[starts[i] + 1 : starts[i] + 1 + lengths[i]]",
           ("tests/format/test_load.py::test_picked_rows_are_those_rows_of_their_splits_in_order",
            "tests/train/test_mixture.py::test_a_repeated_source_reads_a_new_seed_on_each_pass")),
    Mutant("picked-rows-of-the-wrong-part", "mlmprep.format.load:pick_rows",  # every part's rows gathered to the first's slots
           "located = [(buf, first + which, start, length)", "located = [(buf, which, start, length)",
           ("tests/format/test_load.py::test_picked_rows_are_those_rows_of_their_splits_in_order",
            "tests/train/test_mixture.py::test_a_repeated_source_reads_a_new_seed_on_each_pass")),
    Mutant("cut-chunk-counted-whole", "mlmprep.train.mixture:MixturePlan.next_chunk",  # a cut chunk's untrained rows count as trained
           "chunk.totals(slice(None) if cut is None else trained(plan), len(self.queues))",
           "chunk.totals(slice(None), len(self.queues))",
           ("tests/train/test_mixture.py::test_each_chunk_starts_from_the_window_tokens_and_passes_trained_before_it",)),
    Mutant("chunk-sources-misaligned", "mlmprep.train.mixture:MixturePlan.next_chunk",  # rows credited to another source
           "source = np.repeat(np.array([i for i, _, _ in parts], np.int64), sizes)",
           "source = np.repeat(np.array([i for i, _, _ in parts], np.int64), sizes[::-1])",
           ("tests/train/test_mixture.py::test_achieved_token_fractions_match_the_weights",)),
    Mutant("take-stops-at-the-first-head", "mlmprep.train.mixture:rows_within",  # a take never gives more than 1024 rows
           "        if head >= len(rows) or cum[-1] > quota:", "        if True:",
           ("tests/train/test_mixture.py::test_rows_a_source_gives_for_a_quota_follow_a_running_sum",)),
    # ------------------------------------------------------------ the seed cache of a DATA URL
    Mutant("cache-trusts-any-bytes", "mlmprep.format.cache:SeedCache.fetch_file",  # a download is renamed in unchecked
           "record.bytes) == record.sha256:", "record.bytes) != \"\":",
           ("tests/format/test_cache.py::test_a_damaged_file_is_fetched_twice_then_stops_the_run_in_one_line",)),
    Mutant("cache-never-evicts", "mlmprep.format.cache:SeedCache.make_room",  # every seed stays: the disk grows to N seeds
           "                if free:\n                    self.log(f\"{self.url}: evicting",
           "                if False:\n                    self.log(f\"{self.url}: evicting",
           ("tests/format/test_cache.py::test_the_disk_holds_at_most_two_seeds_and_validation_whatever_n",)),
    Mutant("cache-no-prefetch", "mlmprep.format.cache:SeedCache.ensure",  # the next seed is fetched at its boundary only
           "            if later != name and later not in self.jobs", "            if False and later not in self.jobs",
           ("tests/format/test_cache.py::test_the_prefetch_hides_a_slow_stores_fetch_behind_the_epoch",)),
    Mutant("cache-no-file-lock", "mlmprep.format.cache:SeedCache.fetch_file",  # runs sharing the cache each download the file
           "        with locked(self.locks / f\"{split}--{record.name}.lock\"):",
           "        with contextlib.nullcontext():",
           ("tests/format/test_cache.py::test_runs_sharing_the_cache_download_each_file_once_and_never_read_half_of_one",)),
    Mutant("cache-limit-unchecked", "mlmprep.format.cache:SeedCache.check_limit",  # a limit below one seed fails mid-run, or is ignored
           "        if self.limit is not None and self.limit < need:", "        if False:",
           ("tests/format/test_cache.py::test_a_cache_limit_too_small_for_one_seed_is_refused_before_any_download",)),
    Mutant("cache-limit-evicts-anyway", "mlmprep.format.cache:SeedCache.make_room",  # a limit with room still re-downloads each epoch
           "            if self.limit is not None and self.used() + need <= self.limit:",
           "            if self.limit is None:",
           ("tests/format/test_cache.py::test_a_cache_limit_with_room_keeps_seeds_so_each_downloads_once",)),
    Mutant("cache-plan-decoder-lengths", "mlmprep.format.cache:SeedCache.lengths",  # the planned rows get the encoder's length twice
           "np.full(rows, dec if objective", "np.full(rows, enc if objective",
           ("tests/format/test_cache.py::test_the_plan_of_a_fixed_length_build_needs_no_download_and_equals_the_splits_lengths",)),
    Mutant("cache-no-retry", "mlmprep.format.cache",  # one failed read stops the run
           "ATTEMPTS = 5  #", "ATTEMPTS = 1  #", ("tests/format/test_cache.py::test_store_faults_are_retried_and_the_bytes_are_the_builds",)),
    # ------------------------------------------------------------ dedup and the document hold-out
    Mutant("dedup-exact-drops-nothing", "mlmprep.builder.selection:Selection.decide",  # copies counted, never dropped
           "            fates[copy_of >= 0] = DROPPED\n", "            pass\n",
           ("tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps",)),
    Mutant("dedup-exact-within-shards", "mlmprep.builder.selection:Selection.copies_of",  # copies in other shards not seen
           "        for key in here.keys() & self.first.keys():", "        for key in ():",
           ("tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps",)),
    Mutant("dedup-near-drops-the-first", "mlmprep.builder.selection:Selection.cluster",  # each cluster keeps all but its first
           "np.where(first == np.arange(len(first)), sides, DROPPED)",
           "np.where(first != np.arange(len(first)), sides, DROPPED)",
           ("tests/builder/test_dedup.py::test_near_dedup_keeps_the_first_of_each_cluster_brute_force_jaccard_confirms",)),
    Mutant("dedup-near-ignored", "mlmprep.builder.selection:Selection.add",  # --dedup near decided as off
           "        elif waits:\n            # the shard's", "        elif False:\n            # the shard's",
           ("tests/builder/test_dedup.py::test_near_dedup_keeps_the_first_of_each_cluster_brute_force_jaccard_confirms",)),
    Mutant("holdout-by-document-number", "mlmprep.builder.selection:Selection.decide",  # copies land on both sides
           "fates = self.sides(keys)",
           "fates = self.sides(np.arange(self.documents, self.documents + len(keys), dtype=np.uint64))",
           ("tests/builder/test_dedup.py::test_no_validation_window_shares_a_document_with_a_training_window", "tests/builder/test_sharded.py::test_windows_equal_a_one_pass_reference")),
    Mutant("side-picks-every-kept-document", "mlmprep.builder.selection:Selection.picked",  # validation documents trained on
           "return np.flatnonzero(self.fates[s] == fate).astype(np.int64)",
           "return np.flatnonzero(self.fates[s] != DROPPED).astype(np.int64)",
           ("tests/builder/test_dedup.py::test_no_validation_window_shares_a_document_with_a_training_window", "tests/builder/test_sharded.py::test_windows_equal_a_one_pass_reference")),
    Mutant("side-reads-the-span-of-its-documents", "mlmprep.builder.staged:gather",  # dropped documents between read
           "    if int(sizes.sum()) == hi - lo:", "    if True:",
           ("tests/builder/test_sharded.py::test_windows_equal_a_one_pass_reference", "tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps")),
    Mutant("shards-let-go-for-one-side", "mlmprep.builder.run:BuildTasks.file_written",  # validation still reads them
           "self.staging.let_go(range(self.staging.released, min(f.reading_from for f in self.files.values())))",
           "self.staging.let_go(range(self.staging.released, self.files[\"train\"].reading_from))",
           ("tests/builder/test_sharded.py::test_staged_shards_are_let_go_as_the_files_that_read_them_are_written", "tests/builder/test_sharded.py::test_windows_equal_a_one_pass_reference")),
    Mutant("sample-keeps-copies", "mlmprep.builder.tokenizer_file:smallest_keys",  # the copies of boilerplate crowd the tokenizer's sample
           "    keys, first = np.unique(np.concatenate([np.zeros(0, np.uint64), *keys]), return_index=True)\n",
           "    keys = np.concatenate([np.zeros(0, np.uint64), *keys])\n    first = np.argsort(keys, kind=\"stable\")\n"
           "    keys = keys[first]\n",
           ("tests/builder/test_sharded.py::test_the_tokenizer_sample_is_the_smallest_keys_of_the_distinct_documents_whatever_the_files",)),
    Mutant("sample-in-corpus-order", "mlmprep.builder.tokenizer_file:smallest_keys",  # the sample's order is the corpus's, not the keys'
           "list(map(texts.__getitem__, first[:reach].tolist()))",
           "list(map(texts.__getitem__, np.sort(first[:reach]).tolist()))",
           ("tests/builder/test_sharded.py::test_the_tokenizer_sample_is_the_smallest_keys_of_the_distinct_documents_whatever_the_files",)),
    Mutant("sample-limit-bars-the-smaller", "mlmprep.builder.tokenizer_file:training_sample",  # the wrong side barred
           "below = batch_keys < limit", "below = batch_keys > limit",
           ("tests/builder/test_sharded.py::test_the_tokenizer_sample_is_the_smallest_keys_of_the_distinct_documents_whatever_the_files",)),
    Mutant("sample-one-short", "mlmprep.builder.tokenizer_file:smallest_keys",  # the text that reaches the budget left out
           "budget)) + 1  # the texts up to", "budget))  # the texts up to",
           ("tests/builder/test_sharded.py::test_the_tokenizer_sample_is_the_smallest_keys_of_the_distinct_documents_whatever_the_files",)),
    Mutant("dedup-summary-silent", "mlmprep.format.report:build_summary",  # the summary and inspect hide what dedup removed
           "        *dedup_lines(manifest.corpus.stats),\n", "",
           ("tests/builder/test_dedup.py::test_the_summary_inspect_and_the_page_say_what_dedup_removed",)),
    Mutant("dedup-excerpt-of-the-shard-s-first", "mlmprep.builder.record:dedup_stats",  # the excerpt of another document
           "text = next(itertools.islice(docs, d, None), \"\")", "text = next(docs, \"\")",
           ("tests/builder/test_dedup.py::test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps",)),
    # ------------------------------------------------------------ what a newcomer trips on
    Mutant("utf8-offset-line-start", "mlmprep.corpus.text:_decode_lines",  # the error names the line's start, not the bad byte
           "where = functools.partial(line_where, path, at, at + exc.start)", "where = functools.partial(line_where, path, at)",
           ("tests/corpus/test_sources.py::test_decode_error_fail_names_file_line_and_fix",
            "tests/corpus/test_sources.py::test_decode_error_names_the_bad_byte_far_into_the_file")),
    Mutant("wrapped-hint-on-code", "mlmprep.corpus.text:wrapped_count",  # indented, symbol-laden code lines count as wrapped prose
           "if line and len(line) <= WRAP_COLUMNS and not line[0].isspace() and not CODE.search(line)",
           "if line and len(line) <= WRAP_COLUMNS",
           ("tests/corpus/test_hints.py::test_no_hint_for_source_code",)),
    Mutant("gz-unknown-inner-refused", "mlmprep.corpus.files:file_format",  # changelog.gz refused again
           '    return ("" if inner in NOT_TEXT else ".txt"), compression', '    return "", compression',
           ("tests/corpus/test_compressed.py::test_a_compressed_file_with_no_known_format_inside_is_read_as_text_with_a_note",)),
    Mutant("gz-archive-read-as-text", "mlmprep.corpus.files:file_format",  # a .tar.gz read as text
           '    return ("" if inner in NOT_TEXT else ".txt"), compression', '    return ".txt", compression',
           ("tests/corpus/test_compressed.py::test_a_compressed_file_with_no_known_format_inside_is_read_as_text_with_a_note",
            "tests/corpus/test_compressed.py::test_directories_and_globs_pick_compressed_files_up_and_skip_hidden_ones")),
    Mutant("mount-point-staged-beside", "mlmprep.format.publish:staging_dir",  # a volume's stage beside it (read-only there)
           "    stage = out / INSIDE[1] if mount_point(out) else out.parent / f\".{out.name}.partial\"",
           "    stage = out.parent / f\".{out.name}.partial\"",
           ("tests/format/test_mount_point.py",)),
    Mutant("mount-point-old-files-kept", "mlmprep.format.publish:publish_inside",  # --force into a mount point keeps old files
           "        if old.name not in INSIDE + FOREIGN_KEPT:\n            if old.is_dir()",
           "        if False:\n            if old.is_dir()",
           ("tests/format/test_mount_point.py",)),
    Mutant("bind-mount-unseen", "mlmprep.format.publish:mount_point",  # a bind mount of the same disk taken for a directory
           "    return os.fsencode(path) in mount_points(table)", "    return os.path.ismount(path)",
           ("tests/format/test_mount_point.py",)),
    Mutant("mount-table-escapes-kept", "mlmprep.format.publish:mount_points",  # a mount point named with a space unseen
           'bytes([int(m[1], 8)]), fields[4])', 'm[0], fields[4])',
           ("tests/format/test_mount_point.py",)),
    Mutant("busy-rename-traceback", "mlmprep.format.publish:publish",  # a rename refused with EBUSY: a traceback
           "        if exc.errno not in (errno.EBUSY, errno.EXDEV):", "        if True:",
           ("tests/format/test_mount_point.py",)),
    Mutant("degenerate-length-silent", "mlmprep.builder.mask:span_warning",  # --input-length 3 builds noise 0.5, span 1 silently
           "    if not off[window - 2]:\n        return None", "    if True:\n        return None",
           ("tests/builder/test_mask.py::test_span_warning_fires_exactly_where_the_options_are_not_honoured",
            "tests/builder/test_mask.py::test_a_degenerate_input_length_builds_with_a_warning_naming_what_it_got")),
    Mutant("degenerate-length-smallest-off", "mlmprep.builder.mask:span_warning",  # the length named is one that still falls short
           "corrupted_lengths([lengths[off].max() + 1]", "corrupted_lengths([lengths[off].max()]",
           ("tests/builder/test_mask.py::test_span_warning_fires_exactly_where_the_options_are_not_honoured",)),
    Mutant("hf-pins-memory-on-cpu", "mlmprep.train.hf:BudgetTrainer.loader",  # the Trainer snippet warns about pin_memory on a CPU
           "pin_memory=self.args.dataloader_pin_memory and torch.cuda.is_available()",
           "pin_memory=self.args.dataloader_pin_memory",
           ("tests/repo/test_docs.py::test_the_training_page_python_example_runs",)),
    Mutant("unstarted-run-told-to-continue", "mlmprep.train.checkpoint:open_run",  # a run with no checkpoint: "continue it"
           "        if latest(run) is None:\n            raise CacheError(", "        if False:\n            raise CacheError(",
           ("tests/train/test_resume.py::test_a_run_stopped_before_its_first_checkpoint_is_not_told_to_continue",)),
    Mutant("mixture-no-plots", "mlmprep.train.mixture_run:evaluate_mixture",  # a mixture's evaluation never draws RUN/plots.png
           "        plots.update(run.out)  # RUN/plots.png (validation: the weighted mean, when the sources have sets)\n",
           "", ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    Mutant("mixture-says-epoch", "mlmprep.train.logs:position",  # a mixture's logs and metrics speak of epochs
           '    return {"epoch" if run.mix is None else "chunk": epoch}', '    return {"epoch": epoch}', ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    Mutant("source-loss-over-rows", "mlmprep.train.mixture_run:add_source_losses",  # a source's loss divided by its rows
           "weights=targets[mine], ", "",
           ("tests/train/test_mixture.py::test_a_sources_training_loss_is_its_rows_summed_loss_over_its_label_tokens",)),
    Mutant("cut-chunk-resumed-past-its-end", "mlmprep.train.prepare:start",  # new weights: a resume reads past a cut chunk
           "    if mix is not None and state.cursor and state.cursor == len(mix.chunk(state.epoch).plan):",
           "    if False:", ("tests/train/test_mixture.py::test_resume_with_new_weights_repeats_and_skips_nothing",)),
    Mutant("report-names-the-first-source", "mlmprep.format.html:run_section",  # a mixture run's report shows one source
           "        if len(sources) > 1 else", "        if False else", ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    Mutant("mixture-report-shows-first-build", "mlmprep.format.html:report_sources",  # a mixture's report: the first source's build
           'data = config.get("data") if len(config.get("sources") or []) < 2 else None', 'data = config.get("data")',
           ("tests/train/test_mixture.py::test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set",)),
    # ------------------------------------------------------------ the typed manifest, containment, the fuzzer
    Mutant("manifest-fields-unchecked", "mlmprep.format.manifest:_Reader.take",  # any value of any type is taken
           "        if not check(value):", "        if False:",
           ("tests/format/test_manifest.py",)),
    Mutant("manifest-round-trip-drops-a-field", "mlmprep.format.manifest:Manifest.to_json",  # to_json loses the corpus record
           '        for key in ("tokenizer", "corpus"):\n', '        out.pop("corpus", None)\n        for key in ("tokenizer",):\n',
           ("tests/format/test_manifest.py::test_a_fresh_build_manifest_round_trips_byte_for_byte",)),
    Mutant("containment-off", "mlmprep.format.manifest:member",  # a link or `..` out of the build is followed
           "    if os.path.isabs(relative) or not any(inside(resolved, root, whole) for root, whole in build_roots(build_dir)):",
           "    if False:",
           ("tests/format/test_manifest.py::test_member_keeps_paths_inside_the_build_links_resolved",)),
    Mutant("manifest-read-unchecked", "mlmprep.format.load:read_manifest",  # manifest.json linked out is read
           "    path = member(build_dir, MANIFEST)", "    path = Path(build_dir, MANIFEST)",
           ("tests/format/test_build_files.py::test_a_file_linked_out_of_the_build_is_refused_the_manifest_too",)),
    Mutant("hf-blobs-whole-tree", "mlmprep.format.manifest:build_roots",  # any file below the blobs/ is taken
           "            roots.append((blobs, False))", "            roots.append((os.path.dirname(blobs), True))",
           ("tests/format/test_build_files.py::test_a_snapshot_link_anywhere_but_its_own_blobs_is_refused",)),
    Mutant("hf-snapshots-refused", "mlmprep.format.manifest:build_roots",  # a build in the HF cache is refused
           '    if "snapshots" in parts[:-1]:', '    if False:',
           ("tests/format/test_build_files.py::test_a_build_in_the_hugging_face_cache_reads_through_its_links_into_blobs",)),
    Mutant("fifo-opened", "mlmprep.format.manifest:member",  # a FIFO for a file is opened, and waited on
           "    if kind := not_regular(path):", "    if False:",
           ("tests/format/test_build_files.py::test_a_fifo_or_a_directory_for_a_file_is_reported_not_waited_on",)),
    Mutant("fifo-open-blocks", "mlmprep.format.regular:open_regular",  # a FIFO swapped in after a check is waited on
           "    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, \"O_CLOEXEC\", 0))",
           "    fd = os.open(path, os.O_RDONLY | getattr(os, \"O_CLOEXEC\", 0))",
           ("tests/format/test_build_files.py::test_reading_a_fifo_is_refused_even_after_a_check_said_regular",)),
    Mutant("report-rows-of-the-first-seed", "mlmprep.format.html:report_page",  # rows another seed lacks: IndexError
           "rows = sample_rows(min((manifest.splits[s].rows for s in seeds), default=0), examples_shown)",
           "rows = sample_rows(manifest.splits[seeds[0]].rows if seeds else 0, examples_shown)",
           ("tests/format/test_damaged_builds.py::test_the_report_of_a_seed_cut_short_shows_only_rows_every_seed_has",)),
    Mutant("inspect-shows-unchecked-splits", "mlmprep.cli.build:inspect_build",  # a gone split is shown as listed
           "        check_splits(local, manifest,", "        (local, manifest,",
           ("tests/format/test_damaged_builds.py::test_inspect_refuses_a_damaged_build_in_one_line",)),
    Mutant("split-rows-unchecked", "mlmprep.format.load:check_split_rows",  # an edited row count is shown
           "    if rows != (listed := manifest.splits[name].rows):", "    if (listed := manifest.splits[name].rows) < 0:",
           ("tests/format/test_damaged_builds.py::test_the_html_report_refuses_splits_whose_files_disagree_with_the_manifest",)),
    Mutant("first-epoch-unhashed", "mlmprep.train.prepare:start",  # swapped seed files train as seed-0
           "mix, identity=state.data, rehash=True)", "mix, identity=state.data, rehash=False)",
           ("tests/train/test_replaced_build.py::test_the_first_epochs_changed_bytes_stop_the_run_before_its_first_step",)),
    Mutant("later-epoch-check-ignored", "mlmprep.train.epochs:next_epoch",  # the background check's finding dropped
           "    failed = ahead is not None and ahead.index == index and ahead.future.exception() is not None",
           "    failed = False",
           ("tests/train/test_replaced_build.py::test_a_later_epochs_changed_bytes_stop_the_run_before_a_step_reads_them",)),
    Mutant("later-epoch-never-checked", "mlmprep.train.loop:check_next",  # no background check at all
           "    return hash_ahead(run, epoch.index + 1, state.seeds)", "    return None",
           ("tests/train/test_replaced_build.py::test_a_later_epochs_changed_bytes_stop_the_run_before_a_step_reads_them",)),
    Mutant("child-digests-trusted", "mlmprep.format.load:sha_problem",  # any digest passes
           '    return None if sha256 == record.sha256 else "sha256 differs from the manifest (the file changed)"',
           "    return None",
           ("tests/train/test_replaced_build.py::test_a_later_epochs_changed_bytes_stop_the_run_before_a_step_reads_them",)),
    Mutant("validation-unhashed", "mlmprep.train.evaluation:validation",  # evaluated on changed bytes
           '        check_split_hashes(path.parent, manifest, "validation")', '        pass',
           ("tests/format/test_damaged_builds.py::test_training_checks_every_file_it_needs_before_its_first_step",)),
    Mutant("state-json-unlisted-file-read", "mlmprep.format.load:listed_data_files",  # state.json names another file
           "    if unlisted := [n for n in names if n not in records]:", "    if unlisted := []:",
           ("tests/format/test_damaged_builds.py::test_training_checks_every_file_it_needs_before_its_first_step",)),
    Mutant("later-splits-unchecked-at-start", "mlmprep.train.prepare:check_needed_files",  # seed-1 missing: found late
           '        for name in manifest.seed_splits[:seeds] + ["validation"]:', "        for name in []:",
           ("tests/format/test_damaged_builds.py::test_training_checks_every_file_it_needs_before_its_first_step",)),
    Mutant("asyncio-task-noise", "mlmprep.storage:_filesystem",  # dropped connections' tasks printed on stderr
           "        loop.set_exception_handler(quiet_dropped_connections)", "        pass",
           ("tests/test_storage_faults.py::test_a_dropped_connections_failed_task_is_not_printed_and_any_other_task_"
            "failure_is",
            "tests/test_storage_faults.py::test_a_store_that_goes_down_mid_upload_and_comes_back_leaves_only_mlmprep_lines")),
    Mutant("lock-not-marked-before-commit", "mlmprep.format.publish:commit_remote",  # a killed build's lock looks live
           "        mark_committing(url, options, (stage / MANIFEST).read_bytes())\n", "",
           ("tests/test_storage_faults.py::test_a_build_stopped_between_its_commit_and_its_lock_removal_leaves_a_lock_the_next_build_removes",)),
    Mutant("committed-lock-kept", "mlmprep.format.publish:take_over",  # a finished build's lock needs --force
           "    if committed(url, options, owner):", "    if False:",
           ("tests/test_storage_faults.py::test_a_build_stopped_between_its_commit_and_its_lock_removal_leaves_a_lock_the_next_build_removes",)),
    Mutant("dedup-stats-unchecked", "mlmprep.format.manifest",  # corpus.stats.dedup of any type: inspect's traceback
           '    "dedup": (dedup_stats, "an object of dedup counts, a method and the largest clusters"),\n', "",
           ("tests/format/test_manifest.py::test_each_field_is_checked_and_named_in_one_line",)),
    Mutant("fuzz-finds-containment-off", "mlmprep.format.manifest:member",  # the same, for the fuzzer alone
           "    if os.path.isabs(relative) or not any(inside(resolved, root, whole) for root, whole in build_roots(build_dir)):",
           "    if False:",
           ("tests/format/test_fuzz_builds.py::test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside",)),
    Mutant("fuzz-finds-manifest-read-unchecked", "mlmprep.format.load:read_manifest",  # the same as above, for the fuzzer
           "    path = member(build_dir, MANIFEST)", "    path = Path(build_dir, MANIFEST)",
           ("tests/format/test_fuzz_builds.py::test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside",)),
    Mutant("fuzz-finds-first-epoch-unhashed", "mlmprep.train.prepare:start",  # the same as above, for the fuzzer
           "mix, identity=state.data, rehash=True)", "mix, identity=state.data, rehash=False)",
           ("tests/format/test_fuzz_builds.py::test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside",)),
    Mutant("fuzz-finds-fields-unchecked", "mlmprep.format.manifest:_Reader.take",  # the same as above, for the fuzzer alone
           "        if not check(value):", "        if False:",
           ("tests/format/test_fuzz_builds.py::test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside",)),
    Mutant("fuzz-finds-unlisted-files", "mlmprep.builder.verify:check_files",  # a file dropped from the manifest goes unseen
           "            report.problems += [f\"{name}/{p.name}: not listed in the manifest\"",
           "            report.problems += [f\"{name}/{p.name}: not listed in the manifest\" for p in () if p",
           ("tests/format/test_fuzz_builds.py::test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside",)),
    Mutant("fuzz-watch-blind-to-arrow", "tests.format.test_fuzz_builds:audited.wrapper",  # the watch misses pyarrow's memory maps
           '            sys.audit("open", path, "r", 0)\n', "            pass\n",
           ("tests/format/test_fuzz_builds.py::test_the_watch_sees_python_and_arrow_reads",)),
    Mutant("state-json-names-followed", "mlmprep.format.manifest:data_file_names",  # a state.json's data file outside is read
           "    if not names or not all(file_name(n) for n in names):", "    if not names:",
           ("tests/format/test_manifest.py::test_a_state_json_naming_a_file_outside_is_refused_before_it_is_read",)),
    Mutant("replaced-build-trained-on", "mlmprep.format.load:open_epoch",  # a build replaced under a run goes unnoticed
           "    if identity is not None and (now := manifest.identity(seeds)) != identity:",
           "    if identity is None and (now := manifest.identity(seeds)) != identity:",
           ("tests/train/test_replaced_build.py",)),
    Mutant("mixture-source-unchecked", "mlmprep.train.mixture:Source.split",  # a mixture's source replaced goes unnoticed
           "        return open_epoch(self.path, pass_, self.seeds, identity=self.manifest.identity(self.seeds), rehash=True)",
           "        return open_epoch(self.path, pass_, self.seeds, rehash=True)",
           ("tests/train/test_replaced_build.py::test_a_mixture_source_replaced_under_the_run_stops_it_at_its_next_pass",)),
    Mutant("rehash-data-ignored", "mlmprep.format.load:open_epoch",  # --rehash-data does nothing
           "(check_split_hashes if rehash else check_split_files)", "(check_split_files)",
           ("tests/train/test_replaced_build.py::test_an_edit_that_keeps_the_sizes_is_found_by_a_hash_at_once_with_rehash_data",)),
    Mutant("mixture-source-unhashed", "mlmprep.train.mixture:Source.split",  # a mixture trains on changed bytes
           "identity=self.manifest.identity(self.seeds), rehash=True)", "identity=self.manifest.identity(self.seeds))",
           ("tests/train/test_replaced_build.py::test_a_mixture_source_changed_in_place_is_refused_when_its_pass_opens",)),
    # ------------------------------------------------------------ quality filters (--filters c4,gopher)
    Mutant("c4-min-words-off-by-one", "mlmprep.builder._filter_kernels:c4_pages",  # a 5-word line removed
           "            if words < min_words:", "            if words <= min_words:",
           ("tests/builder/test_filters.py",)),
    Mutant("c4-javascript-drops-the-page", "mlmprep.builder._filter_kernels:c4_pages",  # a line rule on the page
           "            elif javascript:\n                line_fate[line] = LINE_JAVASCRIPT",
           "            elif javascript:\n                fate = PAGE_CURLY_BRACKET\n                line_fate[line] = LINE_STOP",
           ("tests/builder/test_filters.py",)),
    Mutant("c4-citations-kept", "mlmprep.builder._filter_kernels:c4_pages",  # "[1]" left in the page
           "                    if j > 0:  # a marker", "                    if j > 10**9:  # a marker",
           ("tests/builder/test_filters.py",)),
    Mutant("c4-ellipsis-ends-a-line", "mlmprep.builder._filter_kernels:c4_pages",  # "..." taken as an end mark
           "            if not (_is_end_mark(last) or last == 34) or ellipsis:",
           "            if not (_is_end_mark(last) or last == 34):", ("tests/builder/test_filters.py",)),
    Mutant("c4-sentences-per-line", "mlmprep.builder._filter_kernels:c4_pages",  # a line counts one sentence
           "sentences += _sentences(out, w0, w, kinds)", "sentences += 1", ("tests/builder/test_filters.py",)),
    Mutant("c4-reasons-swapped", "mlmprep.builder.filters",  # a dropped page's reason mislabeled
           'PAGE_LOREM_IPSUM: "c4_lorem_ipsum",\n                 PAGE_CURLY_BRACKET: "c4_curly_bracket"',
           'PAGE_LOREM_IPSUM: "c4_curly_bracket",\n                 PAGE_CURLY_BRACKET: "c4_lorem_ipsum"',
           ("tests/builder/test_filters.py",)),
    Mutant("gopher-word-count-off-by-one", "mlmprep.builder._filter_kernels:gopher_quality",  # 49 words kept
           "        if plain < limits[0]:", "        if plain + 1 < limits[0]:", ("tests/builder/test_filters.py",)),
    Mutant("gopher-symbol-words-counted", "mlmprep.builder._filter_kernels:gopher_quality",  # "-" is a word
           "                has_plain |= not kind & SYMBOL", "                has_plain = True",
           ("tests/builder/test_filters.py",)),
    Mutant("gopher-reasons-swapped", "mlmprep.builder.filters",  # a dropped document's reason mislabeled
           'Q_HASHES: "gopher_hashes", Q_ELLIPSES: "gopher_ellipses"',
           'Q_HASHES: "gopher_ellipses", Q_ELLIPSES: "gopher_hashes"', ("tests/builder/test_filters.py",)),
    Mutant("gopher-dup-ngrams-overlap", "mlmprep.builder._filter_kernels:_ngram_fate",  # a repeat counted n times
           "                    free = g + n\n", "                    free = g + 1\n", ("tests/builder/test_filters.py",)),
    Mutant("gopher-top-ngram-none-repeats", "mlmprep.builder._filter_kernels:_ngram_fate",  # no first n-gram then
           "most, at = 1, 0", "most, at = 0, 0", (GOPHER_NGRAMS,)),
    Mutant("gopher-ngram-last-place-left-out", "mlmprep.builder._filter_kernels:_ngram_fate",  # the last n-gram unseen
           "if g + n <= words and", "if g + n < words and", (GOPHER_NGRAMS,)),
    Mutant("gopher-ngram-not-lengthened", "mlmprep.builder._filter_kernels:_ngram_fate",  # (n-1)-grams taken for n
           "                    grams[g] = _longer(grams[g], hashes[g + n - 1])\n", "", (GOPHER_NGRAMS,)),
    Mutant("gopher-repeats-only-in-threes", "mlmprep.builder._filter_kernels:_repeats",  # a line repeated once unseen
           "if shared[slots[k]] > 1 and", "if shared[slots[k]] > 2 and", ("tests/builder/test_filters.py",)),
    Mutant("gopher-last-line-uncounted", "mlmprep.builder._filter_kernels:gopher_quality",  # shares of one line less
           "    if b > a and cp[b - 1] != 10:", "    if False:", ("tests/builder/test_filters.py",)),
    Mutant("gopher-blank-line-ends-in-an-ellipsis", "mlmprep.builder._filter_kernels:gopher_quality",
           "                trailing += worded and ends_ellipsis\n                worded = False\n",
           "                trailing += ends_ellipsis\n                worded = False\n",
           ("tests/builder/test_filters.py",)),
    Mutant("gopher-stop-word-past-ascii", "mlmprep.builder._filter_kernels:_stop_word",  # "t\0\u6865" is "the"
           "        if cp[i] >= 128:\n            return 0\n", "", (STOP_WORDS,)),
    Mutant("gopher-stop-word-unmarked", "mlmprep.builder._filter_kernels:_stop_word",  # "\0the" is "the"
           "    key = 1\n", "    key = 0\n", (STOP_WORDS,)),
    Mutant("gopher-top-ngram-without-spaces", "mlmprep.builder._filter_kernels:_ngram_fate",
           "chars[at + n] - chars[at] + n - 1", "chars[at + n] - chars[at]", ("tests/builder/test_filters.py",)),
    Mutant("gopher-lines-from-stripped-text", "mlmprep.builder._filter_kernels:gopher_repetition",
           "            count = _split_breaks(cp, a, b, 1, bounds)", "            count = _split_breaks(cp, lo, hi, 1, bounds)",
           ("tests/builder/test_filters.py",)),
    Mutant("filter-counts-first-batch-only", "mlmprep.builder.filters:add_totals",  # later shards not summed
           '        mine["documents"] += count["documents"]', '        mine["documents"] = count["documents"]',
           ("tests/builder/test_filters.py::test_a_build_keeps_the_references_pages_and_counts_each_rule",)),
    Mutant("dropped-paragraphs-mislabeled", "mlmprep.builder.overlap:trimmed",  # a dropped row's reason wrong
           '"dedup_paragraphs",', '"dedup_exact",',
           ("tests/builder/test_filters.py::test_keep_dropped_writes_every_removal_with_its_rule_and_verify_checks_it",)),
    Mutant("dropped-numbers-per-shard", "mlmprep.builder.dropped:write_split",  # document numbers restart per shard
           "        first += read\n", "",
           ("tests/builder/test_filters.py::test_keep_dropped_writes_every_removal_with_its_rule_and_verify_checks_it",)),
    Mutant("dropped-filter-numbers-unmapped", "mlmprep.builder.pipeline:filtered",  # kept pages renumbered
           "    return kept, numbers[index]", "    return kept, numbers[: len(kept)]",
           ("tests/builder/test_filters.py::test_keep_dropped_writes_every_removal_with_its_rule_and_verify_checks_it",)),
    Mutant("verify-ignores-dropped-counts", "mlmprep.builder.dropped:check_split",  # a split at odds with the stats
           "        if want[0] != got[0] or", "        if False and",
           ("tests/builder/test_filters.py::test_keep_dropped_writes_every_removal_with_its_rule_and_verify_checks_it",)),
    # ------------------------------------------------------------ the benchmarks page's sections
    Mutant("bench-docs-crossed-sections", "benchmarks.docs:write_section",  # a section holding another's marker is rewritten
           '    if "<!-- begin: " in content[start + len(begin):stop] or', '    if False and "<!-- begin: " in content[start + len(begin):stop] or',
           ("tests/repo/test_benchmark_docs.py::test_markers_that_do_not_pair_up_are_refused_and_the_page_left_alone",)),
    Mutant("dedup-bands-of-datatrove", "mlmprep.config",  # 14 x 8 bands: a pair at Jaccard 0.8 compared 92% of the time
           '    dedup_bands: int = opt(24,', '    dedup_bands: int = opt(14,',
           ("tests/builder/test_dedup.py::test_the_default_bands_make_a_candidate_of_nearly_every_pair_at_the_threshold",)),
    Mutant("bench-dedup-reads-a-dict", "benchmarks.dedup:run",  # the benchmark reads the typed manifest as JSON
           'near = manifests["planted", "near"].corpus.stats["dedup"]', 'near = manifests["planted", "near"]["corpus"]["stats"]["dedup"]',
           ("tests/repo/test_benchmark_summary.py::test_the_dedup_benchmark_quick_run_finds_the_planted_copies_and_no_leak",)),
    Mutant("bench-dedup-scale-copies-of-replaced", "benchmarks.dedup:scale_corpus",  # a copy's source replaced after
           "                pool[len(previous) + d] = docs[d]  # what a later copy copies is what the file holds\n", "",
           ("tests/repo/test_benchmark_summary.py::test_the_dedup_scale_corpus_has_its_size_its_documents_and_its_planted_copies",)),
    Mutant("dedup-rows-overwrite", "mlmprep.builder.selection:JoinedRows.place",  # each shard's rows copied to the start
           "        self.length = end\n", "", ("tests/builder/test_dedup_kernels.py::test_shards_rows_added_in_any_order_are_joined_in_corpus_order",)),
    Mutant("dedup-rows-grow-empty", "mlmprep.builder.selection:JoinedRows.place",  # growing loses the rows placed so far
           "                grown[: self.length] = self.whole[: self.length]\n", "                pass\n",
           ("tests/builder/test_dedup_kernels.py::test_shards_rows_added_in_any_order_are_joined_in_corpus_order",)),
    Mutant("dedup-rows-arrival-order", "mlmprep.builder.selection:JoinedRows.add",  # shards joined as they arrive
           "        self.pending[index] = piece\n", "        self.pending[self.placed] = piece\n",
           ("tests/builder/test_dedup_kernels.py::test_shards_rows_added_in_any_order_are_joined_in_corpus_order",)),
    Mutant("dedup-signature-threads-kept", "mlmprep.builder.dedup:minhash_signatures",  # the caller's thread count is lost
           "        numba.set_num_threads(before)\n", "        pass\n",
           ("tests/builder/test_dedup_kernels.py::test_signatures_do_not_depend_on_the_batch_or_the_thread_count",)),
]


def copy_repository(dest: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) under dest/main; ../shared beside it
    (the corpora the tests look for); mlmprep/cli -> cli, as the installs map it (pyproject's package-dir)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    repo = dest / "main"
    for rel in filter(None, files):
        source = ROOT / rel
        if source.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / rel)
    if (ROOT.parent / "shared").is_dir():
        (dest / "shared").symlink_to(ROOT.parent / "shared")
    (repo / "mlmprep" / "cli").symlink_to(repo / "cli", target_is_directory=True)
    return repo


def pytest(repo: Path, args: tuple[str, ...]) -> str:
    """"" if the tests pass in the copy (the mutant survives them), else the first failing test's id."""
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "", *args], cwd=repo,
                          env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return ""
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return failed[0] if failed else f"pytest exit {done.returncode}"


def module_file(repo: Path, module: str) -> Path | None:
    """The source file of a dotted module name in the copy (a package's __init__.py), or None."""
    base = repo.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def scope(source: str, qualname: str) -> tuple[int, int] | None:
    """Character offsets of the definition `qualname` (dotted through classes and functions, decorators
    included) in `source`; the whole text for an empty qualname; None if it is not defined there."""
    if not qualname:
        return 0, len(source)
    nodes, found = ast.parse(source).body, None
    for part in qualname.split("."):
        found = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), None)
        if found is None:
            return None
        nodes = found.body
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    return starts[first - 1], starts[found.end_lineno]


def snippet_pattern(old: str) -> re.Pattern:
    """`old` with the indentation of its lines free: each line break may be followed by any indentation."""
    first, *rest = old.split("\n")
    pattern = (r"(?m:^)[ ]*" if first[:1] == " " else "") + re.escape(first.lstrip(" "))
    for line in rest:
        pattern += r"\n" + (r"[ ]*" + re.escape(line.lstrip(" ")) if line.strip() else re.escape(line))
    return re.compile(pattern)


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def reindent(old: str, new: str, matched: str) -> str:
    """`new` with its whole lines shifted as many columns as the matched text's lines moved from `old`'s."""
    pairs = enumerate(zip(old.split("\n"), matched.split("\n")))
    shift = next((indent(now) - indent(was) for i, (was, now) in pairs if was.strip() and (i or was[:1] == " ")), 0)
    lines = new.split("\n")
    for i, line in enumerate(lines):
        if line.strip() and (i or old[:1] == " "):
            lines[i] = " " * shift + line if shift >= 0 else line[min(-shift, indent(line)):]
    return "\n".join(lines)


def locate(repo: Path, site: str, old: str) -> tuple[Path, re.Match, str] | str:
    """Where the mutant's snippet is: (file, match, where) when it occurs exactly once in its function, the
    function looked for in its named module first, then in any module of the package; else why not."""
    if not site.endswith(".py") and (repo / site).is_file():  # a page template, mkdocs.yml: the whole file
        site, named, qualname = site, repo / site, ""
    else:
        module, _, qualname = site.partition(":")
        named = module_file(repo, module)
    candidates = [named] if named else []
    candidates += [p for folder in ("mlmprep", "cli") for p in sorted((repo / folder).rglob("*.py"))
                   if p != named and qualname]
    pattern = snippet_pattern(old)
    for path in candidates:
        source = path.read_text(encoding="utf-8")
        span = scope(source, qualname)
        if span is None:
            continue
        matches = list(pattern.finditer(source, *span))
        if len(matches) != 1:
            return f"snippet found {len(matches)} times in {site}"
        where = site if path == named else f"{site}, now in {path.relative_to(repo)}"
        return path, matches[0], where
    return f"no {qualname or 'module'} in {site.partition(':')[0]} or elsewhere in the package"


def check(repo: Path, mutant: Mutant, quick: bool) -> str:
    """KILLED (by the likely tests or the suite), SURVIVED, or STALE (the snippet is not there exactly once)."""
    found = locate(repo, mutant.site, mutant.old)
    if isinstance(found, str):
        return f"STALE ({found})"
    path, match, where = found
    original = path.read_text(encoding="utf-8")
    mutated = original[: match.start()] + reindent(mutant.old, mutant.new, match.group()) + original[match.end():]
    path.write_text(mutated, encoding="utf-8")
    moved = f" [{where}]" if where != mutant.site else ""
    try:
        failed = pytest(repo, mutant.tests)
        if failed:
            return "killed by " + failed + moved
        if quick:
            return "SURVIVED its likely tests (--quick: the whole suite not run)" + moved
        failed = pytest(repo, ())
        return (f"killed by {failed} (whole suite)" if failed else "SURVIVED") + moved
    finally:
        path.write_text(original, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--quick", action="store_true", help="run only each mutant's likely test files")
    args = parser.parse_args()
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:34} {m.site}")
        return
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        sys.exit(f"error: no mutant named {', '.join(sorted(unknown))}; see --list")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mlmprep-mutants-") as tmp:
        repo = copy_repository(Path(tmp))
        if pytest(repo, ("tests/builder/test_mask.py", "-k", "golden")):  # the copy itself must pass (and warm Numba)
            sys.exit("error: the unmutated copy fails tests/builder/test_mask.py; fix the tree first")
        for m in chosen:
            started = time.perf_counter()
            outcome = check(repo, m, args.quick)
            bad += not outcome.startswith("killed")
            print(f"{m.name:34} {outcome}  ({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutants killed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
