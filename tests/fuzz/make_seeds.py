#!/usr/bin/env python3
"""Regenerate the seed inputs of every fuzz target under tests/fuzz/corpus/<target>/
(files named seed-*) from the shared real-file corpus, tests/data and a few
handcrafted inputs. Plain Python 3, no torch needed; tpconv (argument 1) writes
the shard-set manifest and the object-tree JSON seeds.

usage: make_seeds.py TPCONV [SHARED_CORPUS]

Regression inputs (files named crash-*, timeout-*, leak-*, oom-*, or regress-*)
are kept; libFuzzer's own finds are not committed (see tests/fuzz/README.md).
"""
import glob, hashlib, io, json, os, struct, subprocess, sys, tempfile, zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
TPCONV = sys.argv[1]
CORPUS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, '..', 'shared', 'corpus')
OUT = os.path.join(HERE, 'corpus')
LEGACY_MAGIC = bytes.fromhex('80028a0a6cfc9c46f9206aa850192e')
MAX = 64 << 10   # bigger inputs make the fuzzer slow; seeds stay under this

seen = {}
def put(target, name, data):
    if len(data) > MAX:
        return
    h = hashlib.sha1(data).hexdigest()
    if h in seen.setdefault(target, set()):
        return
    seen[target].add(h)
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed-' + name), 'wb') as f:
        f.write(data)

for t in os.listdir(OUT) if os.path.isdir(OUT) else []:
    for f in glob.glob(os.path.join(OUT, t, 'seed-*')):
        os.remove(f)

def rd(p):
    with open(p, 'rb') as f:
        return f.read()

# ---- torch files: zip, legacy, their pickles ----
def pickles_of_legacy(b):
    """Split a legacy file into its five pickles (by scanning for STOP with
    pickletools, which never executes anything)."""
    import pickletools
    out, pos = [], 0
    for _ in range(5):
        f = io.BytesIO(b[pos:])
        try:
            for op, arg, p in pickletools.genops(f):
                if op.name == 'STOP':
                    break
        except Exception:
            return out
        end = pos + f.tell()
        out.append(b[pos:end])
        pos = end
    return out

torch_files = sorted(glob.glob(os.path.join(CORPUS, 'torch', '*.pt')) +
                     glob.glob(os.path.join(CORPUS, 'torch', '*.pth')) +
                     glob.glob(os.path.join(SRC, 'tests', 'data', '*.pt')))
for p in torch_files:
    b = rd(p)
    base = os.path.basename(p)
    if b[:4] == b'PK\x03\x04':
        put('torch_zip', base, b)
        put('zip', base, b)
        try:
            z = zipfile.ZipFile(io.BytesIO(b))
            for n in z.namelist():
                if n.endswith('data.pkl'):
                    put('pickle', base + '.data.pkl', z.read(n))
            # the same archive re-zipped by Python, DEFLATED (torch reads it)
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, 'w', zipfile.ZIP_DEFLATED) as w:
                for n in z.namelist():
                    w.writestr(n, z.read(n))
            put('torch_zip', base + '.deflated', buf.getvalue())
            put('zip', base + '.deflated', buf.getvalue())
        except zipfile.BadZipFile:
            pass
    elif b.startswith(LEGACY_MAGIC):
        put('torch_legacy', base, b[len(LEGACY_MAGIC):])
        for i, pk in enumerate(pickles_of_legacy(b)):
            put('pickle', '%s.%d.pkl' % (base, i), pk)
for p in sorted(glob.glob(os.path.join(CORPUS, 'negative', '*'))):
    b = rd(p)
    if b[:4] == b'PK\x03\x04':
        put('zip', os.path.basename(p), b)
        put('torch_zip', os.path.basename(p), b)

# hostile pickles: the tests/hostile generator's, without the container
sys.path.insert(0, os.path.join(SRC, 'tests', 'hostile'))
try:
    import gen_hostile
    for name, pk in gen_hostile.seed_pickles():
        put('pickle', name, pk)
    for name, z in gen_hostile.seed_zips():
        put('zip', name, z)
        put('torch_zip', name, z)
    # legacy files by hand: the protocol-2 magic is left out as for the real
    # files above; other protocols' (text, FRAME) and damaged ones stay in
    for name, b in gen_hostile.seed_legacy():
        put('torch_legacy', name, b[len(LEGACY_MAGIC):] if b.startswith(LEGACY_MAGIC) else b)
except ImportError:
    pass

# ---- DeepSpeed universal checkpoints: the committed folders as file images ----
def universal_seed(tag, optim):
    files = []
    for dp, _, fs in sorted(os.walk(tag)):
        for f in sorted(fs):
            rel = os.path.relpath(os.path.join(dp, f), tag)
            files.append((rel.encode(), rd(os.path.join(dp, f))))
    out = bytes([min(len(files), 32) - 1, 1 if optim else 0])
    for rel, b in files[:32]:
        out += bytes([len(rel)]) + rel + struct.pack('<I', len(b)) + b
    return out
for d in ('ds_universal', 'ds_universal3'):
    for optim in (True, False):
        put('ds_universal', '%s%s' % (d, '_optim' if optim else ''),
            universal_seed(os.path.join(SRC, 'tests', 'data', d, 'global_step14_universal'), optim))

# ---- safetensors ----
for p in sorted(glob.glob(os.path.join(CORPUS, 'safetensors', '*.safetensors'))):
    put('safetensors', os.path.basename(p), rd(p))
with tempfile.TemporaryDirectory() as t:
    cases = subprocess.run([sys.executable, os.path.join(SRC, 'tests', 'make_bad_safetensors.py'), t],
                           capture_output=True, text=True, check=True).stdout
    for line in cases.splitlines():
        f = line.split('\t')[0]
        put('safetensors', 'bad-' + f, rd(os.path.join(t, f)))
    # written by tpconv from a torch file: the object tree in __metadata__,
    # and --dedup-tied aliases
    for i, p in enumerate(['burn_pytorch-tests__tests__complex_nested__complex_nested.pt',
                           'candle_test_with_key.pt',
                           'burn_pytorch-tests__tests__config__weights_with_config.pt',
                           'burn_src__pytorch__tests__reader__test_data__legacy_shared_storage.pt']):
        src = os.path.join(CORPUS, 'torch', p)
        if not os.path.exists(src):
            continue
        o = os.path.join(t, '%d.safetensors' % i)
        if subprocess.run([TPCONV, 'convert', src, '-o', o, '-q', '--dedup-tied']).returncode == 0:
            b = rd(o)
            put('safetensors', 'tpconv-' + p + '.safetensors', b)
            n = struct.unpack('<Q', b[:8])[0]
            meta = json.loads(b[8:8 + n]).get('__metadata__', {})
            if 'tpconv.tree' in meta:
                put('tree_json', p + '.json', meta['tpconv.tree'].encode())

# ---- JSON: HF index, plans, manifest, config ----
with tempfile.TemporaryDirectory() as t:
    st = os.path.join(SRC, 'tests', 'data', 'tiny_llama.safetensors')
    if subprocess.run([TPCONV, 'convert', st, '-o', t + '/hf', '--max-shard-size', '150K', '-q']).returncode == 0:
        put('hf_index', 'tiny_llama.index.json', rd(t + '/hf/model.safetensors.index.json'))
    if subprocess.run([TPCONV, 'shard', st, '--tp', '2', '--preset', 'llama', '--config',
                       os.path.join(SRC, 'tests', 'data', 'config.json'), '-o', t + '/s', '-q']).returncode == 0:
        put('manifest', 'tiny_llama_tp2.json', rd(t + '/s/tpconv-manifest.json'))
    # the manifest schema of sets written before xxh3-128 (sha256 members)
    if subprocess.run([TPCONV, 'shard', st, '--tp', '2', '--preset', 'llama', '--checksum', 'sha256', '--config',
                       os.path.join(SRC, 'tests', 'data', 'config.json'), '-o', t + '/s3', '-q']).returncode == 0:
        put('manifest', 'tiny_llama_tp2_sha256.json', rd(t + '/s3/tpconv-manifest.json'))
    if subprocess.run([TPCONV, 'shard', st, '--tp', '2', '--pp', '2', '--preset', 'llama', '--no-checksums',
                       '--config', os.path.join(SRC, 'tests', 'data', 'config.json'), '-o', t + '/s2', '-q']).returncode == 0:
        put('manifest', 'tiny_llama_tp2_pp2.json', rd(t + '/s2/tpconv-manifest.json'))
    lst = subprocess.run([TPCONV, 'plan', '--list'], capture_output=True, text=True).stdout
    for line in lst.splitlines():
        name = line.split()[0] if line.strip() else ''
        r = subprocess.run([TPCONV, 'plan', name], capture_output=True)
        if name and r.returncode == 0:
            put('plan', name + '.json', r.stdout)
    lst = subprocess.run([TPCONV, 'rules', '--list'], capture_output=True, text=True).stdout
    for line in lst.splitlines():
        name = line.split()[0] if line.strip() else ''
        r = subprocess.run([TPCONV, 'rules', name], capture_output=True)
        if name and r.returncode == 0:
            put('rules', name + '.json', r.stdout)
for p in sorted(glob.glob(os.path.join(SRC, 'tests', 'remap', '*.json'))):
    put('rules', 'remap-' + os.path.basename(p), rd(p))
put('rules', 'all_actions.json', json.dumps({"rules": [
    {"select": "model"}, {"drop": "rotary", "optional": True}, {"keep": ".", "unless": "^x"},
    {"rename": "layers\\.(\\d+)\\.", "to": "h.\\1."}, {"strip_prefix": "module."},
    {"add_prefix": "m."}, {"transpose": "c_attn\\.weight$"}, {"dtype": "bf16", "match": "weight"},
    {"dtype": "f32", "ints": True, "when": "norm"}, {"comment": "x"}]}).encode())
put('rules', 'unfuse.json', json.dumps({"rules": [
    {"unfuse": "q_proj\\.weight$", "groups": "kv_heads",
     "parts": [{"to": "q.w", "size": "heads/kv_heads*head_dim"}, {"to": "k.w", "size": "head_dim"}, {"to": "v.w", "size": "rest"}]},
    {"unfuse": "c_attn\\.weight$", "to": "c_attn.w", "groups": 2, "dim": 1, "parts": [{"comment": "a"}, {}]},
    {"transpose": "c_attn\\.w$"},
    {"unfuse": "embed_tokens", "parts": [{"to": "wte", "size": "vocab"}, {"size": "rest"}], "optional": True},
    {"unfuse": "norm", "parts": [{"to": "n.a", "size": "hidden"}, {"to": "n.b", "size": "rest"}], "optional": True},
    {"dtype": "f32", "match": "^[qkv]\\."}]}).encode())
put('rules', 'keys.txt', b'model.embed_tokens.weight\nlm_head.weight\r\n\n  model.norm.weight  \n')
put('rules', 'keys.json', b'["model.embed_tokens.weight", "lm_head.weight"]')
put('hf_index', 'minimal.json', b'{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}')
for nm, qc in [('fp8', {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}),
               ('gptq', {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True}),
               ('gptq_v2', {"quant_method": "gptq", "bits": 8, "group_size": -1, "checkpoint_format": "gptq_v2"}),
               ('awq', {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}),
               ('ct', {"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {
                   "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}})]:
    put('quant_cfg', nm + '.json', json.dumps({"torch_dtype": "bfloat16", "quantization_config": qc}).encode())
put('quant_cfg', 'quantize_config.json', json.dumps({"bits": 4, "group_size": 128, "desc_act": False, "sym": True}).encode())
# ---- gguf: the block-type fixture and the hostile headers of tests/hostile ----
put('gguf', 'quants.gguf', rd(os.path.join(SRC, 'tests', 'gguf', 'quants.gguf')))
# MXFP4 and NVFP4 blocks (tests/quant/make_fp4_gguf.py): their decoders run when every tensor is hashed
put('gguf', 'fp4.gguf', rd(os.path.join(SRC, 'tests', 'quant', 'fp4', 'fp4.gguf')))
put('gguf', 'iq.gguf', rd(os.path.join(SRC, 'tests', 'quant', 'iq', 'iq.gguf')))  # every IQ / TQ decoder
sys.path.insert(0, os.path.join(SRC, 'tests', 'hostile'))
import gen_hostile  # noqa: E402
for nm, body, *_ in gen_hostile.gguf_cases():
    put('gguf', nm + '.gguf', body)
# adapter GGUFs (convert --base), over fuzz_gguf.c's tiny llama config: a
# pair per kind (q permuted, k with one kv head, token_embd's lora_a
# transposed), and the same without adapter.lora.alpha
def adapter_gguf(alpha=True):
    def s(x):
        return struct.pack('<Q', len(x)) + x.encode()
    kv = [('general.architecture', 8, s('llama')), ('general.type', 8, s('adapter')), ('adapter.type', 8, s('lora'))]
    if alpha:
        kv.append(('adapter.lora.alpha', 6, struct.pack('<f', 4.0)))
    ts = [('blk.0.attn_q.weight.lora_a', [8, 2]), ('blk.0.attn_q.weight.lora_b', [2, 8]),
          ('blk.0.attn_k.weight.lora_a', [8, 2]), ('blk.0.attn_k.weight.lora_b', [2, 4]),
          ('token_embd.weight.lora_a', [2, 16]), ('token_embd.weight.lora_b', [2, 8])]
    h = struct.pack('<IIQQ', 0x46554747, 3, len(ts), len(kv))
    for k, t, v in kv:
        h += s(k) + struct.pack('<I', t) + v
    off, data = 0, b''
    for nm, ne in ts:
        n = ne[0] * ne[1]
        h += s(nm) + struct.pack('<I2QIQ', 2, ne[0], ne[1], 0, off)
        blob = struct.pack('<%df' % n, *[(i % 7 - 3) / 8.0 for i in range(n)])
        data += blob + bytes(-len(blob) % 32)
        off += len(blob) + (-len(blob) % 32)
    return h + bytes(-len(h) % 32) + data
put('gguf', 'adapter.gguf', adapter_gguf())
put('gguf', 'adapter_no_alpha.gguf', adapter_gguf(False))
put('config', 'tiny_llama.json', rd(os.path.join(SRC, 'tests', 'data', 'config.json')))
put('config', 'gpt2.json', json.dumps({"n_head": 12, "n_embd": 768, "vocab_size": 50257, "n_layer": 12}).encode())
put('config', 'multimodal.json', json.dumps({"text_config": {"num_attention_heads": 32, "num_key_value_heads": 8,
                                             "hidden_size": 4096, "vocab_size": 32000}}).encode())
put('tree_json', 'all_kinds.json', json.dumps({"dict": {"a": None, "b": True, "c": 3, "d": {"float": "nan"},
    "e": "s", "f": {"bytes": "00ff"}, "g": [1, 2], "h": {"tuple": [1]}, "i": {"set": [1]},
    "j": {"dict_items": [[1, 2]]}, "k": {"global": "collections.OrderedDict"},
    "l": {"call": [{"global": "argparse.Namespace"}, {"tuple": []}, {"dict": {"lr": 1}}]},
    "m": {"tensor": "ttt"}, "n": {"bigint": "ffffffffffffffffff"}}}).encode())

for t in sorted(seen):
    print('%-14s %3d seeds' % (t, len(seen[t])))
