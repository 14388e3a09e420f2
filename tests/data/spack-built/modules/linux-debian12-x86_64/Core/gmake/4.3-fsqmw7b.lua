-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.863814
--
-- gmake@4.3~guile build_system=generic platform=linux os=debian12 target=x86_64/fsqmw7b
--

whatis([[Name : gmake]])
whatis([[Version : 4.3]])
whatis([[Target : x86_64]])
whatis([[Short description : GNU Make is a tool which controls the generation of executables and other non-source files of a program from the program's source files.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : gmake]])
help([[Version: 4.3]])
help([[Target : x86_64]])
help()
help([[GNU Make is a tool which controls the generation of executables and
other non-source files of a program from the program's source files.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

