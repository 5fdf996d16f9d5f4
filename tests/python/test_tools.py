"""attnc.backends and attnc.tune, the CLI's commands from Python."""
import attnc


def test_backends_lists_what_each_backend_builds():
    names = [backend["name"] for backend in attnc.backends()["backends"]]
    assert {"mlir", "halide", "reference"} <= set(names)


def test_backends_of_a_spec_say_which_cover_it():
    covering = attnc.backends("heads=2 d_k=8 kv_cache=paged page_size=4")
    assert covering["spec"] == attnc.Spec("heads=2 d_k=8 kv_cache=paged page_size=4").canonical


def test_tune_measures_trials_and_reports_the_best(tmp_path):
    events = attnc.tune("heads=2 d_k=16", backend="mlir", seq_q=64, trials=2, runs=1,
                        db=str(tmp_path / "tuning.db"))
    assert events and (tmp_path / "tuning.db").exists()
