"""attnc.backends and attnc.tune: the CLI's commands of the same names, run as child processes."""
import json

from . import _cache, _cli
from ._spec import Spec


def backends(spec=None):
    """What each backend builds (`attnc backends --json`), or for SPEC, which backends cover it
    and why the others do not (`--spec`)."""
    arguments = ["backends", "--json"]
    if spec is not None:
        arguments += ["--spec", Spec(spec).canonical]
    return json.loads(_cli.run(*arguments))


def tune(spec, **options):
    """Searches SPEC's schedules on this machine and remembers the fastest in the tuning database
    (`attnc tune`), which attnc.compile(spec) then uses. Options are tune's own, named with
    underscores: seq_q=2048, minutes=5, trials=40, backend="mlir", threads=1, ... Returns the
    JSON events tune printed, the last one its result. SPEC's cached kernels are dropped, so
    the next attnc.compile(spec) builds with what tune found."""
    arguments = ["tune", Spec(spec).canonical]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            arguments.append(flag)
        elif value is not False and value is not None:
            arguments += [flag, str(value)]
    events = [json.loads(line) for line in _cli.run(*arguments).splitlines()
              if line.startswith("{")]
    _cache.forget(spec)
    return events
