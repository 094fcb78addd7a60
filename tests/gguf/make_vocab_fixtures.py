#!/usr/bin/env python3
"""Build the tokenizer folders of tests/gguf/vocab/ and what llama.cpp's
convert_hf_to_gguf.py writes for them (tokenizer.* keys), in the forky chroot:

    /tmp/inchroot.sh DIR 'python3 make_vocab_fixtures.py OUT'

Each folder gets its tokenizer files, a config.json naming the architecture,
and expected.json: the reference's tokenizer.* and related keys, in file
order, as [key, value type, array element type or null, value] with strings
as hex (bytes), f32 as their bit pattern. The reference runs with
--vocab-only. For a BPE tokenizer trained here the reference refuses
(its pre-tokenizer table knows hashes of published tokenizers only), so its
get_vocab_base_pre is replaced by a function returning the name this
folder's pre-tokenizer structure corresponds to (PRE below); every other key
is the reference's own.
"""
import json, os, shutil, struct, subprocess, sys, io

OUT = sys.argv[1]
CONVERT = '/usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py'

WORDS = ("the quick brown fox jumps over lazy dog model tensor shard weight "
         "llama token vocab merge piece byte fallback café naïve über 東京 "
         "数据 привет мир hello world 12 345 6789 a.b c,d e!f").split()

def corpus(n=3000):
    x = 12345
    for i in range(n):
        s = []
        for j in range(3 + i % 9):
            x = (x * 1103515245 + 12345) & 0x7fffffff
            s.append(WORDS[x % len(WORDS)])
        yield ' '.join(s)

def train_spm(path, vocab, user_defined=()):
    import sentencepiece as spm
    f = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=corpus(), model_writer=f, vocab_size=vocab,
        model_type='bpe', byte_fallback=True, character_coverage=1.0,
        user_defined_symbols=list(user_defined), bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
        minloglevel=2, num_threads=1, normalization_rule_name="identity")
    open(path, 'wb').write(f.getvalue())

def wjson(path, obj):
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)

def config(d, arch, vocab_size, **kw):
    c = {"architectures": [arch], "vocab_size": vocab_size, "hidden_size": 64,
         "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
         "intermediate_size": 128, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
         "head_dim": 16, "rope_theta": 10000.0}
    c.update(kw)
    wjson(os.path.join(d, 'config.json'), c)

CHAT = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"

def spm_folders():
    # llama: tokenizer.model, tokenizer_config.json (chat template, special
    # tokens, added_tokens_decoder, add_bos/eos), added_tokens.json,
    # generation_config.json; config vocab_size past the model's pieces (padding)
    d = os.path.join(OUT, 'llama-spm'); os.makedirs(d)
    train_spm(os.path.join(d, 'tokenizer.model'), 400)
    wjson(os.path.join(d, 'tokenizer_config.json'), {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": None, "chat_template": CHAT, "add_prefix_space": None,
        "added_tokens_decoder": {
            "0": {"content": "<unk>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False},
            "1": {"content": "<s>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False},
            "2": {"content": "</s>", "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False},
            "401": {"content": "<|user|>", "special": False, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False},
            "402": {"content": "\u2581mine", "special": False, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}},
        "tokenizer_class": "LlamaTokenizer"})
    wjson(os.path.join(d, 'added_tokens.json'), {"<|tool|>": 400, "<|far|>": 999})
    wjson(os.path.join(d, 'generation_config.json'), {"bos_token_id": 1, "eos_token_id": [2, 401]})
    config(d, 'LlamaForCausalLM', 404, bos_token_id=1, eos_token_id=2, pad_token_id=403)

    # mistral: the same kind of folder, list chat templates, no added tokens
    d2 = os.path.join(OUT, 'mistral-spm'); os.makedirs(d2)
    shutil.copy(os.path.join(d, 'tokenizer.model'), d2)
    wjson(os.path.join(d2, 'tokenizer_config.json'), {
        "add_bos_token": False, "add_eos_token": True, "bos_token": {"content": "<s>"},
        "eos_token": "</s>", "add_prefix_space": False,
        "chat_template": [{"name": "default", "template": CHAT}, {"name": "tool use!", "template": "T{{x}}"},
                          {"name": "rag", "template": "R"}]})
    config(d2, 'MistralForCausalLM', 400, bos_token_id=1, eos_token_id=2)

    # gemma: its fixed FIM/eot ids, add_space_prefix false
    d3 = os.path.join(OUT, 'gemma-spm'); os.makedirs(d3)
    train_spm(os.path.join(d3, 'tokenizer.model'), 360, user_defined=('<start_of_turn>', '<end_of_turn>'))
    wjson(os.path.join(d3, 'tokenizer_config.json'), {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "pad_token": "<pad>", "chat_template": "{{ bos_token }}G",
        "added_tokens_decoder": {"3": {"content": "<start_of_turn>", "special": True},
                                 "4": {"content": "<end_of_turn>", "special": True},
                                 "5": {"content": "<unused0>", "special": False}}})
    config(d3, 'GemmaForCausalLM', 360, bos_token_id=1, eos_token_id=2, pad_token_id=0)

    # phi3: its own loop (no out-of-range checks on added_tokens_decoder),
    # tokenizer.json added_tokens
    d4 = os.path.join(OUT, 'phi3-spm'); os.makedirs(d4)
    shutil.copy(os.path.join(d, 'tokenizer.model'), d4)
    wjson(os.path.join(d4, 'tokenizer_config.json'), {
        "add_bos_token": False, "add_eos_token": False, "bos_token": "<s>", "eos_token": "<|endoftext|>",
        "tokenizer_class": "LlamaTokenizer", "chat_template": CHAT,
        "added_tokens_decoder": {"400": {"content": "<|endoftext|>", "special": True},
                                 "401": {"content": "<|assistant|>", "special": True},
                                 "402": {"content": "<|user|>", "special": False}}})
    wjson(os.path.join(d4, 'tokenizer.json'), {"version": "1.0", "added_tokens": [
        {"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
        {"id": 400, "content": "<|endoftext|>", "special": True},
        {"id": 403, "content": "<|end|>", "special": True}],
        "model": {"type": "BPE", "vocab": {}, "merges": []}})
    config(d4, 'Phi3ForCausalLM', 404, bos_token_id=1, eos_token_id=400,
           rope_scaling=None, original_max_position_embeddings=256)

GPT2_PRE = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
QWEN2_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
QWEN2_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": QWEN2_RE}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}

def train_bpe(pre, specials, vocab, normalizer=None, post=None):
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=list(specials),
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    j = json.loads(tok.to_str())
    j['pre_tokenizer'] = pre
    j['normalizer'] = normalizer
    j['post_processor'] = post or {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return j

PRE = {}

def bpe_folders():
    # qwen2: Split regex + ByteLevel, NFC, specials after the BPE vocab,
    # config vocab_size past them (padding), merges in the [a, b] list form
    d = os.path.join(OUT, 'qwen2-bpe'); os.makedirs(d)
    sp = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    j = train_bpe(QWEN2_PRE, [], 420, normalizer={"type": "NFC"})
    n = len(j['model']['vocab'])
    j['added_tokens'] = [{"id": n + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(sp)]
    j['added_tokens'].append({"id": n + 3, "content": "<tool_call>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": False})
    wjson(os.path.join(d, 'tokenizer.json'), j)
    wjson(os.path.join(d, 'tokenizer_config.json'), {
        "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "chat_template": "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}",
        "errors": "replace", "model_max_length": 256, "tokenizer_class": "Qwen2Tokenizer",
        "added_tokens_decoder": {str(a['id']): {k: v for k, v in a.items() if k != 'id'} for a in j['added_tokens']}})
    config(d, 'Qwen2ForCausalLM', n + 8, bos_token_id=n, eos_token_id=n + 2)
    PRE['qwen2-bpe'] = 'qwen2'

    # gpt2: ByteLevel pre-tokenizer, merges in the old "a b" string form
    d2 = os.path.join(OUT, 'gpt2-bpe'); os.makedirs(d2)
    j = train_bpe(GPT2_PRE, ["<|endoftext|>"], 400)
    j['model']['merges'] = [' '.join(m) for m in j['model']['merges']]
    wjson(os.path.join(d2, 'tokenizer.json'), j)
    wjson(os.path.join(d2, 'tokenizer_config.json'), {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
        "add_prefix_space": False, "tokenizer_class": "GPT2Tokenizer", "model_max_length": 256})
    config(d2, 'GPT2LMHeadModel', len(j['model']['vocab']), n_embd=64, n_layer=1, n_head=4,
           n_positions=256, n_ctx=256, layer_norm_epsilon=1e-5, bos_token_id=0, eos_token_id=0)
    PRE['gpt2-bpe'] = 'gpt-2'

    # gpt-neox: TemplateProcessing adding a bos (the crude template parse)
    d3 = os.path.join(OUT, 'gptneox-bpe'); os.makedirs(d3)
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}}
    j = train_bpe(GPT2_PRE, ["<|endoftext|>", "<|padding|>"], 400, post=post)
    wjson(os.path.join(d3, 'tokenizer.json'), j)
    wjson(os.path.join(d3, 'tokenizer_config.json'), {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
        "add_bos_token": True, "add_eos_token": False, "tokenizer_class": "GPTNeoXTokenizer"})
    config(d3, 'GPTNeoXForCausalLM', len(j['model']['vocab']) + 2, rotary_pct=0.25, use_parallel_residual=True,
           layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=0)
    PRE['gptneox-bpe'] = 'gpt-2'

def dump(gguf_path, d):
    from gguf import GGUFReader, GGUFValueType as T
    r = GGUFReader(gguf_path)
    out = []
    for k, f in r.fields.items():
        if not k.startswith('tokenizer.'):
            continue
        t = f.types[0]
        def val(part, typ):
            if typ == T.STRING:
                return bytes(part).hex()
            if typ == T.FLOAT32:
                return struct.unpack('<I', bytes(part.tobytes()))[0]
            return int(part[0])
        if t == T.ARRAY:
            at = f.types[1]
            v = [val(f.parts[i], at) for i in f.data]
            out.append([k, int(t), int(at), v])
        else:
            out.append([k, int(t), None, val(f.parts[f.data[0]], t)])
    with open(os.path.join(d, 'expected.json'), 'w') as fp:
        json.dump(out, fp, separators=(',', ':'))
        fp.write('\n')

def reference(d):
    sys.argv = [CONVERT, '--vocab-only', '--outfile', '/tmp/vocab-ref.gguf', d]
    import importlib.util
    spec = importlib.util.spec_from_file_location('convert_hf_to_gguf', CONVERT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    from conversion import base
    if os.path.basename(d) in PRE:  # see the docstring: the pre-tokenizer hash table does not know a trained tokenizer
        base.TextModel.get_vocab_base_pre = lambda self, tok, _p=PRE[os.path.basename(d)]: _p
    m.main()
    dump('/tmp/vocab-ref.gguf', d)

if __name__ == '__main__':
    if len(sys.argv) == 3:  # one folder, in its own process (the reference keeps state)
        OUT = os.path.dirname(sys.argv[2])
        bpe = json.load(open(os.path.join(OUT, 'pre.json')))
        PRE.update(bpe)
        reference(sys.argv[2])
        sys.exit(0)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    spm_folders()
    bpe_folders()
    wjson(os.path.join(OUT, 'pre.json'), PRE)
    for name in sorted(os.listdir(OUT)):
        d = os.path.join(OUT, name)
        if os.path.isdir(d):
            subprocess.run([sys.executable, __file__, OUT, d], check=True,
                           stdout=subprocess.DEVNULL)
