"""Making a build: the driver (`run`: `build()` and its stages, with `inputs`, `lengths`, `outputs` and
`record`), where it goes (`destination`: a local directory or an object-store prefix), `remask`, the tokenizer a
build trains (`tokenizer_file`, also `mlmprep tokenizer train`), the tasks it runs (`pipeline`, with what they share
in `staged`, phase 2's rows in `side_rows` and its masking in `masker`) on local processes or Ray (`engine`: one
interface in `engine.base`, one class per engine in `engine.local` and `engine.ray`), and the stages of those
tasks: cleaning (`clean`), exact and near-duplicate detection (`dedup`, with its Numba kernels in `_dedup_kernels`;
`selection`: which documents are kept and held out), windows (`windows`), masking (`mask`, with its Numba kernels
in `_kernels`; `randomness`: the seed hashing every stage shares), plus `verify`, which re-derives a build to
check it.
May import `corpus`, `format`, `tokenizer` and the shared top-level modules; never torch or `train`."""
