#!/usr/bin/env bash
# SGLang's own generated wire types (`sglang/api/v1/api_types.py`: msgspec Structs for /generate, its sampling
# params, replies, stream errors and /abort_request, "the JSON contract" of SGLang's server) are taken out of the
# pinned sglang wheel from PyPI, without its dependencies (torch and the rest are not needed to decode JSON), into
# ${TITO_CACHE_DIR:-~/.cache/tito}/sglang-api/VERSION/. tests/engines/sglang_api.py loads that file: the in-test
# SGLang server's replies and tito's requests are checked by SGLang's own decoders. Prints the file's path.
set -euo pipefail
VERSION=0.5.23
DIR="${TITO_CACHE_DIR:-$HOME/.cache/tito}/sglang-api/$VERSION"
FILE="$DIR/sglang/api/v1/api_types.py"
if [[ ! -f "$FILE" ]]; then
    mkdir -p "$DIR/wheel"
    python -m pip download -q --no-deps --only-binary=:all: -d "$DIR/wheel" "sglang==$VERSION"
    python - "$DIR" <<'PY'
import pathlib, sys, zipfile
target = pathlib.Path(sys.argv[1])
wheel = next((target / "wheel").glob("sglang-*.whl"))
with zipfile.ZipFile(wheel) as archive:
    archive.extract("sglang/api/v1/api_types.py", target)
PY
    rm -rf "$DIR/wheel"
fi
echo "$FILE"
