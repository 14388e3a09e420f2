-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.589455
--
-- compiler-wrapper@1.0 build_system=generic platform=linux os=debian12 target=zen2/dioyrij
--

whatis([[Name : compiler-wrapper]])
whatis([[Version : 1.0]])
whatis([[Target : zen2]])
whatis([[Short description : Spack compiler wrapper script.]])

help([[Name   : compiler-wrapper]])
help([[Version: 1.0]])
help([[Target : zen2]])
help()
help([[Spack compiler wrapper script. Compiler commands go through this
compiler wrapper in Spack builds. The compiler wrapper is a thin layer
around the standard compilers. It enables several key pieces of
functionality: 1. It allows Spack to swap compilers into and out of
builds easily. 2. It adds several options to the compile line so that
spack packages can find their dependencies at build time and run time:
-I and/or -isystem arguments for dependency /include directories. -L
arguments for dependency /lib directories. -Wl,-rpath arguments for
dependency /lib directories. 3. It provides a mechanism to inject flags
from specs]])



prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/compiler-wrapper-1.0-nonenone-dioyrij/.", ":")

