-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.372135
--
-- numactl@2.0.16 build_system=autotools platform=linux os=debian12 target=x86_64/k5ykrsh
--

whatis([[Name : numactl]])
whatis([[Version : 2.0.16]])
whatis([[Target : x86_64]])
whatis([[Short description : NUMA support for Linux]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : numactl]])
help([[Version: 2.0.16]])
help([[Target : x86_64]])
help()
help([[NUMA support for Linux]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

