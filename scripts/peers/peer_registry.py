"""The peers by name. Each is a class taking the thread count, with `version` (what the table
prints) and `prepare(case) -> (call, kernel)`: a function running one attention on inputs made
once, and the name of the operator or kernel that runs it. Imported lazily, so one peer's
missing package never stops the others."""
import importlib


class Unsupported(Exception):
    """The peer has no way to compute this case; the message says why (it goes in the table)."""


def _lazy(module, name):
    def make(threads):
        return getattr(importlib.import_module(module), name)(threads)
    return make


PEERS = {
    "onnxruntime": _lazy("ort_peer", "OnnxRuntime"),
    "torch-sdpa": _lazy("torch_peers", "Sdpa"),
    "torch-sdpa-backward": _lazy("torch_peers", "SdpaBackward"),
    "torch-mha-backward": _lazy("torch_peers", "MhaBackward"),
    "flex": _lazy("torch_peers", "Flex"),
    "attnc-flex": _lazy("torch_peers", "AttncFlex"),
    "torch-mha": _lazy("torch_peers", "MultiheadAttention"),
    "openvino": _lazy("openvino_peer", "OpenVino"),
    "openvino-paged": _lazy("openvino_paged", "OpenVinoPaged"),
    "iree": _lazy("iree_peer", "Iree"),
}
