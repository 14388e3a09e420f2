-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.815723
--
-- glibc@2.36 build_system=autotools platform=linux os=debian12 target=x86_64/2dxfl3z
--

whatis([[Name : glibc]])
whatis([[Version : 2.36]])
whatis([[Target : x86_64]])
whatis([[Short description : The GNU C Library provides many of the low-level components used directly by programs written in the C or C++ languages.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : glibc]])
help([[Version: 2.36]])
help([[Target : x86_64]])
help()
help([[The GNU C Library provides many of the low-level components used
directly by programs written in the C or C++ languages.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

