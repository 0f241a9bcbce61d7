#!/usr/bin/env python3
"""Chat references: transformers' apply_chat_template with the real Qwen3 tokenizer (its own
chat_template from tokenizer_config.json) on the conversations a chat server must render, and the
tiny random Qwen3 of qwen3_reference.py (same generator, same seed) continuing three rendered chats
greedily, with the top-5 log-probabilities of every step.

    PYTHONUNBUFFERED=1 python3 tools/reference/chat_reference.py \
        --tokenizer-dir ~/.cache/parlance/assets/qwen3 --out tests/fixtures/chat/qwen3_chat.json

Needs torch and transformers 5.x (for the greedy part). Output: one JSON file with
    templates: [{name, messages, tools, add_generation_prompt, kwargs, text, ids}]
    continuations: [{name, template_case, prompt_ids, max_tokens, ids, margins,
                     top5: [[[id, logprob], ...] per step] (float64 model)}]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "The time now",
                                               "parameters": {"type": "object", "properties": {}}}}

# name -> (messages, tools, add_generation_prompt, kwargs): the cases issue 17 lists.
CASES = {
    "one_user_turn": ([{"role": "user", "content": "Hello! Who are you?"}], None, True, {}),
    "system_multi_turn": ([
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one."},
    ], None, True, {}),
    "tools": ([
        {"role": "system", "content": "You help with the weather."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ], [WEATHER_TOOL, TIME_TOOL], True, {}),
    "tool_call_and_result": ([
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 18, \"sky\": \"clear\"}"},
    ], [WEATHER_TOOL], True, {}),
    "enable_thinking_false": ([{"role": "user", "content": "Say hi."}], None, True,
                              {"enable_thinking": False}),
    "reasoning_in_history": ([
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Two plus two is four."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "<think>\nThree plus three.\n</think>\n\n6"},
    ], None, False, {}),
    "non_ascii": ([
        {"role": "system", "content": "Réponds en français, s'il te plaît."},
        {"role": "user", "content": "Grüße aus Köln! 東京は今日も晴れです。 🙂"},
    ], None, True, {}),
    "no_generation_prompt": ([
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}], None, False, {}),
}

# Rendered chats the tiny model continues (served through /v1/chat/completions by the tests).
CONTINUE = ["one_user_turn", "system_multi_turn", "tools"]
MAX_TOKENS = 16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--templates-only", action="store_true", help="skip the model (no torch needed)")
    args = ap.parse_args()
    import transformers
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    templates = []
    for name, (messages, tools, agp, kwargs) in CASES.items():
        text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp,
                                       tokenize=False, **kwargs)
        ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp,
                                      tokenize=True, return_dict=False, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = [int(i) for i in ids]
        assert ids == tok.encode(text, add_special_tokens=False), name
        templates.append({"name": name, "messages": messages, "tools": tools,
                          "add_generation_prompt": agp, "kwargs": kwargs, "text": text, "ids": ids})
        print(f"{name}: {len(text)} chars, {len(ids)} ids", flush=True)
    out = {"generator": "tools/reference/chat_reference.py", "transformers": transformers.__version__,
           "templates": templates, "continuations": []}

    if not args.templates_only:
        import torch
        import qwen3_reference as q
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.use_deterministic_algorithms(True)
        seed = 1234  # qwen3_reference.py's seed for its first config, "tiny"
        model, _ = q.build("tiny", q.CONFIGS["tiny"], args.tokenizer_dir, seed)
        import copy
        model64 = copy.deepcopy(model).to(torch.float64)
        by_name = {t["name"]: t for t in templates}
        for name in CONTINUE:
            ids = by_name[name]["ids"]
            seq, margins = q.greedy(model, ids, MAX_TOKENS, MAX_TOKENS, q.EOS_IDS)
            # Log-probabilities of the raw distribution at each step, in float64, on the ids
            # greedy chose (teacher forcing): what the server's logprobs report.
            full = torch.tensor([ids + seq])
            with torch.no_grad():
                lp = torch.log_softmax(model64(full).logits[0], dim=-1)
            top5 = []
            for k in range(len(seq)):
                row = lp[len(ids) - 1 + k]
                v, i = torch.topk(row, 5)
                top5.append([[int(a), float(b)] for a, b in zip(i.tolist(), v.tolist())])
            out["continuations"].append({"name": name, "template_case": name, "prompt_ids": ids,
                                         "max_tokens": MAX_TOKENS, "ids": seq, "margins": margins,
                                         "top5": top5})
            print(f"continue {name}: {seq[:8]}... min margin {min(margins):.2e}", flush=True)
        out["torch"] = torch.__version__
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
