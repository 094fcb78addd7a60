# bash completion for tpconv. Commands and options come from tpconv's own
# --help, presets from `tpconv plan --list` / `tpconv rules --list`, the values
# of --format, --layout, --outtype, --arch, --checks, --dtype, --checksum and
# --device from `tpconv __complete OPTION` (the format and layout registries),
# so the completion follows the installed version.
# Installed by `meson install` as share/bash-completion/completions/tpconv;
# from a checkout: `source doc/tpconv.bash` (doc/README.md).
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
	--format|--layout|--outtype|--arch|--checks|--dtype|--checksum|--device)
		local values
		values=$("$tp" __complete "$prev" 2>/dev/null) || values=
		if [[ $prev == --checks && $cur == *,* ]]; then # a comma-separated list: complete its last item
			local head=${cur%,*},
			COMPREPLY=($(compgen -P "$head" -W "$values" -- "${cur##*,}"))
		else
			COMPREPLY=($(compgen -W "$values" -- "$cur"))
		fi
		return ;;
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
