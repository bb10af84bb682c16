"""Gumbel-max answers at fixed noise: how `evoenv bound` has a policy answer S. Token t of item j
is argmax(logits/T + G_t), G_t drawn from item j's own generator (NOISE_RULE), so an answer is
a function of (model, instance, noise). How prompts share forward passes is the code's
`batching`: "shared-context" (BATCHING_RULE) keeps every shape independent of what else is
answered, so that function holds whatever else is in a batch; "padded" is how older codes
answered (HF `generate`, left padding), kept so that they still answer as they did.

Why one module: the noise's arithmetic and the batching rule decide every answer bit for bit;
the tests compare the two rules' logits and the rule written out against this code.
"""

from __future__ import annotations

import functools
import hashlib

NOISE_RULE = (
    "item j of S (in order): a torch.Generator seeded with sha256('seed:noise:j'); the t-th token is "
    "argmax(logits/T + G_t), G_t = -log(-log(U_t)), U_t the generator's t-th uniform vector"
)


def noise_seed(seed: int, item: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:noise:{item}".encode()).digest()[:8], "big") >> 1


def _perturbed(scores, generators: list, temperature: float):
    """float32 logits [rows, vocab] -> logits/T + G in float32, G drawn from each row's own
    generator (NOISE_RULE) on the CPU whatever the device, then moved to the logits. Row by row,
    in place in buffers of one row: the same float64 operations in the same order (bit for bit
    the values the rule names, tested against the whole-matrix form), a row's values never
    computed beside another row's, and each pass over a row that stays in cache (2.4x cheaper
    than the same passes over [rows, vocab])."""
    import torch

    vocab = scores.shape[-1]
    out = torch.empty_like(scores)
    noise = torch.empty(vocab, dtype=torch.float64)
    value = torch.empty(vocab, dtype=torch.float64, device=scores.device)
    for row, g, dst in zip(scores, generators, out):
        torch.rand(vocab, generator=g, dtype=torch.float64, out=noise)
        gumbel = noise.clamp_(min=1e-300).log_().neg_().log_().neg_()
        dst.copy_(value.copy_(row).div_(temperature).add_(gumbel.to(scores.device)))
    return out


def _eos_ids(model, tokenizer) -> set[int]:
    eos = model.generation_config.eos_token_id
    eos = tokenizer.eos_token_id if eos is None else eos
    return set(eos) if isinstance(eos, list) else {eos}


def _chat_text(tokenizer, prompt) -> str:
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return prompt


def gumbel_answers(model, tokenizer, prompts: list, code, batch_size: int, items: list[int] | None = None) -> list[str]:
    """Each prompt answered by Gumbel-max sampling at temperature T: token t of item j is
    argmax(logits/T + G), G drawn from item j's own generator (see NOISE_RULE). `items` are the
    prompts' positions in S (default 0, 1, ...): they name each one's noise. How the prompts
    share a forward pass is the code's `batching`: "shared-context" (codes written since it
    was recorded) makes each answer a function of (model, instance, noise) alone, whatever else is
    answered with it; "padded" is how older codes answered, and still answer."""
    items = list(range(len(prompts))) if items is None else items
    if getattr(code, "batching", "shared-context") == "padded":
        return _padded_answers(model, tokenizer, prompts, code, batch_size, items)
    return _shared_context_answers(model, tokenizer, prompts, code, batch_size, items)


def answer(load, prompts: list, code, batch_size: int, items: list[int] | None = None, processes: int = 0) -> list[str]:
    """gumbel_answers with the model `load()` returns ((model, tokenizer); picklable, a
    functools.partial of a module-level function). Under "shared-context" on the CPU, in
    `processes` processes (0: one a torch thread this process would use), each of one torch
    thread and the prompts of whole contexts (BATCHING_RULE): an answer does not depend on what
    else a process answers, so the split decides only the time. "padded" codes and CUDA answer
    here, as they always did."""
    import torch

    items = list(range(len(prompts))) if items is None else items
    if getattr(code, "batching", "shared-context") == "padded" or getattr(code, "device", "cpu") != "cpu":
        model, tokenizer = load()
        return gumbel_answers(model, tokenizer, prompts, code, batch_size, items)
    shards = _shards(prompts, processes or torch.get_num_threads())
    if len(shards) == 1:
        return _answer_shard(load, prompts, code, batch_size, items)
    parts = [(load, [prompts[k] for k in s], code, batch_size, [items[k] for k in s]) for s in shards]
    out = [""] * len(prompts)
    for shard, texts in zip(shards, _in_processes(parts)):
        for k, text in zip(shard, texts):
            out[k] = text
    return out


def _in_processes(parts: list[tuple]) -> list[list[str]]:
    """_answer_shard(*part) for each part, each in a fresh `python -m` of this module: a child
    started by command, not by multiprocessing, so that no caller needs a `__main__` guard. The
    part goes in and the answers come back as pickles in a private folder; the children's
    stdout goes to this process's stderr (stdout may carry `--json`)."""
    import os
    import pickle
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    try:
        stderr = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        stderr = 2
    root = str(Path(__file__).resolve().parents[2])  # this evoenv_cli, whatever the child's sys.path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory(prefix="evoenv-answer-") as tmp:
        children = []
        try:
            for i, part in enumerate(parts):
                job, done = Path(tmp, f"part-{i}.pickle"), Path(tmp, f"answers-{i}.pickle")
                job.write_bytes(pickle.dumps(part))
                argv = [sys.executable, "-m", __name__, str(job), str(done)]
                children.append((subprocess.Popen(argv, stdout=stderr, env=env), done))
            for child, _ in children:
                if child.wait() != 0:
                    raise RuntimeError(f"an answering process exited with {child.returncode} (its error is above)")
            return [pickle.loads(done.read_bytes()) for _, done in children]
        finally:
            for child, _ in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()


def _shards(prompts: list, n: int) -> list[list[int]]:
    """Prompt indices in at most n parts of about equal size, whole contexts (the conversation
    less its last turn) to a part, so that no context is read twice; each part in S's order. A
    prompt of one turn has no context to share: it is a group of its own."""
    import json

    groups: dict[str, list[int]] = {}
    for k, p in enumerate(prompts):
        shared = isinstance(p, list) and len(p) > 1
        groups.setdefault(json.dumps(p[:-1]) if shared else f"#{k}", []).append(k)
    parts: list[list[int]] = [[] for _ in range(max(1, min(n, len(groups))))]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(parts, key=len).extend(group)
    return [sorted(part) for part in parts if part]


def _answer_shard(load, prompts: list, code, batch_size: int, items: list[int]) -> list[str]:
    """One process's part: one torch thread (BATCHING_RULE), the model loaded here."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tokenizer = load()
        return gumbel_answers(model, tokenizer, prompts, code, batch_size, items)
    finally:
        torch.set_num_threads(threads)


def _padded_answers(model, tokenizer, prompts: list, code, batch_size: int, items: list[int]) -> list[str]:
    """The old answering ("padded"): HF `generate` on S's prompts in order, batch_size at a
    time, left-padded to the longest in the batch. Padding moves the rounding of the real
    tokens, so an answer also depends on which prompts shared its batch."""
    import torch
    from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

    class GumbelNoise(LogitsProcessor):
        def __init__(self, items: list[int]):
            self.generators = [torch.Generator().manual_seed(noise_seed(code.seed, j)) for j in items]

        def __call__(self, input_ids, scores):
            return _perturbed(scores, self.generators, code.temperature)

    gen = GenerationConfig(
        max_new_tokens=code.max_tokens,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
    )
    out: list[str] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        texts = [_chat_text(tokenizer, p) for p in chunk]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        processors = LogitsProcessorList([GumbelNoise(items[start : start + len(chunk)])])
        with torch.no_grad():
            ids = model.generate(**enc, generation_config=gen, logits_processor=processors)
        new = ids[:, enc["input_ids"].shape[1] :]
        out += tokenizer.batch_decode(new, skip_special_tokens=True)
    return out


BATCHING_RULE = (
    "shared-context: a prompt is read in two parts, its context (the tokens it shares with its "
    "conversation less the last turn: the system turn and the demonstrations) and its question (the "
    "rest). Contexts of one length are read R rows a forward (R = min(batch_size, 8)), each distinct "
    "context once; questions whose context and question lengths are both equal are read on their "
    "contexts' keys and values, R rows a forward, in S's order; a read short of R rows is filled "
    "with copies of its first. Each answer is then decoded one token a step in one of batch_size "
    "slots, every step [batch_size, 1], attending to its own keys and values over a span fixed by "
    "its own length (context + question + max_tokens, rounded up to 32), masked past its length; a "
    "slot freed by an answer that ends takes the next read's. No padding and no shape that depends "
    "on another item: the arithmetic on an item's row is the same whatever shares its forward; a "
    "row stops at its first end-of-sequence token or max_tokens. On the CPU every answering process "
    "runs one torch thread (a product's sum split across threads would move with the machine's "
    "cores), one process a core, each answering the prompts of whole contexts"
)
READ_ROWS = 8  # rows a read forward (at most batch_size): the per-token cost of a read is flat from 8 up
SPAN = 32  # a slot's keys and values span its length + max_tokens, rounded up to this


def _split(tokenizer, prompt) -> tuple[tuple[int, ...], list[int]]:
    """A prompt's tokens as (context, question): the context is the longest prefix its tokens
    share with its conversation less the last turn (none for a single turn or a plain string);
    the question keeps at least one token."""
    ids = tokenizer(_chat_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    if not isinstance(prompt, list) or len(prompt) < 2:
        return (), ids
    before = tokenizer(tokenizer.apply_chat_template(prompt[:-1], tokenize=False), add_special_tokens=False)[
        "input_ids"
    ]
    k = 0
    while k < min(len(before), len(ids) - 1) and ids[k] == before[k]:
        k += 1
    return tuple(ids[:k]), ids[k:]


def _shared_context_answers(model, tokenizer, prompts: list, code, batch_size: int, items: list[int]) -> list[str]:
    """BATCHING_RULE: the prompts of one span at a time, decoded in slots as their reads come."""
    split = [_split(tokenizer, p) for p in prompts]
    spans: dict[int, list[int]] = {}
    for k, (context, question) in enumerate(split):
        span = -(-(len(context) + len(question) + code.max_tokens) // SPAN) * SPAN
        spans.setdefault(span, []).append(k)
    eos = _eos_ids(model, tokenizer)
    answers: list[list[int]] = [[] for _ in prompts]
    for span, members in spans.items():
        reads = _reads(model, split, members, min(batch_size, READ_ROWS))
        _decode_in_slots(model, reads, items, code, batch_size, span, eos, answers)
    return [tokenizer.decode(tokens, skip_special_tokens=True) for tokens in answers]


CONTEXT_BYTES = 1 << 30  # contexts' keys and values held at once (about 540 of the starter bench's)


def _kv_bytes(model, length: int) -> int:
    """Bytes of one context's keys and values: layers x 2 x kv heads x length x head dim."""
    config = model.config.get_text_config()
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return config.num_hidden_layers * 2 * heads * length * head_dim * itemsize


def _windows(members: list[int], contexts: list, limit: int):
    """`members` in order, cut so that no part holds more than `limit` distinct contexts."""
    part: list[int] = []
    seen: set = set()
    for k, context in zip(members, contexts):
        if context not in seen and len(seen) == limit:
            yield part
            part, seen = [], set()
        part.append(k)
        seen.add(context)
    if part:
        yield part


def _fill(rows: list, shape: int) -> list:
    """`rows` made `shape` long with copies of the first."""
    return rows + [rows[0]] * (shape - len(rows))


def _read_contexts(model, contexts: list[tuple[int, ...]], shape: int):
    """The keys and values of contexts of one length, read `shape` rows a forward: per layer,
    a (keys, values) pair of [contexts, kv heads, length, head dim]; None for the empty context."""
    import torch
    from transformers.cache_utils import Cache

    if not contexts[0]:
        return None
    layers = model.config.get_text_config().num_hidden_layers
    store = None
    with torch.no_grad():
        for start in range(0, len(contexts), shape):
            chunk = contexts[start : start + shape]
            cache = Cache(layers=[_kv_buffer_class()(len(chunk[0])) for _ in range(layers)])
            x = torch.tensor(_fill(chunk, shape), device=model.device)
            model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
            if store is None:
                store = [
                    tuple(t.new_empty(len(contexts), *t.shape[1:]) for t in (layer.keys, layer.values))
                    for layer in cache.layers
                ]
            for (keys, values), layer in zip(store, cache.layers):
                keys[start : start + len(chunk)] = layer.keys[: len(chunk)]
                values[start : start + len(chunk)] = layer.values[: len(chunk)]
    return store


def _reads(model, split: list, members: list[int], shape: int):
    """The questions of `members` read on their contexts, `shape` rows a forward (BATCHING_RULE):
    yields (prompt indices, their last logits in float32, per layer their keys and values of
    [rows, kv heads, context + question, head dim]). One context length at a time, its prompts in
    windows of at most CONTEXT_BYTES of contexts' keys and values. Windows decide only which reads
    are shared, never an answer: a context read in two windows has the same keys and values."""
    import torch
    from transformers.cache_utils import Cache

    by_context: dict[int, list[int]] = {}
    for k in members:
        by_context.setdefault(len(split[k][0]), []).append(k)
    layers = model.config.get_text_config().num_hidden_layers
    for length, group in by_context.items():
        limit = max(shape, CONTEXT_BYTES // max(1, _kv_bytes(model, length)))
        for window in _windows(group, [split[k][0] for k in group], limit):
            contexts = list(dict.fromkeys(split[k][0] for k in window))
            kv = _read_contexts(model, contexts, shape)
            where = {c: i for i, c in enumerate(contexts)}
            by_question: dict[int, list[int]] = {}
            for k in window:
                by_question.setdefault(len(split[k][1]), []).append(k)
            for bucket in by_question.values():
                for start in range(0, len(bucket), shape):
                    chunk = bucket[start : start + shape]
                    questions = _fill([split[k][1] for k in chunk], shape)
                    cache = Cache(layers=[_kv_buffer_class()(length + len(questions[0])) for _ in range(layers)])
                    if kv is not None:
                        index = torch.tensor(_fill([where[split[k][0]] for k in chunk], shape), device=model.device)
                        for layer, (keys, values) in zip(cache.layers, kv):
                            layer.update(keys[index], values[index])
                    x = torch.tensor(questions, device=model.device)
                    position = torch.arange(length, length + x.shape[1], device=model.device)[None]
                    with torch.no_grad():
                        out = model(input_ids=x, position_ids=position, cache=cache, use_cache=True, logits_to_keep=1)
                    logits = out.logits[: len(chunk), -1].float()  # as `generate` takes them
                    yield chunk, logits, [(layer.keys, layer.values) for layer in cache.layers]


def _decode_in_slots(model, reads, items: list[int], code, slots: int, span: int, eos: set[int], answers: list) -> None:
    """Each read row's first token from its read's logits, the rest one token a step in one of
    `slots` rows (BATCHING_RULE), into answers[k]: its tokens up to (not including) its first EOS.
    A slot's keys and values span `span` positions; a step's mask lets each row see its own
    positions up to its own length, so a row never depends on another's length or contents."""
    import torch
    from transformers.cache_utils import Cache

    cache = None
    state: list = [None] * slots  # per slot: [prompt index, generator, tokens chosen, length, next input]
    positions = torch.zeros(slots, dtype=torch.long, device=model.device)
    read = next(reads, None)
    while True:
        # reads take free slots (a read's rows fit in `slots`: when none is live, all are free)
        while read is not None and sum(s is None for s in state) >= len(read[0]):
            chunk, logits, kv = read
            generators = [torch.Generator().manual_seed(noise_seed(code.seed, items[k])) for k in chunk]
            chosen = _perturbed(logits, generators, code.temperature).argmax(-1).tolist()
            if cache is None:
                cache = Cache(layers=[_slot_layer_class()(keys, values, slots, span, positions) for keys, values in kv])
            length = kv[0][0].shape[2]
            free = [i for i, s in enumerate(state) if s is None]
            for r, (k, g, token) in enumerate(zip(chunk, generators, chosen)):
                if token in eos:
                    continue
                answers[k].append(token)
                if code.max_tokens == 1:
                    continue
                slot = free.pop(0)
                for layer, (keys, values) in zip(cache.layers, kv):
                    layer.keys[slot, :, :length] = keys[r]
                    layer.values[slot, :, :length] = values[r]
                state[slot] = [k, g, 1, length, token]
            read = next(reads, None)
        live = [i for i, s in enumerate(state) if s is not None]
        if not live:
            return
        x = torch.tensor([[s[4] if s else min(eos)] for s in state], device=model.device)
        positions.copy_(torch.tensor([s[3] if s else 0 for s in state]))
        mask = torch.arange(span, device=model.device)[None, None, None, :] <= positions[:, None, None, None]
        with torch.no_grad():
            out = model(
                input_ids=x,
                position_ids=positions[:, None],
                cache=cache,
                attention_mask=mask,
                use_cache=True,
                logits_to_keep=1,
            )
        logits = out.logits[live, -1].float()
        chosen = _perturbed(logits, [state[i][1] for i in live], code.temperature).argmax(-1).tolist()
        for i, token in zip(live, chosen):
            s = state[i]
            if token in eos:
                state[i] = None
                continue
            answers[s[0]].append(token)
            s[2] += 1
            s[3] += 1
            s[4] = token
            if s[2] == code.max_tokens:
                state[i] = None


@functools.cache
def _kv_buffer_class():
    """The class, made on first use (transformers is imported only when a model answers)."""
    from transformers.cache_utils import DynamicLayer

    class KVBuffer(DynamicLayer):
        """A layer's keys and values as views of one buffer allocated for the whole answer,
        instead of a concatenation per token (a copy of the cache each step)."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity

        def lazy_initialization(self, key_states, value_states) -> None:
            self.device = key_states.device
            b, h, _, d = key_states.shape
            self.buffers = (
                key_states.new_empty(b, h, self.capacity, d),
                value_states.new_empty(b, h, self.capacity, value_states.shape[-1]),
            )
            self.keys, self.values = (buf[:, :, :0] for buf in self.buffers)
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, m = self.keys.shape[-2], key_states.shape[-2]
            kb, vb = self.buffers
            kb[:, :, n : n + m] = key_states
            vb[:, :, n : n + m] = value_states
            self.keys, self.values = kb[:, :, : n + m], vb[:, :, : n + m]
            return self.keys, self.values

    return KVBuffer


@functools.cache
def _slot_layer_class():
    """The decode cache's layer: keys and values of [slots, kv heads, span, head dim], zeroed
    once (what a row's mask hides is finite, so it weighs exactly 0); a step writes each row's
    new key and value at that row's own position."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        def __init__(self, keys, values, slots: int, span: int, positions):
            super().__init__()
            self.keys = keys.new_zeros(slots, keys.shape[1], span, keys.shape[3])
            self.values = values.new_zeros(slots, values.shape[1], span, values.shape[3])
            self.positions, self.rows = positions, torch.arange(slots, device=keys.device)
            self.device, self.is_initialized = keys.device, True

        def update(self, key_states, value_states, *args, **kwargs):
            self.keys[self.rows, :, self.positions] = key_states[:, :, 0]
            self.values[self.rows, :, self.positions] = value_states[:, :, 0]
            return self.keys, self.values

    return SlotLayer


if __name__ == "__main__":  # an answering process of `answer`: python -m ... PART ANSWERS
    import pickle
    import sys
    from pathlib import Path

    Path(sys.argv[2]).write_bytes(pickle.dumps(_answer_shard(*pickle.loads(Path(sys.argv[1]).read_bytes()))))
