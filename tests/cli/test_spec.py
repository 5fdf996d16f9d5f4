"""attnc spec and attnc presets."""
import json
import os
import re
import unittest

from common import CliTestCase, attnc


class DocumentedSpecs(CliTestCase):
    """Every spec the README and docs/ show is one attnc accepts: a user copies them."""

    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

    def documents(self):
        paths = [os.path.join(self.ROOT, "README.md")]
        docs = os.path.join(self.ROOT, "docs")
        paths += [os.path.join(docs, name) for name in sorted(os.listdir(docs)) if name.endswith(".md")]
        for path in paths:
            with open(path) as f:
                yield os.path.relpath(path, self.ROOT), f.read()

    def test_every_compile_command_parses(self):
        specs = [(name, spec) for name, text in self.documents()
                 for spec in re.findall(r"attnc compile '([^']+)'", text)]
        self.assertGreater(len(specs), 20)
        for name, spec in specs:
            with self.subTest(document=name, spec=spec):
                self.expect(attnc("spec", spec), 0)

    def test_every_expression_example_parses(self):
        # spec.md's table of examples: `| attention | `spec` |`, the spec's | written \|.
        text = dict(self.documents())["docs/spec.md"]
        table = text[text.index("- **Examples**"):text.index("- **Compiled.**")]
        rows = re.findall(r"^\s*\| [^|`]+ \| `(.+)` \|$", table, re.M)
        self.assertGreaterEqual(len(rows), 5)
        for row in rows:
            with self.subTest(spec=row):
                self.expect(attnc("spec", "heads=8 d_k=64 " + row.replace("\\|", "|")), 0)


class SpecCommand(CliTestCase):
    def test_prints_the_canonical_form(self):
        r = self.expect(attnc("spec", "variant=sdpa heads=8 kv_heads=2 d_k=64 mask=causal"), 0)
        self.assertIn("kv_heads=2", r.stdout)
        self.assertIn("scale=0.125", r.stdout)
        again = self.expect(attnc("spec", r.stdout.strip()), 0)
        self.assertEqual(again.stdout, r.stdout)

    def test_json_form_round_trips_through_a_file(self):
        r = self.expect(attnc("spec", "preset=llama3-8b", "--json"), 0)
        spec = json.loads(r.stdout)
        self.assertEqual(spec["kv_heads"], 8)
        path = os.path.join(self.tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        text = self.expect(attnc("spec", "preset=llama3-8b"), 0).stdout
        self.assertEqual(self.expect(attnc("spec", path), 0).stdout, text)

    def test_hash_is_stable(self):
        a = self.expect(attnc("spec", "d_k=64 heads=8", "--hash"), 0).stdout
        b = self.expect(attnc("spec", "heads=8 d_k=64 kv_heads=8", "--hash"), 0).stdout
        self.assertEqual(a, b)
        self.assertEqual(len(a.strip()), 16)

    def test_keys_lists_every_key(self):
        r = self.expect(attnc("spec", "--keys"), 0)
        for key in ("variant", "window_left", "rope_theta", "feature_map", "proj_len"):
            self.assertIn(key, r.stdout)
        # Position-dependent keys say what the code computes: the aligned query position.
        self.assertIn("-slope_h * |qpos - j|", r.stdout)
        self.assertIn("(qpos - j) mod stride = 0", r.stdout)

    def test_bad_specs_exit_2_with_the_key_and_value(self):
        self.expect(attnc("spec", "d_k=0"), 2, "d_k=0", "[1, 65536]")
        self.expect(attnc("spec", "d_k=64 heads=8 kv_heads=3"), 2, "kv_heads=3 must divide heads=8")
        self.expect(attnc("spec", "d_k=64 dropout=0.1"), 2, "needs seed=N")
        self.expect(attnc("spec", "d_k=64 colour=red"), 2, "unknown key 'colour'")
        self.expect(attnc("spec", os.path.join(self.tmp, "none.json")), 2, "cannot read spec file")

    def test_reserved_and_unread_names_exit_2(self):
        # Issue 52: each was accepted (exit 0).
        for name in ("q", "lengths", "bias", "mask", "k_new", "omega"):
            self.expect(attnc("spec", 'd_k=8 params="%s=1" score_mod="score + %s"' % (name, name)),
                        2, "'%s' is the name of a kernel argument" % name)
            self.expect(attnc("spec", 'd_k=8 aux="%s:f32[Tk]" score_mod="score + %s[kv_idx]"'
                              % (name, name)), 2, "'%s' is the name of a kernel argument" % name)
        self.expect(attnc("spec", 'd_k=8 params="cap=30 n=2" score_mod="cap * tanh(score / cap)"'),
                    2, "no expression reads 'n'")
        self.expect(attnc("spec", 'd_k=8 aux="t:f32[Tk] u:f32[Tk]" score_mod="score + t[kv_idx]"'),
                    2, "no expression reads 'u'")
        path = os.path.join(self.tmp, "unread.json")
        with open(path, "w") as f:
            json.dump({"d_k": 8, "params": {"cap": 30, "n": 2},
                       "score_mod": "cap * tanh(score / cap)"}, f)
        self.expect(attnc("spec", path), 2, "no expression reads 'n'")
        for name, why in (("class", "C or C++ keyword"), ("int", "C or C++ keyword"),
                          ("this", "C or C++ keyword"), ("__x", "reserved"),
                          ("num_threads", "a parameter of the kernel's call")):
            self.expect(attnc("spec", 'd_k=8 aux="%s:f32[Tk]" score_mod="score + %s[kv_idx]"'
                              % (name, name)), 2, "aux=\"%s:f32[Tk]\": '%s'" % (name, name),
                        why)

    def test_bad_json_file_exits_2(self):
        path = os.path.join(self.tmp, "bad.json")
        with open(path, "w") as f:
            f.write("{not json")
        self.expect(attnc("spec", path), 2, "not valid JSON")

    def test_help_and_bad_usage(self):
        self.expect(attnc("--help"), 0, "compile", "verify")
        self.expect(attnc("spec", "--help"), 0, "--json")
        self.expect(attnc(), 2)
        self.expect(attnc("frobnicate"), 2)
        self.expect(attnc("spec", "d_k=8", "--no-such-flag"), 2)


class PresetsCommand(CliTestCase):
    def test_lists_presets_that_all_parse(self):
        r = self.expect(attnc("presets"), 0)
        names = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
        self.assertIn("gpt2", names)
        self.assertIn("performer-base", names)
        for name in names:
            self.expect(attnc("spec", "preset=" + name), 0)

    def test_takes_no_arguments(self):
        self.expect(attnc("presets", "gpt2"), 2)


if __name__ == "__main__":
    unittest.main()
