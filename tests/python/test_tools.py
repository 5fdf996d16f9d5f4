"""attnc.backends and attnc.tune, the CLI's commands from Python."""
import os

import attnc


def test_backends_lists_what_each_backend_builds():
    names = [backend["name"] for backend in attnc.backends()["backends"]]
    assert {"mlir", "halide", "reference"} <= set(names)


def test_backends_of_a_spec_say_which_cover_it():
    covering = attnc.backends("heads=2 d_k=8 kv_cache=paged page_size=4")
    assert covering["spec"] == attnc.Spec("heads=2 d_k=8 kv_cache=paged page_size=4").canonical
    verdicts = {backend["name"]: backend["supported"] for backend in covering["backends"]}
    assert verdicts["mlir"] and verdicts["reference"] and covering["auto"] == "mlir"


def test_tune_measures_trials_and_drops_the_specs_cached_kernels(tmp_path):
    before = attnc.compile("heads=2 d_k=16")
    events = attnc.tune("heads=2 d_k=16", backend="mlir", seq_q=64, trials=2, runs=1,
                        db=str(tmp_path / "tuning.db"))
    assert events and (tmp_path / "tuning.db").exists()
    assert not os.path.exists(before.path)  # the next compile builds with the tuned schedule
    assert attnc.compile("heads=2 d_k=16") is not before
