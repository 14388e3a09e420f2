-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.715167
--
-- gcc@12.2.0~binutils+bootstrap~graphite~mold~nvptx~piclibs~profiled~strip build_system=autotools build_type=RelWithDebInfo languages:='c,c++,fortran' platform=linux os=debian12 target=x86_64/2piry45
--

whatis([[Name : gcc]])
whatis([[Version : 12.2.0]])
whatis([[Target : x86_64]])
whatis([[Short description : The GNU Compiler Collection includes front ends for C, C++, Objective-C, Fortran, Ada, and Go, as well as libraries for these languages.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : gcc]])
help([[Version: 12.2.0]])
help([[Target : x86_64]])
help()
help([[The GNU Compiler Collection includes front ends for C, C++, Objective-C,
Fortran, Ada, and Go, as well as libraries for these languages.]])

-- Services provided by the package
family("compiler")

-- Loading this module unlocks the path below unconditionally
prepend_path("MODULEPATH", "$SPACK_RUN/env/modules/linux-debian12-x86_64/Core")



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
setenv("CC", "/usr/bin/gcc")
setenv("CXX", "/usr/bin/g++")
setenv("FC", "/usr/bin/gfortran")
setenv("F77", "/usr/bin/gfortran")
append_path("MANPATH", "", ":")

