"""sentencepiece's ModelProto read without protobuf, so transformers can turn a
tokenizer.model into its fast tokenizer where protobuf is not installed (the
forky chroot): transformers' SentencePieceExtractor parses the file with
protobuf and does nothing else with it, so its __init__ is replaced by this
reader and the rest (vocab, merges, the tokenizer class's pipeline) is
transformers' own code.

    import spm_proto; undo = spm_proto.patch()

Only what transformers reads is decoded; proto2 defaults for the rest of the
fields it reads (sentencepiece_model.proto)."""
import struct
from types import SimpleNamespace

# field number -> (name, kind, default); kinds: i varint int32, b bool, s string, y bytes
TRAINER = {3: ("model_type", "i", 1), 4: ("vocab_size", "i", 8000), 35: ("byte_fallback", "b", False),
           40: ("unk_id", "i", 0), 41: ("bos_id", "i", 1), 42: ("eos_id", "i", 2), 43: ("pad_id", "i", -1),
           45: ("unk_piece", "s", "<unk>"), 46: ("bos_piece", "s", "<s>"), 47: ("eos_piece", "s", "</s>"),
           48: ("pad_piece", "s", "<pad>"), 24: ("treat_whitespace_as_suffix", "b", False),
           25: ("split_digits", "b", False)}
NORMALIZER = {1: ("name", "s", ""), 2: ("precompiled_charsmap", "y", b""), 3: ("add_dummy_prefix", "b", True),
              4: ("remove_extra_whitespaces", "b", True), 5: ("escape_whitespaces", "b", True)}
PIECE = {1: ("piece", "s", ""), 2: ("score", "f", 0.0), 3: ("type", "i", 1)}


def _varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7f) << s
        s += 7
        if not c & 0x80:
            return x, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def _message(b, spec):
    m = SimpleNamespace(**{name: d for name, _, d in spec.values()})
    for num, wt, v in _fields(b):
        if num not in spec:
            continue
        name, kind, _ = spec[num]
        if kind == "i":
            v = v - (1 << 64) if v >= 1 << 63 else v
        elif kind == "b":
            v = bool(v)
        elif kind == "s":
            v = bytes(v).decode("utf-8")
        elif kind == "f":
            v = struct.unpack("<f", v)[0]
        setattr(m, name, v)
    return m


def parse(data):
    """A ModelProto-like object: pieces (piece, score, type), trainer_spec, normalizer_spec."""
    m = SimpleNamespace(pieces=[], trainer_spec=_message(b"", TRAINER), normalizer_spec=_message(b"", NORMALIZER))
    for num, wt, v in _fields(data):
        if num == 1:
            m.pieces.append(_message(v, PIECE))
        elif num == 2:
            m.trainer_spec = _message(v, TRAINER)
        elif num == 3:
            m.normalizer_spec = _message(v, NORMALIZER)
    return m


def patch():
    """Replace SentencePieceExtractor.__init__; returns a function undoing it."""
    import importlib
    c = importlib.import_module("transformers.convert_slow_tokenizer")
    old = c.SentencePieceExtractor.__init__

    def init(self, model):
        with open(model, "rb") as f:
            self.proto = parse(f.read())

    def undo():
        c.SentencePieceExtractor.__init__ = old

    c.SentencePieceExtractor.__init__ = init
    return undo
