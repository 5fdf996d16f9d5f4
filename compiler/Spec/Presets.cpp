#include "Spec/Presets.h"

#include <array>

namespace attnc {
namespace {

// Sliding windows count keys before the query: a window of W tokens including the query itself
// is window_left = W - 1 (Mistral's and Gemma 2's 4096-token windows).
constexpr std::array kPresets{
    Preset{"transformer-base",
           "variant=mha heads=8 d_k=64 d_model=512 pe=sinusoidal mask=padding dropout=0.1 seed=0",
           "Vaswani et al. 2017, base model (encoder self-attention)"},
    Preset{"bert-base", "variant=sdpa heads=12 d_k=64 mask=padding",
           "Devlin et al. 2018, BERT-base"},
    Preset{"gpt2", "variant=sdpa heads=12 d_k=64 mask=causal", "Radford et al. 2019, GPT-2 small"},
    Preset{"vit-b16", "variant=sdpa heads=12 d_k=64", "Dosovitskiy et al. 2020, ViT-B/16"},
    Preset{"t5-base", "variant=sdpa heads=12 d_k=64 scale=1 mask=padding bias=true",
           "Raffel et al. 2019, T5-base encoder (relative position bias as a bias tensor)"},
    Preset{"llama3-8b",
           "variant=sdpa heads=32 kv_heads=8 d_k=128 mask=causal rope=true rope_theta=500000",
           "Meta Llama 3 8B config"},
    Preset{"llama3-70b",
           "variant=sdpa heads=64 kv_heads=8 d_k=128 mask=causal rope=true rope_theta=500000",
           "Meta Llama 3 70B config"},
    Preset{"mistral-7b",
           "variant=sdpa heads=32 kv_heads=8 d_k=128 mask=causal+window window_left=4095 "
           "rope=true rope_theta=10000",
           "Mistral 7B v0.1 config (sliding window 4096)"},
    Preset{"gemma2-9b",
           "variant=sdpa heads=16 kv_heads=8 d_k=256 mask=causal+window window_left=4095 "
           "softcap=50 scale=0.0625 rope=true rope_theta=10000",
           "Gemma 2 9B config, local layers (global layers: override mask=causal)"},
    Preset{"falcon-7b", "variant=sdpa heads=71 kv_heads=1 d_k=64 mask=causal rope=true",
           "Falcon-7B config (multi-query)"},
    Preset{"bloom-560m", "variant=sdpa heads=16 d_k=64 mask=causal alibi=true",
           "BLOOM-560m config"},
    Preset{"mpt-7b", "variant=sdpa heads=32 d_k=128 mask=causal alibi=true", "MPT-7B config"},
    Preset{"longformer-base",
           "variant=sdpa heads=12 d_k=64 mask=window+global window_left=256 window_right=256 "
           "global_tokens=1",
           "Beltagy et al. 2020, Longformer-base (window 512, global CLS)"},
    Preset{"bigbird-base",
           "variant=sdpa heads=12 d_k=64 mask=bigbird block=64 window_blocks=3 global_blocks=2 "
           "random_blocks=3 seed=0",
           "Zaheer et al. 2020, BigBird-ITC base"},
    Preset{"rnnsearch",
           "variant=additive heads=1 d_q=1000 d_k=2000 d_v=2000 d_attn=1000 "
           "mask=padding",
           "Bahdanau et al. 2014, RNNsearch (decoder state 1000, annotations 2000)"},
    Preset{"luong-general", "variant=bilinear heads=1 d_k=1000 mask=padding",
           "Luong et al. 2015, general score"},
    Preset{"linformer-base", "variant=linformer heads=12 d_k=64 proj_len=256",
           "Wang et al. 2020, Linformer (k = 256)"},
    Preset{"performer-base", "variant=linear heads=12 d_k=64 feature_map=favor features=256 seed=0",
           "Choromanski et al. 2020, Performer FAVOR+"},
};

} // namespace

std::span<const Preset> presets() {
  return kPresets;
}

const Preset* findPreset(std::string_view name) {
  for (const Preset& p : kPresets)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace attnc
