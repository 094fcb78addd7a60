"""A tiny stand-in for the remote tokenizer module Tencent's HunYuan MoE
checkpoints ship (tencent/Hunyuan-A13B-Instruct: tokenization_hy.py,
HYTokenizer), written for tpconv's tests: the same files and interface that
llama.cpp's convert_hf_to_gguf.py (HunYuanMoEModel.set_vocab) reads -
hy.tiktoken (one base64 token and its rank a line, ranks in line order),
mergeable_ranks, special_tokens (<|endoftext|>, <|startoftext|>, <|bos|>,
<|eos|>, <|pad|>, then <|extra_N|>, numbered on from the last rank), vocab_size
(ranks + special tokens), encode - but no code of Tencent's: the BPE here is a
plain rank-ordered merge over the regex split (PAT_STR, the pattern
tokenization_hy.py gives tiktoken), without tiktoken, which the test chroot
does not have. Loaded with trust_remote_code=True from the model folder."""
import base64
import unicodedata

import regex
from transformers import PreTrainedTokenizer

PAT_STR = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
           r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
NAMED = ("<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>")
# <|extra_N|> tokens after the named ones, fixed in the module as Tencent's is
# (205 there: A13B's 127957 ranks + 210 = its vocab_size 128167); 5 here
# (make_arch_fixtures.py's 310 ranks + 10 = 320)
N_EXTRAS = 5


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok = base64.b64decode(line.split()[0])
                if tok in ranks:
                    raise ValueError("duplicated token %r in %s" % (tok, path))
                ranks[tok] = len(ranks)
    return ranks


class HYTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": "hy.tiktoken"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, errors="replace", **kwargs):
        self.errors = errors
        self.mergeable_ranks = load_ranks(vocab_file)
        names = NAMED + tuple("<|extra_%d|>" % i for i in range(N_EXTRAS))
        self.special_tokens = {t: len(self.mergeable_ranks) + i for i, t in enumerate(names)}
        self.decoder = {v: k for k, v in self.mergeable_ranks.items()}
        self.decoder.update({v: k for k, v in self.special_tokens.items()})
        self._pat = regex.compile(PAT_STR)
        super().__init__(errors=errors, **kwargs)

    @property
    def vocab_size(self):
        return len(self.mergeable_ranks) + len(self.special_tokens)

    def __len__(self):
        return self.vocab_size

    def get_vocab(self):
        return dict(self.mergeable_ranks)

    def _bpe(self, piece):
        parts = [bytes([b]) for b in piece]
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self.mergeable_ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def tokenize(self, text, **kwargs):
        text = unicodedata.normalize("NFC", text)
        out, pos = [], 0
        specials = regex.compile("|".join(regex.escape(s) for s in self.special_tokens))
        for m in list(specials.finditer(text)) + [None]:
            chunk = text[pos:m.start() if m else len(text)]
            for w in self._pat.findall(chunk):
                out += self._bpe(w.encode("utf-8"))
            if m:
                out.append(m.group(0))
                pos = m.end()
        return out

    def _convert_token_to_id(self, token):
        if token in self.special_tokens:
            return self.special_tokens[token]
        return self.mergeable_ranks[token]

    def _convert_id_to_token(self, index):
        return self.decoder[index]

    def convert_tokens_to_string(self, tokens):
        b = b"".join(t if isinstance(t, bytes) else t.encode("utf-8") for t in tokens)
        return b.decode("utf-8", errors=self.errors)

    def save_vocabulary(self, save_directory, filename_prefix=None):
        import os
        p = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "hy.tiktoken")
        with open(p, "w", encoding="utf-8") as f:
            for k, v in self.mergeable_ranks.items():
                f.write("%s %d\n" % (base64.b64encode(k).decode(), v))
        return (p,)
