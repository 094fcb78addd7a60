# bash completion for tpconv. Commands and options come from tpconv's own
# --help, presets from `tpconv plan --list` / `tpconv rules --list`, so the
# completion follows the installed version.
_tpconv() {
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion || return
	else
		cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
	fi
	local tp=${words[0]}
	if [[ $cword -eq 1 ]]; then
		COMPREPLY=($(compgen -W "$("$tp" --help 2>/dev/null | awk '/^Commands:/{f=1;next} f&&/^  [a-z]/{print $1} f&&/^$/{f=0}') --help --version" -- "$cur"))
		return
	fi
	case $prev in
	--preset) COMPREPLY=($(compgen -W "$("$tp" plan --list 2>/dev/null | awk '{print $1}')" -- "$cur")); return ;;
	--rules) COMPREPLY=($(compgen -W "$("$tp" rules --list 2>/dev/null | awk '{print $1}')" -- "$cur")); compopt -o default 2>/dev/null; return ;;
	--format) COMPREPLY=($(compgen -W "safetensors torch dcp" -- "$cur")); return ;;
	--layout) COMPREPLY=($(compgen -W "tpconv oslo trtllm hf vllm megatron dcp hf-mapping" -- "$cur")); return ;;
	--device) COMPREPLY=($(compgen -W "cpu cuda" -- "$cur")); return ;;
	--dtype) COMPREPLY=($(compgen -W "bf16 f16 f32 f64" -- "$cur")); return ;;
	--checksum) COMPREPLY=($(compgen -W "xxh3-128 sha256 none" -- "$cur")); return ;;
	--tp|--pp|--rank|--ranks|--tokens|--seed|--atol|--rtol|--ulps|--heads|--kv-heads|--head-dim|--hidden|--vocab|--max-shard-size) return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$("$tp" "${words[1]}" --help 2>/dev/null | grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u)" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
	compopt -o filenames 2>/dev/null
}
complete -F _tpconv tpconv
