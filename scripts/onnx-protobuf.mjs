// A minimal ONNX model writer for the peer benchmarks (ort-attention.mjs, ort-gqa.mjs), so
// nothing but onnxruntime-node is needed: protobuf varints, and fields as (number << 3 | wire
// type) followed by their value.
export const varint = (n) => {
  const out = [];
  for (let v = BigInt(n); ; v >>= 7n) {
    if (v < 0x80n) { out.push(Number(v)); return out; }
    out.push(Number(v & 0x7fn) | 0x80);
  }
};
export const field = (num, wire, payload) => [...varint((num << 3) | wire), ...payload];
export const int = (num, n) => field(num, 0, varint(n));
export const bytes = (num, data) => field(num, 2, [...varint(data.length), ...data]);
export const str = (num, s) => bytes(num, [...Buffer.from(s)]);

// TensorProto element types.
export const FLOAT = 1, INT32 = 6, BOOL = 9, FLOAT16 = 10;

// ValueInfoProto as graph field `num` (11: input, 12: output): name, TypeProto { tensor_type {
// elem_type, shape { dim { dim_value } } } }; no dims: a scalar.
export const valueInfo = (num, name, elemType, dims) =>
  bytes(num, [...str(1, name), ...bytes(2, bytes(1, [...int(1, elemType),
    ...bytes(2, dims.flatMap((n) => bytes(1, int(1, n))))]))]);

// An integer AttributeProto (name, type INT = 2, i) as node field 5.
export const intAttribute = (name, value) => bytes(5, [...str(1, name), ...int(20, 2), ...int(3, value)]);

// ModelProto: ir_version 10, the graph, and opset_import { domain, version } per [domain, version].
export const model = (graph, opsets) =>
  Uint8Array.from([...int(1, 10), ...bytes(7, graph),
    ...opsets.flatMap(([domain, version]) => bytes(8, [...str(1, domain), ...int(2, version)]))]);

// The median of `runs` timed calls of `run` (after one untimed), in ms.
export const medianMs = async (runs, run) => {
  await run();
  const times = [];
  for (let r = 0; r < runs; ++r) {
    const start = process.hrtime.bigint();
    await run();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
};
