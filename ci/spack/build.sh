#!/bin/bash
# Build the MPI x compiler matrix of ci/spack/spack.yaml with a real Spack, offline, on a
# Debian 12 machine; run by hand (CI has no Spack: nothing in `make test` or .ci/ calls this).
# Everything Spack writes goes under $HPCNET_SPACK_RUN, never into the checkout.
#
#   ci/spack/build.sh setup        # Spack + spack-packages checkouts, clingo, compilers, externals
#   ci/spack/build.sh mirror       # the local source mirror (Debian source packages, git archives)
#   ci/spack/build.sh concretize   # the environment at $HPCNET_SPACK_RUN/env and its spack.lock
#   ci/spack/build.sh install      # spack install (long: run it in the background, see the docs)
#   ci/spack/build.sh modules      # spack module lmod refresh
#   ci/spack/build.sh record DIR   # copy the lock, `spack find --json` and module files to DIR
#
# Inputs (environment): HPCNET_SPACK_RUN (required: a scratch directory outside the
# checkout, where everything Spack writes goes), SPACK_GIT_DIR and
# SPACK_PACKAGES_GIT_DIR (bare git directories holding the Spack and spack-packages tags),
# IMB_GIT_DIR, OSU_GIT_DIR, OMPI_GIT_DIR, MPICH_GIT_DIR (bare git directories of
# intel/mpi-benchmarks, an OSU 7.4 import, open-mpi/ompi and pmodels/mpich: the source of
# the recipes' URL patches and of IMB and OSU archives).
set -euo pipefail

RUN=${HPCNET_SPACK_RUN:?set HPCNET_SPACK_RUN to a scratch directory outside the checkout (e.g. \$HOME/hpcnet-spack-run)}
SPACK_TAG=v1.1.0
PACKAGES_TAG=v2025.11.0
HERE=$(cd "$(dirname "$0")" && pwd)
ENV_DIR=$RUN/env

spack_env() {
    export SPACK_PYTHON=$RUN/clingo-venv/bin/python
    export SPACK_USER_CONFIG_PATH=$RUN/config/user
    export SPACK_SYSTEM_CONFIG_PATH=$RUN/config/system
    export SPACK_USER_CACHE_PATH=$RUN/cache
    # shellcheck disable=SC1091
    . "$RUN/spack/share/spack/setup-env.sh"
}

need() {    # need VAR: the variable must name an existing directory
    if [ -z "${!1:-}" ] || [ ! -d "${!1}" ]; then
        echo "build.sh: set $1 to an existing directory (see the header of $0)" >&2
        exit 2
    fi
}

setup() {
    need SPACK_GIT_DIR; need SPACK_PACKAGES_GIT_DIR
    mkdir -p "$RUN/config/user" "$RUN/config/system" "$RUN/cache"
    [ -d "$RUN/spack" ] || git --git-dir="$SPACK_GIT_DIR" worktree add --detach "$RUN/spack" "$SPACK_TAG"
    [ -d "$RUN/spack-packages" ] || \
        git --git-dir="$SPACK_PACKAGES_GIT_DIR" worktree add --detach "$RUN/spack-packages" "$PACKAGES_TAG"
    # Spack cannot bootstrap clingo offline; the registry's wheel works.
    [ -x "$RUN/clingo-venv/bin/python" ] || { python3 -m venv "$RUN/clingo-venv" &&
        "$RUN/clingo-venv/bin/pip" install -q clingo; }
    spack_env
    # Spack 1.x clones its packages unless told where they are.
    spack repo set --scope site --destination "$RUN/spack-packages" builtin
    # Compilers and externals into the user scope (under $RUN): otherwise Spack writes the
    # compilers it finds into the environment's spack.yaml on first use.
    spack compiler find --scope user
    spack external find --scope user --not-buildable perl pkgconf findutils openssh gmake \
        autoconf automake libtool m4 hwloc rdma-core python cmake bzip2 xz tar diffutils \
        sed grep curl git openssl
}

# The recipes' sha256 for what the mirror holds under its content address (checked here).
IMB_SHA=acee02cc719a74e6853194576cb7e6bf1fdc74f8971578e1b2141306c3c19477
OMPI_PATCH=(a8fc35c161e5ffcc1adb3690da9f2c60a3f18a5c
            12f3aabbcdb02f28138e250273c2f62591db4b1f9f8aa3dcc3ef9ed551f4f587)
MPICH_PATCHES=(fa50d3a94270f720205ca41b7a6addb576b8ff13
               d4c0e99a80f6cb0cb0ced91f6ad5da776c4a70f70f805f08096939ec9a92483e
               0cc7d58b1cb18b2573c74e16ba159487de0899d2
               de0de41ec42ac5f259ea02f195eea56fba84d72b0b649a44c947eab6632995ab)
OSU_IMPORT_COMMIT=a6bb9d2f81af86451f342da216af90106da028b7
# The recipes' sha256 of the releases whose bytes the mirror cannot have (mirror()).
OMPI_SHA=92912e175fd1234368c8730c03f4996fe5942e7479bb1d10059405e7f2b3930d
MPICH_SHA=5a42f1a889d4a2d996c26e48cbf9c595cbf4316c6814f7c181e3320d21dedd42
OSU_SHA=1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc

put_checked() {   # put_checked FILE SHA256 EXT: store FILE under its content address
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$got" != "$2" ]; then
        echo "build.sh: $1 has sha256 $got, the recipe wants $2" >&2
        exit 1
    fi
    mkdir -p "$RUN/mirror/_source-cache/archive/${2:0:2}"
    cp "$1" "$RUN/mirror/_source-cache/archive/${2:0:2}/$2$3"
}

put_unchecked() { # put_unchecked FILE SHA256 EXT: FILE where the recipe's digest points
    mkdir -p "$RUN/mirror/_source-cache/archive/${2:0:2}"
    cp "$1" "$RUN/mirror/_source-cache/archive/${2:0:2}/$2$3"
}

# A GitHub commit's .patch?full_index=1 is `git format-patch --full-index` without its
# signature (the last three lines); that reproduces the recipes' patch checksums.
github_patch() {  # github_patch GIT_DIR COMMIT SHA256
    git --git-dir="$1" format-patch --full-index -1 --stdout "$2" | head -n -3 > "$RUN/sources/$2.patch"
    put_checked "$RUN/sources/$2.patch" "$3" ""
}

mirror() {
    need IMB_GIT_DIR; need OSU_GIT_DIR; need OMPI_GIT_DIR; need MPICH_GIT_DIR
    mkdir -p "$RUN/sources" "$RUN/mirror"
    cd "$RUN/sources"
    # Debian's source packages carry the upstream release archives (needs a deb-src entry).
    if [ ! -f openmpi_4.1.4.orig.tar.xz ] || [ ! -f mpich_4.0.2.orig.tar.xz ]; then
        apt-get source --download-only openmpi=4.1.4-3 mpich=4.0.2-3
    fi
    git --git-dir="$IMB_GIT_DIR" archive --prefix=mpi-benchmarks-IMB-v2021.7/ IMB-v2021.7 |
        gzip -n > mpi-benchmarks-IMB-v2021.7.tar.gz
    put_checked mpi-benchmarks-IMB-v2021.7.tar.gz "$IMB_SHA" .tar.gz
    github_patch "$OMPI_GIT_DIR" "${OMPI_PATCH[@]}"
    github_patch "$MPICH_GIT_DIR" "${MPICH_PATCHES[@]:0:2}"
    github_patch "$MPICH_GIT_DIR" "${MPICH_PATCHES[@]:2:2}"
    # Not the recipes' bytes (Debian repacked the releases as .tar.xz; OSU has no official
    # repository). Spack looks a versioned archive up in a mirror only by the recipe's digest
    # (stage.py: mirror_layout.path), so they go there and are installed with --no-checksum;
    # SHA256SUMS below records what the files really are.
    xz -dc openmpi_4.1.4.orig.tar.xz | bzip2 -9 > openmpi-4.1.4.tar.bz2
    put_unchecked openmpi-4.1.4.tar.bz2 "$OMPI_SHA" .tar.bz2
    xz -dc mpich_4.0.2.orig.tar.xz | gzip -n > mpich-4.0.2.tar.gz
    put_unchecked mpich-4.0.2.tar.gz "$MPICH_SHA" .tar.gz
    git --git-dir="$OSU_GIT_DIR" archive --prefix=osu-micro-benchmarks-7.4/ "$OSU_IMPORT_COMMIT" \
        -- . ':(exclude)autom4te.cache' | gzip -n > osu-micro-benchmarks-7.4.tar.gz
    put_unchecked osu-micro-benchmarks-7.4.tar.gz "$OSU_SHA" .tar.gz
    # The only mirror (`mirrors::` replaces Spack's public one, unreachable here), sources only.
    printf 'mirrors::\n  hpcnet-offline:\n    url: file://%s/mirror\n    binary: false\n' "$RUN" \
        > "$RUN/spack/etc/spack/site/mirrors.yaml"
    (cd "$RUN/mirror" && find . -type f ! -name SHA256SUMS | sort | xargs sha256sum) > "$RUN/mirror/SHA256SUMS"
}

concretize() {
    spack_env
    [ -d "$ENV_DIR" ] || spack env create -d "$ENV_DIR" "$HERE/spack.yaml"
    spack -e "$ENV_DIR" concretize -f
}

install() {
    # IMB's Makefile takes one TARGET; its recipe passes several, so make builds every
    # program, IMB-MT (OpenMP) too, whatever ~mt says: clang needs Debian's OpenMP headers.
    if ! printf '#include <omp.h>\n' | clang -E -x c - > /dev/null 2>&1; then
        echo "build.sh: clang finds no omp.h (IMB-MT needs it): apt-get install libomp-14-dev" >&2
        exit 2
    fi
    spack_env
    # --no-checksum: the MPI and OSU archives are not the recipes' bytes (see mirror()).
    spack -e "$ENV_DIR" install --no-checksum --no-cache -j 2 "$@"
}

modules() {
    spack_env
    spack -e "$ENV_DIR" module lmod refresh --delete-tree -y
}

record() {
    local dest=${1:?record needs a destination directory}
    mkdir -p "$dest/modules"
    dest=$(cd "$dest" && pwd)        # the module files are copied from inside the tree
    spack_env
    cp "$ENV_DIR/spack.yaml" "$dest/spack.yaml"
    sed "s#$RUN#\$SPACK_RUN#g" "$ENV_DIR/spack.lock" > "$dest/spack.lock"
    spack -e "$ENV_DIR" find --json | sed "s#$RUN#\$SPACK_RUN#g" > "$dest/find.json"
    # What HPCNET_SPACK_ENV discovery reads (hpcnet/stacks/sources.py, SPACK_FORMAT and
    # SPACK_MPI_OF_FORMAT with SPACK_MPI_QUERY).
    spack -e "$ENV_DIR" find --format '{name}|{version}|{hash:7}|{prefix}|{compiler.name}|{compiler.version}' |
        sed "s#$RUN#\$SPACK_RUN#g" > "$dest/find-format.txt"
    spack -e "$ENV_DIR" find --format '{name}|{hash:7}|{^mpi.prefix}|{compiler.name}|{compiler.version}' '^mpi' |
        sed "s#$RUN#\$SPACK_RUN#g" > "$dest/find-mpi-of.txt"
    { echo "spack $(spack --version)"
      echo "spack-packages $(git -C "$RUN/spack-packages" rev-parse HEAD) ($PACKAGES_TAG)"
    } > "$dest/VERSIONS"
    (cd "$ENV_DIR/modules" && find . -name '*.lua' | while read -r f; do
        mkdir -p "$dest/modules/$(dirname "$f")"
        sed "s#$RUN#\$SPACK_RUN#g" "$f" > "$dest/modules/$f"
    done)
}

step=${1:?usage: $0 setup|mirror|concretize|install|modules|record DIR}
shift
"$step" "$@"
