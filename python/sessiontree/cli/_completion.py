"""``sessiontree completion``: shell completion scripts, made from the argument parser
(argparse offers none of its own), so they always list the current commands and options."""

from __future__ import annotations

import argparse

from ._output import open_output
from ._target import Options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=("bash", "zsh", "fish"))


def _commands() -> dict[str, list[str]]:
    from ._app import build_parser

    parser = build_parser()
    out: dict[str, list[str]] = {"": _options(parser)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = _options(sub)
    return out


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})


def bash(cmds: dict[str, list[str]]) -> str:
    names = " ".join(k for k in cmds if k)
    cases = "\n".join(f'        {k}) opts="{" ".join(v)}" ;;' for k, v in cmds.items() if k)
    return f"""# bash completion for sessiontree
_sessiontree() {{
    local cur cmd opts i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in -*) ;; *) cmd="${{COMP_WORDS[i]}}"; break ;; esac
    done
    if [[ -z "$cmd" ]]; then
        COMPREPLY=($(compgen -W "{names} {" ".join(cmds[""])}" -- "$cur"))
        return
    fi
    case "$cmd" in
{cases}
        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _sessiontree sessiontree
"""


def zsh(cmds: dict[str, list[str]]) -> str:
    return "#compdef sessiontree\nautoload -U bashcompinit && bashcompinit\n" + bash(cmds)


def fish(cmds: dict[str, list[str]]) -> str:
    lines = ["# fish completion for sessiontree", "complete -c sessiontree -f"]
    names = " ".join(k for k in cmds if k)
    lines.append(
        f'complete -c sessiontree -n "not __fish_seen_subcommand_from {names}" -a "{names}"'
    )
    for cmd, opts in cmds.items():
        if not cmd:
            continue
        for opt in opts:
            lines.append(
                f'complete -c sessiontree -n "__fish_seen_subcommand_from {cmd}" -l {opt[2:]}'
            )
        lines.append(f'complete -c sessiontree -n "__fish_seen_subcommand_from {cmd}" -F')
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, opts: Options) -> int:
    cmds = _commands()
    text = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell](cmds)
    with open_output(color_mode="never", pager=False) as out:
        out.write(text)
    return 0
