// ONNX Runtime's fused CPU attention as the prefill peer of scripts/bench-peers, f32, one batch
// entry of T tokens: `mha` is one com.microsoft.MultiHeadAttention node (query, key and value
// [1, T, H * d], no mask: ONNX Runtime's fused kernel), `causal` one ai.onnx Attention node
// (opset 23, [1, H, T, d], is_causal = 1), as users reach for them; prints the median of RUNS
// calls in ms.
//   node ort-prefill.mjs ORT_MODULE_DIR mha|causal HEADS D T THREADS RUNS
import { createRequire } from "module";
import { FLOAT, bytes, intAttribute, medianMs, model, str, valueInfo } from "./onnx-protobuf.mjs";

const [moduleDir, kind, heads, d, t, threads, runs] = process.argv.slice(2);
if (kind !== "mha" && kind !== "causal") {
  console.error(`ort-prefill.mjs: unknown kind '${kind}' (mha or causal)`);
  process.exit(2);
}
const ort = createRequire(moduleDir + "/")("onnxruntime-node");
const H = Number(heads), D = Number(d), T = Number(t), mha = kind === "mha";

const shape = mha ? [1, T, H * D] : [1, H, T, D];
const node = mha
  ? [...["query", "key", "value"].flatMap((n) => str(1, n)), ...str(2, "output"),
    ...str(4, "MultiHeadAttention"), ...intAttribute("num_heads", H), ...str(7, "com.microsoft")]
  : [...["query", "key", "value"].flatMap((n) => str(1, n)), ...str(2, "output"),
    ...str(4, "Attention"), ...intAttribute("is_causal", 1)];
const graph = [...bytes(1, node), ...str(2, "prefill"),
  ...["query", "key", "value"].flatMap((n) => valueInfo(11, n, FLOAT, shape)),
  ...valueInfo(12, "output", FLOAT, shape)];
const opsets = mha ? [["", 23], ["com.microsoft", 1]] : [["", 23]];
const session = await ort.InferenceSession.create(model(graph, opsets), {
  intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: "all" });
const random = () => Float32Array.from({ length: H * T * D }, () => Math.random() * 2 - 1);
const feeds = Object.fromEntries(["query", "key", "value"].map(
  (n) => [n, new ort.Tensor("float32", random(), shape)]));
const median = await medianMs(Number(runs), () => session.run(feeds));
console.log(`ort ${mha ? "MultiHeadAttention" : "Attention-23 causal"} H=${H} d=${D} T=${T} ` +
  `threads=${threads}: median ${median.toFixed(3)} ms over ${runs} runs`);
