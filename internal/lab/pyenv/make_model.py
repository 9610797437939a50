"""Makes the lab's tiny model at environment-build time (nothing can be
downloaded here): a byte-level BPE tokenizer trained on a few sentences and a
random-weight Llama, saved as safetensors (about 2 MB). Real weights, real
tokenizer, real architecture; the text it writes is gibberish.

Head dim 64 (hidden 256 / 4 heads): vLLM's CPU attention kernels refuse 16.
"""
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = sys.argv[1]
torch.manual_seed(0)

corpus = [
    "Ray registered the head under its external address.",
    "vLLM was told VLLM_HOST_IP, the fabric address of the head.",
    "No available node types can fulfill resource request.",
    "Two DGX Sparks on the fabric serve one model with tensor parallelism.",
    "The placement group waits for a node label that no node carries.",
    "hello world, say hello from the spark lab",
] * 20
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus, trainers.BpeTrainer(
    vocab_size=512, special_tokens=["<s>", "</s>", "<unk>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
fast.chat_template = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}")
fast.save_pretrained(out)

config = LlamaConfig(vocab_size=len(fast), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                     bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, torch_dtype="float32")
LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)
print("tiny model written to", out)
