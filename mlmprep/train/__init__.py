"""Training on a build: token-budget batch plans (`batch`), microbatch tensors (`collate`), out-of-memory
adaptation (`adapt`), models (`model`), checkpoints (`checkpoint`), non-finite steps and FLOPs
(`numerics`), prefetching (`speed`), metric sinks (`reporters`) and the loop itself (`loop`). May import
`format` and the shared top-level modules; never `build` or `corpus`."""
