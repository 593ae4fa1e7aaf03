# Sourced by the .ci/run stages that need a venv of their own (trainers, Ray, the agent frameworks strands, autogen and inspect-ai): each venv lives under
# ${TITO_CACHE_DIR:-~/.cache/tito}/venvs/NAME, outside the checkout, and is rebuilt only when what built it changed
# (the calling script and tito's installable dependencies in pyproject.toml: the core list and every extra but `test`,
# hashed into a stamp inside the venv; markers, tool settings and the test extra change often and install nothing
# into these venvs, so they do not rebuild them). A fresh clone on a machine that ran
# CI before reuses it; a new machine builds it once. Tests run the checkout's code with PYTHONPATH=src, so a venv
# built from another checkout (tito installed editable from there) still tests this one.
VENV_CACHE="${TITO_CACHE_DIR:-$HOME/.cache/tito}/venvs"

# cached_venv NAME PYTHON: prints the venv's directory; returns 0 when it is current, else makes it afresh (with pip
# upgraded) and returns 1, and the caller installs into it and then calls `stamp_venv DIR`.
cached_venv() {
    local dir="$VENV_CACHE/$1"
    if [[ -f "$dir/tito-stamp" && "$(cat "$dir/tito-stamp")" == "$(venv_stamp)" ]]; then echo "$dir"; return 0; fi
    rm -rf "$dir"
    mkdir -p "$VENV_CACHE"
    "$2" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >&2
    echo "$dir"
    return 1
}

venv_stamp() {
    { cat "$0"; python3 - <<'PY'
import json, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = {name: deps for name, deps in project.get("optional-dependencies", {}).items() if name != "test"}
print(json.dumps([project.get("requires-python"), project["dependencies"], extras], sort_keys=True))
PY
    } | sha256sum | cut -c1-16
}

stamp_venv() {
    venv_stamp > "$1/tito-stamp"
}
