"""Training on a build: token-budget batch plans (`batch`), microbatch tensors (`collate`), out-of-memory
adaptation (`adapt`), models (`model`), checkpoints (`checkpoint`), non-finite steps and FLOPs (`numerics`),
prefetching (`speed`), metric sinks (`reporters`), mixtures of builds (`mixture`, and `mixture_run` for a run's
side of one), and the loop: `loop` (the recipe) over `prepare` (set-up), `state`, `epochs`, `step`, `loss`,
`optim`, `evaluation`, `logs` and `world` (the ranks). May import `format` and the shared top-level modules;
never `builder` or `corpus`."""
