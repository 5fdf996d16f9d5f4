// ONNX Runtime's CPU decode attention as a peer for scripts/bench-decode: one
// com.microsoft.GroupQueryAttention node taking TQ new tokens (1 unless given: a decoding step;
// more for speculative decoding, causal among themselves) per sequence against a K/V cache
// holding Tk - TQ past tokens (buffers [B, H_kv, Tk, d], float16 or float32, seqlens_k = Tk - 1,
// ONNX Runtime's convention for a cache of fixed size), as an inference engine calls it each
// step; prints the median time of a step in ms. The model is written with
// onnx-protobuf.mjs, so nothing but onnxruntime-node is needed.
//   node ort-gqa.mjs ORT_MODULE_DIR HEADS KV_HEADS D TK DTYPE THREADS RUNS [TQ]
// DTYPE is f16 or f32. ONNX Runtime's kernel also writes the present K/V (the past with the new
// token, [B, H_kv, Tk, d]): that copy is part of its step, as it is for its users without I/O
// binding.
import { createRequire } from "module";
import { FLOAT, FLOAT16, INT32, bytes, intAttribute, medianMs, model, str, valueInfo }
  from "./onnx-protobuf.mjs";

const [moduleDir, heads, kvHeads, d, tk, dtype, threads, runs, tq = "1"] = process.argv.slice(2);
const ort = createRequire(moduleDir + "/")("onnxruntime-node");
const H = Number(heads), HKV = Number(kvHeads), D = Number(d), TK = Number(tk), TQ = Number(tq);
const half = dtype === "f16", elem = half ? FLOAT16 : FLOAT;

const inputs = ["query", "key", "value", "past_key", "past_value", "seqlens_k",
  "total_sequence_length"];
const outputs = ["output", "present_key", "present_value"];
const node = [...inputs.flatMap((n) => str(1, n)), ...outputs.flatMap((n) => str(2, n)),
  ...str(4, "GroupQueryAttention"), ...intAttribute("num_heads", H),
  ...intAttribute("kv_num_heads", HKV), ...str(7, "com.microsoft")];
const graph = [...bytes(1, node), ...str(2, "decode"),
  ...valueInfo(11, "query", elem, [1, TQ, H * D]),
  ...valueInfo(11, "key", elem, [1, TQ, HKV * D]),
  ...valueInfo(11, "value", elem, [1, TQ, HKV * D]),
  ...valueInfo(11, "past_key", elem, [1, HKV, TK, D]),
  ...valueInfo(11, "past_value", elem, [1, HKV, TK, D]),
  ...valueInfo(11, "seqlens_k", INT32, [1]), ...valueInfo(11, "total_sequence_length", INT32, []),
  ...valueInfo(12, "output", elem, [1, TQ, H * D]),
  ...valueInfo(12, "present_key", elem, [1, HKV, TK, D]),
  ...valueInfo(12, "present_value", elem, [1, HKV, TK, D])];

const session = await ort.InferenceSession.create(model(graph, [["", 21], ["com.microsoft", 1]]), {
  intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: "all" });
// Random values in [-1, 1), as float16 bits or float32.
const random = (n) => {
  if (!half)
    return Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
  const f = new Float32Array(1), bits = new Uint32Array(f.buffer);
  return Uint16Array.from({ length: n }, () => {
    f[0] = Math.random() * 2 - 1;
    const b = bits[0], exponent = ((b >> 23) & 0xff) - 127 + 15;
    return exponent <= 0 ? (b >> 16) & 0x8000 : ((b >> 16) & 0x8000) | (exponent << 10) | ((b >> 13) & 0x3ff);
  });
};
const type = half ? "float16" : "float32";
const feeds = {
  query: new ort.Tensor(type, random(TQ * H * D), [1, TQ, H * D]),
  key: new ort.Tensor(type, random(TQ * HKV * D), [1, TQ, HKV * D]),
  value: new ort.Tensor(type, random(TQ * HKV * D), [1, TQ, HKV * D]),
  past_key: new ort.Tensor(type, random(HKV * TK * D), [1, HKV, TK, D]),
  past_value: new ort.Tensor(type, random(HKV * TK * D), [1, HKV, TK, D]),
  seqlens_k: new ort.Tensor("int32", Int32Array.from([TK - 1]), [1]),
  total_sequence_length: new ort.Tensor("int32", Int32Array.from([TK]), []),
};
const median = await medianMs(Number(runs), () => session.run(feeds));
console.log(`ort GroupQueryAttention H=${H} H_kv=${HKV} d=${D} Tq=${TQ} Tk=${TK} ${dtype} ` +
  `${threads} threads: median ${median.toFixed(3)} ms over ${runs} runs`);
