#!/usr/bin/env bash
# Run the agent frameworks' own tests against sessiontree's adapters (issue 27, item 4).
#
#   tests/upstream/run.sh [openai-agents|claude-agent-sdk|all] [--baseline|--reference] [pytest args...]
#
# For each framework: download the source distribution of the version constraints/adapters.txt
# pins (pip download --no-binary :all:, from PyPI), unpack it into .upstream/ (git-ignored;
# kept between runs), check that its source is the installed package's, and run the test
# files its list names (tests/upstream/<framework>.txt) with our pytest plugin, which swaps
# the framework's stores for ours; the list deselects (with the reason) the tests that reach
# into the framework's own store, and expects to fail (strict xfail) the divergences. The
# tests stay theirs: nothing of them is copied into this repository.
#
# --baseline runs the same files with the framework's own stores (our plugin left out), every
# listed test included: only the lines whose reason begins "baseline:" must fail then (they
# are not about sessions), and every test we deselect or expect to fail passes with theirs.
# --reference (claude-agent-sdk only) runs the tests deselected as "reference:" with the
# SDK's own PostgresSessionStore (examples/ of its sdist; asyncpg from
# constraints/upstream-reference.txt) over the server SESSIONTREE_PG_DSN names, expecting
# each to fail on its assertion, and the list's "reference" lines, expecting them to pass
# (tests/upstream/claude_agent_sdk_reference_plugin.py). Extra arguments go to pytest (e.g. -x, -k NAME, a
# node id of theirs, with the framework named: tests/test_agent_runner.py::test_simple_first_run).
#
# Needs .venv (make install: the adapter extras at their pins) and network access to PyPI on
# the first run. `make upstream-tests` runs it; .ci/run always does.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
py=${PYTHON:-$root/.venv/bin/python}
cache=$root/.upstream
here=$root/tests/upstream

which=all
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
    which=$1
    shift
fi
baseline=0
reference=0
if [ "${1:-}" = --baseline ]; then
    baseline=1
    shift
elif [ "${1:-}" = --reference ]; then
    [ "$which" = claude-agent-sdk ] || { echo "--reference is for claude-agent-sdk" >&2; exit 2; }
    reference=1
    shift
fi
case $which in
    openai-agents | claude-agent-sdk | all) ;;
    *) echo "usage: $0 [openai-agents|claude-agent-sdk|all] [--baseline] [pytest args...]" >&2; exit 2 ;;
esac

export PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$cache"

# site_of <pins file> -> prints a folder holding exactly those pins (named by their hash,
# installed once) that only the runs needing them put on PYTHONPATH.
site_of() {
    local site
    site=$cache/site-$(sha256sum "$1" | cut -c1-12)
    if [ ! -d "$site" ]; then
        rm -rf "$site.tmp"
        "$py" -m pip install -q --no-deps --target "$site.tmp" -r "$1" >&2
        mv "$site.tmp" "$site"
    fi
    echo "$site"
}

# unpack <dist name> -> prints the unpacked sdist's folder (downloaded once per version).
unpack() {
    local dist=$1 version stem
    version=$(sed -n "s/^$dist==//p" constraints/adapters.txt)
    [ -n "$version" ] || { echo "$dist is not pinned in constraints/adapters.txt" >&2; exit 1; }
    stem=${dist//-/_}-$version
    if [ ! -d "$cache/$stem" ]; then
        "$py" -m pip download -q --no-binary :all: --no-deps -d "$cache/dl" "$dist==$version" >&2
        tar -xzf "$cache/dl/$stem.tar.gz" -C "$cache"
    fi
    echo "$cache/$stem"
}

# same_source <sdist src package folder> <module>: the sdist's package is the installed one
# (their tests import it from src/, as they are meant to run).
same_source() {
    "$py" - "$1" "$2" <<'EOF'
import filecmp, importlib.util, os, sys
src, module = sys.argv[1], sys.argv[2]
installed = os.path.dirname(importlib.util.find_spec(module).origin)
bad = []
for folder, dirs, files in os.walk(src):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    for name in files:
        mine = os.path.join(folder, name)
        theirs = os.path.join(installed, os.path.relpath(mine, src))
        if not os.path.exists(theirs) or not filecmp.cmp(mine, theirs, shallow=False):
            bad.append(os.path.relpath(mine, src))
if bad:
    sys.exit(f"{src} differs from the installed {module} ({installed}): {bad[:5]}")
EOF
}

# run <dist name> <module> <list> <plugin> <extra PYTHONPATH> [pytest args...]
run() {
    local dist=$1 module=$2 list=$here/$3 plugin=$4 extra=$5 dir plugins arg files=()
    shift 5
    # The list's files, unless the arguments name tests of their own.
    for arg in "$@"; do [[ $arg != tests/* ]] || files=(--); done
    if [ ${#files[@]} = 0 ] && [ "$reference" = 1 ]; then
        mapfile -t files < <(sed -n -e 's/^reference \([^:]*\)::.*/\1/p' \
            -e 's/^deselect \([^:]*\)::.*# *reference:.*/\1/p' "$list" | sort -u)
    elif [ ${#files[@]} = 0 ]; then
        mapfile -t files < <(sed -n 's/^file //p' "$list")
    else
        files=()
    fi
    dir=$(unpack "$dist")
    same_source "$dir/src/$module" "$module"
    plugins=(-p upstream_select "--upstream-list=$list")
    if [ "$baseline" = 1 ]; then
        plugins+=(--upstream-baseline)
    elif [ "$reference" = 1 ]; then
        plugins+=(--upstream-reference -p "${plugin}_reference_plugin")
        extra=":$dir/examples/session_stores:$(site_of constraints/upstream-reference.txt)"
    else
        plugins+=(-p "${plugin}_plugin")
    fi
    local mode="sessiontree's adapter"
    [ "$baseline" = 0 ] || mode="baseline: their stores"
    [ "$reference" = 0 ] || mode="reference: their PostgreSQL store"
    echo "== $dist $(basename "$dir") ($mode)"
    # Their folder is pytest's rootdir (their pytest settings, their conftest); src/ holds
    # their package (checked above to be the installed one), as their tests expect.
    (
        cd "$dir"
        PYTHONPATH="$here:$dir/src$extra${PYTHONPATH:+:$PYTHONPATH}" \
            "$py" -m pytest -q -p no:cacheprovider "${plugins[@]}" "${files[@]}" "$@"
    )
}

status=0
if [ "$which" != claude-agent-sdk ]; then
    run openai-agents agents openai_agents.txt openai_agents ":$(site_of constraints/upstream.txt)" "$@" \
        || status=1
fi
if [ "$which" != openai-agents ]; then
    # Their test needs (pytest, anyio[trio]) are .venv's.
    run claude-agent-sdk claude_agent_sdk claude_agent_sdk.txt claude_agent_sdk "" "$@" \
        || status=1
fi
exit $status
