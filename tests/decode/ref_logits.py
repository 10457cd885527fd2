#!/usr/bin/env python3
"""Reference logit traces for kiln's decode driver, from an implementation that is not kiln's:
Hugging Face transformers' Llama, loaded from the same GGUF (transformers dequantizes every
tensor with the gguf package and runs the model in f32 on the CPU).

For each fixed prompt: the prompt is tokenized by transformers' tokenizer built from the GGUF,
continued greedily by transformers for a few tokens, and the whole sequence is then run once,
teacher-forced, keeping the logits at every position. Writes

  <out>.json  the prompts, their token ids, the full sequences and where each one's logits start
  <out>.bin   the logits, f32 little-endian, one row of `vocab` values per position, in order

which tests/tests/decode_trace.rs compares with kiln's logits for the same sequences.

Usage: ref_logits.py --model <file.gguf> --out <path without extension> [--continue N]
"""

import argparse
import json
import os
import sys
import time

# Plain-text prompts (no template) and one chat turn (the GGUF's template); the digits, code
# and punctuation exercise the pre-tokenizer.
PROMPTS = [
    {"text": "The capital of France is", "chat": False},
    {"text": "In 1969, Neil Armstrong walked on the moon. The year after, in", "chat": False},
    {"text": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", "chat": False},
    {"text": "What is the boiling point of water?", "chat": True},
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--continue", dest="cont", type=int, default=24)
    args = ap.parse_args()

    t0 = time.time()
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    folder, name = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    loaded = time.time() - t0

    entries, rows = [], []
    for p in PROMPTS:
        if p["chat"]:
            text = tok.apply_chat_template(
                [{"role": "user", "content": p["text"]}],
                add_generation_prompt=True,
                tokenize=False,
            )
        else:
            text = p["text"]
        prompt_ids = tok(text, add_special_tokens=False).input_ids
        ids = torch.tensor([prompt_ids])
        with torch.no_grad():
            full = model.generate(
                ids,
                max_new_tokens=args.cont,
                do_sample=False,
                pad_token_id=tok.eos_token_id,
            )[0].tolist()
            logits = model(torch.tensor([full])).logits[0].float().numpy()
        entries.append(
            {
                "text": p["text"],
                "chat": p["chat"],
                "rendered": text,
                "prompt_ids": prompt_ids,
                "ids": full,
                "first_row": sum(len(e["ids"]) for e in entries),
            }
        )
        rows.append(np.ascontiguousarray(logits, dtype="<f4"))

    vocab = rows[0].shape[1]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".bin", "wb") as f:
        for r in rows:
            f.write(r.tobytes())
    meta = {
        "reference": f"transformers {transformers.__version__}, torch {torch.__version__}, f32 on the CPU",
        "model": name,
        "vocab": vocab,
        "rows": sum(r.shape[0] for r in rows),
        "prompts": entries,
    }
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(
        f"ref_logits: {meta['rows']} positions over {len(entries)} prompts "
        f"({meta['reference']}); load {loaded:.1f} s, total {time.time() - t0:.1f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
