#!/bin/bash
# Run a command as on a fresh machine that has only Python, gcc and make:
# Debian's MPIs, gcc-11, clang, libfabric, UCX and the verbs libraries are
# hidden from it (and only from it).
#
#   unshare -m ci/fresh-machine.sh SCRATCH_DIR COMMAND [ARG...]     (root)
#
# Inside the private mount namespace unshare(1) gives, /usr/bin and the
# multiarch library directory are overlaid with whiteouts for those files:
# for the command they do not exist (the loader's cache still names them,
# the files are gone, so a dlopen() fails the way it does on such a machine).
# SCRATCH_DIR holds the overlays' upper and work directories.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: unshare -m $0 SCRATCH_DIR COMMAND [ARG...]" >&2
    exit 2
fi
work=$(mktemp -d "$1/fresh-machine.XXXXXX")
shift
libdir=/usr/lib/$(gcc -print-multiarch)

hide() {  # hide DIR PATTERN...: DIR without the files matching the patterns
    local dir=$1
    shift
    local upper=$work/upper${dir//\//_} scratch=$work/work${dir//\//_}
    mkdir -p "$upper" "$scratch"
    local pattern file
    for pattern in "$@"; do
        for file in "$dir"/$pattern; do
            if [ -e "$file" ] || [ -L "$file" ]; then
                mknod "$upper/${file##*/}" c 0 0    # an overlayfs whiteout
            fi
        done
    done
    mount -t overlay overlay -o "lowerdir=$dir,upperdir=$upper,workdir=$scratch" "$dir"
}

# Mounts made here must not propagate back to the host's namespace.
mount --make-rprivate /
hide /usr/bin 'mpi*' 'ompi*' 'orte*' 'hydra*' 'gcc-11' "$(gcc -print-multiarch)-gcc-11" 'clang*'
hide "$libdir" 'libfabric.so*' 'libucp.so*' 'libucs.so*' 'libuct.so*' 'libucm.so*' \
    'libibverbs.so*' 'librdmacm.so*' 'libmpi*' 'libopen-*'
exec "$@"
