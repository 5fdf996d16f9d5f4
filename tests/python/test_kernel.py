"""attnc.compile's kernels called on numpy arrays: outputs against the f64 reference on odd
shapes, out=, the arguments' description, and every refusal as an exception naming the tensor."""
import numpy
import pytest

import attnc
from conftest import random_qkv

GQA_CAUSAL = "heads=4 kv_heads=2 d_k=16 mask=causal lse=true"


@pytest.mark.parametrize("batch, seq_q, seq_k", [(2, 37, 53), (1, 1, 67), (3, 19, 5)])
def test_outputs_match_the_f64_reference_on_odd_shapes(batch, seq_q, seq_k, reference_of):
    """Sizes off every tile, Tq = 1, and Tq > Tk (the first rows see no key: fully masked)."""
    q, k, v = random_qkv(numpy.random.default_rng(seq_q), batch, 4, 2, seq_q, seq_k, 16)
    o, lse = attnc.compile(GQA_CAUSAL)(q, k, v)
    expected = reference_of(GQA_CAUSAL, q, k, v)
    assert o.shape == (batch, 4, seq_q, 16) and lse.shape == (batch, 4, seq_q)
    numpy.testing.assert_allclose(o, expected.o, atol=2e-5)
    numpy.testing.assert_allclose(lse, expected.lse, atol=2e-5)


def test_plain_attention_is_softmax_of_the_scaled_scores():
    q, k, v = random_qkv(numpy.random.default_rng(0), 2, 3, 3, 9, 11, 8)
    o = attnc.compile("heads=3 d_k=8")(q, k, v)
    scores = numpy.einsum("bhqd,bhkd->bhqk", q.astype(float), k.astype(float)) / numpy.sqrt(8)
    weights = numpy.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    assert isinstance(o, numpy.ndarray) and o.dtype == numpy.float32
    numpy.testing.assert_allclose(o, weights @ v.astype(float), atol=1e-5)


def test_out_is_written_in_place():
    kernel = attnc.compile(GQA_CAUSAL)
    q, k, v = random_qkv(numpy.random.default_rng(1), 1, 4, 2, 6, 6, 16)
    o, lse = numpy.zeros((1, 4, 6, 16), numpy.float32), numpy.zeros((1, 4, 6), numpy.float32)
    result = kernel(q, k, v, out={"o": o, "lse": lse})
    assert result.o is o and result.lse is lse
    numpy.testing.assert_array_equal(o, kernel(q, k, v).o)
    o_only = numpy.zeros_like(o)
    assert kernel(q, k, v, out=o_only).o is o_only


def test_read_only_inputs_are_read():
    q, k, v = random_qkv(numpy.random.default_rng(2), 1, 4, 2, 3, 4, 16)
    expected = attnc.compile(GQA_CAUSAL)(q, k, v).o
    for tensor in (q, k, v):
        tensor.flags.writeable = False
    numpy.testing.assert_array_equal(attnc.compile(GQA_CAUSAL)(q, k, v).o, expected)


def test_f16_kernels_take_numpy_float16(reference_of):
    spec = "heads=2 d_k=32 dtype=f16 mask=causal"
    q, k, v = random_qkv(numpy.random.default_rng(3), 1, 2, 2, 13, 13, 32, numpy.float16)
    o = attnc.compile(spec)(q, k, v)
    assert o.dtype == numpy.float16
    numpy.testing.assert_allclose(o.astype(float), reference_of(spec, q, k, v).astype(float),
                                  atol=2e-3)


def test_arguments_describe_the_manifest():
    kernel = attnc.compile(GQA_CAUSAL)
    assert [(a.name, a.role) for a in kernel.arguments] == [
        ("q", "input"), ("k", "input"), ("v", "input"), ("o", "output"), ("lse", "output")]
    q = kernel.arguments[0]
    assert q.dtypes == ("f32",) and q.shape == ("B", 4, "Tq", 16) and q.doc
    assert kernel.outputs == ["o", "lse"] and kernel.spec == attnc.Spec(GQA_CAUSAL)
    assert kernel.target and kernel.target in repr(kernel)


def test_inputs_given_by_name():
    kernel = attnc.compile("heads=2 d_k=8 mask=padding")
    q, k, v = random_qkv(numpy.random.default_rng(4), 2, 2, 2, 5, 7, 8)
    lengths = numpy.array([7, 3], numpy.int32)
    by_name = kernel(q=q, k=k, v=v, lengths=lengths)
    numpy.testing.assert_array_equal(kernel(q, k, v, lengths=lengths), by_name)
    numpy.testing.assert_allclose(by_name[1], attnc.compile("heads=2 d_k=8")(
        q[1:], k[1:, :, :3], v[1:, :, :3])[0], atol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda f, q, k, v: f(q, k), r"missing 'v' \(values, Bx2xTkx16\)"),
    (lambda f, q, k, v: f(q, k, v, q), "4 tensors given by position; this kernel takes at most 3"),
    (lambda f, q, k, v: f(q, k, v, k=k), "tensor 'k' given twice"),
    (lambda f, q, k, v: f(q, k, v, bias=q), "no tensor 'bias'; it takes q, k, v"),
    (lambda f, q, k, v: f(q, k, v, out={"weights": q}), "out= names weights; this kernel's"),
])
def test_a_wrong_call_is_a_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call(attnc.compile(GQA_CAUSAL), *random_qkv(numpy.random.default_rng(5), 1, 4, 2, 3, 3, 16))


def refusal(q=None, k=None, v=None, **named):
    base = dict(zip("qkv", random_qkv(numpy.random.default_rng(6), 2, 4, 2, 5, 7, 16)))
    given = {name: tensor for name, tensor in dict(q=q, k=k, v=v).items() if tensor is not None}
    with pytest.raises(attnc.TensorError) as raised:
        attnc.compile(GQA_CAUSAL)(**{**base, **given}, **named)
    return str(raised.value)


def test_a_wrong_dtype_names_the_tensor_and_the_allowed_one():
    message = refusal(q=numpy.zeros((2, 4, 5, 16), numpy.float64))
    assert "'q'" in message and "f32" in message and "f64" in message


def test_a_wrong_extent_names_the_tensor():
    message = refusal(k=numpy.zeros((2, 3, 7, 16), numpy.float32))
    assert "'k'" in message and "3" in message


def test_strided_and_broadcast_inputs_are_read_where_they_lie():
    kernel = attnc.compile("heads=4 kv_heads=2 d_k=16")
    # Tq 5: the decoding steps' kernel; Tq 40: the prefill's, whose PV reads v's columns
    # through a view of unit column stride where they are contiguous, else through the strides.
    for seq_q, seq_k in ((5, 7), (40, 37)):
        q, k, v = random_qkv(numpy.random.default_rng(9), 2, 4, 2, seq_q, seq_k, 32)
        every_other = q[..., ::2]
        one_head = numpy.broadcast_to(k[:, :1, :, ::2], (2, 2, seq_k, 16))
        for value in (v[..., :16], spaced(v[..., :16])):
            numpy.testing.assert_array_equal(
                kernel(every_other, one_head, value),
                kernel(*map(numpy.ascontiguousarray, (every_other, one_head, value))))


def spaced(array):
    """The array's values in a view whose last dimension is every other element of a buffer."""
    buffer = numpy.zeros(array.shape[:-1] + (2 * array.shape[-1],), array.dtype)
    buffer[..., ::2] = array
    return buffer[..., ::2]


def test_the_backward_reads_and_writes_rows_that_are_not_contiguous():
    """A bias and the gradients of the bias and of q whose elements lie a stride apart take the
    backward's element-by-element paths; they give what contiguous rows give, bit for bit."""
    rng = numpy.random.default_rng(11)
    q, k, v = random_qkv(rng, 2, 2, 2, 37, 53, 16)
    bias = rng.standard_normal((2, 2, 37, 53)).astype(numpy.float32)
    kernel = attnc.compile("heads=2 d_k=16 bias=true lse=true backward=true")
    o, lse = kernel(q, k, v, bias=bias)
    grad_o = rng.standard_normal(o.shape).astype(numpy.float32)
    contiguous = kernel.backward(q, k, v, bias=bias, o=o, lse=lse, grad_o=grad_o)
    out = {name: spaced(numpy.zeros_like(getattr(contiguous, name)))
           for name in ("grad_q", "grad_bias")}
    strided = kernel.backward(q, k, v, bias=spaced(bias), o=o, lse=lse, grad_o=grad_o, out=out)
    for name in contiguous._fields:
        numpy.testing.assert_array_equal(getattr(strided, name), getattr(contiguous, name))


def test_a_negative_stride_is_refused():
    q = numpy.zeros((2, 4, 5, 16), numpy.float32)[..., ::-1]
    assert "tensor 'q' has negative stride -1 in dimension 3" in refusal(q=q)


def test_outputs_that_overlap_are_refused():
    o = numpy.zeros((2, 4, 5, 16), numpy.float32)
    assert "'o' shares memory with tensor 'lse'" in refusal(out={"o": o, "lse": o[..., 0]})


def test_an_output_numpy_cannot_hold_is_refused():
    with pytest.raises(attnc.TensorError, match="'o' is bf16, which numpy has no type for"):
        attnc.compile("heads=2 d_k=32 dtype=bf16")(*random_qkv(
            numpy.random.default_rng(7), 1, 2, 2, 3, 3, 32, numpy.float16))


PAGED = "heads=2 kv_heads=1 d_k=16 kv_cache=paged page_size=4"


def paged_inputs(seq_lens, block_table, pages=6):
    rng = numpy.random.default_rng(8)
    q = rng.standard_normal((2, 2, 1, 16)).astype(numpy.float32)
    k_pages, v_pages = (rng.standard_normal((pages, 4, 1, 16)).astype(numpy.float32)
                        for _ in range(2))
    return (q, k_pages, v_pages), dict(seq_lens=numpy.array(seq_lens, numpy.int32),
                                       block_table=numpy.array(block_table, numpy.int32))


def test_a_paged_cache_matches_the_reference(reference_of):
    """Shuffled pages, a sequence ending inside its last page."""
    tensors, named = paged_inputs([5, 8], [[3, 1], [0, 5]])
    numpy.testing.assert_allclose(attnc.compile(PAGED)(*tensors, **named),
                                  reference_of(PAGED, *tensors, **named), atol=2e-5)


@pytest.mark.parametrize("seq_lens, block_table, names", [
    ([5, 9], [[3, 1], [0, 5]], "seq_lens"),
    ([5, 8], [[3, 6], [0, 5]], "block_table"),
    ([5, -1], [[3, 1], [0, 5]], "seq_lens"),
])
def test_bad_lengths_and_block_tables_are_refused(seq_lens, block_table, names):
    tensors, named = paged_inputs(seq_lens, block_table)
    with pytest.raises(attnc.TensorError, match=names):
        attnc.compile(PAGED)(*tensors, **named)


def test_something_not_an_array_is_refused():
    assert "tensor 'v' is not an array (numpy, torch or any object with __dlpack__); it is a " \
           "list" in refusal(v=[[1.0]])


def test_a_read_only_output_is_refused():
    o = numpy.zeros((2, 4, 5, 16), numpy.float32)
    o.flags.writeable = False
    assert "tensor 'o' is not a writable array" in refusal(out=o)
