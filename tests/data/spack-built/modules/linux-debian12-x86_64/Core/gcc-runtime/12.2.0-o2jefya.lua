-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.766249
--
-- gcc-runtime@12.2.0 build_system=generic platform=linux os=debian12 target=zen2/o2jefya
--

whatis([[Name : gcc-runtime]])
whatis([[Version : 12.2.0]])
whatis([[Target : zen2]])
whatis([[Short description : Package for GCC compiler runtime libraries]])

help([[Name   : gcc-runtime]])
help([[Version: 12.2.0]])
help([[Target : zen2]])
help()
help([[Package for GCC compiler runtime libraries]])


depends_on("glibc/2.36-2dxfl3z")

prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/gcc-runtime-12.2.0-nonenone-o2jefya/.", ":")

