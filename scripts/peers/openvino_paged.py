"""OpenVINO's CPU paged attention (PagedAttentionExtension, what OpenVINO GenAI's LLM pipelines
run), one decoding step of one sequence built as a model in memory: tk - 1 tokens already in a
paged cache of blocks in shuffled order, the new token's q, k and v. Every call writes the new
token's K/V into its slot before attending (the op's write_kv_cache), as a serving step does;
rerunning the step rewrites the same slot with the same values.

The op (OpenVINO 2026.4) takes 28 inputs: query [1, H d], key and value [1, H_kv d], the two
caches, past_lens, subsequence_begins, block_indices, block_indices_begins, scale,
sliding_window, alibi_slopes, max_context_len, then 15 inputs of features left off here (cache
rotation, xattention, sinks, adaptive R-KV, token types, qq bias), each given empty. The CPU
plugin picks the caches' type (KV_CACHE_PRECISION: its default u8 quantises them, so it is set)
and shape [blocks, H_kv, 32, d] from the op's rt_info. It accepts an f16 cache with f32
compute, and a bf16 cache only with bf16 compute. Checked against an f64 softmax(q k^T) v at
H 32, H_kv 8, d 128, tk 1000 (f16 cache: 7e-8 absolute; bf16: 7e-4) when this peer was added."""
import math

import numpy
import openvino
import openvino.opset13 as ops
from openvino._pyopenvino.op import _PagedAttentionExtension

import cases
from openvino_peer import OpenVino
from peer_registry import Unsupported

BLOCK = 32  # the CPU plugin's block of f32, f16 and bf16 caches
PRECISIONS = {"f32": ("f32", "f32"), "f16": ("f16", "f32"), "bf16": ("bf16", "bf16")}
# Inputs 13-27, each feature given nothing: (name, value, type).
FEATURES_OFF = [
    ("score_aggregation_window", [], numpy.int32), ("rotated_block_indices", [], numpy.int32),
    ("rotation_deltas", [], numpy.int32), ("rotation_trig_lut", [], numpy.float32),
    ("xattention_threshold", [], numpy.float32), ("xattention_block_size", 0, numpy.int32),
    ("xattention_stride", 0, numpy.int32), ("sinks", [], numpy.float32),
    ("adaptive_rkv_start_size", 0, numpy.int32),
    ("adaptive_rkv_evictable_sizes", [], numpy.int32),
    ("adaptive_rkv_diversity_block_set_indices", [], numpy.int32),
    ("adaptive_rkv_diversity_block_set_indices_begins", [], numpy.int32),
    ("token_type_ids", [], numpy.int32), ("qq_bias", [], numpy.uint8),
    ("qq_bias_begins", [], numpy.int32)]
PARAMETERS = ["query", "key", "value", "key_cache", "value_cache", "past_lens",
              "subsequence_begins", "block_indices", "block_indices_begins"]


def constant(value, dtype):
    return ops.constant(numpy.array(value, dtype=dtype))


def paged_model(heads, kv_heads, d):
    rows = {"query": heads * d, "key": kv_heads * d, "value": kv_heads * d}
    parameters = {name: ops.parameter([-1, width], openvino.Type.f32, name=name)
                  for name, width in rows.items()}
    for name in ("key_cache", "value_cache"):  # typed and shaped by the plugin
        parameters[name] = ops.parameter(openvino.PartialShape.dynamic(4),
                                         openvino.Type.dynamic, name=name)
    for name in PARAMETERS[5:]:
        parameters[name] = ops.parameter([-1], openvino.Type.i32, name=name)
    parameters["max_context_len"] = ops.parameter([], openvino.Type.i32, name="max_context_len")
    inputs = [parameters[name] for name in PARAMETERS] + [
        constant(1 / math.sqrt(d), numpy.float32), constant(0, numpy.int32),  # scale, window
        constant([], numpy.float32), parameters["max_context_len"]]  # no ALiBi slopes
    inputs += [constant(value, dtype) for _, value, dtype in FEATURES_OFF]
    attention = _PagedAttentionExtension([x.output(0) for x in inputs])
    info = attention.get_rt_info()
    info["num_k_heads"], info["k_head_size"] = kv_heads, d
    info["num_v_heads"], info["v_head_size"] = kv_heads, d
    return openvino.Model([attention.output(0)], list(parameters.values()), "paged_decode")


def fill(tensor, values):
    if tensor.get_element_type() == openvino.Type.bf16:
        tensor.data.view(numpy.uint16)[...] = cases.bf16_bits(values)
    else:
        tensor.data[...] = values


class OpenVinoPaged(OpenVino):
    """The SDPA peer's core, threads and version; its own model."""

    def prepare(self, case):
        if case["tq"] != 1 or case["mask"] not in ("none", "causal"):
            raise Unsupported("this paged-attention driver runs one decoding row, no mask")
        heads, kv_heads, d, tk = (case[k] for k in ("heads", "kv_heads", "d", "tk"))
        cache, compute = PRECISIONS[case["dtype"]]
        compiled = self.core.compile_model(paged_model(heads, kv_heads, d), "CPU", {
            "KV_CACHE_PRECISION": cache, "INFERENCE_PRECISION_HINT": compute,
            "INFERENCE_NUM_THREADS": self.threads, "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY"})
        generator = numpy.random.default_rng(0)
        blocks = -(-tk // BLOCK)
        feeds = {"past_lens": [tk - 1], "subsequence_begins": [0, 1],
                 "block_indices": generator.permutation(blocks),
                 "block_indices_begins": [0, blocks], "max_context_len": tk}
        request = compiled.create_infer_request()
        for name, values in feeds.items():
            request.set_tensor(name, openvino.Tensor(numpy.array(values, numpy.int32)))
        for name, width in (("query", heads * d), ("key", kv_heads * d), ("value", kv_heads * d)):
            request.set_tensor(name, openvino.Tensor(
                generator.uniform(-1, 1, (1, width)).astype(numpy.float32)))
        for port in compiled.inputs:
            if port.get_any_name().endswith("_cache"):
                tensor = openvino.Tensor(port.get_element_type(), [blocks, kv_heads, BLOCK, d])
                fill(tensor, generator.uniform(-1, 1, (blocks, kv_heads, BLOCK, d)))
                request.set_tensor(port.get_any_name(), tensor)
        return request.infer, "PagedAttentionExtension, %s cache in shuffled blocks of %d, " \
            "computed in %s" % (cache, BLOCK, compute)
