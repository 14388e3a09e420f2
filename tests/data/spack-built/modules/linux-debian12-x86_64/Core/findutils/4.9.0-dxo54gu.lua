-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.638033
--
-- findutils@4.9.0 build_system=autotools platform=linux os=debian12 target=x86_64/dxo54gu
--

whatis([[Name : findutils]])
whatis([[Version : 4.9.0]])
whatis([[Target : x86_64]])
whatis([[Short description : The GNU Find Utilities are the basic directory searching utilities of the GNU operating system.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : findutils]])
help([[Version: 4.9.0]])
help([[Target : x86_64]])
help()
help([[The GNU Find Utilities are the basic directory searching utilities of
the GNU operating system.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

