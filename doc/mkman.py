#!/usr/bin/env python3
"""Write tpconv(1) from the command's own --help texts (so every subcommand and
option is in it and cannot drift), plus the examples and exit status below.
usage: mkman.py TPCONV OUT.1"""
import re, subprocess, sys

tp, out = sys.argv[1], sys.argv[2]

def run(*args):
    return subprocess.run([tp, *args], capture_output=True, text=True).stdout

def esc(line):
    line = line.replace('\\', '\\e').replace('-', '\\-')
    if line.startswith(('.', "'")):
        line = '\\&' + line
    return line

top = run('--help')
version = run('--version').split()[-1]
cmds = re.findall(r'^  (\w+)\s{2,}(.*)$', top.split('Commands:')[1].split('\n\n')[0], re.M)

m = [f'.TH TPCONV 1 "" "tpconv {version}" "User Commands"',
     '.SH NAME', 'tpconv \\- convert, shard, merge and verify model checkpoints',
     '.SH SYNOPSIS', '.B tpconv', '.I command', '[options]', '.br',
     '.B tpconv', '.RB [ \\-\\-version | \\-\\-help ]',
     '.SH DESCRIPTION',
     'tpconv reads PyTorch checkpoints (torch.save zip and legacy files), safetensors '
     '(single files and Hugging Face sharded folders), GGUF (llama.cpp, gguf\\-split sets too) '
     'and training checkpoints (PyTorch '
     'Distributed Checkpoint, Megatron\\-Core, DeepSpeed ZeRO), renames and casts tensors, writes them '
     'as safetensors, torch, GGUF or DCP, splits them for N\\-way tensor parallelism, merges rank files '
     'back, and checks that a shard set computes what the unsplit model computes. It streams '
     'tensor bytes from the input mapping to the output, never executes pickle code, and '
     'writes every output atomically.',
     '.PP',
     'This page holds every command\'s \\-\\-help text. The manual, with worked examples, '
     'is in the tpconv sources: README.md (the set\\-up and an example for each task) and '
     'doc/README.md (the index of the rest). From a build tree, read this page with',
     '.BR "man \\-l build/doc/tpconv.1" .',
     '.PP', esc(re.sub(r'\s+', ' ', re.search(r'^Formats read.*?\.$', top, re.M | re.S).group(0))),
     '.PP',
     'Bash completion (commands, options, presets, and the values of \\-\\-format, \\-\\-layout, '
     '\\-\\-outtype, \\-\\-arch, \\-\\-checks and the like, asked of tpconv itself) is installed as '
     'share/bash\\-completion/completions/tpconv; from the sources,',
     '.BR "source doc/tpconv.bash" .',
     '.PP', 'Commands:', '.RS']
for name, desc in cmds:
    m += ['.TP', f'.B {name}', esc(desc)]
m += ['.RE']
for name, _ in cmds:
    text = run(name, '--help').rstrip('\n')
    text = re.sub(r'\n*Exit status:.*\Z', '', text, flags=re.S)
    m += [f'.SH "TPCONV {name.upper()}"', '.nf']
    m += [esc(l) for l in text.split('\n')]
    m += ['.fi']
m += ['.SH EXAMPLES',
      '.SS Convert a torch checkpoint',
      '.nf', esc('tpconv convert pytorch_model.bin -o model.safetensors'),
      esc('tpconv convert model.safetensors -o out/ --max-shard-size 4GB'),
      esc('tpconv convert latest.pth --select ema_model --rules dalle2 -o decoder.safetensors'), '.fi',
      '.SS Merge a PEFT LoRA adapter into its base while converting',
      '.nf', esc('tpconv convert Llama-3.1-8B/ --lora my-adapter/ -o llama-merged/'),
      esc('tpconv convert Llama-3.1-8B/ --lora a/:0.5 --lora b/:1.5 -o merged.gguf --outtype q8_0'), '.fi',
      '.SS Shard for N\\-way tensor parallelism',
      '.nf', esc('tpconv shard model/ --tp 8 --preset llama -o tp8/'),
      esc('tpconv shard model.safetensors --tp 4 --preset llama --config config.json --dry-run'), '.fi',
      '.SS Merge rank files back',
      '.nf', esc('tpconv merge tp8/ -o merged.safetensors'),
      esc('tpconv shard tp8/ --tp 2 -o tp2/        # reshard 8 -> 2 without an intermediate file'), '.fi',
      '.SS Check a shard set in CI',
      '.nf', esc('tpconv verify --reference model.safetensors --shards tp8/ --json report.json --junit report.xml'),
      esc('tpconv inspect --json --hash model.safetensors > inventory.json'), '.fi',
      '.SH "EXIT STATUS"',
      '.TP', '.B 0', 'success',
      '.TP', '.B 1', 'verify or diff found differences (or \\-\\-expect\\-keys found missing or unexpected keys)',
      '.TP', '.B 2', 'usage error: a bad flag, an existing output without \\-\\-force, an output that is an input, '
      'a model fact the split needs and no flag or config gives, or one that contradicts the shapes of the '
      'tensors it governs (doc/shard.md), a padded Megatron vocabulary whose true size nothing gives',
      '.TP', '.B 3', 'bad or unsupported input: a corrupt file, a dangerous pickle, a TorchScript archive, an uneven split',
      '.TP', '.B 4', 'output or I/O failure: disk full (a shard set or HF folder keeps the files it finished; '
      'the same command again resumes), permissions',
      '.TP', '.B 5', 'GPU, NCCL or MPI failure',
      '.TP', '.B "130, 143"', 'interrupted by SIGINT or SIGTERM: temporary files removed, finished files kept; '
      'the same command again (without \\-\\-force) resumes a shard set or an HF folder',
      '.SH DIAGNOSTICS',
      'Errors are one line on standard error naming the file, the tensor and the byte offset, e.g.',
      '.nf', esc("tpconv: error: 'model.safetensors': tensor 'h.0.w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20 (at byte offset 88, 0x58)"), '.fi',
      '.SH ENVIRONMENT',
      '.TP', '.B TPCONV_INFLATE_CAP', 'largest size a DEFLATED zip record may inflate to (default 16GiB)',
      '.TP', '.B TPCONV_DIRECT', '0 writes every output buffered; 1 writes large copies with O_DIRECT wherever '
      'the file system allows (default: direct unless the input is larger than three quarters of RAM)',
      '.TP', '.B TPCONV_DIRECT_ASYNC', '0: one direct write at a time instead of up to four in flight',
      '.TP', '.B TPCONV_DIRECT_STAGE', "0: direct copies in page phase go straight from the input's mapping",
      '.TP', '.B TPCONV_WRITE_BEHIND', '0: no writeback started every 32 MiB while a file is written',
      '.TP', '.B TPCONV_JOINT', '0: shard writes rank by rank instead of several ranks in step',
      '.TP', '.B TPCONV_NO_RSS_GUARD', 'set: shard does not drop input pages when its resident set grows',
      '.TP', '.B TPCONV_CUDA_MODULE', 'the CUDA module verify \\-\\-device cuda loads (default: beside the '
      'executable, in the build tree or in the install\'s libdir)',
      '.TP', '.B TPCONV_BLAS', 'the library verify\'s products use: none for the hand-written loops, or a name '
      'or path exporting cblas_sgemm and cblas_dgemm (default: the OpenBLAS the build found, opened at the '
      'first product)',
      '.TP', '.B TPCONV_MPI_MODULE', 'the MPI module (tpconv_mpi.so) a run under mpirun loads (default: '
      'where the CUDA module is looked for)',
      '.SH "SEE ALSO"', 'python3(1); in the tpconv sources: README.md, doc/README.md (the manual), '
      'BENCHMARKS.md and SECURITY.md']
open(out, 'w').write('\n'.join(m) + '\n')
