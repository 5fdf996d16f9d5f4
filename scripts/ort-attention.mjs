// ONNX Runtime's CPU attention as a peer for attnc bench: one ai.onnx Attention node (opset 23)
// on [B, H, T, d] f32 tensors, optionally with a boolean attn_mask [T, T] (true keeps), timed
// over several runs; prints the median in ms. The model is written here with a minimal
// protobuf encoder, so nothing but onnxruntime-node is needed.
//   node ort-attention.mjs ORT_MODULE_DIR HEADS D T RUNS [documents]
// With `documents`, the mask keeps the scores whose query and key lie in the same one of that
// many equal documents (what attnc's document mask computes from q_doc and kv_doc).
import { createRequire } from "module";

const [moduleDir, heads, d, t, runs, documents] = process.argv.slice(2);
const ort = createRequire(moduleDir + "/")("onnxruntime-node");
const H = Number(heads), D = Number(d), T = Number(t), masked = documents !== undefined;

// Protobuf: varints, and fields as (number << 3 | wire type) followed by their value.
const varint = (n) => {
  const out = [];
  for (let v = BigInt(n); ; v >>= 7n) {
    if (v < 0x80n) { out.push(Number(v)); return out; }
    out.push(Number(v & 0x7fn) | 0x80);
  }
};
const field = (num, wire, payload) => [...varint((num << 3) | wire), ...payload];
const int = (num, n) => field(num, 0, varint(n));
const bytes = (num, data) => field(num, 2, [...varint(data.length), ...data]);
const str = (num, s) => bytes(num, [...Buffer.from(s)]);

const FLOAT = 1, BOOL = 9;
// ValueInfoProto as graph field `num` (11: input, 12: output): name, TypeProto { tensor_type {
// elem_type, shape { dim { dim_value } } } }.
const valueInfo = (num, name, elemType, dims) =>
  bytes(num, [...str(1, name), ...bytes(2, bytes(1, [...int(1, elemType),
    ...bytes(2, dims.flatMap((n) => bytes(1, int(1, n))))]))]);
const inputs = ["Q", "K", "V", ...(masked ? ["M"] : [])];
const shape = [1, H, T, D];
// NodeProto: inputs, output, op_type; GraphProto: node, name, inputs, output; ModelProto:
// ir_version 10, the graph, opset_import { domain "", version 23 }.
const node = [...inputs.flatMap((n) => str(1, n)), ...str(2, "Y"), ...str(4, "Attention")];
const graph = [...bytes(1, node), ...str(2, "attention"),
  ...["Q", "K", "V"].flatMap((n) => valueInfo(11, n, FLOAT, shape)),
  ...(masked ? valueInfo(11, "M", BOOL, [T, T]) : []), ...valueInfo(12, "Y", FLOAT, shape)];
const model = [...int(1, 10), ...bytes(7, graph), ...bytes(8, [...str(1, ""), ...int(2, 23)])];

const session = await ort.InferenceSession.create(Uint8Array.from(model), {
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
await session.run(feeds); // warm-up
const times = [];
for (let r = 0; r < Number(runs); ++r) {
  const start = process.hrtime.bigint();
  await session.run(feeds);
  times.push(Number(process.hrtime.bigint() - start) / 1e6);
}
times.sort((a, b) => a - b);
console.log(`ort Attention-23 H=${H} d=${D} T=${T}${masked ? ` documents=${documents}` : ""}: ` +
  `median ${times[Math.floor(times.length / 2)].toFixed(2)} ms over ${runs} runs`);
