"""examples/training/train.py: a two-layer transformer trained for 50 steps with attnc's
attention (its backward entry) follows the loss curve of the same model on torch's SDPA."""
import os
import runpy

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "training", "train.py")


def test_the_loss_curve_matches_eager_pytorchs():
    example = runpy.run_path(EXAMPLE)
    mine, theirs = example["main"]()
    assert len(mine) == len(theirs) == 50
    for a, b in zip(mine, theirs):
        assert abs(a - b) <= 1e-3 * abs(b), (a, b)
    assert mine[-1] < 0.25 * mine[0]  # it learned the sequences
