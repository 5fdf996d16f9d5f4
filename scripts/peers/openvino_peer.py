"""OpenVINO's CPU ScaledDotProductAttention (opset 13), one op a model built in memory, compiled
for "CPU" with INFERENCE_NUM_THREADS and its INFERENCE_PRECISION_HINT (bf16 for bf16 and f16
inputs, which this CPU plugin computes in bf16 where the CPU has AVX512-BF16 or AMX, f32 for f32).
The op's K/V heads must broadcast to the queries' (no GQA), so a decoding step puts a GQA
group's query rows in one head (cases.group_rows), as OpenVINO's own LLM graphs do, with the
causal mask among the new rows as a boolean mask.
Its causal flag is top-left aligned: used only where tq == tk."""
import openvino
import openvino.opset13 as ops

import cases

HINTS = {"f32": "f32", "bf16": "bf16", "f16": "bf16"}


class OpenVino:
    def __init__(self, threads):
        self.threads = threads
        self.core = openvino.Core()
        self.version = "openvino " + openvino.__version__.split("-")[0]

    def prepare(self, case):
        q, k, v = cases.qkv(case)
        grouped = case["heads"] != case["kv_heads"]
        # The mask: booleans, or for ALiBi and a bias the scores' bias in the inputs' type.
        bias = cases.score_bias(case)
        keep = bias if bias is not None else cases.keep_matrix(case)
        if grouped:
            q, keep = cases.group_rows(case, q, keep)
        inputs = {"q": q, "k": k, "v": v}
        parameters = {name: ops.parameter(list(x.shape), element_type(case), name=name)
                      for name, x in inputs.items()}
        arguments = list(parameters.values())
        causal = case["mask"] == "causal" and case["tq"] == case["tk"]
        if keep is not None and not causal:
            inputs["mask"] = keep
            mask_type = element_type(case) if keep.dtype != bool else openvino.Type.boolean
            parameters["mask"] = ops.parameter(list(keep.shape), mask_type, name="mask")
            arguments.append(parameters["mask"])
        attention = ops.scaled_dot_product_attention(*arguments, causal=causal)
        model = openvino.Model([attention], list(parameters.values()), "attention")
        compiled = self.core.compile_model(model, "CPU", {
            "INFERENCE_NUM_THREADS": self.threads,
            "INFERENCE_PRECISION_HINT": HINTS[case["dtype"]],
            "PERFORMANCE_HINT": "LATENCY"})
        request = compiled.create_infer_request()
        # openvino.Tensor shares the array's memory: the arrays live as long as the call.
        arrays = {name: x if x.dtype == bool else cases.host_array(x, case["dtype"])
                  for name, x in inputs.items()}
        for name, x in arrays.items():
            element = parameters[name].get_element_type()
            request.set_tensor(name, openvino.Tensor(x, x.shape, element))
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        kernel = "ScaledDotProductAttention (opset 13)%s, computed in %s" % (
            ", a GQA group's rows in one head" if grouped else "", precision)

        def infer():
            return request.infer(share_inputs=True), arrays
        return infer, kernel


def element_type(case):
    return {"f32": openvino.Type.f32, "bf16": openvino.Type.bf16,
            "f16": openvino.Type.f16}[case["dtype"]]
