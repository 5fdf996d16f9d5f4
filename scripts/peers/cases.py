"""What every peer derives from a case alike: its inputs, its mask as booleans, ALiBi's slopes.
The semantics are attnc's (docs/spec.md): query row i sits at position qpos = i + tk - tq."""
import numpy

from peer_registry import Unsupported

DECODE_ROWS = 16  # at most this many query rows a step are a decoding step (attnc's decode kernel)

NUMPY_TYPES = {"f32": numpy.float32, "f16": numpy.float16}


def bf16_bits(array):
    """Round-to-nearest-even bf16 bit patterns of an f32 array, as uint16 (numpy has no bf16)."""
    bits = numpy.ascontiguousarray(array, numpy.float32).view(numpy.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(numpy.uint16)


def host_array(array, dtype):
    """The bytes an input of `dtype` holds: bf16 as its bit patterns."""
    if dtype == "bf16":
        return bf16_bits(array)
    return array.astype(NUMPY_TYPES[dtype])


def group_rows(case, q, mask):
    """A GQA decoding step for peers whose K/V heads must match the queries': a group's query
    rows in one head, q [1, H, tq, d] -> [1, H_kv, groups * tq, d], the [tq, tk] mask repeated
    for each query head of the group. Exact for tq <= DECODE_ROWS rows at the cache's end."""
    if case["tq"] > DECODE_ROWS:
        raise Unsupported("K/V heads must match the queries' here, and a GQA prefill has no "
                          "form with a group's rows in one head")
    if mask is not None and mask.ndim != 2:
        raise Unsupported("a per-head mask (ALiBi) has no form with a group's rows in one head")
    q = q.reshape(1, case["kv_heads"], -1, case["d"])
    return q, None if mask is None else numpy.tile(mask, (groups(case), 1))


def groups(case):
    if case["heads"] % case["kv_heads"]:
        raise ValueError("heads %d is not a multiple of kv_heads %d" %
                         (case["heads"], case["kv_heads"]))
    return case["heads"] // case["kv_heads"]


def random_bhsd(heads, rows, width, seed):
    """[1, heads, rows, width] uniform in [-1, 1), f32 (a peer casts it to its dtype)."""
    generator = numpy.random.default_rng(seed)
    return generator.uniform(-1, 1, (1, heads, rows, width)).astype(numpy.float32)


def qkv(case):
    return (random_bhsd(case["heads"], case["tq"], case["d"], 1),
            random_bhsd(case["kv_heads"], case["tk"], case["d"], 2),
            random_bhsd(case["kv_heads"], case["tk"], case["d"], 3))


def document_ids(length, documents):
    """Token t's document: `documents` runs of equal length (the last one shorter)."""
    size = -(-length // documents)
    return numpy.arange(length, dtype=numpy.int32) // size


def keep_function(case, as_array=numpy.asarray):
    """The mask as a function of (q_idx, kv_idx), on NumPy arrays or, with `as_array` =
    torch.from_numpy, torch tensors (FlexAttention's mask_mod): the one definition every peer
    uses."""
    offset, mask = case["tk"] - case["tq"], case["mask"]
    if mask in ("causal", "alibi", "softcap"):
        return lambda q_idx, kv_idx: kv_idx <= q_idx + offset
    if mask == "window":
        return lambda q_idx, kv_idx: (kv_idx <= q_idx + offset) & (
            q_idx + offset - kv_idx < case["window"])
    if mask == "document":
        ids = as_array(document_ids(case["tk"], case["documents"]))
        return lambda q_idx, kv_idx: ids[q_idx + offset] == ids[kv_idx]
    raise ValueError("mask %r has no keep function" % mask)


def keep_matrix(case):
    """[tq, tk] booleans, or None when every key is kept."""
    if case["mask"] in ("none", "bias"):
        return None
    rows = numpy.arange(case["tq"])[:, None]
    columns = numpy.arange(case["tk"])[None, :]
    return keep_function(case)(rows, columns)


def alibi_slopes(heads):
    """2^(-8 (h + 1) / n) for n a power of two; otherwise the power of two below's, then every
    other slope of twice that (Press et al.; attnc's docs/spec.md)."""
    def powers(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    below = 1 << (heads.bit_length() - 1)
    if below == heads:
        return powers(heads)
    return powers(below) + powers(2 * below)[0::2][:heads - below]



def score_bias(case):
    """The float [1, H, tq, tk] f32 the scores add, or None: ALiBi's, or for "bias" a seeded
    standard normal one (a learned relative bias, a float attention mask), every key kept."""
    if case["mask"] == "alibi":
        return alibi_bias(case)
    if case["mask"] == "bias":
        shape = (1, case["heads"], case["tq"], case["tk"])
        return numpy.random.default_rng(4).standard_normal(shape, numpy.float32)
    return None


def alibi_bias(case):
    """-slope_h |qpos - j| where kept, -inf elsewhere: [1, H, tq, tk] f32."""
    rows = numpy.arange(case["tq"])[:, None] + case["tk"] - case["tq"]
    distance = numpy.abs(rows - numpy.arange(case["tk"])[None, :]).astype(numpy.float32)
    slopes = numpy.array(alibi_slopes(case["heads"]), numpy.float32)[:, None, None]
    bias = numpy.where(keep_matrix(case), -slopes * distance, -numpy.inf)
    return bias[None].astype(numpy.float32)
