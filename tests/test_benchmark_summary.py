"""The summary table of `python -m benchmarks`: a target is judged from the figures, and a run that diverged
(no final evaluation) is shown as such and fails its target instead of crashing the table."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import segmentation


def result(text_loss, tokens_loss, text_accuracy=0.30, tokens_accuracy=0.35, mode="default") -> dict:
    build = {"token_utilisation": 0.96, "fragment_rate": 0.6, "fragment_span_share": 0.25}
    return {"settings": {"mode": mode}, "methods": {
        "text": {"build": build, "train": {"steps": 20, "final_loss": text_loss, "final_accuracy": text_accuracy}},
        "tokens": {"build": build, "train": {"steps": 20, "final_loss": tokens_loss, "final_accuracy": tokens_accuracy}},
    }}


@pytest.mark.parametrize("losses, met", [((4.6, 4.5), True), ((4.5, 4.6), False), ((4.6, None), False), ((None, 4.5), False)])
def test_the_segmentation_loss_target_is_judged_from_the_losses_and_a_diverged_run_fails_it(losses, met):
    loss = next(f for f in segmentation(result(*losses)) if f.name.startswith("validation loss"))
    assert loss.met is met
    assert loss.value == " / ".join("none (diverged)" if x is None else f"{x:.3f}" for x in losses)


def test_a_quick_segmentation_run_is_shown_but_not_judged():
    """20 steps on 1 MB cannot test seed 002's claim either way: the figures are shown, the targets not judged."""
    for losses in ((4.6, 4.5), (4.5, 4.6)):
        loss = next(f for f in segmentation(result(*losses, mode="quick")) if f.name.startswith("validation loss"))
        assert loss.met is None and loss.target == "tokens lower (default mode)"
