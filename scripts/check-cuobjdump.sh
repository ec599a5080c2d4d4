#!/usr/bin/env bash
# Ground truth for backend/scan/resources.rs: run `cuobjdump -res-usage` on cubins and print
# one line per kernel:
#
#   <file> REG=<n> STACK=<n> SHARED=<n> LOCAL=<n> CONST0=<n> GLOBAL=<n> KERNEL=<name>
#
# (REG/STACK/SHARED/LOCAL are exactly what cuobjdump prints; CONST0 is the kernel's
# CONSTANT[0]; GLOBAL is the module-wide "Common: GLOBAL" repeated on each kernel line;
# KERNEL is the function name, last because it is the longest). Values cuobjdump did not
# print are "?". A file cuobjdump cannot read gives `<file> ERROR=<message>`.
#
# Usage: scripts/check-cuobjdump.sh CUBIN_DIR_OR_FILE...
#   A directory is searched recursively for *.cubin.
#
# cuobjdump is looked up in this order:
#   $CUOBJDUMP, `cuobjdump` on PATH, the one shipped in an importable triton wheel
#   (triton/backends/nvidia/bin/cuobjdump), /tmp/triton-whl/triton/backends/nvidia/bin/cuobjdump.
# It needs no GPU. Exit status: 0 if every file was dumped, 1 if any failed, 2 on usage errors.
set -u

if [ $# -eq 0 ]; then
    echo "usage: $0 CUBIN_DIR_OR_FILE..." >&2
    exit 2
fi

find_cuobjdump() {
    if [ -n "${CUOBJDUMP:-}" ]; then
        if [ -x "$CUOBJDUMP" ] || command -v "$CUOBJDUMP" >/dev/null 2>&1; then echo "$CUOBJDUMP"; return 0; fi
        echo "CUOBJDUMP=$CUOBJDUMP is not executable" >&2
        return 1
    fi
    if command -v cuobjdump >/dev/null 2>&1; then command -v cuobjdump; return 0; fi
    local py
    for py in python3 python; do
        if command -v "$py" >/dev/null 2>&1; then
            local d
            d=$("$py" -c 'import os, triton; print(os.path.dirname(triton.__file__))' 2>/dev/null) || continue
            if [ -x "$d/backends/nvidia/bin/cuobjdump" ]; then echo "$d/backends/nvidia/bin/cuobjdump"; return 0; fi
        fi
    done
    if [ -x /tmp/triton-whl/triton/backends/nvidia/bin/cuobjdump ]; then
        echo /tmp/triton-whl/triton/backends/nvidia/bin/cuobjdump; return 0
    fi
    return 1
}

CUOBJ=$(find_cuobjdump) || {
    echo "cuobjdump not found: set CUOBJDUMP, put it on PATH, or unzip a triton wheel" \
         "(triton/backends/nvidia/bin/cuobjdump) into /tmp/triton-whl" >&2
    exit 2
}

status=0
dump_one() {
    local f=$1 out
    if ! out=$("$CUOBJ" -res-usage "$f" 2>&1); then
        echo "$f ERROR=$(printf '%s' "$out" | tr '\n' ' ' | tr -s ' ')" 
        status=1
        return
    fi
    # Lines look like:
    #  Function matmul_kernel:
    #   REG:255 STACK:800 SHARED:1024 LOCAL:0 CONSTANT[0]:592 TEXTURE:0 SURFACE:0 SAMPLER:0
    printf '%s\n' "$out" | awk -v file="$f" '
        BEGIN { global = "0" }
        /^ *GLOBAL:/ { split($1, g, ":"); global = g[2]; next }
        /^ *Function .*:$/ {
            name = $0
            sub(/^ *Function /, "", name); sub(/:$/, "", name)
            next
        }
        /^ *REG:/ && name != "" {
            reg = stack = shared = local_ = c0 = "?"
            for (i = 1; i <= NF; i++) {
                split($i, kv, ":")
                if (kv[1] == "REG") reg = kv[2]
                else if (kv[1] == "STACK") stack = kv[2]
                else if (kv[1] == "SHARED") shared = kv[2]
                else if (kv[1] == "LOCAL") local_ = kv[2]
                else if (kv[1] == "CONSTANT[0]") c0 = kv[2]
            }
            printf "%s REG=%s STACK=%s SHARED=%s LOCAL=%s CONST0=%s GLOBAL=%s KERNEL=%s\n", file, reg, stack, shared, local_, c0, global, name
            name = ""
        }'
}

for arg in "$@"; do
    if [ -d "$arg" ]; then
        while IFS= read -r -d '' f; do
            dump_one "$f"
        done < <(find "$arg" -type f -name '*.cubin' -print0 | sort -z)
    elif [ -f "$arg" ]; then
        dump_one "$arg"
    else
        echo "$arg ERROR=no such file or directory"
        status=1
    fi
done
exit $status
