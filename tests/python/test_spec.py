"""attnc.Spec and attnc.presets against `attnc spec` and `attnc presets`."""
import json
import subprocess

import pytest

import attnc
from attnc import _cli


def cli(*arguments):
    return subprocess.run([_cli.EXECUTABLE, *arguments], capture_output=True, text=True)


def test_canonical_form_and_hash_are_the_clis():
    text = "heads=8 kv_heads=2 d_k=64 mask=causal"
    spec = attnc.Spec(text)
    assert spec.canonical == cli("spec", text).stdout.strip()
    assert spec.hash == cli("spec", text, "--hash").stdout.strip()
    assert spec.to_json() == json.loads(cli("spec", text, "--json").stdout)
    assert str(spec) == spec.canonical and "kv_heads=2" in repr(spec)


def test_a_dict_a_json_file_and_a_spec_give_the_same_spec(tmp_path):
    spec = attnc.Spec("heads=4 d_k=32 dtype=bf16")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"heads": 4, "d_k": 32, "dtype": "bf16"}))
    assert attnc.Spec({"heads": 4, "d_k": 32, "dtype": "bf16"}) == spec
    assert attnc.Spec(path) == spec
    assert attnc.Spec(spec) == spec and hash(attnc.Spec(spec)) == hash(spec)


@pytest.mark.parametrize("text", ["heads=8 d_k=64 dtype=f64", "heads=8 kv_heads=3 d_k=64",
                                  "heads=8 d_k=64 mask=causl", "heads=8 d_k=64 nonsense=1",
                                  'heads=8 d_k=64 score_mod="score +"'])
def test_a_bad_spec_raises_spec_error_with_the_clis_message(text):
    with pytest.raises(attnc.SpecError) as raised:
        attnc.Spec(text)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == cli("spec", text).stderr.strip().removeprefix("attnc: error: ")


def test_a_bad_json_spec_raises_spec_error():
    with pytest.raises(attnc.SpecError, match="heads"):
        attnc.Spec({"heads": "eight", "d_k": 64})


def test_a_spec_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="spec text, a .json path, a dict or a Spec, not int"):
        attnc.Spec(8)


def test_presets_are_the_clis():
    presets = attnc.presets()
    assert [p.name for p in presets] == [
        line.split()[0] for line in cli("presets").stdout.splitlines() if not line[0].isspace()]
    llama = next(p for p in presets if p.name == "llama3-8b")
    assert attnc.Spec("preset=llama3-8b").to_json()["kv_heads"] == 8 and llama.source
