"""attnc.Spec: a spec parsed and checked in process by the compiler core, as `attnc spec` does."""
import collections
import json
import os

from . import _attnc

Preset = collections.namedtuple("Preset", "name spec source")


class Spec:
    """An attention spec in canonical form: from spec text ('heads=8 d_k=64 mask=causal'), the
    path of a .json file, a dict of keys, or another Spec. Raises attnc.SpecError naming the key,
    the value and what is allowed."""

    def __init__(self, spec):
        if isinstance(spec, Spec):
            self._canonical, self._hash, self._json = spec._canonical, spec._hash, spec._json
            return
        if isinstance(spec, dict):
            parsed = _attnc.parse_spec_json(json.dumps(spec))
        elif isinstance(spec, (str, os.PathLike)):
            parsed = _attnc.parse_spec(os.fspath(spec))
        else:
            raise TypeError("attnc.Spec takes spec text, a .json path, a dict or a Spec, not %s"
                            % type(spec).__name__)
        self._canonical, self._hash, self._json = parsed

    @property
    def canonical(self):
        """Every key with its value, sorted, defaults filled: `attnc spec`'s output."""
        return self._canonical

    @property
    def hash(self):
        """The canonical form's stable hash (16 hex digits), as in bundle names."""
        return self._hash

    def to_json(self):
        """The canonical form as a dict (`attnc spec --json`)."""
        return json.loads(self._json)

    def __str__(self):
        return self._canonical

    def __repr__(self):
        return "attnc.Spec(%r)" % self._canonical

    def __eq__(self, other):
        return isinstance(other, Spec) and other._canonical == self._canonical

    def __hash__(self):
        return hash(self._canonical)


def presets():
    """The real models' attentions known by name (`preset=NAME` in a spec), as `attnc presets`."""
    return [Preset(*preset) for preset in _attnc.presets()]
