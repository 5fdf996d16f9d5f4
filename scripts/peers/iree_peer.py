"""IREE, the other MLIR attention compiler: one `iree_linalg_ext.attention` op (IREE's fused
online-softmax attention, which its llvm-cpu pipeline tiles and decomposes into a flash loop)
compiled by iree-base-compiler for this CPU (--iree-llvmcpu-target-cpu=host) and run by
iree-base-runtime's local-task driver on `threads` workers. A mask is the op's optional mask
operand (booleans [Tq, Tk], or ALiBi or a bias as a float bias [H, Tq, Tk]): IREE applies it
to every score, skipping no block. The op's batch dimension is the head; its maps cannot divide a head
index, so a GQA decoding step puts a group's query rows in one batch entry (cases.group_rows).
A module is compiled once per shape and kept beside the venv, so the rounds after the first
only load it."""
import hashlib
import importlib.metadata
import os
import sys

from iree import compiler, runtime

import cases

MODULES = os.path.join(sys.prefix, "iree-modules")


class Iree:
    def __init__(self, threads):
        runtime.flags.parse_flags("--task_topology_max_group_count=%d" % threads)
        self.config = runtime.Config("local-task")
        self.version = "iree-base-compiler %s" % importlib.metadata.version("iree-base-compiler")

    def prepare(self, case):
        q, k, v = cases.qkv(case)
        mask = mask_input(case)
        if case["heads"] != case["kv_heads"]:
            q, mask = cases.group_rows(case, q, mask)
        host = [cases.host_array(x[0], case["dtype"]) for x in (q, k, v)]
        if mask is not None:
            host.append(mask if mask.dtype == bool else cases.host_array(mask, case["dtype"]))
        text = attention_mlir(case, [x.shape for x in host], mask)
        function = self.load(text)
        device = [runtime.asdevicearray(self.config.device, x) for x in host]
        return (lambda: function(*device).to_host()), (
            "iree_linalg_ext.attention, llvm-cpu" + (", mask operand" if mask is not None
                                                     else ""))

    def load(self, text):
        path = os.path.join(MODULES, hashlib.sha256(
            (self.version + text).encode()).hexdigest()[:16] + ".vmfb")
        if not os.path.exists(path):
            os.makedirs(MODULES, exist_ok=True)
            flatbuffer = compiler.compile_str(text, target_backends=["llvm-cpu"],
                                              extra_args=["--iree-llvmcpu-target-cpu=host"])
            with open(path + ".part", "wb") as f:
                f.write(flatbuffer)
            os.replace(path + ".part", path)
        with open(path, "rb") as f:
            module = runtime.VmModule.copy_buffer(self.config.vm_instance, f.read())
        context = runtime.SystemContext(config=self.config)
        context.add_vm_module(module)
        return context.modules.module["attention"]


def mask_input(case):
    if cases.score_bias(case) is not None:
        return cases.score_bias(case)[0]  # [H, tq, tk]
    if case["mask"] == "causal" and case["tq"] == 1:
        return None
    return cases.keep_matrix(case)


def tensor_type(shape, element):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), element)


def attention_mlir(case, shapes, mask):
    """The op over (batch, m, n, k1, k2): Q [batch, m, k1], K [batch, k2, k1], V [batch, k2, n],
    the scale, the mask [m, k2] or [batch, m, k2], the result [batch, m, n]. bf16 tensors cross
    the function's boundary as their bits (i16: NumPy has no bf16), bitcast inside."""
    element = case["dtype"]  # attnc's dtype names are MLIR's element types
    storage = "i16" if element == "bf16" else element
    names = ["%q", "%k", "%v", "%mask"][:len(shapes)]
    floats = [i < 3 or mask.dtype != bool for i in range(len(shapes))]
    arguments, operands, operand_types, casts = [], [], [], []
    for name, shape, is_float in zip(names, shapes, floats):
        outside = tensor_type(shape, storage if is_float else "i1")
        inside = tensor_type(shape, element if is_float else "i1")
        arguments.append("%s: %s" % (name, outside))
        if outside != inside:
            casts.append("%s_cast = arith.bitcast %s : %s to %s" % (name, name, outside, inside))
            name += "_cast"
        operands.append(name)
        operand_types.append(inside)
    operands.insert(3, "%scale")
    operand_types.insert(3, element)
    shape = [shapes[0][0], shapes[0][1], shapes[2][2]]
    result, returned = tensor_type(shape, element), tensor_type(shape, storage)
    if returned != result:
        casts_out = "%%out_cast = arith.bitcast %%out : %s to %s\n  return %%out_cast : %s" % (
            result, returned, returned)
    else:
        casts_out = "return %%out : %s" % result
    maps = ["(batch, m, k1)", "(batch, k2, k1)", "(batch, k2, n)", "()"]
    if mask is not None:
        maps.append("(m, k2)" if mask.ndim == 2 else "(batch, m, k2)")
    maps.append("(batch, m, n)")
    indexing = ",\n      ".join("affine_map<(batch, m, n, k1, k2) -> %s>" % m for m in maps)
    arguments, casts = ", ".join(arguments), "\n  ".join(casts)
    operands, operand_types = ", ".join(operands), ", ".join(operand_types)
    return f"""
func.func @attention({arguments}) -> {returned} {{
  {casts}
  %scale = arith.constant {case["d"] ** -0.5:.9e} : {element}
  %empty = tensor.empty() : {result}
  %out = iree_linalg_ext.attention <{{indexing_maps = [
      {indexing}]}}>
      ins({operands} : {operand_types}) outs(%empty : {result}) {{
    ^bb0(%score: f32):
      iree_linalg_ext.yield %score : f32
  }} -> {result}
  {casts_out}
}}
"""
