// ONNX Runtime's CPU attention as a peer for attnc bench: one ai.onnx Attention node (opset 23)
// on [B, H, T, d] f32 tensors, optionally with a boolean attn_mask [T, T] (true keeps), timed
// over several runs; prints the median in ms. The model is written here with a minimal
// protobuf encoder (onnx-protobuf.mjs), so nothing but onnxruntime-node is needed.
//   node ort-attention.mjs ORT_MODULE_DIR HEADS D T RUNS [documents]
// With `documents`, the mask keeps the scores whose query and key lie in the same one of that
// many equal documents (what attnc's document mask computes from q_doc and kv_doc).
import { createRequire } from "module";
import { BOOL, FLOAT, bytes, medianMs, model, str, valueInfo } from "./onnx-protobuf.mjs";

const [moduleDir, heads, d, t, runs, documents] = process.argv.slice(2);
const ort = createRequire(moduleDir + "/")("onnxruntime-node");
const H = Number(heads), D = Number(d), T = Number(t), masked = documents !== undefined;

const inputs = ["Q", "K", "V", ...(masked ? ["M"] : [])];
const shape = [1, H, T, D];
// NodeProto: inputs, output, op_type; GraphProto: node, name, inputs, output; opset 23.
const node = [...inputs.flatMap((n) => str(1, n)), ...str(2, "Y"), ...str(4, "Attention")];
const graph = [...bytes(1, node), ...str(2, "attention"),
  ...["Q", "K", "V"].flatMap((n) => valueInfo(11, n, FLOAT, shape)),
  ...(masked ? valueInfo(11, "M", BOOL, [T, T]) : []), ...valueInfo(12, "Y", FLOAT, shape)];

const session = await ort.InferenceSession.create(model(graph, [["", 23]]), {
  intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: "all" });
const random = (n) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
const feeds = { Q: new ort.Tensor("float32", random(H * T * D), shape),
  K: new ort.Tensor("float32", random(H * T * D), shape),
  V: new ort.Tensor("float32", random(H * T * D), shape) };
if (masked) {
  const size = Math.ceil(T / Number(documents)), keep = new Uint8Array(T * T);
  for (let i = 0; i < T; ++i)
    for (let j = 0; j < T; ++j) keep[i * T + j] = Math.floor(i / size) === Math.floor(j / size);
  feeds.M = new ort.Tensor("bool", keep, [T, T]);
}
const median = await medianMs(Number(runs), () => session.run(feeds));
console.log(`ort Attention-23 H=${H} d=${D} T=${T}${masked ? ` documents=${documents}` : ""}: ` +
  `median ${median.toFixed(2)} ms over ${runs} runs`);
