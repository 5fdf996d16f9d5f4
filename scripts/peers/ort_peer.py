"""ONNX Runtime's CPU attention, one node a model (written with the `onnx` package), as users
reach for it:
  - a decoding step (tq <= 16 new tokens after a cache): com.microsoft.GroupQueryAttention with
    past K/V [1, kv_heads, tk, d] (a cache of fixed size, seqlens_k = tk - 1: ONNX Runtime's
    convention for a shared buffer), causal among the new tokens; it also writes the present
    K/V, as it does for its users without I/O binding;
  - prefill without a mask: com.microsoft.MultiHeadAttention ([1, T, H d]: its fused kernel);
  - prefill with a mask: ai.onnx Attention (opset 23, [1, H, T, d]), is_causal for causal, else
    the mask as a boolean attn_mask [tq, tk] (ALiBi: a float attn_mask [1, H, tq, tk] of
    slope-scaled distances, -inf where masked; a bias: the float attn_mask itself).
ONNX Runtime's CPU attention operators take f32 and f16; none takes bf16."""
import numpy
import onnx
import onnxruntime
from onnx import TensorProto, helper

import cases
from peer_registry import Unsupported

ELEMENT = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16}


class OnnxRuntime:
    def __init__(self, threads):
        self.threads = threads
        self.version = "onnxruntime " + onnxruntime.__version__

    def prepare(self, case):
        if case["dtype"] not in ELEMENT:
            raise Unsupported("ONNX Runtime's CPU attention operators take f32 and f16, not %s"
                              % case["dtype"])
        if case["tq"] <= cases.DECODE_ROWS < case["tk"]:
            model, feeds, kernel = group_query_attention(case)
        elif case["mask"] == "none" and case["heads"] == case["kv_heads"]:
            model, feeds, kernel = multi_head_attention(case)
        else:
            model, feeds, kernel = attention_23(case)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        return (lambda: session.run(None, feeds)), kernel


def one_node_model(node, inputs, outputs, opsets):
    graph = helper.make_graph([node], "attention", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, version)
                                                   for domain, version in opsets])


def tensor(name, element, shape):
    return helper.make_tensor_value_info(name, element, shape)


def as_dtype(array, case):
    return array.astype(cases.NUMPY_TYPES[case["dtype"]])


def token_rows(x, case):
    """[1, heads, tokens, d] -> the contrib operators' [1, tokens, heads d], in the case's type."""
    return as_dtype(x.transpose(0, 2, 1, 3).reshape(1, x.shape[2], -1), case)


def group_query_attention(case):
    if case["mask"] not in ("none", "causal"):
        raise Unsupported("GroupQueryAttention's mask is causal only, not %s" % case["mask"])
    heads, kv_heads, d, tq, tk = (case[k] for k in ("heads", "kv_heads", "d", "tq", "tk"))
    element = ELEMENT[case["dtype"]]
    q, k, v = cases.qkv(case)
    inputs = [tensor("query", element, [1, tq, heads * d]),
              tensor("key", element, [1, tq, kv_heads * d]),
              tensor("value", element, [1, tq, kv_heads * d]),
              tensor("past_key", element, [1, kv_heads, tk, d]),
              tensor("past_value", element, [1, kv_heads, tk, d]),
              tensor("seqlens_k", TensorProto.INT32, [1]),
              tensor("total_sequence_length", TensorProto.INT32, [])]
    outputs = [tensor("output", element, [1, tq, heads * d]),
               tensor("present_key", element, [1, kv_heads, tk, d]),
               tensor("present_value", element, [1, kv_heads, tk, d])]
    node = helper.make_node("GroupQueryAttention", [i.name for i in inputs],
                            [o.name for o in outputs], domain="com.microsoft",
                            num_heads=heads, kv_num_heads=kv_heads)
    model = one_node_model(node, inputs, outputs, [("", 21), ("com.microsoft", 1)])
    rows = lambda x: token_rows(x, case)
    feeds = {"query": rows(q), "key": rows(k[:, :, -tq:]), "value": rows(v[:, :, -tq:]),
             "past_key": as_dtype(k, case), "past_value": as_dtype(v, case),
             "seqlens_k": numpy.array([tk - 1], numpy.int32),
             "total_sequence_length": numpy.array(tk, numpy.int32)}
    return model, feeds, "GroupQueryAttention (com.microsoft), past K/V"


def multi_head_attention(case):
    heads, d, tq, tk = (case[k] for k in ("heads", "d", "tq", "tk"))
    element = ELEMENT[case["dtype"]]
    inputs = [tensor("query", element, [1, tq, heads * d]),
              tensor("key", element, [1, tk, heads * d]),
              tensor("value", element, [1, tk, heads * d])]
    outputs = [tensor("output", element, [1, tq, heads * d])]
    node = helper.make_node("MultiHeadAttention", ["query", "key", "value"], ["output"],
                            domain="com.microsoft", num_heads=heads)
    model = one_node_model(node, inputs, outputs, [("", 23), ("com.microsoft", 1)])
    feeds = {name: token_rows(x, case) for name, x in zip(["query", "key", "value"],
                                                           cases.qkv(case))}
    return model, feeds, "MultiHeadAttention (com.microsoft)"


def attention_23(case):
    element = ELEMENT[case["dtype"]]
    q, k, v = (as_dtype(x, case) for x in cases.qkv(case))
    feeds = {"Q": q, "K": k, "V": v}
    inputs = [tensor(name, element, list(x.shape)) for name, x in feeds.items()]
    attributes, kernel = {}, "Attention (opset 23)"
    if case["mask"] == "causal" and case["tq"] == case["tk"]:
        attributes["is_causal"] = 1
        kernel += ", is_causal"
    elif cases.score_bias(case) is not None:
        feeds["attn_mask"] = as_dtype(cases.score_bias(case), case)
        inputs.append(tensor("attn_mask", element, list(feeds["attn_mask"].shape)))
        kernel += ", %s as a float attn_mask [1, H, Tq, Tk]" % (
            "ALiBi" if case["mask"] == "alibi" else "the bias")
    elif case["mask"] != "none":
        feeds["attn_mask"] = cases.keep_matrix(case)
        inputs.append(tensor("attn_mask", TensorProto.BOOL, list(feeds["attn_mask"].shape)))
        kernel += ", a boolean attn_mask [Tq, Tk]"
    outputs = [tensor("Y", element, list(q.shape[:3]) + [case["d"]])]
    node = helper.make_node("Attention", list(feeds), ["Y"], **attributes)
    return one_node_model(node, inputs, outputs, [("", 23)]), feeds, kernel

